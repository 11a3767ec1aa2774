"""Shared helpers of the deployment tests (chart, Dockerfile, compose, manifests)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "apiserver"


def load_all(text: str) -> list[dict]:
    """Every non-empty YAML document in ``text``."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render(values: dict | None = None, *, name: str = "demo", namespace: str = "apiserver") -> list[dict]:
    """Render the chart offline with Helm's engine; returns the manifests (NOTES excluded)."""
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values, name=name, namespace=namespace, is_install=True)
    docs: list[dict] = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(load_all(text))
    return docs


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d.get("kind") == kind]


def one(docs: list[dict], kind: str) -> dict:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}: {[d.get('kind') for d in docs]}"
    return found[0]

