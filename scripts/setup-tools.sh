#!/usr/bin/env bash
# Installs the tools the tests use, from the project's own pinned list, into .tools/ (idempotent).
#   .tools/py   Python venv with scripts/requirements-test.txt: kafka-python (the independent Kafka
#               record-batch codec that the storage tests use as an external oracle) and the
#               OpenAPI tools of scripts/check-openapi.sh (openapi-spec-validator,
#               openapi-python-client, schemathesis). Reinstalled when the list changes.
#   clients/ts/node_modules  openapi-typescript, openapi-fetch and TypeScript for the TypeScript
#               client smoke test, from clients/ts/package-lock.json (npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="$PWD/.tools"
mkdir -p "$TOOLS"

REQUIREMENTS=scripts/requirements-test.txt
STAMP="$TOOLS/py/.requirements.sha256"
want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if ! "$TOOLS/py/bin/python" -c 'import kafka.record' >/dev/null 2>&1; then
  echo "setup-tools: creating $TOOLS/py" >&2
  rm -rf "$TOOLS/py"
  if ! python3 -m venv "$TOOLS/py" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      (apt-get update -qq && apt-get install -y -qq python3-venv) >&2
      python3 -m venv "$TOOLS/py"
    else
      echo "setup-tools: python3 -m venv failed; install python3-venv" >&2
      exit 1
    fi
  fi
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "setup-tools: installing $REQUIREMENTS into $TOOLS/py" >&2
  "$TOOLS/py/bin/python" -m pip install -q --disable-pip-version-check -r "$REQUIREMENTS"
  echo "$want" >"$STAMP"
fi

# curl runs the README's tour (tests/it/readme.rs); Debian images usually have it already.
if ! command -v curl >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq curl) >&2
  else
    echo "setup-tools: curl is missing; install it" >&2
    exit 1
  fi
fi

# Node packages of the TypeScript client smoke test (clients/ts), exactly as its lock file says;
# reinstalled when the lock file changes.
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq nodejs npm) >&2
  else
    echo "setup-tools: npm is missing; install Node.js 18+" >&2
    exit 1
  fi
fi
NODE_LOCK=clients/ts/package-lock.json
NODE_STAMP=clients/ts/node_modules/.lock.sha256
node_want=$(sha256sum "$NODE_LOCK" | cut -d' ' -f1)
if [ "$(cat "$NODE_STAMP" 2>/dev/null)" != "$node_want" ]; then
  echo "setup-tools: installing clients/ts node packages" >&2
  (cd clients/ts && npm ci --silent --no-audit --no-fund) >&2
  echo "$node_want" >"$NODE_STAMP"
fi
