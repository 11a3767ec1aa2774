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
    assert one(docs, "Service")["spec"]["selector"].items() <= labels.items()
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
