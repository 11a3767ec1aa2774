"""deploy/compose.yaml: 3 etcd members, 3 apiserver replicas, HAProxy checking /readyz."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from deploy_support import REPO

DEPLOY = REPO / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def etcd_services(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items() if s.get("image", "").startswith("quay.io/coreos/etcd:")}


def etcd_members(compose: dict) -> dict[str, dict]:
    """The main cluster's members (etcd-events is a cluster of its own)."""
    return {n: s for n, s in etcd_services(compose).items() if n != "etcd-events"}


def apiservers(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items() if s.get("image") == "apiserver:latest"}


def haproxy_lines() -> list[str]:
    lines = []
    for raw in (DEPLOY / "haproxy.cfg").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def backend(name: str) -> list[str]:
    lines, inside = [], False
    for line in haproxy_lines():
        word = line.split()[0]
        if word in ("global", "defaults", "frontend", "backend", "listen", "resolvers"):
            inside = line == f"backend {name}"
            continue
        if inside:
            lines.append(line)
    return lines


def test_three_etcd_members_form_one_cluster(compose):
    members = etcd_members(compose)
    assert sorted(members) == ["etcd1", "etcd2", "etcd3"]
    for name, svc in members.items():
        assert re.fullmatch(r"quay\.io/coreos/etcd:v3\.5\.\d+", svc["image"]), svc["image"]
        env = svc["environment"]
        assert env["ETCD_NAME"] == name
        assert env["ETCD_ADVERTISE_CLIENT_URLS"] == f"http://{name}:2379"
        assert env["ETCD_INITIAL_ADVERTISE_PEER_URLS"] == f"http://{name}:2380"
        assert env["ETCD_INITIAL_CLUSTER"] == ",".join(f"{m}=http://{m}:2380" for m in sorted(members))
        assert "healthcheck" in svc
        assert any(v.endswith(":/var/lib/etcd") for v in svc["volumes"])
        assert env["ETCD_DATA_DIR"] == "/var/lib/etcd"


def test_three_apiserver_replicas_use_all_members(compose):
    replicas = apiservers(compose)
    assert sorted(replicas) == ["apiserver1", "apiserver2", "apiserver3"]
    members = sorted(etcd_members(compose))
    for svc in replicas.values():
        assert svc["build"]["context"] == ".."
        assert svc["build"]["dockerfile"] == "Dockerfile"
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == REPO / "Dockerfile"
        flags = [a for a in svc["command"] if a.startswith("--etcd-servers=")]
        assert len(flags) == 1
        urls = flags[0].split("=", 1)[1].split(",")
        assert sorted(urls) == [f"http://{m}:2379" for m in members]
        for m in members + ["etcd-events"]:
            assert svc["depends_on"][m]["condition"] == "service_healthy"
        # Replicas are reached through HAProxy only.
        assert "ports" not in svc
        # TLS with one shared PKI (a shared data volume, one hostname so one
        # serving certificate); anonymous auth for the HTTPS health checks.
        assert "--anonymous-auth=true" in svc["command"]
        assert not any(a.startswith("--listen") for a in svc["command"])
        assert "apiserver-data:/var/lib/apiserver" in svc["volumes"]
        assert svc["hostname"] == "apiserver"
    assert "apiserver-data" in compose["volumes"]


def test_events_live_on_their_own_etcd(compose):
    svc = etcd_services(compose)["etcd-events"]
    env = svc["environment"]
    assert env["ETCD_INITIAL_CLUSTER"] == "etcd-events=http://etcd-events:2380"
    assert env["ETCD_ADVERTISE_CLIENT_URLS"] == "http://etcd-events:2379"
    assert env["ETCD_INITIAL_CLUSTER_TOKEN"] != etcd_members(compose)["etcd1"]["environment"]["ETCD_INITIAL_CLUSTER_TOKEN"]
    assert "etcd-events-data:/var/lib/etcd" in svc["volumes"] and "etcd-events-data" in compose["volumes"]
    assert "healthcheck" in svc
    for replica in apiservers(compose).values():
        flags = [a for a in replica["command"] if a.startswith("--etcd-servers-overrides=")]
        assert flags == ["--etcd-servers-overrides=/events#http://etcd-events:2379"]


def test_haproxy_service(compose):
    svc = compose["services"]["haproxy"]
    assert re.fullmatch(r"haproxy:\d+\.\d+(\.\d+)?(-\w+)?", svc["image"]), svc["image"]
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in svc["volumes"]
    assert any(p.endswith(":6443:6443") for p in svc["ports"])
    assert sorted(svc["depends_on"]) == sorted(apiservers(compose))


def test_haproxy_checks_readyz_on_every_replica(compose):
    lines = backend("apiservers")
    assert "option httpchk" in lines
    checks = [l for l in lines if l.startswith("http-check send")]
    assert len(checks) == 1 and "meth GET" in checks[0] and "uri /readyz" in checks[0].split("ver")[0]
    assert "http-check expect status 200" in lines
    servers = [l.split() for l in lines if l.startswith("server ")]
    assert sorted(s[1] for s in servers) == sorted(apiservers(compose))
    for s in servers:
        assert s[2] == f"{s[1]}:6443"
        assert "check" in s[3:]
    # TLS passes through to the replicas; the checks speak HTTPS.
    default_server = next(l for l in lines if l.startswith("default-server"))
    assert "check-ssl" in default_server.split()
    defaults = [l for l in haproxy_lines()]
    assert "mode tcp" in defaults
    frontends = [l for l in haproxy_lines() if l.startswith("default_backend")]
    assert "default_backend apiservers" in frontends


@pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy not installed")
def test_haproxy_accepts_the_config():
    result = subprocess.run(
        ["haproxy", "-c", "-f", str(DEPLOY / "haproxy.cfg")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
