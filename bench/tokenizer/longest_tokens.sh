#!/usr/bin/env bash
# Per file of a folder (default ../shared/data/multilingual): tokens `streamvec tokenize` finds
# and the longest one in characters (issue 28's bar: none over 64 unless the text has one, a URL).
# Usage: bench/tokenizer/longest_tokens.sh [DIR] [STREAMVEC]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-../shared/data/multilingual}"
sv="${2:-build/app/streamvec}"
for f in "$dir"/*.txt; do
  "$sv" tokenize --input "$f" 2>/dev/null | python3 -c '
import sys
toks = [l.rstrip("\n") for l in sys.stdin]
m = max(toks, key=len) if toks else ""
print(f"{sys.argv[1]}: {len(toks)} tokens, longest {len(m)} characters: {m[:60]}")' "$(basename "$f")"
done
