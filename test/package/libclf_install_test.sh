#!/usr/bin/env bash
# libclf as others build against it: `meson install --destdir` into a scratch
# prefix, compile a small program with only the installed headers and clf.pc,
# and run it against two real clfd processes (cluster file from `clf init`).
# Env (from meson): BUILD_ROOT (the build dir), CLFD, CLF; in a sanitized
# build CXX (the project's compiler) and SANITIZE_FLAGS (its -fsanitize=), since
# the installed libclf then needs that sanitizer's runtime in the program.
source "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/clf-test-libclf.XXXXXX)
at_exit "rm -rf '$tmp'"

dest="$tmp/dest"
meson install -C "$BUILD_ROOT" --destdir "$dest" --no-rebuild --only-changed >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install"; }
pc=$(find "$dest" -name clf.pc | head -1)
[ -n "$pc" ] || fail "clf.pc not installed"
so=$(find "$dest" -name 'libclf.so.0' | head -1)
[ -n "$so" ] || fail "libclf.so.0 (the soname link) not installed"
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libclf.so.0" ] || fail "soname is '$soname', not libclf.so.0"

cat >"$tmp/tiny.cc" <<'CC'
#include <clf/client.h>

#include <cstdio>
#include <memory>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto c = clf::client::Client::Open(argv[1]);
  if (!c.ok()) { std::fprintf(stderr, "open: %s\n", c.status().ToString().c_str()); return 1; }
  clf::client::Client& cl = **c;
  auto f = cl.CreateSync(cl.root(), "from-tiny", clf::client::CreateArgs{});
  if (!f.ok()) { std::fprintf(stderr, "create: %s\n", f.status().ToString().c_str()); return 1; }
  auto w = cl.WriteSync(f->handle, f->layout, 0, "hello from an installed libclf");
  if (!w.ok()) { std::fprintf(stderr, "write: %s\n", w.status().ToString().c_str()); return 1; }
  auto r = cl.ReadSync(f->handle, f->layout, 0, *w);
  if (!r.ok()) { std::fprintf(stderr, "read: %s\n", r.status().ToString().c_str()); return 1; }
  std::printf("%s\n", r->c_str());
  return 0;
}
CC
read -ra cxx <<<"${CXX:-c++}"
read -ra san <<<"${SANITIZE_FLAGS:-}"
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$dest"
cflags=$(pkg-config --cflags clf)
libs=$(pkg-config --libs clf)
# Self-contained: every header the program reads comes from the scratch prefix or
# the C++ standard library, none from gRPC, protobuf, RocksDB, spdlog or toml++.
"${cxx[@]}" "${san[@]}" -std=c++20 $cflags -M "$tmp/tiny.cc" >"$tmp/deps" || fail "installed headers do not compile"
deps=$(tr ' \\' '\n\n' <"$tmp/deps" | grep -E '^/' || true)
echo "$deps" | grep -q "^$dest/.*/clf/client.h" || fail "clf/client.h did not come from $dest"
if echo "$deps" | grep -E "^/usr/include/(grpc|grpcpp|google|rocksdb|spdlog|fmt|toml\+\+|nlohmann|absl|CLI|fuse3)/|^$(cd "$(dirname "$0")/../.." && pwd)/"; then
  fail "the installed headers reach headers outside the prefix (listed above)"
fi
"${cxx[@]}" "${san[@]}" -std=c++20 $cflags "$tmp/tiny.cc" -o "$tmp/tiny" $libs || fail "link against libclf"
readelf -d "$tmp/tiny" | grep -q 'NEEDED.*\[libclf.so.0\]' || fail "tiny does not need libclf.so.0"

read -r p0 p1 <<<"$(free_ports 2)"
"$CLF" init --servers "127.0.0.1:$p0,127.0.0.1:$p1" --out "$tmp/etc" --data-root "$tmp/data" \
  --metrics-port 0 >/dev/null || fail "clf init"
[ "$(stat -c %a "$tmp/etc/secret")" = 600 ] || fail "secret is not 0600"
for k in 0 1; do
  "$CLFD" --cluster "$tmp/etc/cluster.toml" --id $k --log-file "$tmp/clfd$k.log" &
  pid=$!
  at_exit "stop_pid $pid"
done
wait_for 60 health_ok "$tmp/etc/cluster.toml" || fail "servers did not come up"
# libclf logs through spdlog's default logger (stdout unless the program sets
# one up): the program's own answer is its last line.
out=$(LD_LIBRARY_PATH="$(dirname "$so")" "$tmp/tiny" "$tmp/etc/cluster.toml") || fail "tiny failed: $out"
out=$(printf '%s\n' "$out" | tail -n 1)
[ "$out" = "hello from an installed libclf" ] || fail "tiny read back '$out'"
echo "PASS: built against $dest with clf.pc and read back through libclf.so.0"
