#!/bin/bash
# On the lent GPU machine, after bench/gpu/on_device.sh unpacked .gpu/: Nsight Compute's
# speed-of-light, memory and occupancy sections for one training launch of each model (`ncu -c 1`
# on the kernel TrainKernel) on the first 20 MB of the benchmark corpus. Reports go to $OUT.
set -uo pipefail
work=/tmp/streamvec-gpu
out=${OUT:-/tmp}
export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "profile: no ncu on this machine"; exit 0; }
head -c 20000000 "$work/corpus.txt" > "$work/corpus20m.txt"
for model in sgns cbow; do
  "$ncu" -k regex:TrainKernel -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    --section WarpStateStats \
    "$work/bin/streamvec" train --device cuda --input "$work/corpus20m.txt" --output /tmp/p.vec \
    --model "$model" --sample 1e-4 --epochs 1 --progress never > "$out/ncu-$model.txt" 2>&1
  grep -E "Duration|Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Warp Cycles Per Issued|Executed Ipc|L2 Hit|Block Limit" "$out/ncu-$model.txt" | head -30
done
