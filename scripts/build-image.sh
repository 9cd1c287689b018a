#!/usr/bin/env bash
# Builds Strata's container image with buildah (daemonless, from Debian's packages; run as
# root), from a binary built here instead of compiling inside a container:
#   scripts/build-image.sh                       cargo build --release, image localhost/strata:<version>
#   scripts/build-image.sh --binary PATH         package that binary (CI: its own debug build)
#   scripts/build-image.sh --tag NAME:TAG        another name
#   scripts/build-image.sh --dev-s3              also localhost/strata-dev-s3:<seaweedfs version>
#                                                (the chart's demo S3, values-dev.yaml)
# Storage: $STORAGE_DRIVER if set, else overlay when the kernel and the existing store allow it,
# else vfs (slower, works everywhere). Push with `buildah push localhost/strata:<v> docker://...`.
# The from-source multi-stage build for machines with a container engine is container/Containerfile.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
binary="" tag="localhost/strata:$version" dev_s3=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --dev-s3) dev_s3=1; shift ;;
    *) echo "build-image: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v buildah >/dev/null || { echo "build-image: buildah is missing (apt-get install buildah)" >&2; exit 1; }
if [ -z "${STORAGE_DRIVER:-}" ]; then
  if buildah --storage-driver overlay images >/dev/null 2>&1; then
    export STORAGE_DRIVER=overlay
  else
    export STORAGE_DRIVER=vfs
  fi
fi
if [ -z "$binary" ]; then
  cargo build --release --locked -p strata-server --bin strata
  binary=target/release/strata
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
build() { # containerfile tag version
  # The previous image of this tag would stay behind, untagged: remove it first.
  buildah rmi "$2" >/dev/null 2>&1 || true
  buildah bud --quiet --layers=false -f "$1" --build-arg VERSION="$3" --build-arg REVISION="$revision" \
    -t "$2" "$context" >/dev/null
  echo "build-image: built $2 ($STORAGE_DRIVER storage)" >&2
}
container/rootfs.sh "$context/rootfs" "$binary"
build container/Containerfile.prebuilt "$tag" "$version"

if [ -n "$dev_s3" ]; then
  weed="$ROOT/.tools/seaweedfs/bin/weed"
  [ -x "$weed" ] || { echo "build-image: $weed is missing: run scripts/start-s3.sh once to install it" >&2; exit 1; }
  weed_version=$(sed -n 's/^SEAWEEDFS_VERSION=//p' scripts/start-s3.sh)
  rm -rf "$context/rootfs" "$context/rootfs.data"
  container/rootfs.sh "$context/rootfs" "$weed"
  build container/Containerfile.dev-s3 "localhost/strata-dev-s3:$weed_version" "$weed_version"
fi
echo "$tag"
