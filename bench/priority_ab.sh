#!/bin/bash
# How the background threads' scheduling changes serving latency while `streamvec run` trains:
# one `run` process, its background threads (every thread whose nice value is not the main
# thread's: broker, connector, trainer, index and polling threads) switched between settings
# before each wrk run of most_similar, alternating, so the settings share the box's noise.
#
#   bench/priority_ab.sh [ROUNDS] [SETTINGS...]
#   SETTINGS: nice:N (SCHED_OTHER at nice N in 1-19, with renice) or idle (SCHED_IDLE, chrt -i);
#   default: 3 rounds of nice:10 idle.
# Environment: CORPUS (default the 100M text8-style corpus), WORD (king), PORT (18081),
# CONNECTIONS (16), DURATION (5 s), WARMUP (50 s of training before the first wrk run).
# Prints one line per wrk run: round, setting, req/s, p50, p99, and the words trained while it
# ran (streamvec_train_words_total before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift || true
SETTINGS=("$@")
[ ${#SETTINGS[@]} -eq 0 ] && SETTINGS=(nice:10 idle)
CORPUS=${CORPUS:-$(cd "$(dirname "$0")/.." && pwd)/../shared/data/corpus/enwiki-text8style-100m.txt}
WORD=${WORD:-king}
PORT=${PORT:-18081}
CONNECTIONS=${CONNECTIONS:-16}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-50}
SV=build/app/streamvec
for tool in wrk curl chrt; do
  command -v $tool >/dev/null || { echo "priority_ab: $tool not found" >&2; exit 2; }
done
[ -x "$SV" ] || { echo "priority_ab: build $SV first (scripts/test or bench/run)" >&2; exit 2; }
[ -r "$CORPUS" ] || { echo "priority_ab: cannot read CORPUS=$CORPUS" >&2; exit 2; }
for s in "${SETTINGS[@]}"; do
  [[ $s == idle || $s =~ ^nice:([1-9]|1[0-9])$ ]] ||
    { echo "priority_ab: setting '$s' is not idle or nice:N with N in 1-19" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/priority-ab-XXXXXX)
mkdir -p "$WORK/data"
# Linked under several names: the followed directory never runs dry during the rounds.
for i in $(seq 1 12); do ln -s "$(readlink -f "$CORPUS")" "$WORK/data/c$i.txt"; done
"$SV" run --state "$WORK/state" --http "127.0.0.1:$PORT" --data "$WORK/data" --no-crawl \
  --vocab-capacity 120000 --min-count 3 >"$WORK/run.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
sleep "$WARMUP"
kill -0 $PID 2>/dev/null || { echo "priority_ab: run exited:" >&2; tail "$WORK/run.log" >&2; exit 1; }

MAIN_NICE=$(awk '{print $19}' /proc/$PID/stat)
apply() {  # $1: a setting, applied to every background thread
  for t in /proc/$PID/task/*; do
    tid=${t##*/}
    # A background thread keeps a nice value above the main thread's under either setting.
    [ "$(awk '{print $19}' "$t/stat" 2>/dev/null || echo "$MAIN_NICE")" = "$MAIN_NICE" ] && continue
    case $1 in
      idle) chrt -i -p 0 "$tid" >/dev/null 2>&1 || true ;;
      nice:*) chrt -o -p 0 "$tid" >/dev/null 2>&1 || true
              renice -n "${1#nice:}" -p "$tid" >/dev/null 2>&1 || true ;;
    esac
  done
}
trained() {  # streamvec_train_words_total from /metrics
  curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1=="streamvec_train_words_total"{printf "%d", $2}'
}

URL="http://127.0.0.1:$PORT/v1/most_similar?positive=$WORD&topn=10"
echo "round setting req/s p50 p99 words-trained-during"
for round in $(seq 1 "$ROUNDS"); do
  for setting in "${SETTINGS[@]}"; do
    apply "$setting"
    sleep 1
    before=$(trained)
    out=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "$URL")
    after=$(trained)
    echo "$round $setting $(awk '/Requests\/sec/{print $2}' <<<"$out")" \
      "$(awk '$1=="50%"{print $2}' <<<"$out") $(awk '$1=="99%"{print $2}' <<<"$out")" \
      "$(( ${after:-0} - ${before:-0} ))"
  done
done
