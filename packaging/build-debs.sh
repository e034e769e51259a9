#!/usr/bin/env bash
# Builds the Debian packages clf-server, clf-client, clf-tools, libclf0 and
# libclf-dev with `dpkg-buildpackage -b -us -uc` (debhelper + meson).
# Usage: packaging/build-debs.sh OUTDIR      (the .deb, .buildinfo and .changes land in OUTDIR)
# dpkg-buildpackage wants debian/ at the top of the source tree: this copies the
# working tree's files (tracked and untracked-but-not-ignored, so no build/ folders)
# to a scratch folder, puts packaging/debian there as debian/, builds, and
# removes the scratch folder. Run it under the build lock (it compiles everything).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build-debs.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(sed -n 's/^clusterfile (\([^)]*\)).*/\1/p' "$src/packaging/debian/changelog" | head -1)
work=$(mktemp -d /tmp/clf-debs.XXXXXX)
trap 'rm -rf "$work"' EXIT
tree="$work/clusterfile-$version"
mkdir "$tree"
(cd "$src" && git ls-files -co --exclude-standard -z |
   while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
   tar --null -T - -cf -) | tar -C "$tree" -xf -
rm -rf "$tree/debian"
cp -r "$src/packaging/debian" "$tree/debian"
cd "$tree"
# nocheck: the suites need clusters and FUSE (scripts/test.sh runs them);
# noddebs: no -dbgsym packages.
DEB_BUILD_OPTIONS="nocheck noddebs parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
  dpkg-buildpackage -b -us -uc
cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/
ls -1 "$out"
