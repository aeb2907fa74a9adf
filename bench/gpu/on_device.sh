#!/bin/bash
# Runs on the lent GPU machine from the repository root (after bench/gpu/pack.sh here):
# unpacks .gpu/, runs the GPU tests (ctest label "gpu": the *Gpu* tests of the kernels, trainer
# and charmodel binaries) and then bench/gpu_bench.py with the arguments given. Logs go to $OUT when
# set (the device tool's result folder), else to .gpu/out.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=/tmp/streamvec-gpu
out=${OUT:-$repo/.gpu/out}
mkdir -p "$work" "$out"
tar -C "$work" -xJf "$repo/.gpu/bundle.tar.xz"
# The benchmark corpus: pack.sh's copy, else the one the repository carries for `streamvec run`
# (data/run/, the same 100M corpus).
if [ ! -f "$work/corpus.txt" ]; then
  for xz in "$repo/.gpu/corpus.txt.xz" "$repo/data/run/enwiki-text8style-100m.txt.xz"; do
    if [ -f "$xz" ]; then
      xz -T0 -dc "$xz" > "$work/corpus.txt"
      break
    fi
  done
fi
# cuBLAS (the character model's device encoder loads it when it starts) comes from the machine's
# CUDA: its toolkit's libraries, else the nvidia-cublas Python package's.
cublas=$(ls /usr/local/cuda/lib64/libcublas.so.* /usr/local/cuda/targets/*/lib/libcublas.so.* \
  2>/dev/null | head -1)
[ -n "$cublas" ] || cublas=$(find /usr /opt -name 'libcublas.so.*' 2>/dev/null | head -1)
cublas_dir=${cublas:+$(dirname "$cublas")}
echo "cuBLAS: ${cublas:-not found}"
export LD_LIBRARY_PATH=$work/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
[ -x "$work/bin/streamvec" ] && "$work/bin/streamvec" --version 2>&1 | head -1
status=0
for t in kernels_test trainer_test charmodel_test; do
  [ -x "$work/bin/$t" ] || continue  # pack.sh's GPU_BINS left it out
  (cd "$work" && "$work/bin/$t" --gtest_filter='*Gpu*:Cuda*' 2>&1) | tee "$out/$t.log" | tail -4
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
if [ "$#" -gt 0 ] && [ -x "$work/bin/streamvec" ]; then
  PYTHONUNBUFFERED=1 python3 "$repo/bench/gpu_bench.py" --streamvec "$work/bin/streamvec" \
    --corpus "$work/corpus.txt" --eval-dir "$repo/tests/data/eval" --out "$out/gpu_bench.json" "$@" 2>&1 |
    tee "$out/gpu_bench.log"
fi
exit $status
