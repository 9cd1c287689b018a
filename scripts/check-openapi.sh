#!/usr/bin/env bash
# Checks the checked-in OpenAPI contract (openapi/openapi.json) with outside tools, against the
# real server:
#   1. openapi-spec-validator: the document is valid OpenAPI 3.1;
#   2. openapi-python-client: a Python client generates from it without warnings;
#   3. scripts/client_smoke.py: that client creates a topic, produces, fetches and reads offsets
#      on a live `strata serve`, asserting every value, typed 401/403/416 included; the same
#      with a TypeScript client (clients/ts: openapi-typescript types, openapi-fetch, tsc);
#   4. schemathesis: generated requests (examples, coverage, fuzzing, stateful; positive and
#      negative data) against the live server with every check (openapi/schemathesis.toml says
#      which statuses count as accepting or rejecting); any 5xx, undocumented status code,
#      response that violates its schema, schema-valid request refused as malformed or
#      schema-violating request accepted fails. It runs with a super user's API key; key
#      revocation is left out (a revoked key of its own would turn the rest of the run into
#      401s) and is tested by tests/it/security.rs instead.
# Tools come from scripts/requirements-test.txt (installed into .tools/ by setup-tools.sh).
# The last line is `openapi checks: N passed, N failed`; the exit status is 1 if any failed.
#
# Env: STRATA_SCHEMATHESIS_EXAMPLES (default 25) and STRATA_SCHEMATHESIS_SEED (default random;
# the seed is printed so a failure can be replayed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SPEC=$ROOT/openapi/openapi.json

bash scripts/setup-tools.sh
PY=$ROOT/.tools/py/bin
# openapi-python-client runs ruff from PATH on what it generates.
export PATH="$PY:$PATH"

# The server the checks run against: the binary as users build it. `cargo test --all-features`
# builds one with test-only features and dev-dependency features unified in, so this compiles
# strata-server (and the crates whose features differ) once more, into target/debug.
cargo build --quiet --profile test -p strata-server --bin strata
STRATA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/strata"

work=$(mktemp -d)
server_pid=""
token=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
run_check() {
  local name=$1
  shift
  echo "--- openapi check: $name"
  local started=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "--- openapi check: $name: ok ($((SECONDS - started)) s)"
  else
    failed=$((failed + 1))
    echo "--- openapi check: $name: FAILED ($((SECONDS - started)) s)"
  fi
}

validate() {
  "$PY/openapi-spec-validator" "$SPEC"
}

generate_client() {
  local log=$work/generate.log
  "$PY/openapi-python-client" generate --path "$SPEC" --config openapi/python-client.yaml \
    --output-path "$work/client/strata_client" --meta none >"$log" 2>&1 || {
    cat "$log"
    return 1
  }
  # A warning means part of the API is missing from the client.
  if grep -qiE 'warning|error' "$log"; then
    cat "$log"
    return 1
  fi
}

start_server() {
  mkdir -p "$work/data"
  # Authentication on, as operators run it: every check goes through a super user's API key.
  token=$("$STRATA_BIN" auth create-key --principal admin --data-dir "$work/data" 2>/dev/null)
  # A short long-poll cap keeps fuzzed max_wait_ms values from stalling the run.
  # A low partition limit keeps fuzzed partition counts (up to the spec's 1024) cheap.
  "$STRATA_BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
    --auth-mode api_key --auth-super-users admin \
    --fetch-max-wait-ms 200 --max-partitions-per-topic 16 >"$work/server.out" 2>"$work/server.log" &
  server_pid=$!
  for _ in $(seq 1 100); do
    base=$(grep -o 'listening on http://[0-9.:]*' "$work/server.out" 2>/dev/null | head -n1 | sed 's/^listening on //' || true)
    if [ -n "$base" ]; then
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
  echo "the server did not start:" >&2
  tail -n 20 "$work/server.log" >&2
  return 1
}

client_smoke() {
  [ -d "$work/client/strata_client" ] || {
    echo "no generated client" >&2
    return 1
  }
  "$PY/python" scripts/client_smoke.py "$base" "$work/client" "$token"
}

typescript_client() {
  # Types generated from the spec (openapi-typescript), a typed client (openapi-fetch),
  # compiled by tsc: a spec that does not describe the server fails to compile or at run time.
  local ts=$ROOT/clients/ts
  "$ts/node_modules/.bin/openapi-typescript" "$SPEC" -o "$ts/schema.d.ts" >"$work/ts.log" 2>&1 || {
    cat "$work/ts.log"
    return 1
  }
  (cd "$ts" && ./node_modules/.bin/tsc -p .) || return 1
  node "$ts/dist/smoke.js" "$base" "$token"
}

schemathesis() {
  local seed_args=()
  if [ -n "${STRATA_SCHEMATHESIS_SEED:-}" ]; then
    seed_args=(--seed "$STRATA_SCHEMATHESIS_SEED")
  fi
  # From the temp dir: schemathesis keeps a .schemathesis/ cache in its working directory.
  # Every check runs (each is on by default); not `--checks all`, which would override the
  # one per-operation exception in openapi/schemathesis.toml.
  (cd "$work" && "$PY/schemathesis" --config-file "$ROOT/openapi/schemathesis.toml" run "$SPEC" \
    --url "$base" --mode all --header "Authorization: Bearer $token" \
    --exclude-operation-id revoke_key \
    --max-examples "${STRATA_SCHEMATHESIS_EXAMPLES:-25}" --workers 1 --request-timeout 10 \
    --no-color --suppress-health-check too_slow "${seed_args[@]}") || {
    echo "server log (last lines):"
    tail -n 30 "$work/server.log"
    return 1
  }
}

run_check "spec is valid OpenAPI 3.1" validate
run_check "python client generates" generate_client
base=""
if start_server; then
  run_check "generated python client against the server" client_smoke
  run_check "generated typescript client against the server" typescript_client
  run_check "schemathesis against the server" schemathesis
  if grep -q 'panicked' "$work/server.log"; then
    echo "the server log shows a panic:"
    grep -B2 -A5 'panicked' "$work/server.log" | head -n 40
    failed=$((failed + 1))
  fi
else
  failed=$((failed + 2))
fi

echo "openapi checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
