"""Smoke test of the Python client generated from openapi/openapi.json, against a live server.

Usage: client_smoke.py BASE_URL CLIENT_PARENT_DIR TOKEN
  CLIENT_PARENT_DIR holds the package `strata_client` that openapi-python-client generated
  (scripts/check-openapi.sh does this); TOKEN is an API key of a super user (the server runs
  with auth_mode = api_key). Every call goes through the generated functions and models, so a
  spec that does not describe what the server does fails here, typed 401 and 403 included.
"""

import sys
import time
import uuid

BASE, CLIENT_DIR, TOKEN = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, CLIENT_DIR)

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from strata_client import AuthenticatedClient, Client  # noqa: E402
from strata_client.api.security import create_key  # noqa: E402
from strata_client.api.health import healthz, readyz  # noqa: E402
from strata_client.api.producers import init_producer  # noqa: E402
from strata_client.api.records import (  # noqa: E402
    fetch,
    offsets,
    produce_to_partition,
    produce_to_topic,
)
from strata_client.api.topics import (  # noqa: E402
    create_topic,
    delete_topic,
    describe_topic,
    list_topics,
)
from strata_client.models import (  # noqa: E402
    CreateKeyRequest,
    CreatedApiKey,
    CreateTopicRequest,
    ErrorBody,
    ErrorCode,
    FetchResponse,
    InitProducerRequest,
    PartitionOffsets,
    ProduceRecord,
    ProduceRequest,
    ProduceResponse,
    ProducerFields,
    ProducerIdentity,
    TimestampOffset,
    TopicDescription,
    TopicList,
    ValueFormat,
)
from strata_client.models.produce_record_headers_type_0 import (  # noqa: E402
    ProduceRecordHeadersType0,
)
from strata_client.models.producer_fields_sequences import (  # noqa: E402
    ProducerFieldsSequences,
)
from strata_client.types import File  # noqa: E402

checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise SystemExit(f"client smoke FAILED: {what}")
    checks += 1


def headers(**values):
    h = ProduceRecordHeadersType0()
    h.additional_properties = dict(values)
    return h


client = AuthenticatedClient(
    base_url=BASE, token=TOKEN, raise_on_unexpected_status=True, timeout=None
)
topic = f"smoke-{uuid.uuid4().hex[:8]}"

