"""Helm 4's engine (the `helm-python-sdk` package, Helm's Go SDK behind a
C ABI) installs, upgrades, rolls back and uninstalls a tiny local chart.
Helm's client sends its DeleteOptions in protobuf, so `uninstall` needs
protobuf request bodies.

Run by tests/tests/protobuf.rs with the server's URL as the only argument;
exits non-zero (an assertion or a HelmError) on any mismatch.
"""
import json
import pathlib
import sys
import tempfile
import time
import urllib.error
import urllib.request

import helm_python as helm

URL = sys.argv[1]
NS = "default"

CHART = """apiVersion: v2
name: tiny
version: 0.1.0
"""
CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
"""


def get(path):
    try:
        with urllib.request.urlopen(URL + path) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def settings():
    return get(f"/api/v1/namespaces/{NS}/configmaps/tiny-settings")


def eventually(what, check, timeout=20.0):
    deadline = time.time() + timeout
    while not check():
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


with tempfile.TemporaryDirectory() as d:
    chart = pathlib.Path(d) / "tiny"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART)
    (chart / "values.yaml").write_text("color: blue\n")
    (chart / "templates" / "configmap.yaml").write_text(CONFIGMAP)
    kubeconfig = pathlib.Path(d) / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{URL}"}}
users:
- name: u
  user: {{}}
contexts:
- name: c
  context: {{cluster: c, user: u, namespace: {NS}}}
current-context: c
"""
    )
    cfg = helm.Config(kubeconfig_path=kubeconfig, namespace=NS)

    cfg.install(str(chart), "tiny", timeout=60)
    assert settings()["data"]["color"] == "blue", settings()

    cfg.upgrade(str(chart), "tiny", {"color": "red"}, timeout=60)
    assert settings()["data"]["color"] == "red", settings()

    cfg.rollback("tiny", version=1, timeout=60)
    assert settings()["data"]["color"] == "blue", settings()

    # Helm's DELETEs carry protobuf DeleteOptions.
    cfg.uninstall("tiny", timeout=60)
    eventually("the release's ConfigMap gone", lambda: settings() is None)
    releases = get(f"/api/v1/namespaces/{NS}/secrets?labelSelector=owner%3Dhelm")
    assert releases["items"] == [], releases
    print("ok")
