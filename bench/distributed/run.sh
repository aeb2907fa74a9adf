#!/usr/bin/env bash
# One pass of a corpus through the distributed path on the embedded broker, as separate
# processes: `streamvec broker --param-shards S`, S `param-node` shards, `ingest`, N trainers
# (`train --bootstrap-file ... --param-shards S`, one training thread each). Then exports the
# shards' union and trainer 1's own vectors and scores both on WS-353, and prints the trainers'
# and node 0's summary lines (messages merged, node offset: merged < offset means pushes were
# lost to the embedded broker's ring).
# Usage: [NODE_ARGS="param-node flags"] bench/distributed/run.sh [CORPUS] [TRAINERS] [SHARDS]
#        [MERGE] [train args...]
#   defaults: ../shared/data/corpus/enwiki-text8style-small-5m.txt 2 2 scaled
# Work files: bench/results/distributed/w-N-S-MERGE/
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
corpus=$(readlink -f "${1:-../shared/data/corpus/enwiki-text8style-small-5m.txt}")
n=${2:-2}; shards=${3:-2}; merge=${4:-scaled}; shift $(( $# < 4 ? $# : 4 ))
S=$root/build/app/streamvec
ws=$(readlink -f ../shared/data/eval/wordsim/EN-WS-353-ALL.txt)
W=$root/bench/results/distributed/w-$n-$shards-$merge
rm -rf "$W"; mkdir -p "$W"; cd "$W"
"$S" broker --bootstrap-file bs.txt --param-shards "$shards" > broker.log 2>&1 &
broker=$!
while [ ! -s bs.txt ]; do sleep 0.1; done
nodes=()
for ((i = 0; i < shards; i++)); do
  "$S" param-node --shard "$i" --shards "$shards" --state "n$i" --bootstrap-file bs.txt \
    --merge "$merge" ${NODE_ARGS:-} > "node$i.log" 2>&1 &
  nodes+=($!)
done
t0=$(date +%s.%N)
"$S" ingest --bootstrap-file bs.txt --from "$corpus" > ingest.log 2>&1 &
trainers=()
for ((t = 1; t <= n; t++)); do
  "$S" train --bootstrap-file bs.txt --state "t$t" --param-shards "$shards" --trainer-id "$t" \
    --vocab-capacity 50000 --threads 1 --max-idle 3 "$@" > "train$t.log" 2>&1 &
  trainers+=($!)
done
wait "${trainers[@]}"
t1=$(date +%s.%N)
sleep 2
kill -INT "${nodes[@]}"; wait "${nodes[@]}"
kill "$broker"; wait "$broker" 2>/dev/null
states=(); for ((i = 0; i < shards; i++)); do states+=(--state "n$i"); done
"$S" export "${states[@]}" --output node.vec > export.log 2>&1
"$S" export --state t1 --output t1.vec > /dev/null 2>&1
echo "trainers $n, shards $shards, merge $merge, corpus $corpus"
echo "wall (ingest start to the last trainer's exit, less --max-idle): $(echo "$t1 - $t0 - 3" | bc) s"
echo "shards' union:  $("$S" eval --vectors node.vec --similarity "$ws" | grep EN-WS)"
echo "trainer 1 alone: $("$S" eval --vectors t1.vec --similarity "$ws" | grep EN-WS)"
grep -h "streamvec train:" train*.log | cut -c1-160
tail -n 1 node0.log
