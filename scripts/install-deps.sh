#!/usr/bin/env bash
# Installs every Debian 12 package Clusterfile needs to build, run, test and benchmark.
# Idempotent: packages already present are skipped; apt-get update runs only when needed.
set -euo pipefail
PKGS=(
  build-essential meson ninja-build pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  librocksdb-dev libfuse3-dev fuse3
  libssl-dev
  libfabric-dev libfabric-bin  # the RDMA data path (libfabric; fi_info to inspect providers)
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libspdlog-dev libtomlplusplus-dev nlohmann-json3-dev libcivetweb-dev
  debhelper lintian prometheus curl systemd
  fio iperf3 attr acl gnuplot-nox util-linux procps iproute2 psmisc tar diffutils
  sqlite3
  clang libclang-rt-14-dev  # SANITIZE=1 scripts/test.sh and scripts/fuzz.sh (libFuzzer, ASan, UBSan)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (or with sudo)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
