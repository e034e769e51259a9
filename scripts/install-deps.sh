#!/usr/bin/env bash
# Installs the Debian 12 packages Clusterfile needs.
#   scripts/install-deps.sh        building and running (command 1, scripts/up.sh)
#   scripts/install-deps.sh all    also testing, packaging, fuzzing and benchmarks
#                                  (command 2, scripts/test.sh)
# Idempotent: packages already present are skipped; apt-get update runs only when needed.
set -euo pipefail
RUN_PKGS=(
  build-essential meson ninja-build pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  librocksdb-dev libfuse3-dev fuse3
  libssl-dev
  libfabric-dev  # the RDMA data path (libfabric)
  libcli11-dev libspdlog-dev libtomlplusplus-dev nlohmann-json3-dev libcivetweb-dev
)
ALL_PKGS=(
  libfabric-bin  # fi_info to inspect providers
  libgtest-dev libgmock-dev libbenchmark-dev
  debhelper lintian prometheus curl systemd
  fio iperf3 attr acl gnuplot-nox util-linux procps iproute2 psmisc tar diffutils
  sqlite3
  clang libclang-rt-14-dev  # SANITIZE=1 scripts/test.sh and scripts/fuzz.sh (libFuzzer, ASan, UBSan)
)
case "${1:-run}" in
  run) PKGS=("${RUN_PKGS[@]}") ;;
  all) PKGS=("${RUN_PKGS[@]}" "${ALL_PKGS[@]}") ;;
  *) echo "usage: $0 [run|all]" >&2; exit 2 ;;
esac
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
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
apt-get update -qq
apt-get install -y -q --no-install-recommends "${missing[@]}"
