#!/bin/bash
# bench/kernel_ab/run.sh REV_A REV_B [REPS] [resident] [cbow]
#
# The AVX-512 skip-gram (with `cbow`: CBOW) kernel (kernels/src/simd_kernel.h and the headers
# it uses) of two git revisions -- or WORKTREE for the working tree -- built side by side in one
# harness and timed alternating on real micro-batches (kernel_ab.cpp), in both link orders;
# prints B/A as the geometric mean of the two orders' ratios (below 1: B is faster). Needs an AVX-512 machine and a
# configured build/ (for the base and kernels libraries); run from the repository root.
set -euo pipefail
A=${1:?REV_A}; B=${2:?REV_B}; REPS=${3:-10}; MODE="${*:4}"
ROOT=$(pwd)
CORPUS=${CORPUS:-$ROOT/../shared/data/corpus/enwiki-text8style-100m.txt}
[ -f "$CORPUS" ] || CORPUS=$ROOT/data/demo/enwiki-text8style-small-5m.txt
grep -q avx512f /proc/cpuinfo || { echo "kernel_ab: this CPU has no AVX-512" >&2; exit 2; }
cmake --build build --target streamvec_kernels streamvec_base >/dev/null
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# The build's flags for simd_avx512.cpp (kernels/CMakeLists.txt); FLAGS_A / FLAGS_B (environment)
# add flags to one side only, e.g. FLAGS_A=-mno-prfchw to compare with read prefetches.
FLAGS="-O3 -DNDEBUG -std=c++20 -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma -mprfchw -w"
# Sources of REV into $W/src-NAME; its AVX-512 kernel as object $W/NAME.o with namespace and
# factory renamed (MakeKernelNAME).
build_variant() {
  local rev=$1 name=$2 extra=$3 dir=$W/src-$2
  rm -rf "$dir"; mkdir -p "$dir"
  if [ "$rev" = WORKTREE ]; then
    cp -r kernels "$dir/"
  else
    git archive "$rev" kernels | tar -x -C "$dir"
  fi
  sed -e "s/namespace avx512 {/namespace avx512_$name {/; s/}  \/\/ namespace avx512\$/}/" \
      -e "s/avx512::/avx512_$name::/g; s/MakeAvx512Kernel()/MakeKernel$name()/" \
      -e "s/DotAvx512(/DotAvx512_$name(/; s/ColumnScoresAvx512(/ColumnScoresAvx512_$name(/" \
      "$dir/kernels/src/simd_avx512.cpp" > "$dir/kernels/src/variant.cpp"
  c++ $FLAGS $extra -I"$dir/kernels/src" -I"$dir/kernels/include" -I"$ROOT/base/include" \
      -c "$dir/kernels/src/variant.cpp" -o "$W/$name.o"
}
LIBS="build/kernels/libstreamvec_kernels.a build/base/libstreamvec_base.a"
build_variant "$A" A "${FLAGS_A:-}"; build_variant "$B" B "${FLAGS_B:-}"
c++ -O2 -std=c++20 -Ikernels/include -Ibase/include bench/kernel_ab/kernel_ab.cpp "$W/A.o" "$W/B.o" $LIBS -o "$W/ab"
# The other order: B's kernel in slot A and A's in slot B.
build_variant "$B" A "${FLAGS_B:-}"; build_variant "$A" B "${FLAGS_A:-}"
c++ -O2 -std=c++20 -Ikernels/include -Ibase/include bench/kernel_ab/kernel_ab.cpp "$W/A.o" "$W/B.o" $LIBS -o "$W/ba"
ab=$("$W/ab" "$CORPUS" "$REPS" $MODE); echo "order A,B: $ab"
ba=$("$W/ba" "$CORPUS" "$REPS" $MODE); echo "order B,A: $ba"
r1=${ab##*B/A }; r2=${ba##*B/A }
python3 -c "import math; r=math.sqrt($r1/$r2); print(f'{\"$B\"} / {\"$A\"}: {r:.4f} (slot bias {math.sqrt($r1*$r2):.4f})')"
