#!/bin/bash
# On the lent GPU machine after bench/gpu/on_device.sh: `streamvec run` over the benchmark corpus
# (no crawl, no follow, stops 2 s after the corpus is trained) with --device cuda and --device
# cpu, alternating; prints each run's summary line.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=/tmp/streamvec-gpu
export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/rundata && ln -sf "$work/corpus.txt" /tmp/rundata/corpus.txt
for rep in 1 2; do
  for device in cuda cpu; do
    rm -rf /tmp/runstate
    echo "== run --device $device (rep $rep)"
    timeout 300 "$work/bin/streamvec" run --data /tmp/rundata --no-crawl --no-follow --max-idle 2 \
      --vocab-capacity 50000 --threads "${THREADS:-2}" --state /tmp/runstate \
      --http 127.0.0.1:0 --device "$device" 2>&1 | grep -E "streamvec run:|error|warn" | tail -3
  done
done
