#!/usr/bin/env python3
"""Writes helm/strata/values.schema.json (run after changing the chart's values).

The schema is kept as Python here because JSON has no comments and this one needs some; CI
checks that the checked-in file equals this script's output (helm/tests/test_chart.py).
"""
import json
import pathlib
import sys

INT = {"type": "integer", "minimum": 0}
POS = {"type": "integer", "minimum": 1}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
OBJ = {"type": "object"}
ARR = {"type": "array"}
QUANTITY = {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"}
DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}


def strict(properties, required=None, **extra):
    """An object with exactly these keys: a typo is an error, not a silently ignored value."""
    schema = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


QUOTA = strict({"requests_per_second": INT, "produce_bytes_per_second": INT,
                "fetch_bytes_per_second": INT})
ACL = strict({
    "principal": STR,
    "resource_type": {"enum": ["topic", "group", "cluster"]},
    "resource_name": STR,
    "pattern_type": {"enum": ["literal", "prefix"]},
    "operation": {"enum": ["read", "write", "create", "delete", "alter", "describe", "admin", "all"]},
    "permission": {"enum": ["allow", "deny"]},
}, required=["principal", "resource_type", "resource_name", "operation", "permission"])

# Every TOML key of Strata's settings table except the ones the chart sets itself (listen,
# data_dir, tls_* files, auth_keys_file): server/src/config.rs has a test that this list and the
# server's Config agree.
CONFIG = strict({
    "io_backend": {"enum": ["auto", "io_uring", "sync"]},
    "page_cache_window_bytes": INT,
    "segment_preallocate_bytes": INT,
    "max_request_bytes": POS,
    "max_partitions_per_topic": {"type": "integer", "minimum": 1, "maximum": 4294967295},
    "fetch_max_wait_ms": INT,
    "fetch_default_max_bytes": POS,
    "fetch_max_bytes": POS,
    "sse_ping_interval_ms": POS,
    "shutdown_timeout_ms": INT,
    "retention_check_interval_ms": POS,
    "cleaner_io_max_bytes_per_second": INT,
    "tiered_storage_url": {"type": "string", "pattern": r"^(|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?|file:///.*|/.*)$",
                           "description": "s3://bucket/prefix, file:///path or an absolute folder"},
    "tiered_storage_s3_endpoint": {"type": "string", "pattern": r"^(|https?://[^\s/]+(/.*)?)$",
                                   "description": "http(s)://host[:port] of an S3-compatible server"},
    "tiered_storage_s3_region": STR,
    "tiering_interval_ms": POS,
    "tiering_chunk_cache_bytes": INT,
    "tiering_orphan_grace_ms": INT,
    # Mount the key from a Secret with extraVolumes and point this at it.
    "archive_signing_key_file": STR,
    "archive_allow_new_signing_key": BOOL,
    "audit_upload_idle_ms": POS,
    # mtls is left out on purpose: kubelet probes cannot present a client certificate. Use
    # api_key with tls.clientCa, where a certificate authenticates like a key.
    "auth_mode": {"enum": ["none", "api_key"]},
    "auth_acls_file": STR,
    "auth_super_users": {"type": "array", "items": STR},
    "auth_acls": {"type": "array", "items": ACL},
    "request_body_timeout_ms": POS,
    "max_inflight_request_bytes": POS,
    "header_read_timeout_ms": POS,
    "max_connections": POS,
    "max_streams_per_principal": POS,
    "cors_allowed_origins": {"type": "array", "items": STR},
    "quota": QUOTA,
    "auth_quotas": {"type": "object", "additionalProperties": QUOTA},
    "log_format": {"enum": ["text", "json"]},
    "log_level": STR,
    "access_log_sample_rate": {"type": "number", "minimum": 0, "maximum": 1},
    "metrics_enabled": BOOL,
    "metrics_topic_labels": BOOL,
})

PROBE = strict({"periodSeconds": POS, "failureThreshold": POS, "timeoutSeconds": POS})

