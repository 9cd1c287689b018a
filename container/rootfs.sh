#!/usr/bin/env bash
# Assembles the root filesystem of Strata's image in ROOTFS from a built `strata` binary: the
# binary, the shared libraries it links (glibc, libgcc_s: found with ldd, so the image matches
# the machine that built it), the CA bundle for S3 over HTTPS, a passwd/group naming the
# non-root user 65532 `strata`, and /tmp. Nothing else: no shell, no package manager. The
# volume's mount point is an empty ROOTFS.data beside it, which the Containerfiles copy to /data
# owned by 65532 (inside ROOTFS, a plain COPY would make it root's, and engines copy that
# ownership into new named volumes). Used by all three Containerfiles.
#   container/rootfs.sh ROOTFS BINARY [EXTRA_BINARY...]
set -euo pipefail
rootfs=$1
shift
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs.data"
for binary in "$@"; do
  cp "$binary" "$rootfs/usr/local/bin/"
  # Every library ldd resolves (the vdso has no path), copied to the same path in the image.
  for library in $(ldd "$binary" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
    mkdir -p "$rootfs$(dirname "$library")"
    cp -L "$library" "$rootfs$library"
  done
done
for ca in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  if [ -f "$ca" ]; then
    cp -L "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
    break
  fi
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nstrata:x:65532:65532:strata:/data:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nstrata:x:65532:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
