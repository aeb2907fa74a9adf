#!/usr/bin/env bash
# Single-thread costs of param/ (merge rounds per rule, protocol encode/decode, delta export, count
# summary), for the scaling model of issue 20. Builds bench/param/param_bench.cpp against one
# build's libraries (default build/; scripts/build first).
# Usage: bench/param/param_bench.sh [BUILD_DIR]   (PARAM_BENCH_EXE=PATH keeps the binary there)
set -euo pipefail
cd "$(dirname "$0")/../.."
b="${1:-build}"
exe="${PARAM_BENCH_EXE:-$(mktemp -d)/param_bench}"
g++ -O2 -std=c++20 -Iparam/include -Ibase/include bench/param/param_bench.cpp \
  "$b/param/libstreamvec_param.a" "$b/trainer/libstreamvec_trainer.a" \
  "$b/tokenizer/libstreamvec_tokenizer.a" "$b/kernels/libstreamvec_kernels.a" \
  "$b/base/libstreamvec_base.a" \
  $(pkg-config --libs libutf8proc) -o "$exe"
"$exe"
