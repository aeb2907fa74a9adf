#!/usr/bin/env bash
# NormalizeText's MB/s on each line of FILE (default data/demo/enwiki-small-5m.txt, Wikipedia
# paragraphs), best of five passes, for each build directory given (default build): run it with
# two builds, alternating, to compare them.
# Usage: bench/tokenizer/normalize_bench.sh [FILE] [BUILD_DIR ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
file="${1:-data/demo/enwiki-small-5m.txt}"
shift || true
builds=("$@")
[ "${#builds[@]}" -gt 0 ] || builds=(build)
for b in "${builds[@]}"; do
  exe="$(mktemp -d)/normalize_bench"
  g++ -O2 -std=c++20 -Itokenizer/include bench/tokenizer/normalize_bench.cpp \
    "$b/tokenizer/libstreamvec_tokenizer.a" $(pkg-config --libs libutf8proc icu-uc icu-i18n) -o "$exe"
  echo "$b: $("$exe" "$file")"
done
