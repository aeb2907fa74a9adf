#!/bin/bash
# Runs on the lent GPU machine from the repository root (after bench/gpu/pack.sh here):
# unpacks .gpu/, runs the GPU tests (ctest label "gpu": the *Gpu* tests of the kernels and
# trainer binaries) and then bench/gpu_bench.py with the arguments given. Logs go to $OUT when
# set (the device tool's result folder), else to .gpu/out.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=/tmp/streamvec-gpu
out=${OUT:-$repo/.gpu/out}
mkdir -p "$work" "$out"
tar -C "$work" -xJf "$repo/.gpu/bundle.tar.xz"
if [ -f "$repo/.gpu/corpus.txt.xz" ] && [ ! -f "$work/corpus.txt" ]; then
  xz -dc "$repo/.gpu/corpus.txt.xz" > "$work/corpus.txt"
fi
export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
"$work/bin/streamvec" --version 2>&1 | head -1
status=0
for t in kernels_test trainer_test; do
  (cd "$work" && "$work/bin/$t" --gtest_filter='*Gpu*:Cuda*' 2>&1) | tee "$out/$t.log" | tail -4
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
if [ "$#" -gt 0 ]; then
  PYTHONUNBUFFERED=1 python3 "$repo/bench/gpu_bench.py" --streamvec "$work/bin/streamvec" \
    --corpus "$work/corpus.txt" --eval-dir "$repo/tests/data/eval" --out "$out/gpu_bench.json" "$@" 2>&1 |
    tee "$out/gpu_bench.log"
fi
exit $status
