#!/usr/bin/env bash
# The Debian packages end to end (suite `package`; several minutes: it compiles
# the whole tree once more inside dpkg-buildpackage):
#  1. packaging/build-debs.sh builds the five packages; lintian must report no
#     error or warning (overrides live in packaging/debian/*.lintian-overrides);
#  2. each .deb is extracted into a scratch root with dpkg-deb -x (not installed
#     with dpkg --root: the maintainer scripts would need a chroot with a shell
#     and systemd; the extracted tree is what dpkg would unpack) and its files,
#     the library's soname and the unit are checked; systemd-analyze verify
#     checks the unit;
#  3. from the scratch root: `clf init` writes a cluster file; two servers run
#     with the unit's ExecStart command (%i = id; systemd is not PID 1 here);
#     `mount -a -T FSTAB` mounts through an fstab line (mount.fuse3, the
#     packaged clfmount behind a PATH/LD_LIBRARY_PATH wrapper: mount(8) cleans
#     the environment) and mount.fuse.clf mounts a second time (called as
#     mount(8) calls it for type fuse.clf);
#     `clf status` says HEALTH_OK; each metrics port answers with Prometheus text
#     that `promtool check metrics` accepts; unmount; stop; remove the tree.
# Env (from meson): SOURCE_ROOT.
source "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/clf-test-pkg.XXXXXX)
at_exit "rm -rf '$tmp'"
debs="$tmp/debs"
root="$tmp/root"

echo "== build (dpkg-buildpackage -b -us -uc)"
start=$SECONDS
bash "$SOURCE_ROOT/packaging/build-debs.sh" "$debs" >"$tmp/build.log" 2>&1 ||
  { tail -60 "$tmp/build.log"; fail "package build"; }
echo "built in $((SECONDS - start)) s"
for p in clf-server clf-client clf-tools libclf0 libclf-dev; do
  ls "$debs/${p}_"*.deb >/dev/null 2>&1 || fail "no $p package"
done

