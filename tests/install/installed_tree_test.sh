#!/usr/bin/env bash
# ctest "install" test: `cmake --install` of the build into a temporary prefix, then the installed
# binary, run from a directory outside the checkout, trains a small state and serves it:
# /healthz, a vector, the dashboard page and every asset it loads answer 200 (the dashboard is
# found without --web-root). The state is trained on the start of the installed run data (the
# bundled xz-compressed corpus, decoded with xz).
# Usage: installed_tree_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
bin="$work/prefix/bin/streamvec"
share="$work/prefix/share/streamvec"
for f in "$bin" "$share/web/index.html" "$share/web/dashboard.js" \
         "$share/web/node_modules/uplot/dist/uPlot.iife.min.js" \
         "$share/web/node_modules/uplot/dist/uPlot.min.css" "$share/data/feeds/feeds.txt"; do
  if [ ! -s "$f" ]; then echo "FAIL: $f was not installed"; exit 1; fi
done
corpus=$(ls "$share"/data/run/*.xz | head -1)

cd "$work"  # outside the checkout: nothing may be found relative to the source tree
head -c 400000 < <(xz -dc "$corpus" 2>/dev/null) |
  "$bin" train --input - --stream --state "$work/state" --vocab-capacity 5000 --dim 20 \
    --min-count 2 2> "$work/train.log"
"$bin" serve --state "$work/state" --http 127.0.0.1:0 > "$work/serve.out" 2> "$work/serve.err" &
server=$!
url=""
for _ in $(seq 1 300); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1 || true)
  if [ -n "$url" ] && grep -q '^serving ' "$work/serve.out"; then break; fi
  sleep 0.1
done
if [ -z "$url" ]; then echo "FAIL: serve did not start"; cat "$work/serve.out" "$work/serve.err"; exit 1; fi
if ! grep -qF "dashboard $url/ from $share/web" "$work/serve.out"; then
  echo "FAIL: the installed binary does not serve the installed dashboard:"; cat "$work/serve.out"
  exit 1
fi

/usr/bin/python3 - "$url" <<'PY'
import sys, urllib.request, urllib.error, time
url = sys.argv[1]
def get(path):
    try:
        with urllib.request.urlopen(url + path, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
# The first snapshot may still be loading: bounded wait for a vector.
deadline = time.monotonic() + 30
while True:
    code, body = get("/v1/vectors/the")
    if code == 200 or time.monotonic() > deadline:
        break
    time.sleep(0.2)
failed = 0
for path, want in [("/healthz", None), ("/v1/vectors/the", b'"vector"'), ("/", b"/static/dashboard.js"),
                   ("/static/dashboard.js", None), ("/static/uPlot.iife.min.js", b"uPlot"),
                   ("/static/uPlot.min.css", b"uplot")]:
    code, body = get(path)
    ok = code == 200 and (want is None or want in body)
    print(("ok  " if ok else "FAIL") + f" GET {path}: {code}, {len(body)} bytes")
    failed += not ok
sys.exit(1 if failed else 0)
PY
