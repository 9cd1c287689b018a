#!/usr/bin/env bash
# Installs the tools the tests use, from the project's own pinned list, into .tools/ (idempotent).
#   .tools/py   Python venv with kafka-python: the independent Kafka record-batch codec that the
#               storage tests use as an external oracle.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="$PWD/.tools"
mkdir -p "$TOOLS"

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
  "$TOOLS/py/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi
