#!/usr/bin/env bash
# libclf as others build against it: `meson install --destdir` into a scratch
# prefix; only the application API is installed and exported; a C program
# (cc) and a C++ one compiled with only the installed headers and clf.pc run
# against two real clfd processes (cluster file from `clf init`).
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

# Only the application API is installed: clf/clf.h (C) and clf/clf.hpp (C++).
inc=$(dirname "$(find "$dest" -path '*/include/clf/clf.h' | head -1)")
[ -f "$inc/clf.h" ] && [ -f "$inc/clf.hpp" ] || fail "clf/clf.h or clf/clf.hpp not installed"
for internal in client.h lock_client.h fsck_client.h common; do
  [ ! -e "$inc/$internal" ] || fail "internal header clf/$internal is installed"
done
# The library exports the application API and nothing else: C functions clf_*,
# C++ clf::api::*, and the version node.
nm -D --defined-only "$so" | awk '{print $NF}' >"$tmp/exports"
grep -qx 'clf_connect@@CLF_0' "$tmp/exports" || grep -qx 'clf_connect' "$tmp/exports" ||
  fail "clf_connect is not exported"
other=$(sed 's/@.*//' "$tmp/exports" | grep -vE '^(clf_[a-z_]+|CLF_0)$' | c++filt | grep -v '^clf::api::' || true)
[ -z "$other" ] || { echo "$other" | head -20; fail "libclf exports symbols beyond the application API (above)"; }

