#!/usr/bin/env python3
"""Print Kafka default-partitioner vectors computed by kafka-python, as JSON.

Strata must put a keyed record on the same partition as Kafka's Java client.
This script is the independent side of that check: it uses kafka-python's
pure-Python port of Kafka's murmur2 (kafka.partitioner.default.murmur2) and its
DefaultPartitioner, never Strata's code.

Usage:
  murmur2_vectors.py                 # built-in vector set (the golden table)
  murmur2_vectors.py --stdin         # a JSON array of hex-encoded keys on stdin
  murmur2_vectors.py --partitions 1,3,12,100

Output: {"source": "kafka-python <version>", "vectors": [...]}, each vector
  {"key_hex": "...", "murmur2": <signed 32-bit int, as Java returns it>,
   "partitions": {"<n>": <partition for n partitions>, ...}}

Exit status 2 with a message on stderr when kafka-python is not installed.
Tested against kafka-python 2.3.3.
"""

import argparse
import json
import sys

try:
    import kafka
    from kafka.partitioner.default import DefaultPartitioner, murmur2
except ImportError as err:  # pragma: no cover - exercised by the Rust test
    sys.stderr.write(
        "murmur2_vectors.py: kafka-python is not importable (%s); "
        "install it with: pip install kafka-python==2.3.3\n" % err
    )
    sys.exit(2)

DEFAULT_PARTITIONS = (1, 3, 12, 100)


def builtin_keys():
    """Keys chosen to cover every tail length, ASCII, UTF-8 and high bytes."""
    keys = [b""]
    # 1..=9 bytes: every value of len & 3, and one full block plus each tail.
    for n in range(1, 10):
        keys.append(b"abcdefghi"[:n])
    ascii_keys = [
        "21", "abc", "foobar", "key", "user-42", "order:1001", "Kafka",
        "a-little-bit-long-string", "a-little-bit-longer-string",
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        "The quick brown fox jumps over the lazy dog",
    ]
    keys += [k.encode("ascii") for k in ascii_keys]
    utf8_keys = ["日本語", "é", "ñandú", "Ölçüm", "🦀", "κλειδί-7", "ключ"]
    keys += [k.encode("utf-8") for k in utf8_keys]
    keys += [
        bytes([0x00]),
        bytes([0xFF]),
        bytes([0x80, 0x81]),
        bytes([0xFF, 0xFE, 0xFD]),
        bytes([0x7F, 0x80, 0xFF, 0x00]),
        bytes([0xDE, 0xAD, 0xBE, 0xEF, 0x01]),
        bytes(range(0x80, 0x80 + 16)),
        bytes(range(256)),
        bytes([0xFF] * 7),
        bytes([0x00] * 8),
    ]
    keys += [
        b"x" * 63,
        b"0123456789" * 10,
        bytes((i * 37 + 11) % 256 for i in range(1000)),
    ]
    return keys


def vector(key, partition_counts):
    unsigned = murmur2(key) & 0xFFFFFFFF
    signed = unsigned - (1 << 32) if unsigned >= (1 << 31) else unsigned
    partitioner = DefaultPartitioner()
    parts = {}
    for n in partition_counts:
        all_partitions = list(range(n))
        parts[str(n)] = partitioner(key, all_partitions, all_partitions)
    return {"key_hex": key.hex(), "murmur2": signed, "partitions": parts}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdin", action="store_true", help="read a JSON array of hex keys from stdin")
    parser.add_argument(
        "--partitions",
        default=",".join(str(n) for n in DEFAULT_PARTITIONS),
        help="comma-separated partition counts",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.partitions.split(",") if n.strip()]
    if args.stdin:
        keys = [bytes.fromhex(k) for k in json.load(sys.stdin)]
    else:
        keys = builtin_keys()
    out = {
        "source": "kafka-python %s" % getattr(kafka, "__version__", "unknown"),
        "vectors": [vector(k, counts) for k in keys],
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
