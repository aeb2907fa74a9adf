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
# One pass over the listing: each function header ("ADDRESS <NAME>:") that matches a pattern,
# and whether its body holds a prefetch instruction.
"$objdump" -d -C --no-show-raw-insn "$@" | awk '
  BEGIN {
    n = split("SimdKernel::SkipGramImpl< SimdKernel::CbowImpl< SimdKernel::CbowFused< " \
              "AdagradSentenceAvx2( AdagradSentenceAvx512(", patterns, " ")
  }
  /^[0-9a-f]+ <.*>:$/ {
    current = 0
    for (p = 1; p <= n; ++p) {
      if (index($0, patterns[p]) > 0) {
        current = $0
        checked[p]++
        has[$0] = 0
      }
    }
    next
  }
  current != 0 && /\tprefetch/ { has[current] = 1 }
  END {
    fail = 0
    for (f in has) {
      if (!has[f]) { print "FAIL: no prefetch instruction in " f; fail = 1 }
    }
    for (p = 1; p <= n; ++p) {
      if (!checked[p]) { print "FAIL: no function matches " patterns[p]; fail = 1 }
      else print patterns[p] ": " checked[p] " function(s) checked"
    }
    exit fail
  }'