# A C program: connect, create, write, list-write interleaved pieces, close,
# reopen, read back (contiguous and as a list), stat.
cat >"$tmp/prog.c" <<'C'
#include <clf/clf.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                             \
  do {                                                                          \
    long long rc_ = (long long)(call);                                          \
    if (rc_ < 0) {                                                              \
      fprintf(stderr, "%s: %s (%s)\n", #call, strerror((int)-rc_), clf_last_error()); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

int main(int argc, char** argv) {
  clf_fs_t* fs;
  clf_file_t* f;
  const char* text = "hello from C through an installed libclf";
  char evens[4] = {'a', 'c', 'e', 'g'}, odds[4] = {'b', 'd', 'f', 'h'};
  struct iovec mem[2];
  clf_segment_t segs[4];
  char back[64] = {0}, listed[9] = {0};
  struct stat st;
  int i;
  if (argc != 2) return 2;
  CHECK(clf_connect(argv[1], &fs));
  CHECK(clf_mkdir(fs, "/c", 0755));
  CHECK(clf_open(fs, "/c/file", O_CREAT | O_EXCL | O_RDWR, 0644, &f));
  CHECK(clf_pwrite(f, text, strlen(text), 0));
  /* Bytes 100..107 as two lists of every other byte: "abcdefgh". */
  mem[0].iov_base = evens; mem[0].iov_len = 4;
  for (i = 0; i < 4; ++i) { segs[i].offset = 100 + 2 * i; segs[i].length = 1; }
  CHECK(clf_writev_list(f, mem, 1, segs, 4));
  mem[0].iov_base = odds; mem[0].iov_len = 4;
  for (i = 0; i < 4; ++i) segs[i].offset = 101 + 2 * i;
  CHECK(clf_writev_list(f, mem, 1, segs, 4));
  CHECK(clf_close(f));
  CHECK(clf_stat(fs, "/c/file", &st));
  CHECK(clf_open(fs, "/c/file", O_RDONLY, 0, &f));
  CHECK(clf_pread(f, back, strlen(text), 0));
  segs[0].offset = 100; segs[0].length = 3;
  segs[1].offset = 103; segs[1].length = 5;
  mem[0].iov_base = listed; mem[0].iov_len = 5;
  mem[1].iov_base = listed + 5; mem[1].iov_len = 3;
  CHECK(clf_readv_list(f, mem, 2, segs, 2));
  CHECK(clf_close(f));
  if (clf_open(fs, "/c/file", O_CREAT | O_EXCL | O_WRONLY, 0644, &f) != -EEXIST) return 3;
  clf_disconnect(fs);
  printf("%s | %s | size %lld\n", back, listed, (long long)st.st_size);
  return 0;
}
C
# And a C++ one with clf/clf.hpp.
cat >"$tmp/tiny.cc" <<'CC'
#include <clf/clf.hpp>

#include <fcntl.h>

#include <cstdio>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::unique_ptr<clf::api::FileSystem> fs;
  if (int rc = clf::api::FileSystem::Connect(argv[1], &fs); rc != 0) {
    std::fprintf(stderr, "connect: %d %s\n", rc, clf::api::LastError());
    return 1;
  }
  std::unique_ptr<clf::api::File> f;
  const std::string text = "hello from C++ through an installed libclf";
  if (fs->Open("/from-tiny", O_CREAT | O_RDWR, 0644, &f) != 0 ||
      f->Pwrite(text.data(), text.size(), 0) != static_cast<int64_t>(text.size()) || f->Close() != 0 ||
      fs->Open("/from-tiny", O_RDONLY, 0, &f) != 0) {
    std::fprintf(stderr, "%s\n", clf::api::LastError());
    return 1;
  }
  std::string back(text.size(), '\0');
  if (f->Pread(back.data(), back.size(), 0) != static_cast<int64_t>(text.size())) return 1;
  std::printf("%s\n", back.c_str());
  return 0;
}
CC
read -ra cxx <<<"${CXX:-c++}"
read -ra san <<<"${SANITIZE_FLAGS:-}"
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$dest"
cflags=$(pkg-config --cflags clf)
libs=$(pkg-config --libs clf)
# Self-contained: every header a program reads comes from the scratch prefix or
# the system's C/C++ headers, none from gRPC, protobuf, RocksDB, spdlog or toml++.
check_deps() {
  local deps
  deps=$(tr ' \\' '\n\n' <"$1" | grep -E '^/' || true)
  echo "$deps" | grep -q "^$dest/.*/clf/clf.h" || fail "clf/clf.h did not come from $dest"
  if echo "$deps" | grep -E "^/usr/include/(grpc|grpcpp|google|rocksdb|spdlog|fmt|toml\+\+|nlohmann|absl|CLI|fuse3)/|^$(cd "$(dirname "$0")/../.." && pwd)/"; then
    fail "the installed headers reach headers outside the prefix (listed above)"
  fi
}
cc -std=c99 -Wall -Wextra -Werror -pedantic "${san[@]}" $cflags -M "$tmp/prog.c" >"$tmp/deps.c" ||
  fail "clf/clf.h does not compile as C99"
check_deps "$tmp/deps.c"
cc -std=c99 -Wall -Wextra -Werror -pedantic "${san[@]}" $cflags "$tmp/prog.c" -o "$tmp/prog" $libs ||
  fail "link a C program against libclf"
readelf -d "$tmp/prog" | grep -q 'NEEDED.*\[libclf.so.0\]' || fail "prog does not need libclf.so.0"
"${cxx[@]}" "${san[@]}" -std=c++20 -Wall -Wextra -Werror $cflags -M "$tmp/tiny.cc" >"$tmp/deps.cc" ||
  fail "clf/clf.hpp does not compile"
check_deps "$tmp/deps.cc"
"${cxx[@]}" "${san[@]}" -std=c++20 $cflags "$tmp/tiny.cc" -o "$tmp/tiny" $libs || fail "link a C++ program against libclf"

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
out=$(LD_LIBRARY_PATH="$(dirname "$so")" "$tmp/prog" "$tmp/etc/cluster.toml") || fail "prog failed: $out"
[ "$out" = "hello from C through an installed libclf | abcdefgh | size 108" ] || fail "prog printed '$out'"
out=$(LD_LIBRARY_PATH="$(dirname "$so")" "$tmp/tiny" "$tmp/etc/cluster.toml") || fail "tiny failed: $out"
[ "$out" = "hello from C++ through an installed libclf" ] || fail "tiny printed '$out'"
echo "PASS: a C and a C++ program built against $dest with clf.pc ran through libclf.so.0"
