#!/usr/bin/env bash
# What observability costs, measured in one run: the same produce and fetch load
# (strata-loadtest, closed loop) against three servers started one after another:
#   off      metrics_enabled = false, access_log_sample_rate = 0
#   metrics  metrics on (counted, /metrics scraped every second during the load), no access log
#   all      metrics on and scraped, an access log line for every request (the defaults)
# Prints one JSON line per run and the throughput ratios against "off". Release builds.
# Env: BENCH_SECONDS (default 5), BENCH_CONCURRENCY (default 4), BENCH_ROUNDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
cargo build --quiet --release -p strata-server --bin strata
cargo build --quiet --release -p strata-loadtest
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
work=$(mktemp -d)
pid=""
scraper=""
cleanup() {
  if [ -n "$scraper" ]; then kill "$scraper" 2>/dev/null || true; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

start() { # extra serve flags...
  rm -rf "$work/data"
  mkdir -p "$work/data"
  # The log goes to a file, as it would to a container runtime's log pipe.
  "$BIN/strata" serve --listen 127.0.0.1:0 --data-dir "$work/data" "$@" >"$work/out" 2>"$work/log" &
  pid=$!
  for _ in $(seq 1 100); do
    url=$(grep -o 'listening on http://[0-9.:]*' "$work/out" 2>/dev/null | sed 's/^listening on //' || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$work/log"; exit 1; }
}

stop() {
  if [ -n "$scraper" ]; then
    kill "$scraper" 2>/dev/null || true
    wait "$scraper" 2>/dev/null || true
  fi
  scraper=""
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}

scrape_every_second() {
  (while true; do curl -sf "$url/metrics" >/dev/null || true; sleep 1; done) &
  scraper=$!
}

results=$work/results
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  # Alternate the order per round so the disk's drift does not count against one configuration.
  order="off metrics all"
  [ $((round % 2)) -eq 0 ] && order="all metrics off"
  for config in $order; do
    case $config in
      off) start --metrics-enabled false --access-log-sample-rate 0 ;;
      metrics) start --access-log-sample-rate 0; scrape_every_second ;;
      all) start; scrape_every_second ;;
    esac
    for workload in produce fetch; do
      line=$("$BIN/strata-loadtest" "$workload" --url "$url" --topic "bench.$workload" \
        --duration-s "${BENCH_SECONDS:-5}" --concurrency "${BENCH_CONCURRENCY:-4}")
      echo "{\"config\": \"$config\", ${line#\{}" | tee -a "$results"
    done
    stop
  done
done

python3 - "$results" <<'PY'
import json, sys, statistics
runs = [json.loads(line) for line in open(sys.argv[1])]
for workload in ("Produce", "Fetch"):
    def median(config):
        return statistics.median(r["records_per_s"] for r in runs
                                 if r["config"] == config and r["workload"] == workload)
    base = median("off")
    for config in ("metrics", "all"):
        value = median(config)
        print(f"{workload.lower()}: {config} / off = {value / base:.3f} "
              f"(median records/s {value:.0f} vs {base:.0f})")
PY
