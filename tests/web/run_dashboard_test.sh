#!/usr/bin/env bash
# ctest "browser" test: builds a small state with `streamvec train --stream` (two snapshots),
# serves it with `streamvec serve`, and drives the dashboard in headless Chromium
# (dashboard_test.mjs). Exits 77 (SKIP_RETURN_CODE) only when /usr/bin/chromium is missing; a
# missing node or web/node_modules (scripts/install-deps installs Node and runs npm ci) fails it,
# as the dashboard then has no charts.
# Usage: run_dashboard_test.sh STREAMVEC_BINARY ARTIFACT_DIR
set -euo pipefail
binary=$1
artifacts=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ ! -x /usr/bin/chromium ]; then echo "SKIP: /usr/bin/chromium is missing"; exit 77; fi
for need in "$root/web/node_modules/playwright-core" "$root/web/node_modules/uplot"; do
  if [ ! -e "$need" ]; then echo "FAIL: $need is missing (scripts/install-deps runs npm ci)"; exit 1; fi
done
if ! command -v node >/dev/null 2>&1; then echo "FAIL: node is missing (scripts/install-deps)"; exit 1; fi

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

corpus="$root/data/demo/enwiki-text8style-small-5m.txt"
head -c 1500000 "$corpus" > "$work/part1.txt"
dd if="$corpus" of="$work/part2.txt" bs=1500000 skip=1 count=1 status=none
"$binary" train --input "$work/part1.txt" --stream --state "$work/state" --vocab-capacity 30000 --dim 50 2> "$work/train1.log"

"$binary" serve --state "$work/state" --http 127.0.0.1:0 --exact-max-words 5000 \
  --similarity "$root/tests/data/eval/EN-WS-353-ALL.txt" --web-root "$root/web" \
  > "$work/serve.out" 2> "$work/serve.err" &
server=$!
for _ in $(seq 1 600); do  # up to 60 s for the first snapshot (index + quality)
  if grep -q '^serving ' "$work/serve.out"; then break; fi
  sleep 0.1
done
if ! grep -q '^serving ' "$work/serve.out"; then
  echo "streamvec serve did not start:"; cat "$work/serve.out" "$work/serve.err"; exit 1
fi
# The URL from the line just seen (read before it, it could still be missing: an empty URL).
url=$(grep -o '^serving http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1 | cut -d' ' -f2)
# More snapshots while serving: quality per snapshot, PIP loss and drift get older points.
"$binary" train --input "$work/part2.txt" --stream --state "$work/state" --snapshot-every 100000 \
  2> "$work/train2.log"
mkdir -p "$artifacts"
node "$here/dashboard_test.mjs" "$url" "$artifacts/dashboard.png" king || {
  echo "--- serve log"; tail -20 "$work/serve.err"; exit 1; }
