#!/usr/bin/env bash
# The deployment checks: the Helm chart (helm/tests, with the real `helm` that setup-tools.sh
# installs: lint, render of every value set, Kubernetes schema validation for two versions,
# golden renders, assertions on the objects, bad values rejected, and the rendered
# configuration started with the real binary) and the container image (container/tests:
# built with buildah from the binary, run inside it). The binary is target/debug/strata unless
# STRATA_BIN says. The last line is `deploy checks: N passed, N failed`.
set -uo pipefail
cd "$(dirname "$0")/.."
export STRATA_HELM="${STRATA_HELM:-$PWD/.tools/helm/helm}"
export STRATA_BIN="${STRATA_BIN:-$PWD/target/debug/strata}"
[ -x "$STRATA_BIN" ] || cargo build -q -p strata-server --bin strata
report=$(mktemp)
trap 'rm -f "$report"' EXIT
.tools/py/bin/python -m pytest -q -p no:cacheprovider --junitxml="$report" helm/tests container/tests
status=$?
.tools/py/bin/python - "$report" <<'PY'
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot()
suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
total, bad = int(suite.get("tests")), int(suite.get("failures")) + int(suite.get("errors"))
skipped = int(suite.get("skipped", 0))
print(f"deploy checks: {total - bad - skipped} passed, {bad + skipped} failed")
PY
exit $status
