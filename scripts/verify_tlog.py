#!/usr/bin/env python3
"""Independent check of one partition's transparency log in a copy of a Strata bucket.

Written from the bucket's FORMAT.md and the C2SP specs (tlog-tiles, tlog-checkpoint,
signed-note) with hashlib and the `cryptography` package only, sharing no code with Strata:
reads the checkpoint, verifies its Ed25519 signature with the given key, reads every entry
bundle, recomputes the RFC 6962 root and compares it with the checkpoint.

  verify_tlog.py BUCKET_DIR TOPIC PARTITION VKEY      exit 0 and prints size and root if it holds
"""
import base64
import hashlib
import pathlib
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def leaf_hash(entry):
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(hashes):
    """RFC 6962: split at the largest power of two below n."""
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return node_hash(root(hashes[:k]), root(hashes[k:]))


def index_path(n):
    path = "%03d" % (n % 1000)
    while n >= 1000:
        n //= 1000
        path = "x%03d/%s" % (n % 1000, path)
    return path


def parse_vkey(vkey):
    name, key_id, blob = vkey.strip().split("+", 2)
    raw = base64.b64decode(blob)
    assert raw[0] == 1 and len(raw) == 33, "not an Ed25519 verifier key"
    computed = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    assert computed.hex() == key_id.lower(), "key id does not match the key"
    return name, computed, Ed25519PublicKey.from_public_bytes(raw[1:])


def open_checkpoint(note, vkey):
    name, key_id, public = parse_vkey(vkey)
    split = note.rindex("\n\n")
    text, signatures = note[: split + 1], note[split + 2 :]
    for line in signatures.splitlines():
        dash, signer, blob = line.split(" ", 2)
        raw = base64.b64decode(blob)
        if dash != "\u2014" or signer != name or raw[:4] != key_id:
            continue
        public.verify(raw[4:], text.encode())  # raises InvalidSignature
        origin, size, root_b64 = text.splitlines()[:3]
        return origin, int(size), base64.b64decode(root_b64)
    raise InvalidSignature("no signature of this key")


def entries(log_dir, size):
    for index in range((size + 255) // 256):
        width = min(256, size - index * 256)
        name = "tile/entries/" + index_path(index) + ("" if width == 256 else ".p/%d" % width)
        data = (log_dir / name).read_bytes()
        found = []
        while data:
            length = int.from_bytes(data[:2], "big")
            found.append(data[2 : 2 + length])
            data = data[2 + length :]
        assert len(found) == width, "%s holds %d entries, not %d" % (name, len(found), width)
        yield from found


def main(bucket, topic, partition, vkey):
    log_dir = pathlib.Path(bucket) / "topics" / topic / partition / "tlog"
    note = (log_dir / "checkpoint").read_text(encoding="utf-8")
    origin, size, signed_root = open_checkpoint(note, vkey)
    computed = root([leaf_hash(e) for e in entries(log_dir, size)])
    if computed != signed_root:
        print("MISMATCH: entries give root %s, checkpoint says %s" % (computed.hex(), signed_root.hex()))
        return 1
    print("ok %s size %d root %s" % (origin, size, base64.b64encode(computed).decode()))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    try:
        sys.exit(main(*sys.argv[1:]))
    except (InvalidSignature, AssertionError, ValueError, OSError) as error:
        print("FAILED: %s: %s" % (type(error).__name__, error))
        sys.exit(1)
