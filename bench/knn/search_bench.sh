#!/usr/bin/env bash
# The HNSW search alone (bench/knn/search_bench.cpp): streamvec's search loop against hnswlib's
# searchKnn on the same graph, one thread, no HTTP; recall@10 and microseconds per search for a
# few ef values. VECTORS: a word2vec file; default: the 220k-word state of bench/knn_bench.py
# (bench/results/cache/knn-state, made by it) exported to a temporary file.
# Usage: bench/knn/search_bench.sh [VECTORS [M [EF_CONSTRUCTION [REPS [BUILDS]]]]]   (scripts/build first)
set -euo pipefail
cd "$(dirname "$0")/../.."
b=build
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
vectors="${1:-}"
if [ -z "$vectors" ]; then
  state=bench/results/cache/knn-state
  [ -d "$state" ] || { echo "no $state: run bench/knn_bench.py once, or pass VECTORS" >&2; exit 2; }
  vectors="$tmp/knn.bin"
  "$b/app/streamvec" export --state "$state" --output "$vectors" --format binary >&2
fi
# The character model's library calls OpenBLAS where the build found it (CMakeCache says).
blas=
grep -q '^OPENBLAS_FOUND:INTERNAL=1' "$b/CMakeCache.txt" 2>/dev/null &&
  grep -q '^STREAMVEC_ENABLE_OPENBLAS:BOOL=ON' "$b/CMakeCache.txt" && blas=$(pkg-config --libs openblas)
# A CUDA build's character model library calls the CUDA runtime.
cudart=
grep -q '^STREAMVEC_ENABLE_CUDA:BOOL=ON' "$b/CMakeCache.txt" 2>/dev/null &&
  cudart=$(sed -n 's/^CUDA_cudart_LIBRARY:FILEPATH=//p' "$b/CMakeCache.txt")
g++ -O2 -std=c++20 -Iapi/src -Iapi/include -Ibase/include -Istore/include -Ikernels/include \
  -Icharmodel/include -Itokenizer/include bench/knn/search_bench.cpp \
  "$b/api/libstreamvec_api.a" "$b/eval/libstreamvec_eval.a" "$b/store/libstreamvec_store.a" \
  "$b/charmodel/libstreamvec_charmodel.a" "$b/kernels/libstreamvec_kernels.a" \
  "$b/tokenizer/libstreamvec_tokenizer.a" "$b/base/libstreamvec_base.a" \
  -lrocksdb -lspdlog -lfmt -lxxhash $(pkg-config --libs libutf8proc) $blas $cudart -lpthread \
  -o "$tmp/search_bench"
"$tmp/search_bench" "$vectors" "${@:2}"
