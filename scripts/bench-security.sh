#!/usr/bin/env bash
# What security costs, measured in one run: the same produce and fetch load (strata-loadtest,
# closed loop) against three servers started one after another on the same data-less setup:
#   plain  auth_mode = none, HTTP
#   auth   auth_mode = api_key, a non-super-user key allowed by a prefix ACL, HTTP
#   tls    as auth, over HTTPS (rustls, aws-lc-rs) with a CA made here by openssl
# Prints one JSON line per run and the throughput ratios against "plain". Release builds.
# Env: BENCH_SECONDS (default 5), BENCH_CONCURRENCY (default 4), BENCH_ROUNDS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj '/CN=bench-ca' -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=localhost' \
  -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' -keyout "$work/server.key" \
  -out "$work/server.csr" 2>/dev/null
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
  -CAcreateserial -days 2 -copy_extensions copy -out "$work/server.pem" 2>/dev/null

start() { # extra serve flags...
  bench_fresh_data
  admin=$("$BIN/strata" auth create-key --principal admin --data-dir "$work/data" 2>/dev/null)
  app=$("$BIN/strata" auth create-key --principal app --data-dir "$work/data" 2>/dev/null)
  bench_serve "$@"
  # The certificate names localhost.
  url=${url/127.0.0.1/localhost}
}

grant() { # lets "app" do everything on topics starting with "pay."
  curl -sf ${CA:+--cacert "$CA"} -X POST "$url/v1/acls" -H "Authorization: Bearer $admin" \
    -H 'content-type: application/json' -d '{"principal": "app", "resource_type": "topic",
      "resource_name": "pay.", "pattern_type": "prefix", "operation": "all",
      "permission": "allow"}' >/dev/null
}

SECURE=(--auth-mode api_key --auth-super-users admin)
TLS=(--tls-cert-file "$work/server.pem" --tls-key-file "$work/server.key")
for round in $(seq 1 "${BENCH_ROUNDS:-2}"); do
  # Odd rounds run plain first, even rounds last: the disk slows as it absorbs earlier runs'
  # writes, and alternating keeps that from counting against one configuration.
  order="plain auth tls"
  [ $((round % 2)) -eq 0 ] && order="tls auth plain"
  for config in $order; do
    CA=""
    case $config in
      plain) start ;;
      auth) start "${SECURE[@]}" ;;
      tls) start "${SECURE[@]}" "${TLS[@]}"; CA=$work/ca.pem ;;
    esac
    flags=()
    if [ "$config" != plain ]; then
      grant
      flags=(--token "$app")
    fi
    [ -n "$CA" ] && flags+=(--ca "$CA")
    for workload in produce fetch; do
      bench_load "$config" "$workload" "pay.$workload" "${flags[@]}"
    done
    bench_stop
  done
done
bench_ratios plain auth tls
