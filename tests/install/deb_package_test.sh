#!/usr/bin/env bash
# ctest "install" test: `cpack -G DEB` builds the Debian package of the installed tree; it must
# declare its library dependencies (librdkafka, RocksDB, cpprestsdk, ...) and, unpacked outside
# the checkout, run and find its dashboard and bundled data. Exits 77 (skipped) without
# dpkg-shlibdeps (package dpkg-dev).
# Usage: deb_package_test.sh BUILD_DIR
set -euo pipefail
build=$1
if ! command -v dpkg-shlibdeps >/dev/null 2>&1; then echo "SKIP: dpkg-shlibdeps is missing"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work/pkg" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/pkg/streamvec_*.deb | head -1)
[ -s "$deb" ] || { echo "FAIL: no package built"; cat "$work/cpack.log"; exit 1; }
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
failed=0
for lib in librdkafka librocksdb libcpprest libutf8proc libsimdjson libzstd liblzma zlib1g; do
  if ! grep -q "$lib" <<<"$depends"; then echo "FAIL: Depends lacks $lib"; failed=1; fi
done
dpkg-deb -x "$deb" "$work/root"
for f in usr/bin/streamvec usr/share/streamvec/web/index.html \
         usr/share/streamvec/web/node_modules/uplot/dist/uPlot.iife.min.js \
         usr/share/streamvec/data/feeds/feeds.txt \
         usr/share/streamvec/data/run/enwiki-text8style-100m.txt.xz; do
  [ -s "$work/root/$f" ] || { echo "FAIL: the package lacks /$f"; failed=1; }
done
cd "$work"
"$work/root/usr/bin/streamvec" --help > "$work/help.txt" || { echo "FAIL: the packaged binary does not run"; failed=1; }
grep -q "serve" "$work/help.txt" || { echo "FAIL: the packaged binary's --help lists no serve"; failed=1; }
[ "$failed" -eq 0 ] && echo "ok   $(basename "$deb"): dependencies declared, files in place, the binary runs"
exit "$failed"
