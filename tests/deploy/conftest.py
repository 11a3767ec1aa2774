"""Fixtures of the deployment tests."""

from __future__ import annotations

import pytest

from deploy_support import render


@pytest.fixture(scope="session")
def default_docs() -> list[dict]:
    """The chart rendered with its default values."""
    return render()
