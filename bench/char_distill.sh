#!/usr/bin/env bash
# The cost of --char-distill to the SGNS stream, and what the character model answers for words
# outside the vocabulary (docs/char-model.md).
#   bench/char_distill.sh CORPUS [MB] [THREADS]
# Trains `train --stream` on the first MB megabytes of CORPUS (a text8-style file) twice, without
# and with --char-distill, in the same run, and prints both words/s; then serves the distilled
# state on 127.0.0.1 and prints the neighbours of a few words the vocabulary does not hold.
set -euo pipefail
corpus=${1:?usage: bench/char_distill.sh CORPUS [MB] [THREADS]}
mb=${2:-50}
threads=${3:-2}
bin=${STREAMVEC:-$(dirname "$0")/../build/app/streamvec}
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
server=

run() {  # name, extra flags...
  local name=$1
  shift
  head -c "${mb}000000" "$corpus" |
    "$bin" train --input - --stream --state "$work/$name" --threads "$threads" \
      --vocab-capacity 100000 --snapshot-every 100000000 "$@" 2>"$work/$name.log"
  grep -o '[0-9.]*[kM]* words/s' "$work/$name.log" | head -1 | sed "s/^/$name: /"
  grep 'character model' "$work/$name.log" | sed "s/^streamvec train: /$name: /" || true
}

echo "first ${mb} MB of $(basename "$corpus"), --threads $threads, dim 100"
run sgns
run distill --char-distill

port=$((20000 + RANDOM % 20000))
"$bin" serve --state "$work/distill" --http "127.0.0.1:$port" 2>"$work/serve.log" &
server=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
for word in computerized musicianship reinvented antidisestablishment kingdoms philosophize; do
  curl -s "http://127.0.0.1:$port/v1/neighbors?word=$word&k=5" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r.get("word"), r.get("source"), " ".join(n["word"] for n in r.get("neighbors", [])))'
done