echo "== lintian"
if ! lintian --fail-on error,warning "$debs"/*.changes >"$tmp/lintian.log" 2>&1; then
  cat "$tmp/lintian.log"
  fail "lintian reports errors or warnings"
fi
cat "$tmp/lintian.log"

echo "== extract into $root"
for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$root"; done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for f in usr/bin/clfd usr/bin/clf usr/bin/clfmount sbin/mount.clf \
         lib/systemd/system/clfd@.service \
         usr/share/doc/clf-server/examples/cluster.toml.example usr/share/clf/grafana/clf-dashboard.json \
         usr/include/clf/clf.h usr/include/clf/clf.hpp \
         "usr/lib/$multiarch/libclf.so.0" "usr/lib/$multiarch/libclf.so" \
         "usr/lib/$multiarch/pkgconfig/clf.pc"; do
  [ -e "$root/$f" ] || fail "missing $f"
done
[ "$(readlink "$root/sbin/mount.fuse.clf")" = mount.clf ] || fail "sbin/mount.fuse.clf is not a link to mount.clf"
[ -x "$root/sbin/mount.clf" ] || fail "mount.clf is not executable"
soname=$(readelf -d "$root/usr/lib/$multiarch/libclf.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libclf.so.0 ] || fail "soname $soname"
dpkg-deb -f "$debs"/libclf0_*.deb Package | grep -qx libclf0 || fail "libclf0 control"
dpkg-deb -I "$debs"/libclf0_*.deb shlibs | grep -q '^libclf 0 libclf0' || fail "libclf0 has no shlibs entry"
# The programs of the extracted tree find libclf.so.0 there (dpkg would put it in /usr/lib).
export LD_LIBRARY_PATH="$root/usr/lib/$multiarch"
"$root/usr/bin/clfd" --version | grep -q '^clfd [0-9]' || fail "clfd --version"
"$root/usr/bin/clf" --version | grep -q '^clf [0-9]' || fail "clf --version"
"$root/usr/bin/clfmount" --version | grep -q '^clfmount [0-9]' ||
  fail "clfmount --version"
python3 -m json.tool "$root/usr/share/clf/grafana/clf-dashboard.json" >/dev/null || fail "dashboard JSON"

echo "== the unit"
unit="$root/lib/systemd/system/clfd@.service"
for want in 'ProtectSystem=strict' 'ReadWritePaths=/var/lib/clf' 'NoNewPrivileges=yes' \
            'Restart=on-failure' 'ExecStart=/usr/bin/clfd --cluster /etc/clf/cluster.toml --id %i'; do
  grep -qx "$want" "$unit" || fail "unit lacks $want"
done
# verify resolves ExecStart in the root it is given; instance 0 of the template.
# The root needs systemd's own targets (a system with clf-server has systemd):
# they are copied from this host into a copy of the root.
cp -a "$root" "$tmp/vroot"
cp /lib/systemd/system/*.target /lib/systemd/system/*.slice "$tmp/vroot/lib/systemd/system/"
# --man=no: verify would run this host's man(1) for Documentation=man:clfd(1);
# the page is checked in the root instead.
[ -e "$root/usr/share/man/man1/clfd.1.gz" ] || fail "no clfd(1) man page"
if systemd-analyze verify --man=no --root="$tmp/vroot" "clfd@0.service" >"$tmp/verify.log" 2>&1; then
  echo "systemd-analyze verify: ok"
else
  cat "$tmp/verify.log"
  fail "systemd-analyze verify"
fi

echo "== two servers from the unit's ExecStart, a fstab mount, status, metrics"
read -r p0 p1 m0 m1 <<<"$(free_ports 4)"
export PATH="$root/usr/bin:$root/sbin:$PATH"
CLF="$root/usr/bin/clf"
"$CLF" init --servers "127.0.0.1:$p0,127.0.0.1:$p1" --out "$tmp/etc" --data-root "$tmp/data" \
  --metrics-port 1 >/dev/null || fail "clf init"
# Metrics ports from the free list (clf init numbers them from --metrics-port).
sed -i -E "s/^(metrics_address = .127\.0\.0\.1:)1(.)\$/\1$m0\2/; s/^(metrics_address = .127\.0\.0\.1:)2(.)\$/\1$m1\2/" \
  "$tmp/etc/cluster.toml"
grep -q "127.0.0.1:$m1" "$tmp/etc/cluster.toml" || fail "metrics ports not set: $(cat "$tmp/etc/cluster.toml")"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
for k in 0 1; do
  cmd=${exec_start//%i/$k}
  cmd=${cmd//\/etc\/clf\/cluster.toml/$tmp/etc/cluster.toml}
  cmd=${cmd/\/usr\/bin\/clfd/$root/usr/bin/clfd}
  $cmd >"$tmp/clfd$k.log" 2>&1 &
  pid=$!
  at_exit "stop_pid $pid"
done
wait_for 60 health_ok "$tmp/etc/cluster.toml" || { cat "$tmp"/clfd*.log; fail "servers not healthy"; }

mkdir -p "$tmp/mnt" "$tmp/mnt2"
at_exit "unmount_if_mounted '$tmp/mnt'"
at_exit "unmount_if_mounted '$tmp/mnt2'"
# mount(8) runs helpers with a clean environment (PATH reset, LD_* dropped), so
# it cannot find a clfmount that lives in the scratch root by PATH. The fstab
# line uses mount.fuse3's "PROGRAM#SOURCE" form with a two-line wrapper that
# stands in for /usr/bin and the dynamic linker's path of an installed system.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$root/usr/lib/$multiarch" "$root/usr/bin/clfmount" \
  >"$tmp/bin/clfmount"
chmod +x "$tmp/bin/clfmount"
echo "$tmp/bin/clfmount#$tmp/etc/cluster.toml $tmp/mnt fuse defaults,_netdev 0 0" >"$tmp/fstab"
mount -a -T "$tmp/fstab" || fail "mount -a"
wait_for 30 mountpoint -q "$tmp/mnt" || fail "fstab mount did not appear"
echo "through fstab" >"$tmp/mnt/hello"
# mount(8) runs /sbin/mount.fuse.clf SOURCE DIR -o OPTS -t fuse.clf for `-t fuse.clf`.
"$root/sbin/mount.fuse.clf" "$tmp/etc/cluster.toml" "$tmp/mnt2" -o rw -t fuse.clf || fail "mount.clf"
wait_for 30 mountpoint -q "$tmp/mnt2" || fail "mount.clf mount did not appear"
[ "$(cat "$tmp/mnt2/hello")" = "through fstab" ] || fail "the second mount does not see the file"

"$CLF" status --cluster "$tmp/etc/cluster.toml" | tee "$tmp/status.txt"
head -1 "$tmp/status.txt" | grep -qx 'health: HEALTH_OK' || fail "status is not HEALTH_OK"
"$CLF" status --cluster "$tmp/etc/cluster.toml" --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["health"]["status"] == "HEALTH_OK", j
assert j["servers_up"] == 2, j' || fail "status --json"

for m in $m0 $m1; do
  curl -sf "http://127.0.0.1:$m/metrics" >"$tmp/metrics.$m" || fail "curl metrics port $m"
  grep -q '^clf_rpc_handled_total{method="/clf.v1.Meta/Create",code="OK"} [1-9]' "$tmp/metrics.$m" ||
    grep -q '^clf_inodes ' "$tmp/metrics.$m" || fail "metrics on $m lack clf_ series"
  if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/metrics.$m" || fail "promtool check metrics on port $m"
  fi
done

echo "== unmount, stop, remove"
fusermount3 -u "$tmp/mnt2" || fail "unmount mount.clf mount"
umount "$tmp/mnt" || fail "umount fstab mount"
rm -rf "$root"
[ ! -e "$root" ] || fail "scratch root not removed"
echo "PASS"
