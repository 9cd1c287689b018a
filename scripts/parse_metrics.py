#!/usr/bin/env python3
"""Parses a /metrics answer with the Prometheus project's own Python parsers, as an
independent check of Strata's exposition (tests/it/observability.rs runs it).

Reads the exposition from stdin; `--openmetrics` uses the OpenMetrics parser (which also
requires the `# EOF` terminator), otherwise the Prometheus text 0.0.4 parser. Prints one JSON
object per sample: {"name", "labels", "value", "type"}. A parse error exits non-zero."""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus_text


def main() -> int:
    parse = openmetrics if "--openmetrics" in sys.argv[1:] else prometheus_text
    text = sys.stdin.read()
    for family in parse(text):
        for sample in family.samples:
            print(json.dumps({
                "name": sample.name,
                "labels": sample.labels,
                "value": sample.value,
                "type": family.type,
            }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