with client:
    check(healthz.sync(client=client).status == "ok", "healthz")
    check(readyz.sync(client=client).ready is True, "readyz")

    # Topics.
    created = create_topic.sync_detailed(
        client=client, body=CreateTopicRequest(name=topic, partitions=2)
    )
    check(created.status_code == 201, f"create_topic status {created.status_code}")
    desc = created.parsed
    check(isinstance(desc, TopicDescription), f"create_topic body {desc!r}")
    check(desc.name == topic and len(desc.partitions) == 2, "created topic shape")
    # Config keys are typed fields of the generated client (the spec lists every key).
    check(str(desc.configs.cleanup_policy) == "delete", f"default config {desc.configs!r}")
    check(desc.configs.retention_ms == 604800000, "default retention_ms")
    again = create_topic.sync(client=client, body=CreateTopicRequest(name=topic))
    check(
        isinstance(again, ErrorBody) and again.error.code == ErrorCode.TOPIC_ALREADY_EXISTS,
        f"duplicate create gives topic_already_exists, got {again!r}",
    )
    listed = list_topics.sync(client=client)
    check(isinstance(listed, TopicList), "list_topics body")
    check(topic in [t.name for t in listed.topics], "topic listed")
    missing = describe_topic.sync(client=client, topic="no-such-topic")
    check(
        isinstance(missing, ErrorBody) and missing.error.code == ErrorCode.TOPIC_NOT_FOUND,
        f"unknown topic gives topic_not_found, got {missing!r}",
    )

    # Produce to the topic: explicit partition, JSON values, headers, timestamps.
    before = int(time.time() * 1000)
    produced = produce_to_topic.sync(
        client=client,
        topic=topic,
        body=ProduceRequest(
            records=[
                ProduceRecord(
                    key="k0",
                    value={"n": 0, "s": "zero"},
                    partition=1,
                    headers=headers(trace="a"),
                    timestamp=before,
                ),
                ProduceRecord(key="k1", value=[1, 2, 3], partition=1),
                ProduceRecord(value=None, partition=1),
            ]
        ),
    )
    check(isinstance(produced, ProduceResponse), f"produce_to_topic body {produced!r}")
    check([o.offset for o in produced.offsets] == [0, 1, 2], "offsets 0..3 in request order")
    check({o.partition for o in produced.offsets} == {1}, "explicit partition honoured")
    check(produced.offsets[0].timestamp == before, "timestamp kept")
    check(produced.duplicate is False, "not a duplicate")

    # Produce to one partition: JSON with a string value.
    single = produce_to_partition.sync(
        client=client,
        topic=topic,
        partition=1,
        value_format=ValueFormat.STRING,
        body=ProduceRequest(records=[ProduceRecord(key="k3", value="plain text")]),
    )
    check(isinstance(single, ProduceResponse), f"produce_to_partition body {single!r}")
    check(single.offsets[0].offset == 3, "per-partition produce appends at 3")

    # Produce to one partition: raw Kafka RecordBatch v2 bytes.
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=before, key=b"raw", value=b'{"raw": true}', headers=[])
    raw = produce_to_partition.sync(
        client=client,
        topic=topic,
        partition=1,
        expected_offset=4,
        body=File(
            payload=bytes(builder.build()),
            mime_type="application/vnd.strata.record-batches",
        ),
    )
    check(isinstance(raw, ProduceResponse), f"raw produce body {raw!r}")
    check(raw.offsets[0].offset == 4, "raw batch appended at 4")
    stale = produce_to_partition.sync(
        client=client,
        topic=topic,
        partition=1,
        body=ProduceRequest(records=[ProduceRecord(value=1)], expected_offset=0),
    )
    check(
        isinstance(stale, ErrorBody)
        and stale.error.code == ErrorCode.OFFSET_MISMATCH
        and stale.error.log_end_offset == 5,
        f"conditional append refused with the log end, got {stale!r}",
    )

    # Idempotent produce: a retried request is answered with the original offsets.
    identity = init_producer.sync(client=client, body=InitProducerRequest())
    check(isinstance(identity, ProducerIdentity), f"init_producer body {identity!r}")
    sequences = ProducerFieldsSequences()
    sequences.additional_properties = {"0": 0}
    idempotent = ProduceRequest(
        records=[ProduceRecord(key="once", value="x", partition=0)],
        producer=ProducerFields(
            producer_id=identity.producer_id,
            producer_epoch=identity.producer_epoch,
            sequences=sequences,
        ),
    )
    first = produce_to_topic.sync(client=client, topic=topic, body=idempotent)
    retry = produce_to_topic.sync(client=client, topic=topic, body=idempotent)
    check(first.offsets[0].offset == 0 and first.duplicate is False, "idempotent first write")
    check(retry.offsets[0].offset == 0 and retry.duplicate is True, "idempotent retry")

    # Fetch what was written.
    fetched = fetch.sync(client=client, topic=topic, partition=1, offset=0)
    check(isinstance(fetched, FetchResponse), f"fetch body {fetched!r}")
    records = fetched.records
    check([r.offset for r in records] == [0, 1, 2, 3, 4], "fetched offsets 0..5")
    check(records[0].key == "k0" and records[0].value == {"n": 0, "s": "zero"}, "JSON value")
    check(records[0].headers.additional_properties == {"trace": "a"}, "headers")
    check(records[0].timestamp == before, "fetched timestamp")
    check(records[1].value == [1, 2, 3], "array value")
    check(records[2].key is None and records[2].value is None, "null value")
    check(
        records[3].value is None and records[3].value_base64 == "cGxhaW4gdGV4dA==",
        "bytes that are not JSON come back as value_base64",
    )
    check(records[4].key == "raw" and records[4].value == {"raw": True}, "raw batch record")
    check(fetched.next_offset == 5 and fetched.high_watermark == 5, "next offset, watermark")
    check(fetched.log_start_offset == 0, "log start")
    page = fetch.sync(
        client=client,
        topic=topic,
        partition=1,
        offset=3,
        max_records=1,
        value_format=ValueFormat.STRING,
    )
    check([r.offset for r in page.records] == [3] and page.next_offset == 4, "max_records")
    check(page.records[0].value == "plain text", "value_format=string")
    out = fetch.sync(client=client, topic=topic, partition=1, offset=99)
    check(
        isinstance(out, ErrorBody)
        and out.error.code == ErrorCode.OFFSET_OUT_OF_RANGE
        and out.error.earliest_offset == 0
        and out.error.latest_offset == 5,
        f"out of range fetch gives 416 with the range, got {out!r}",
    )

    # Offsets, plain and by timestamp.
    bounds = offsets.sync(client=client, topic=topic, partition=1)
    check(isinstance(bounds, PartitionOffsets), f"offsets body {bounds!r}")
    check((bounds.earliest, bounds.latest, bounds.log_end) == (0, 5, 5), "offset bounds")
    by_time = offsets.sync(client=client, topic=topic, partition=1, timestamp=before)
    check(isinstance(by_time, TimestampOffset), f"timestamp offsets body {by_time!r}")
    check(by_time.offset == 0 and by_time.timestamp == before, "timestamp lookup")
    future = offsets.sync(client=client, topic=topic, partition=1, timestamp=2**62)
    check(isinstance(future, TimestampOffset) and future.offset is None, "no record that new")

    # Authentication and authorization answer typed errors.
    with Client(base_url=BASE, raise_on_unexpected_status=True, timeout=None) as anonymous:
        refused = describe_topic.sync(client=anonymous, topic=topic)
    check(
        isinstance(refused, ErrorBody) and refused.error.code == ErrorCode.UNAUTHENTICATED,
        f"no token gives unauthenticated, got {refused!r}",
    )
    made = create_key.sync(client=client, body=CreateKeyRequest(principal="nobody"))
    check(
        isinstance(made, CreatedApiKey) and made.token.startswith("strata_"),
        f"create_key body {made!r}",
    )
    with AuthenticatedClient(
        base_url=BASE, token=made.token, raise_on_unexpected_status=True, timeout=None
    ) as nobody:
        denied = describe_topic.sync(client=nobody, topic=topic)
    check(
        isinstance(denied, ErrorBody)
        and denied.error.code == ErrorCode.FORBIDDEN
        and denied.error.message == f'nobody may not describe topic "{topic}"',
        f"a key without ACLs gives forbidden, got {denied!r}",
    )

    # Delete.
    gone = delete_topic.sync_detailed(client=client, topic=topic)
    check(gone.status_code == 204, f"delete status {gone.status_code}")
    check(isinstance(describe_topic.sync(client=client, topic=topic), ErrorBody), "deleted")

print(f"client smoke: {checks} checks passed")
