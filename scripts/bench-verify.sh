#!/usr/bin/env bash
# Speed of `strata verify` against raw GETs of the same objects in the same run (issue 17): a
# release server fills a bucket with BENCH_RECORDS (default 1,000,000) records of 1 KiB in 4
# partitions of 64 MiB segments, on the local folder store and on SeaweedFS
# (scripts/start-s3.sh); then `strata verify --baseline` (GET every object once, then verify)
# runs BENCH_ROUNDS times (default 3) with and without --chunk-digests-only. Prints one speed
# JSON line per run: raw GET MiB/s, verify MiB/s and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
eval "$(bash scripts/start-s3.sh)"
records=${BENCH_RECORDS:-1000000}
fill() { # extra serve flags...
  bench_fresh_data
  bench_serve --tiering-interval-ms 500 --log-level warn "$@"
  curl -sf -XPOST "$url/v1/topics" -H 'content-type: application/json' -d '{"name": "bench",
    "partitions": 4, "configs": {"remote_storage_enable": true, "segment_bytes": 67108864,
    "remote_upload_idle_ms": 1000}}' >/dev/null
  "$BIN/strata-loadtest" produce --url "$url" --topic bench --partitions 4 --producers 4 \
    --record-size 1024 --batch-records 1000 --format raw --count "$records" --quiet --warmup-s 0 >/dev/null
  # Everything uploaded: the idle roll, then one sweep.
  sleep 5
  bench_stop
}
prefix="bench-verify-$$"
s3=(--s3-endpoint "$STRATA_TEST_S3_ENDPOINT" --s3-region "$AWS_REGION")
fill
cp -r "$work/data/tiered" "$work/local-bucket"
fill --tiered-storage-url "s3://$STRATA_TEST_S3_BUCKET/$prefix" "${s3[@]/#--s3/--tiered-storage-s3}"
for round in $(seq 1 "${BENCH_ROUNDS:-3}"); do
  for mode in full --chunk-digests-only; do
    flag=(); [ "$mode" = full ] || flag=("$mode")
    echo "round $round local $mode: $("$BIN/strata" verify --baseline "${flag[@]}" "$work/local-bucket" | tail -1)"
    echo "round $round s3 $mode: $("$BIN/strata" verify --baseline "${flag[@]}" "${s3[@]}" "s3://$STRATA_TEST_S3_BUCKET/$prefix" | tail -1)"
  done
done
