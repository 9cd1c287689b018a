# Shared by the benchmark scripts (source it after `cd` to the repository root): release
# builds, one server at a time on a fresh data dir, one closed-loop strata-loadtest run per
# line, and the median ratios of each configuration against a baseline in the same run.
# Sets BIN, work, url, pid; the caller may set `scraper` to a background pid to stop with the
# server. Env: BENCH_SECONDS (default 5), BENCH_CONCURRENCY (default 4).

cargo build --quiet --release -p strata-server --bin strata
cargo build --quiet --release -p strata-loadtest
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release
work=$(mktemp -d)
results=$work/results
pid=""
scraper=""
url=""

bench_cleanup() {
  if [ -n "$scraper" ]; then kill "$scraper" 2>/dev/null || true; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap bench_cleanup EXIT

bench_fresh_data() {
  rm -rf "$work/data"
  mkdir -p "$work/data"
}

bench_serve() { # extra serve flags... (on $work/data; sets pid and url)
  bench_serve_binary "$BIN/strata" "$@"
}

bench_serve_binary() { # binary, extra serve flags...
  local binary=$1
  shift
  # The log goes to a file, as it would to a container runtime's log pipe.
  "$binary" serve --listen 127.0.0.1:0 --data-dir "$work/data" "$@" >"$work/out" 2>"$work/log" &
  pid=$!
  url=""
  for _ in $(seq 1 100); do
    url=$(grep -o 'listening on https\?://[0-9.:]*' "$work/out" 2>/dev/null | sed 's/^listening on //' || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$work/log"; exit 1; }
}

bench_stop() {
  if [ -n "$scraper" ]; then
    kill "$scraper" 2>/dev/null || true
    wait "$scraper" 2>/dev/null || true
  fi
  scraper=""
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}

bench_load() { # config, produce|fetch, topic, extra loadtest flags... (appends to $results)
  local config=$1 workload=$2 topic=$3
  shift 3
  local report
  case $workload in
    # Closed loop, BENCH_CONCURRENCY producers of 100 x 100 B JSON records per request.
    produce) report=$("$BIN/strata-loadtest" produce --url "$url" --topic "$topic" --json --quiet \
      --duration-s "${BENCH_SECONDS:-5}" --producers "${BENCH_CONCURRENCY:-4}" --batch-records 100 "$@") ;;
    # 200,000 records preloaded, then read back as JSON (timed).
    fetch) report=$("$BIN/strata-loadtest" consume --url "$url" --topic "$topic" --json --quiet \
      --count 200000 --batch-records 100 --fetch-format json "$@") ;;
  esac
  python3 -c '
import json, sys
config, workload, report = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
figures = report["produce"] if workload == "produce" else report["fetch"]
assert report["verification"]["passed"], report["verification"]
print(json.dumps({"config": config, "workload": workload.capitalize(),
                  "records_per_s": figures["records_per_s"]}))' "$config" "$workload" "$report" | tee -a "$results"
}

bench_ratios() { # baseline config, compared configs...
  python3 - "$results" "$@" <<'PY'
import json, sys, statistics
runs = [json.loads(line) for line in open(sys.argv[1])]
base_config, configs = sys.argv[2], sys.argv[3:]
for workload in ("Produce", "Fetch"):
    def median(config):
        return statistics.median(r["records_per_s"] for r in runs
                                 if r["config"] == config and r["workload"] == workload)
    base = median(base_config)
    for config in configs:
        value = median(config)
        print(f"{workload.lower()}: {config} / {base_config} = {value / base:.3f} "
              f"(median records/s {value:.0f} vs {base:.0f})")
PY
}
