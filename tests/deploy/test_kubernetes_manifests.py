"""The plain manifests in deploy/kubernetes/ parse and fit together."""

from __future__ import annotations

import pytest
import yaml

from deploy_support import REPO, load_all, one

MANIFESTS = REPO / "deploy" / "kubernetes"


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    out: list[dict] = []
    for name in kustomization["resources"]:
        out.extend(load_all((MANIFESTS / name).read_text()))
    return out


def test_every_file_is_listed(docs):
    listed = set(yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]


def test_deployment(docs):
    dep = one(docs, "Deployment")
    assert dep["spec"]["replicas"] == 3
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["scheme"] == "HTTPS"
        assert c[probe]["httpGet"]["port"] == "https"
    assert c["ports"] == [{"name": "https", "containerPort": 6443, "protocol": "TCP"}]
    # The kubelet's probes carry no credentials.
    assert "--anonymous-auth=true" in c["args"]
    assert not any(a.startswith("--listen") for a in c["args"])
    # One PKI for every replica, from a Secret readable by the server's group.
    pki = next(v for v in pod["volumes"] if v["name"] == "pki")
    assert pki["secret"]["secretName"] == "apiserver-pki"
    assert pod["securityContext"]["fsGroup"] == 10001
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["pki"] == "/etc/apiserver/pki"
    for flag in ("--tls-cert-file", "--tls-private-key-file", "--client-ca-file", "--service-account-signing-key-file"):
        (arg,) = [a for a in c["args"] if a.startswith(flag + "=")]
        assert arg.split("=", 1)[1].startswith("/etc/apiserver/pki/")
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    delay = [a for a in c["args"] if a.startswith("--shutdown-delay-duration=")]
    assert delay == ["--shutdown-delay-duration=15s"]
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["/bin/sleep", "15"]
    assert pod["terminationGracePeriodSeconds"] > 30
    assert pod["securityContext"]["runAsNonRoot"] is True
    # etcd is external: its URLs come from the ConfigMap as the server's env variable.
    cm = one(docs, "ConfigMap")
    assert c["envFrom"] == [{"configMapRef": {"name": cm["metadata"]["name"]}}]
    assert cm["data"]["APISERVER_ETCD_SERVERS"].startswith("http://")


def test_service_and_pdb_select_the_pods(docs):
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    svc = one(docs, "Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "https"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
