#!/usr/bin/env bash
# The CPU kernels' hot loops and the stream's Adagrad step keep their software prefetches.
# GCC deletes calls to a function that does nothing but prefetch (see PrefetchRow in
# kernels/src/simd_kernel.h): a helper that loses its always_inline leaves a kernel without a
# single prefetch, with the same results, only slower, so no other test notices. This one reads
# the compiled code: every instance of each function below must hold prefetch instructions.
# Usage: prefetch_test.sh OBJDUMP LIBRARY...   Exit 77 (ctest: skipped) without objdump.
set -euo pipefail
objdump=$1
shift
if ! command -v "$objdump" >/dev/null; then
  echo "prefetch_test: no $objdump, skipped"
  exit 77
fi
listing=$("$objdump" -d -C --no-show-raw-insn "$@")
# Function headers ("ADDRESS <NAME>:") that contain at least one prefetch instruction.
with_prefetch=$(awk '/^[0-9a-f]+ <.*>:$/ { fn = $0; next }
                     /\tprefetch/ && fn != "" { seen[fn] = 1 }
                     END { for (f in seen) print f }' <<<"$listing")
fail=0
for pattern in 'SimdKernel::SkipGramImpl<' 'SimdKernel::CbowImpl<' 'SimdKernel::CbowFused<' \
               'AdagradSentenceAvx2\(' 'AdagradSentenceAvx512\('; do
  functions=$(grep -E '^[0-9a-f]+ <.*>:$' <<<"$listing" | grep -E "$pattern" || true)
  if [[ -z $functions ]]; then
    echo "FAIL: no function matches $pattern"
    fail=1
    continue
  fi
  count=0
  while IFS= read -r f; do
    count=$((count + 1))
    if ! grep -qxF "$f" <<<"$with_prefetch"; then
      echo "FAIL: no prefetch instruction in $f"
      fail=1
    fi
  done <<<"$functions"
  echo "$pattern: $count function(s) checked"
done
exit "$fail"
