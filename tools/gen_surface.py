#!/usr/bin/env python3
"""Derive tests/data/ga_surface.txt from the upstream OpenAPI v2 document.

The output lists every GA (not alpha, not beta) resource and subresource
endpoint of the built-in API, one per line, as `<group-version path>
<resource>[/<subresource>]` (for example `apis/apps/v1 deployments/scale`),
sorted. Watch paths and namespace prefixes are folded into the resource they
serve. The e2e test `surface` compares the server's discovery with it.

Usage:
    tools/gen_surface.py [SWAGGER_JSON] [-o OUTPUT] [--check]

Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_INPUT = os.path.join(
    REPO_ROOT, os.pardir, "shared", "k8s-api", "openapi", "swagger.json"
)
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "tests", "data", "ga_surface.txt")
PATH = re.compile(r"^/(api/v1|apis/[^/]+/([^/]+))/(.*)$")


def endpoints(doc):
    out = set()
    for path in doc["paths"]:
        m = PATH.match(path)
        if not m:
            continue
        version = m.group(2) or "v1"
        if "alpha" in version or "beta" in version:
            continue
        parts = m.group(3).split("/")
        if parts[0] == "watch":
            continue
        if parts[0] == "namespaces" and len(parts) > 2 and parts[1] == "{namespace}":
            parts = parts[2:]
        if not parts[0]:
            continue
        resource = parts[0] if len(parts) < 3 else f"{parts[0]}/{parts[2]}"
        out.add(f"{m.group(1)} {resource}")
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", nargs="?", default=DEFAULT_INPUT)
    ap.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    with open(args.input, encoding="utf-8") as f:
        text = "\n".join(endpoints(json.load(f))) + "\n"
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                same = f.read() == text
        except FileNotFoundError:
            same = False
        sys.exit(0 if same else 1)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
