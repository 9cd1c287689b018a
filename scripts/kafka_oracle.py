#!/usr/bin/env python3
"""Independent oracle for Strata's Kafka RecordBatch v2 codec, built on kafka-python.

kafka-python (PyPI, pure-Python CRC-32C unless the optional `crc32c` package is installed)
re-implements Kafka's log format v2 without sharing any code with Strata, so agreeing with it
is good evidence that our bytes are what real Kafka clients read and write.

Commands:
  decode <file>            Decode a log segment (concatenated v2 batches) and print JSON:
                           {"batches":[{"base_offset":..,"last_offset_delta":..,"crc_valid":..,
                             ...header fields..., "records":[{"offset":..,"timestamp":..,
                             "key_b64":..|null,"value_b64":..|null,"headers":[[k, v_b64|null]]}]}]}
  encode <json-in> <file-out>
                           Read {"batches":[{"base_offset":N, "records":[{"timestamp":..,
                           "key_b64":..,"value_b64":..,"headers":[[k, v_b64|null]]}]}]} (optional
                           per-batch: partition_leader_epoch, producer_id, producer_epoch,
                           base_sequence, transactional, compression = none|gzip|snappy|lz4|zstd)
                           and write the batches built by kafka-python's
                           DefaultRecordBatchBuilder (magic 2).
  version                  Print the kafka-python version.

Exit status: 0 on success, 2 on usage errors or when kafka-python is missing, 1 when the input
cannot be decoded (the error is printed to stderr).
"""

import base64
import json
import struct
import sys

try:
    import kafka
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords
except ImportError as err:  # pragma: no cover - environment problem, reported clearly
    sys.stderr.write(
        "kafka_oracle.py: kafka-python is not importable by %s (%s). "
        "Install it with: pip install 'kafka-python>=2.2,<3'\n" % (sys.executable, err)
    )
    sys.exit(2)


def b64(data):
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def unb64(text):
    return None if text is None else base64.b64decode(text)


def decode(path):
    with open(path, "rb") as f:
        data = f.read()
    records = MemoryRecords(data)
    batches = []
    while records.has_next():
        batch = records.next_batch()
        if not isinstance(batch, DefaultRecordBatch):
            raise ValueError("batch with magic %d is not a v2 batch" % batch.magic)
        # validate_crc must run before iteration (kafka-python asserts this).
        crc_valid = batch.validate_crc()
        out = {
            "base_offset": batch.base_offset,
            "last_offset_delta": batch.last_offset_delta,
            "crc_valid": crc_valid,
            "size_in_bytes": batch.size_in_bytes,
            "partition_leader_epoch": batch.leader_epoch,
            "magic": batch.magic,
            "crc": batch.crc,
            "attributes": batch.attributes,
            "compression_type": batch.compression_type,
            "timestamp_type": batch.timestamp_type,
            "is_transactional": batch.is_transactional,
            "is_control": batch.is_control_batch,
            "first_timestamp": batch.first_timestamp,
            "max_timestamp": batch.max_timestamp,
            "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence,
            "records_count": batch.records_count,
            "records": [],
        }
        for record in batch:
            out["records"].append(
                {
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key_b64": b64(record.key),
                    "value_b64": b64(record.value),
                    "headers": [[k, b64(v)] for k, v in record.headers],
                }
            )
        batches.append(out)
    valid = records.valid_bytes()
    if valid != len(data):
        raise ValueError(
            "%d trailing bytes after the last whole batch" % (len(data) - valid)
        )
    json.dump({"batches": batches}, sys.stdout)
    sys.stdout.write("\n")


# Kafka's codec ids (attributes bits 0-2).
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def encode(json_path, out_path):
    with open(json_path, "r", encoding="utf-8") as f:
        spec = json.load(f)
    out = bytearray()
    for batch in spec["batches"]:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=CODECS[batch.get("compression", "none")],
            is_transactional=bool(batch.get("transactional", False)),
            producer_id=batch.get("producer_id", -1),
            producer_epoch=batch.get("producer_epoch", -1),
            base_sequence=batch.get("base_sequence", -1),
            batch_size=1 << 30,
        )
        for delta, rec in enumerate(batch["records"]):
            headers = [(k, unb64(v)) for k, v in rec.get("headers", [])]
            meta = builder.append(
                delta,
                timestamp=rec["timestamp"],
                key=unb64(rec.get("key_b64")),
                value=unb64(rec.get("value_b64")),
                headers=headers,
            )
            if meta is None:
                raise ValueError("record %d did not fit in the batch" % delta)
        buf = builder.build()
        # baseOffset and partitionLeaderEpoch are outside the CRC; the builder leaves them 0
        # (the broker assigns them), so patch them in as a broker would.
        struct.pack_into(">q", buf, 0, batch.get("base_offset", 0))
        struct.pack_into(">i", buf, 12, batch.get("partition_leader_epoch", 0))
        out += buf
    with open(out_path, "wb") as f:
        f.write(out)


def main(argv):
    if len(argv) == 3 and argv[1] == "decode":
        decode(argv[2])
    elif len(argv) == 4 and argv[1] == "encode":
        encode(argv[2], argv[3])
    elif len(argv) == 2 and argv[1] == "version":
        print(kafka.__version__)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as err:  # report decode failures as a clear one-line error
        sys.stderr.write("kafka_oracle.py: %s: %s\n" % (type(err).__name__, err))
        sys.exit(1)
