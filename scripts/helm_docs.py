#!/usr/bin/env python3
"""The values table of helm/strata/README.md, generated from the comments in values.yaml.

Every value of values.yaml (a group of keys may go without) must have a comment right above it (CI fails otherwise, so every
value is documented); nested keys are named by their dotted path. The table sits between the
<!-- values --> markers of the README.
  scripts/helm_docs.py          rewrite the table
  scripts/helm_docs.py --check  exit 1 when the README is stale or a value has no comment
"""
import json
import pathlib
import re
import sys

import yaml

CHART = pathlib.Path(__file__).resolve().parent.parent / "helm" / "strata"
START, END = "<!-- values -->", "<!-- /values -->"
KEY = re.compile(r"^(\s*)([A-Za-z_][\w.-]*|\"[^\"]+\"):(.*)$")


def rows(lines, values):
    """(path, default, description) for every key, in file order."""
    stack, comment, out, missing = [], [], [], []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        match = KEY.match(line)
        if not match or stripped.startswith("-"):
            comment = [] if not stripped else comment
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
        path = ".".join(k for _, k in stack)
        default = values
        for _, key in stack:
            default = default[key]
        group = isinstance(default, dict) and bool(default)
        if not comment and not group:  # a group of keys needs no comment; every value does
            missing.append(path)
        shown = "" if isinstance(default, dict) and default else json.dumps(default)
        if comment or not group:
            out.append((path, shown, " ".join(comment)))
        comment = []
    return out, missing


def table():
    text = (CHART / "values.yaml").read_text()
    found, missing = rows(text.splitlines(), yaml.safe_load(text))
    lines = ["| value | default | meaning |", "|---|---|---|"]
    lines += [f"| `{p}` | {f'`{d}`' if d else ''} | {c.replace('|', '/')} |" for p, d, c in found]
    return "\n".join(lines), missing


def main():
    readme = CHART / "README.md"
    text = readme.read_text()
    generated, missing = table()
    if missing:
        print("values without a comment in values.yaml: " + ", ".join(missing))
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    updated = f"{head}{START}\n{generated}\n{END}{tail}"
    if sys.argv[1:] == ["--check"]:
        if updated != text:
            print("helm/strata/README.md values table is stale: run scripts/helm_docs.py")
            return 1
        return 0
    readme.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
