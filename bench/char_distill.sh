#!/usr/bin/env bash
# The cost of the character model to the SGNS stream (--char-distill, --model char-lstm), and what
# it answers for words outside the vocabulary (docs/char-model.md).
#   bench/char_distill.sh CORPUS [MB] [THREADS]
# Trains `train --stream` on the first MB megabytes of CORPUS (a text8-style file) six times in
# the same run: plain SGNS, --char-distill, --char-distill with an n-gram bag of 100k rows (and
# the distillation defaults a bag brings: a step every 50k words, 1024 word types a step, a small
# forward LSTM), --model char-lstm --char-mode sum and replace, plain SGNS again (ratios at the
# end against the faster SGNS run); prints each one's words/s and its ratio to plain SGNS's
# (issue 21's bars: --char-distill >= 0.85x, --model char-lstm >= 0.25x), and the table's WS-353 rho and analogy accuracy (3CosAdd, the 30k
# most frequent words) as `export` writes it (the bar for --char-mode sum: at least plain
# SGNS's); then serves the distilled state on 127.0.0.1 and prints the neighbours of a few words
# the vocabulary does not hold.
set -euo pipefail
corpus=${1:?usage: bench/char_distill.sh CORPUS [MB] [THREADS]}
mb=${2:-50}
threads=${3:-2}
bin=${STREAMVEC:-$(dirname "$0")/../build/app/streamvec}
eval_dir=${EVAL_DIR:-$(dirname "$0")/../../shared/data/eval}
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
server=

run() {  # name, extra flags...
  local name=$1
  shift
  "$bin" train --input "$work/corpus.txt" --stream --state "$work/$name" --threads "$threads" \
      --vocab-capacity 100000 --snapshot-every 100000000 "$@" 2>"$work/$name.log"
  local rate
  rate=$(grep -o '[0-9.]*[kM]* words/s' "$work/$name.log" | head -1 | cut -d' ' -f1)
  local per_s
  per_s=$(echo "$rate" | awk '/M$/ {print $0 * 1e6; next} /k$/ {print $0 * 1e3; next} {print $0}')
  [ "$name" = sgns ] && sgns_per_s=$per_s
  rates+=("$name $per_s")
  echo "$name: $rate words/s ($(awk -v a="$per_s" -v b="$sgns_per_s" 'BEGIN {printf "%.3f", a / b}')x sgns)"
  grep 'character model' "$work/$name.log" | sed "s/^streamvec train: /$name: /" || true
  "$bin" export --state "$work/$name" --output "$work/$name.txt" 2>/dev/null
  "$bin" eval --vectors "$work/$name.txt" --similarity "$eval_dir/wordsim/EN-WS-353-ALL.txt" \
    --analogy "$eval_dir/analogy/questions-words.txt" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
rho, acc = r["similarity"][0]["spearman"], r["analogy"]["accuracy"]
print(f"{sys.argv[1]}: table WS-353 rho {rho:.3f}, analogy {acc:.3f}")' "$name"
}

# A file, not a pipe: how much a read returns from a pipe depends on timing, and with it where
# --model char-lstm's pieces end.
head -c "${mb}000000" "$corpus" >"$work/corpus.txt"
echo "first ${mb} MB of $(basename "$corpus"), --threads $threads, dim 100"
sgns_per_s=1
rates=()
run sgns
run distill --char-distill
run distill-bag --char-distill --char-ngram-buckets 100000
run char-lstm-sum --model char-lstm --char-mode sum
run char-lstm-replace --model char-lstm --char-mode replace
run sgns-again  # the machine drifts: the ratios below are against the faster SGNS run
printf '%s\n' "${rates[@]}" | awk '
  { rate[NR] = $2; name[NR] = $1; if ($1 ~ /^sgns/ && $2 > best) best = $2 }
  END { for (i = 1; i <= NR; i++) if (name[i] !~ /^sgns/)
          printf "%s: %.3fx the faster SGNS run\n", name[i], rate[i] / best }'

port=$((20000 + RANDOM % 20000))
"$bin" serve --state "$work/distill" --http "127.0.0.1:$port" 2>"$work/serve.log" &
server=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
for word in computerized musicianship reinvented antidisestablishment kingdoms philosophize; do
  curl -s "http://127.0.0.1:$port/v1/neighbors?word=$word&k=5" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r.get("word"), r.get("source"), " ".join(n["word"] for n in r.get("neighbors", [])))'
done
