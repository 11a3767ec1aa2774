"""The Helm chart lints clean and renders the expected manifests."""

from __future__ import annotations

import pytest

from deploy_support import CHART, by_kind, one, render


def container(docs):
    deployment = one(docs, "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return deployment, containers[0]


def test_chart_lints_clean_in_strict_mode():
    import helm_python as helm

    report = helm.lint(CHART, strict=True, kube_version="v1.30.0")
    assert report["total_charts_linted"] == 1
    assert report["errors"] == [], report
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [], problems


def test_chart_lints_clean_with_everything_enabled():
    import helm_python as helm

    values = {"serviceMonitor": {"enabled": True}, "autoscaling": {"targetMemoryUtilizationPercentage": 80}}
    report = helm.lint(CHART, values, strict=True)
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_default_kinds(default_docs):
    kinds = sorted(d["kind"] for d in default_docs)
    assert kinds == ["Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Secret", "Service"]
    for doc in default_docs:
        want = "demo-apiserver-pki" if doc["kind"] == "Secret" else "demo-apiserver"
        assert doc["metadata"]["name"] == want
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "demo"


def test_probes_resources_and_security(default_docs):
    deployment, c = container(default_docs)
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["startupProbe"]["httpGet"]["path"] == "/livez"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["port"] == "https"
        assert c[probe]["httpGet"]["scheme"] == "HTTPS"
    assert {"name": "https", "containerPort": 6443, "protocol": "TCP"} in c["ports"]
    assert "--anonymous-auth=true" in c["args"]
    assert c["resources"]["requests"]["cpu"]
    assert c["resources"]["requests"]["memory"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False


def test_args_carry_etcd_servers_and_shutdown_delay(default_docs):
    _, c = container(default_docs)
    args = c["args"]
    assert "--etcd-servers=http://etcd-0.etcd:2379,http://etcd-1.etcd:2379,http://etcd-2.etcd:2379" in args
    assert "--etcd-prefix=/registry" in args
    assert "--shutdown-delay-duration=15s" in args
    assert "--request-timeout=60s" in args
    assert all(isinstance(a, str) and a.startswith("--") for a in args), args
    # The image's entrypoint sets --secure-listen; the plain port is
    # loopback-only and never asked for.
    assert not any(a.startswith("--listen") for a in args)


def test_pki_secret_is_generated_and_mounted(default_docs):
    import base64

    deployment, c = container(default_docs)
    secret = one(default_docs, "Secret")
    assert secret["metadata"]["name"] == "demo-apiserver-pki"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert sorted(data) == ["ca.crt", "sa.key", "tls.crt", "tls.key", "tokens.csv"]
    assert data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert "PRIVATE KEY-----" in data["tls.key"] and "PRIVATE KEY-----" in data["sa.key"]
    token, user, uid, groups = data["tokens.csv"].strip().split(",")
    assert len(token) >= 32 and groups == "system:masters"
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "pki", "secret": {"secretName": "demo-apiserver-pki", "defaultMode": 0o440}} in volumes
    for flag, key in (("--tls-cert-file", "tls.crt"), ("--client-ca-file", "ca.crt"), ("--token-auth-file", "tokens.csv")):
        assert f"{flag}=/etc/apiserver/pki/{key}" in c["args"]
    # An existing Secret replaces the generated one.
    docs = render({"pki": {"existingSecret": "mine"}})
    assert by_kind(docs, "Secret") == []
    _, = [v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"] if v["name"] == "pki" and v["secret"]["secretName"] == "mine"]


def test_prestop_matches_shutdown_delay(default_docs):
    deployment, c = container(default_docs)
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["/bin/sleep", "15"]
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > 2 * 15


def test_hpa_targets_the_deployment(default_docs):
    deployment = one(default_docs, "Deployment")
    hpa = one(default_docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    ref = hpa["spec"]["scaleTargetRef"]
    assert ref == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
    assert hpa["spec"]["minReplicas"] == 3
    assert hpa["spec"]["maxReplicas"] >= hpa["spec"]["minReplicas"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    # With an autoscaler the Deployment leaves replicas to it.
    assert "replicas" not in deployment["spec"]


def test_pdb_and_service_select_the_pods(default_docs):
    deployment = one(default_docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    pdb = one(default_docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    svc = one(default_docs, "Service")
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "https"


def test_service_monitor_only_when_enabled(default_docs):
    assert by_kind(default_docs, "ServiceMonitor") == []
    docs = render({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}})
    sm = one(docs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    endpoint = sm["spec"]["endpoints"][0]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] == "https"
    assert endpoint["scheme"] == "https"
    assert sm["spec"]["selector"]["matchLabels"].items() <= one(docs, "Service")["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == ["apiserver"]


def test_values_override():
    docs = render(
        {
            "etcd": {"servers": ["http://a:2379", "http://b:2379"], "prefix": "/k8s"},
            "image": {"repository": "registry.example/apiserver", "tag": "v9"},
            "shutdownDelaySeconds": 30,
            "autoscaling": {"enabled": False},
            "podDisruptionBudget": {"enabled": False},
            "replicaCount": 5,
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
            "server": {"extraArgs": ["--etcd-compaction-interval=5m"]},
        }
    )
    assert sorted(d["kind"] for d in docs) == ["Deployment", "Secret", "Service"]
    deployment, c = container(docs)
    assert deployment["spec"]["replicas"] == 5
    assert c["image"] == "registry.example/apiserver:v9"
    assert "--etcd-servers=http://a:2379,http://b:2379" in c["args"]
    assert "--etcd-prefix=/k8s" in c["args"]
    assert "--shutdown-delay-duration=30s" in c["args"]
    assert c["args"][-1] == "--etcd-compaction-interval=5m"
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["/bin/sleep", "30"]
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}


def test_etcd_overrides_become_the_flag():
    docs = render(
        {
            "etcd": {
                "overrides": [
                    {"resource": "/events", "servers": ["http://e1:2379", "http://e2:2379"]},
                    {"resource": "coordination.k8s.io/leases", "servers": ["http://l:2379"]},
                ]
            }
        }
    )
    _, c = container(docs)
    flags = [a for a in c["args"] if a.startswith("--etcd-servers-overrides=")]
    assert flags == ["--etcd-servers-overrides=/events#http://e1:2379;http://e2:2379,coordination.k8s.io/leases#http://l:2379"]


def test_no_overrides_no_flag(default_docs):
    _, c = container(default_docs)
    assert not any(a.startswith("--etcd-servers-overrides") for a in c["args"])


def test_image_defaults_to_app_version(default_docs):
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        app_version = chart.metadata["appVersion"]
    _, c = container(default_docs)
    assert c["image"] == f"apiserver:{app_version}"


def test_missing_etcd_servers_fails_to_render():
    import helm_python as helm

    with pytest.raises(helm.HelmError, match="etcd.servers"):
        render({"etcd": {"servers": None}})


def test_notes_render():
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        rendered = chart.render({"serviceMonitor": {"enabled": True}}, name="demo", namespace="ns")
    notes = next(v for k, v in rendered.items() if k.endswith("NOTES.txt"))
    assert "port-forward service/demo-apiserver" in notes
    assert "/metrics" in notes
