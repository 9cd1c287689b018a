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
source scripts/bench-lib.sh

scrape_every_second() {
  (while true; do curl -sf "$url/metrics" >/dev/null || true; sleep 1; done) &
  scraper=$!
}

for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  # Alternate the order per round so the disk's drift does not count against one configuration.
  order="off metrics all"
  [ $((round % 2)) -eq 0 ] && order="all metrics off"
  for config in $order; do
    bench_fresh_data
    case $config in
      off) bench_serve --metrics-enabled false --access-log-sample-rate 0 ;;
      metrics) bench_serve --access-log-sample-rate 0; scrape_every_second ;;
      all) bench_serve; scrape_every_second ;;
    esac
    for workload in produce fetch; do
      bench_load "$config" "$workload" "bench.$workload"
    done
    bench_stop
  done
done
bench_ratios off metrics all
