#!/usr/bin/env bash
# Disk full while snapshots are written (issue 24's fault campaign): the state lives on a small
# tmpfs that fills up mid-run. Checks, for `train --stream` and for `run`:
#   1. the failed snapshots are named (ENOSPC) and the process does not crash;
#   2. every published snapshot is intact (`state verify`) and `serve` serves the newest;
#   3. once there is room again (the tmpfs grown), a restart resumes from that snapshot and, for
#      `run`, trains every document of the data at least once (its connector positions).
# Needs root (mount -t tmpfs); prints SKIP otherwise.
#   bench/disk_full.sh [CORPUS] [MB]     (default: the 100M corpus, its first 20 MB)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=${1:-$root/../shared/data/corpus/enwiki-text8style-100m.txt}
mb=${2:-20}
bin=${STREAMVEC:-$root/build/app/streamvec}
work=$(mktemp -d)
mnt=$work/disk
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  umount "$mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$mnt" "$work/data"
if ! mount -t tmpfs -o size=40m tmpfs "$mnt" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs here (needs root)"
  exit 0
fi
head -c "${mb}000000" "$corpus" > "$work/corpus.txt"
# run's data: lines of about 50 KB (documents), so that positions and counts mean something.
fold -w 50000 -s "$work/corpus.txt" > "$work/data/corpus.txt"
docs=$(wc -l < "$work/data/corpus.txt")
fail=0
check() {  # name, condition result (0 ok), message
  if [ "$2" -eq 0 ]; then echo "ok    $1: $3"; else echo "FAIL  $1: $3"; fail=1; fi
}
served_documents() {  # state -> the served snapshot's "documents" (or words_seen), via serve
  local port=$((20000 + RANDOM % 20000))
  "$bin" serve --state "$1" --http "127.0.0.1:$port" > "$work/serve.out" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && break
    sleep 0.1
  done
  curl -s "http://127.0.0.1:$port/v1/snapshots" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
s = [x for x in r["snapshots"] if x["version"] == r["served"]][0]
print(r["served"], s.get("documents", 0), s.get("words_seen", 0))'
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
}

echo "== train --stream, state on a 40 MB tmpfs, ${mb} MB of text"
set +e
"$bin" train --input "$work/corpus.txt" --stream --state "$mnt/stream" --vocab-capacity 20000 \
  --dim 50 --snapshot-every 300000 --threads 2 > "$work/stream.log" 2>&1
rc=$?
set -e
failed=$(grep -c "No space left on device" "$work/stream.log" || true)
check stream "$([ "$failed" -gt 0 ] && [ "$rc" -eq 1 ]; echo $?)" \
  "$failed snapshot failures name ENOSPC; exit $rc (1: the final snapshot failed, the previous kept)"
verify=$("$bin" state verify --state "$mnt/stream" 2>&1 | tail -1)
check stream "$(echo "$verify" | grep -q 'snapshots intact'; echo $?)" "state verify: $verify"
read -r version _ words < <(served_documents "$mnt/stream")
check stream "$([ "$words" -gt 0 ]; echo $?)" "serve serves snapshot $version ($words words seen)"
mount -o remount,size=400m "$mnt"
"$bin" train --input "$work/corpus.txt" --stream --state "$mnt/stream" > "$work/stream2.log" 2>&1
resumed=$(grep -o "resuming from .* words seen)" "$work/stream2.log" | head -1)
check stream "$([ -n "$resumed" ]; echo $?)" "with room again: $resumed"

echo "== run, state on a 30 MB tmpfs, $docs documents"
rm -rf "$mnt/stream"
mount -o remount,size=30m "$mnt"
set +e
"$bin" run --data "$work/data" --no-crawl --no-follow --max-idle 2 --state "$mnt/run" \
  --http 127.0.0.1:0 --vocab-capacity 20000 --dim 50 --snapshot-every 0.3 \
  --checkpoint-every 0.3 > "$work/run.log" 2>&1
rc=$?
set -e
failed=$(grep -c "No space left on device" "$work/run.log" || true)
check run "$([ "$failed" -gt 0 ]; echo $?)" "$failed messages name ENOSPC; exit $rc"
verify=$("$bin" state verify --state "$mnt/run" 2>&1 | tail -1)
check run "$(echo "$verify" | grep -q 'snapshots intact'; echo $?)" "state verify: $verify"
read -r version before _ < <(served_documents "$mnt/run")
check run 0 "serve serves snapshot $version ($before documents)"
mount -o remount,size=400m "$mnt"
"$bin" run --data "$work/data" --no-crawl --no-follow --max-idle 2 --state "$mnt/run" \
  --http 127.0.0.1:0 --vocab-capacity 20000 --dim 50 > "$work/run2.log" 2>&1
read -r version after _ < <(served_documents "$mnt/run")
check run "$([ "$after" -ge "$docs" ]; echo $?)" \
  "with room again: snapshot $version holds $after documents trained (the data has $docs)"
if [ "$fail" -ne 0 ]; then
  echo "logs: $work (kept)"
  trap - EXIT
  umount "$mnt" 2>/dev/null || true
  exit 1
fi