SCHEMA = strict({
    "replicas": {"type": "integer", "minimum": 1, "maximum": 1,
                 "description": "Strata is one node today: replicas must be 1"},
    "image": strict({
        "repository": {"type": "string", "minLength": 1},
        "tag": STR,
        "digest": {"type": "string", "pattern": r"^(|sha256:[0-9a-f]{64})$"},
        "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    }),
    "imagePullSecrets": {"type": "array", "items": strict({"name": STR}, required=["name"])},
    "nameOverride": STR,
    "fullnameOverride": STR,
    "commonLabels": LABELS,
    "podAnnotations": LABELS,
    "podLabels": LABELS,
    "priorityClassName": STR,
    "serviceAccount": strict({"create": BOOL, "name": STR, "annotations": LABELS,
                              "automountToken": BOOL}),
    "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
    "service": strict({
        "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "nodePort": {"type": ["integer", "null"], "minimum": 1, "maximum": 65535},
        "annotations": LABELS,
        "loadBalancerSourceRanges": {"type": "array", "items": STR},
    }),
    "podManagementPolicy": {"enum": ["Parallel", "OrderedReady"]},
    "updateStrategy": OBJ,
    "terminationGracePeriodSeconds": {"type": ["integer", "null"], "minimum": 0},
    "preStopSleepSeconds": INT,
    "persistence": strict({
        "enabled": BOOL,
        "size": QUANTITY,
        "storageClass": STR,
        "accessModes": {"type": "array", "minItems": 1,
                        "items": {"enum": ["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]}},
        "annotations": LABELS,
        "retentionPolicy": strict({"whenDeleted": {"enum": ["Retain", "Delete"]},
                                   "whenScaled": {"enum": ["Retain", "Delete"]}}),
        "emptyDirSizeLimit": {"anyOf": [{"const": ""}, QUANTITY]},
    }),
    "probes": strict({"startup": PROBE, "readiness": PROBE, "liveness": PROBE}),
    "config": CONFIG,
    "s3": strict({"existingSecret": STR, "accessKeyIdKey": {"type": "string", "minLength": 1},
                  "secretAccessKeyKey": {"type": "string", "minLength": 1}}),
    "tls": strict({
        "enabled": BOOL,
        "existingSecret": STR,
        "clientCa": BOOL,
        "clientPrincipal": {"enum": ["cn", "san"]},
        "certManager": strict({
            "enabled": BOOL,
            "issuerRef": strict({"name": STR, "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                                 "group": STR}),
            "duration": DURATION,
            "renewBefore": DURATION,
            "extraDnsNames": {"type": "array", "items": STR},
        }),
    }),
    "auth": strict({"keysSecret": STR}),
    "archive": strict({"signingKeySecret": STR}),
    "metrics": strict({
        "serviceMonitor": strict({"enabled": BOOL, "interval": DURATION,
                                  "scrapeTimeout": DURATION, "labels": LABELS,
                                  "insecureSkipVerify": BOOL}),
        "dashboard": strict({"enabled": BOOL, "labels": LABELS,
                             "datasourceUid": {"type": "string", "minLength": 1}}),
    }),
    "podDisruptionBudget": strict({"enabled": BOOL, "maxUnavailable": {"type": ["integer", "string"], "minimum": 0}}),
    "networkPolicy": strict({"enabled": BOOL, "allowExternal": BOOL, "from": ARR, "egress": ARR}),
    "resources": OBJ,
    "nodeSelector": LABELS,
    "tolerations": ARR,
    "affinity": OBJ,
    "topologySpreadConstraints": ARR,
    "podSecurityContext": OBJ,
    "securityContext": OBJ,
    "extraEnv": {"type": "array", "items": {"type": "object", "required": ["name"]}},
    "extraEnvFrom": ARR,
    "extraVolumes": {"type": "array", "items": {"type": "object", "required": ["name"]}},
    "extraVolumeMounts": {"type": "array", "items": {"type": "object", "required": ["name", "mountPath"]}},
    "tests": strict({"enabled": BOOL, "records": {"type": "integer", "minimum": 1, "maximum": 10000},
                     "tokenSecret": STR, "tokenKey": {"type": "string", "minLength": 1}}),
    "devS3": strict({
        "enabled": BOOL,
        "image": strict({"repository": {"type": "string", "minLength": 1}, "tag": STR,
                         "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]}}),
        "bucket": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"},
        "sizeLimit": QUANTITY,
    }),
    # Helm passes this to every chart; allow it so umbrella charts work.
    "global": OBJ,
}, **{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Strata Helm chart values"})


def render():
    return json.dumps(SCHEMA, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    target = pathlib.Path(__file__).resolve().parent.parent / "strata" / "values.schema.json"
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if target.read_text() == render() else "values.schema.json is stale: run helm/tools/make_schema.py")
    target.write_text(render())
