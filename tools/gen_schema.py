#!/usr/bin/env python3
"""Derive apimachinery/data/definitions.json from the upstream OpenAPI v2 document.

The output is the `definitions` map of the Kubernetes OpenAPI document with
every human-readable `description` removed. Everything else (types, formats,
`$ref`s, `required`, and all `x-kubernetes-*` extensions such as the
group-version-kind list, list/map types and patch strategies) is kept as is.
The file is compact JSON with sorted keys, so regenerating it from the same
input always yields the same bytes.

Usage:
    tools/gen_schema.py [SWAGGER_JSON] [-o OUTPUT] [--check]

SWAGGER_JSON defaults to ../shared/k8s-api/openapi/swagger.json next to the
repository; OUTPUT defaults to apimachinery/data/definitions.json inside it.
With --check nothing is written; the exit status tells whether OUTPUT is up
to date.

Python 3 standard library only.
"""

import argparse
import json
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_INPUT = os.path.join(
    REPO_ROOT, os.pardir, "shared", "k8s-api", "openapi", "swagger.json"
)
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "apimachinery", "data", "definitions.json")

# Keywords whose value is a single nested schema.
SCHEMA_KEYWORDS = ("items", "additionalProperties", "not", "additionalItems")
# Keywords whose value is a list of schemas.
SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf")
# Keywords whose value maps names to schemas.
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "definitions")


def strip_schema(node):
    """Return a copy of a schema node without `description`, recursively.

    The walk follows the schema structure, so a property that happens to be
    called `description` (for example in JSONSchemaProps) is kept; only the
    documentation keyword of each schema node is dropped.
    """
    if not isinstance(node, dict):
        # `additionalProperties: true/false`, or anything unexpected.
        return node
    out = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key in SCHEMA_KEYWORDS:
            out[key] = strip_schema(value)
        elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            out[key] = [strip_schema(v) for v in value]
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            out[key] = {name: strip_schema(v) for name, v in value.items()}
        else:
            out[key] = value
    return out


def count_descriptions(node, in_schema=True):
    """Count `description` keywords left in schema positions (for the check)."""
    if not isinstance(node, dict):
        return 0
    n = 1 if in_schema and "description" in node else 0
    for key, value in node.items():
        if key in SCHEMA_KEYWORDS:
            n += count_descriptions(value)
        elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            n += sum(count_descriptions(v) for v in value)
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            n += sum(count_descriptions(v) for v in value.values())
    return n


def generate(swagger):
    definitions = swagger.get("definitions")
    if not isinstance(definitions, dict):
        raise ValueError("input has no `definitions` object")
    stripped = {name: strip_schema(schema) for name, schema in definitions.items()}
    left = sum(count_descriptions(s) for s in stripped.values())
    if left:
        raise ValueError("%d descriptions survived stripping" % left)
    text = json.dumps(
        stripped, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return text + "\n", len(stripped)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", default=DEFAULT_INPUT)
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; fail if OUTPUT differs from what would be generated",
    )
    args = parser.parse_args(argv)

    with open(args.input, encoding="utf-8") as f:
        swagger = json.load(f)
    text, count = generate(swagger)

    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print("%s is out of date; run tools/gen_schema.py" % args.output)
            return 1
        print("%s is up to date (%d definitions)" % (args.output, count))
        return 0

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, args.output)
    print("wrote %s: %d definitions, %d bytes" % (args.output, count, len(text.encode("utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
