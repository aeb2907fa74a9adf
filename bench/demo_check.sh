#!/usr/bin/env bash
# Does the demo show good vectors in time? Starts scripts/demo (install check, build, then
# `streamvec run` on the bundled data) on a fresh state and a free port, and polls
#   GET /v1/most_similar?positive=king,woman&negative=man&topn=5   until `queen` is in it
#   GET /v1/neighbors?word=france&k=10                            until >= 3 countries are in it
# every second until the limit, timing each from the moment `streamvec run` serves (and from the
# script's start, the build's no-op check included), then asks both once more at the limit (the
# answer must still pass: later snapshots keep it). Prints PASS/FAIL for each with the time it
# first passed and the answers, and exits 0 when both passed within the limit and still do.
#   bench/demo_check.sh [--limit SECONDS (60)] [--give-up SECONDS (180)] [streamvec run flags...]
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

limit=60
give_up=180
run_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --limit) limit="$2"; shift 2 ;;
    --give-up) give_up="$2"; shift 2 ;;
    *) run_args+=("$1"); shift ;;
  esac
done

work=$(mktemp -d /tmp/streamvec-demo-check.XXXXXX)
demo_pid=""
cleanup() {
  if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -INT "$demo_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$demo_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$demo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
t0=$(now)
scripts/demo --state "$work/state" --http 127.0.0.1:0 "${run_args[@]}" \
  > "$work/demo.out" 2> "$work/demo.err" &
demo_pid=$!

url=""
while [ -z "$url" ]; do
  if ! kill -0 "$demo_pid" 2>/dev/null; then
    echo "FAIL: scripts/demo exited before serving"; tail -20 "$work/demo.out" "$work/demo.err"
    exit 1
  fi
  url=$(grep -o '^serving http://[^ ]*' "$work/demo.out" | head -1 | cut -d' ' -f2 || true)
  sleep 0.2
done
t_serve=$(now)
printf 'serving %s %.1f s after the start (install check and build included)\n' "$url" \
  "$(echo "$t_serve - $t0" | bc)"

# Prints "ok <answer>" when the answer passes, else "no <answer>".
judge() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
kind, body = sys.argv[1], sys.argv[2]
try:
    results = json.loads(body).get("results") or json.loads(body).get("neighbors") or []
    words = [r["word"] if isinstance(r, dict) else r[0] for r in results]
except Exception:
    print("no", body[:200].replace("\n", " "))
    sys.exit()
countries = {"germany", "italy", "spain", "belgium", "netherlands", "switzerland", "austria",
             "portugal", "england", "britain", "scotland", "ireland", "poland", "russia",
             "sweden", "denmark", "norway", "hungary", "greece", "luxembourg", "prussia",
             "bavaria", "savoy", "burgundy", "flanders", "canada", "japan", "china", "egypt",
             "turkey", "romania", "bulgaria", "serbia", "croatia", "finland", "algeria",
             "morocco", "tunisia", "lorraine", "alsace", "brittany", "normandy", "monaco",
             "andorra", "czechoslovakia", "yugoslavia", "france"}
if kind == "analogy":
    ok = "queen" in words
else:
    ok = sum(w in countries and w != "france" for w in words) >= 3
print("ok" if ok else "no", " ".join(words))
PY
}

analogy_q="$url/v1/most_similar?positive=king,woman&negative=man&topn=5"
france_q="$url/v1/neighbors?word=france&k=10"
analogy_t=""; analogy_ans=""; france_t=""; france_ans=""
while true; do
  t=$(echo "$(now) - $t_serve" | bc)
  if [ -z "$analogy_t" ]; then
    read -r verdict analogy_ans < <(judge analogy "$(curl -s "$analogy_q" || true)")
    [ "$verdict" = ok ] && analogy_t=$t
  fi
  if [ -z "$france_t" ]; then
    read -r verdict france_ans < <(judge france "$(curl -s "$france_q" || true)")
    [ "$verdict" = ok ] && france_t=$t
  fi
  if [ -n "$analogy_t" ] && [ -n "$france_t" ] && [ "$(echo "$t >= $limit" | bc)" = 1 ]; then
    break
  fi
  if [ "$(echo "$t > $give_up" | bc)" = 1 ]; then break; fi
  if ! kill -0 "$demo_pid" 2>/dev/null; then echo "scripts/demo exited"; break; fi
  sleep 1
done
t_end=$(echo "$(now) - $t_serve" | bc)
read -r analogy_end analogy_end_ans < <(judge analogy "$(curl -s "$analogy_q" || true)")
read -r france_end france_end_ans < <(judge france "$(curl -s "$france_q" || true)")
words=$(curl -s "$url/metrics" | grep -E '^streamvec_train_words_total ' | awk '{print $2}' || true)
total=$(echo "$(now) - $t0" | bc)

rc=0
report() {  # name, time since serving ("" = never), answer, verdict and answer at the end
  if [ -n "$2" ] && [ "$(echo "$2 <= $limit" | bc)" = 1 ] && [ "$4" = ok ]; then
    printf 'PASS %-58s %5.1f s after serving: %s\n' "$1" "$2" "$3"
  elif [ -n "$2" ] && [ "$4" != ok ]; then
    printf 'FAIL %-58s passed at %.1f s but no longer at the end\n' "$1" "$2"
    rc=1
  elif [ -n "$2" ]; then
    printf 'FAIL %-58s %5.1f s after serving (limit %s s): %s\n' "$1" "$2" "$limit" "$3"
    rc=1
  else
    printf 'FAIL %-58s not within %s s: %s\n' "$1" "$give_up" "$3"
    rc=1
  fi
}
report "most_similar?positive=king,woman&negative=man&topn=5 has queen" "$analogy_t" \
  "$analogy_ans" "$analogy_end"
report "neighbors?word=france&k=10 has >= 3 countries" "$france_t" "$france_ans" "$france_end"
printf 'at %.1f s after serving: most_similar: %s\n' "$t_end" "$analogy_end_ans"
printf 'at %.1f s after serving: neighbors of france: %s\n' "$t_end" "$france_end_ans"
printf 'words trained at the end: %s; %.1f s since the start\n' "${words:-?}" "$total"
exit "$rc"
