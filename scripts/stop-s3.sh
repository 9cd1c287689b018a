#!/usr/bin/env bash
# Stops the SeaweedFS server that scripts/start-s3.sh started (the pid in its state directory, and
# only if that pid still is a `weed server` serving that directory).
#   scripts/stop-s3.sh           stop; data stays, so the next start keeps buckets and objects
#   scripts/stop-s3.sh --purge   stop and delete the state directory (data, env file, log). The
#                                only way to drop objects under COMPLIANCE retention before expiry.
# STRATA_S3_DIR selects the state directory, as for start-s3.sh (default .tools/s3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${STRATA_S3_DIR:-$ROOT/.tools/s3}"
PID_FILE="$DIR/weed.pid"
PURGE=""
case "${1:-}" in
  "") ;;
  --purge) PURGE=1 ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

log() { echo "stop-s3: $*" >&2; }
# Alive and not a zombie (an exited child nobody reaped yet still answers kill -0).
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# The lock start-s3.sh holds while starting (it sets STRATA_S3_LOCK_HELD when it calls us).
if [ -d "$DIR" ] && [ -z "${STRATA_S3_LOCK_HELD:-}" ]; then
  exec 9>>"$DIR/lock"
  flock -w 300 9 || { log "ERROR: $DIR/lock held for 5 minutes"; exit 1; }
fi

pid=$(cat "$PID_FILE" 2>/dev/null || true)
if [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" &&
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "server -dir=$DIR/data "; then
  log "stopping SeaweedFS (pid $pid)"
  # Without the env file nobody reuses the server while it shuts down.
  rm -f "$DIR/env"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do # graceful stop takes ~4 s; give it 20
    alive "$pid" || break
    sleep 0.2
  done
  if alive "$pid"; then
    log "still running after 20 s; sending KILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
else
  log "not running"
fi
rm -f "$PID_FILE" "$DIR/env"
if [ -n "$PURGE" ]; then
  rm -rf "$DIR"
  log "purged $DIR"
fi
