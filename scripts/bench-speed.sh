#!/usr/bin/env bash
# The speed table of issue 15, measured with strata-loadtest in one run: each workload against
# a fresh server, with the no-storage server and write + fdatasync baselines measured by the
# same command right after it (--baselines), BENCH_ROUNDS times (default 3, medians printed).
# With BEFORE=/path/to/an/older/strata, every workload also runs against that binary in the
# same rounds (alternating which goes first), and the table shows after / before.
# With the 8 x 100 KiB row, each round also measures goal 5b's floor without HTTP
# (`strata-loadtest tcp-bound`). Prints one JSON line per run to $BENCH_OUT (default
# bench-speed.jsonl) and a table at the end.
# Env: BENCH_SECONDS (default 3), BENCH_ROUNDS (default 3), BEFORE (optional), BENCH_ROWS
# (optional: space-separated row names to run, default all).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
out=${BENCH_OUT:-bench-speed.jsonl}
: >"$out"
seconds=${BENCH_SECONDS:-3}
declare -A rows=(
  [all_100x100B]="produce --batch-records 100 --baselines"
  [all_1x100B]="produce --batch-records 1 --baselines"
  [leader_1x100B]="produce --batch-records 1 --acks leader --baselines"
  [all_1000x1KiB]="produce --batch-records 1000 --record-size 1024 --format raw --compact-answer --baselines"
  [open_1x100B_at_1000]="produce --rate 1000 --baselines"
  [open_100x100B_at_200]="produce --rate 200 --batch-records 100 --baselines"
  [group_commit_64x1]="produce --producers 64 --batch-records 1"
  # --baselines: its bound is the group-commit no-storage server under the same load.
  [group_commit_8x100x1KiB]="produce --producers 8 --batch-records 100 --record-size 1024 --format raw --compact-answer --baselines"
  # Another view of the row above: the same work without waiting for any fdatasync.
  [group_commit_8x100x1KiB_leader]="produce --producers 8 --batch-records 100 --record-size 1024 --format raw --compact-answer --acks leader"
  [json_produce_1000x1KiB]="produce --batch-records 1000 --record-size 1024 --compact-answer"
  [raw_produce_1000x1KiB]="produce --batch-records 1000 --record-size 1024 --format raw --compact-answer"
  [json_fetch_1KiB]="consume --count 100000 --batch-records 1000 --record-size 1024 --fetch-format json"
  [raw_fetch_1KiB]="consume --count 100000 --batch-records 1000 --record-size 1024 --fetch-format raw"
)
servers="after"
[ -n "${BEFORE:-}" ] && servers="after before"
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  order=$servers
  [ $((round % 2)) -eq 0 ] && order=$(echo "$servers" | tr ' ' '\n' | tac | tr '\n' ' ')
  for row in $(printf '%s\n' "${!rows[@]}" | sort); do
    if [ -n "${BENCH_ROWS:-}" ] && [[ " $BENCH_ROWS " != *" $row "* ]]; then continue; fi
    for server in $order; do
      bench_fresh_data
      if [ "$server" = before ]; then bench_serve_binary "$BEFORE"; else bench_serve; fi
      # shellcheck disable=SC2086
      report=$("$BIN/strata-loadtest" ${rows[$row]} --url "$url" --json --quiet \
        --duration-s "$seconds" --disk-dir "$work")
      python3 -c '
import json, sys
row, server, load, report = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
print(json.dumps({"row": row, "server": server, "round": int(sys.argv[5]), "load": load,
                  "report": report}))' \
        "$row" "$server" "$(cut -d' ' -f1 /proc/loadavg)" "$report" "$round" >>"$out"
      bench_stop
    done
  done
  # Goal 5b's floor without HTTP: the same 8 x 100 KiB group-committed over bare TCP, against
  # the 1 MiB line measured right before and after it. On a fresh data dir, as every row is:
  # the last row's unsynced pages (acks=leader leaves gigabytes) would otherwise be written
  # back during it.
  if [ -z "${BENCH_ROWS:-}" ] || [[ " $BENCH_ROWS " == *" group_commit_8x100x1KiB "* ]]; then
    bench_fresh_data
    bound=$("$BIN/strata-loadtest" tcp-bound --dir "$work/data" --duration-s "$seconds")
    python3 -c '
import json, sys
print(json.dumps({"row": "tcp_bound", "server": "floor", "round": int(sys.argv[1]),
                  "load": sys.argv[2], "report": json.loads(sys.argv[3])}))' \
      "$round" "$(cut -d' ' -f1 /proc/loadavg)" "$bound" >>"$out"
  fi
done
python3 scripts/bench_speed_table.py "$out"
