#!/usr/bin/env python3
"""Prometheus, with kube-prometheus's rules, scraping two replicas of the server.

`make monitor` runs this for people; tests/deploy/test_monitoring.py imports it
and checks the same set-up. What it starts:

- etcd on free loopback ports (or the one given with --etcd-servers),
- two replicas of the server on one etcd prefix, each with a TLS port
  (the certificate the server makes for itself, shared through one data
  directory) and a static token file: `prometheus` (only what the RBAC
  objects below grant) and `loader` (system:masters, for load and set-up),
- the RBAC objects kube-prometheus gives its Prometheus (get on /metrics and
  /metrics/slis),
- Debian's `prometheus` with a configuration generated from kube-prometheus's
  own files in ../shared/monitoring, read at run time, never copied:
  * the ServiceMonitor `kube-apiserver` becomes static scrape jobs, one per
    endpoint (scheme https, the bearer token, the CA and server name
    `kubernetes`, its metricRelabelings as metric_relabel_configs, and the
    labels the operator gives targets: job="apiserver" from the Service's
    `component` label, namespace, service, endpoint);
  * `spec.groups` of the PrometheusRule becomes the rules file, expressions
    as shipped. `fast=True` (the test) scrapes and evaluates every second
    and drops the groups' own `interval` (the availability group's 3m would
    not evaluate within a short test); people get the shipped intervals.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SHARED_DIR", REPO.parent / "shared"))
MONITORING = SHARED / "monitoring"
SERVICE_MONITOR = MONITORING / "kubernetesControlPlane-serviceMonitorApiserver.yaml"
PROMETHEUS_RULE = MONITORING / "kubernetesControlPlane-prometheusRule.yaml"
KUBE_DASHBOARD = MONITORING / "apiserver.json"
DASHBOARD = REPO / "deploy" / "monitoring" / "dashboard.json"

PROMETHEUS_TOKEN = "prometheus-scrape-token"
LOADER_TOKEN = "loader-token"
# A known user that RBAC grants nothing.
NOBODY_TOKEN = "nobody-token"
# What the `kubernetes` Service's endpoints are labelled with by the operator.
TARGET_LABELS = {"namespace": "default", "service": "kubernetes", "endpoint": "https"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_binary() -> Path:
    """The server built by `cargo build --bin apiserver` (CARGO_TARGET_DIR aware)."""
    if os.environ.get("APISERVER_BIN"):
        return Path(os.environ["APISERVER_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "apiserver"


# --- configuration, from kube-prometheus's files ---------------------------------


def rule_groups(fast: bool) -> list[dict]:
    """`spec.groups` of kube-prometheus's PrometheusRule, as shipped (`fast`:
    without the groups' own evaluation intervals)."""
    doc = yaml.safe_load(PROMETHEUS_RULE.read_text())
    groups = doc["spec"]["groups"]
    if fast:
        groups = [{k: v for k, v in g.items() if k != "interval"} for g in groups]
    return groups


def scrape_jobs(targets: list[str], ca_file: Path, token_file: Path, interval: str | None) -> list[dict]:
    """The ServiceMonitor's endpoints as static scrape jobs, as the operator
    renders them (`interval`: instead of each endpoint's own)."""
    monitor = yaml.safe_load(SERVICE_MONITOR.read_text())
    meta, spec = monitor["metadata"], monitor["spec"]
    jobs = []
    for i, ep in enumerate(spec["endpoints"]):
        relabel = [{"target_label": "job", "replacement": "apiserver"}]
        relabel += [{"target_label": k, "replacement": v} for k, v in TARGET_LABELS.items()]
        job = {
            "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{i}",
            "scheme": ep.get("scheme", "http"),
            "metrics_path": ep.get("path", "/metrics"),
            "scrape_interval": interval or ep.get("interval", "30s"),
            "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
            "tls_config": {"ca_file": str(ca_file), "server_name": ep["tlsConfig"]["serverName"]},
            "static_configs": [{"targets": targets}],
            "relabel_configs": relabel,
            "metric_relabel_configs": [
                {
                    "action": r["action"].lower(),
                    "source_labels": r["sourceLabels"],
                    "regex": r["regex"],
                }
                for r in ep.get("metricRelabelings", [])
            ],
        }
        if interval:
            job["scrape_timeout"] = interval
        jobs.append(job)
    return jobs


def prometheus_config(jobs: list[dict], rules_file: Path, interval: str) -> dict:
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(rules_file)],
        "scrape_configs": jobs,
    }


# --- processes -------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    port: int
    plain_port: int
    args: list[str]
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.plain_port}/readyz", timeout=2) as r:
                    if r.read() == b"ok":
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not become ready:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@dataclass
class Monitoring:
    """etcd (unless given), two replicas and Prometheus in `dir`."""

    dir: Path
    fast: bool = True
    etcd_servers: str | None = None
    prefix: str = "/registry"
    replicas: list[Replica] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)
    prometheus_url: str = ""
    prometheus: subprocess.Popen | None = None

    @property
    def interval(self) -> str:
        return "1s" if self.fast else "15s"

    @property
    def ca_file(self) -> Path:
        return self.dir / "data" / "pki" / "ca.crt"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.etcd_servers:
            self.etcd_servers = self._start_etcd()
        tokens = self.dir / "tokens.csv"
        tokens.write_text(
            f'{PROMETHEUS_TOKEN},prometheus,prometheus-uid,""\n'
            f'{LOADER_TOKEN},loader,loader-uid,"system:masters"\n'
            f'{NOBODY_TOKEN},nobody,nobody-uid,""\n'
        )
        for n in range(2):
            port, plain = free_port(), free_port()
            args = [
                str(server_binary()),
                f"--etcd-servers={self.etcd_servers}",
                f"--etcd-prefix={self.prefix}",
                f"--listen=127.0.0.1:{plain}",
                f"--secure-listen=127.0.0.1:{port}",
                f"--data-dir={self.dir / 'data'}",
                f"--token-auth-file={tokens}",
            ]
            r = Replica(f"replica-{n}", port, plain, args, self.dir / f"replica-{n}.log")
            # One after the other: the second reuses the certificates the
            # first made in the shared data directory.
            r.start()
            self.replicas.append(r)
        self.grant_scrape_access()
        self._start_prometheus()

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{client}"
        log = open(self.dir / "etcd.log", "ab")
        p = subprocess.Popen(
            [
                "etcd",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                # The test's etcd lives in a temp dir: a slow CI disk's
                # fsyncs would make writes miss their 1 s SLO and burn
                # the error budget for a reason that is not the server's.
                *(["--unsafe-no-fsync"] if self.fast else []),
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        self.procs.append(p)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return url
            except (OSError, urllib.error.URLError, ValueError):
                time.sleep(0.2)
        raise RuntimeError("etcd did not start")

    def grant_scrape_access(self) -> None:
        """kube-prometheus's grant to its Prometheus: get on the metrics paths."""
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "prometheus-k8s"},
            "rules": [{"nonResourceURLs": ["/metrics", "/metrics/slis"], "verbs": ["get"]}],
        }
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-k8s"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "prometheus-k8s"},
            "subjects": [{"kind": "User", "name": "prometheus", "apiGroup": "rbac.authorization.k8s.io"}],
        }
        base = "/apis/rbac.authorization.k8s.io/v1"
        for path, obj in ((f"{base}/clusterroles", role), (f"{base}/clusterrolebindings", binding)):
            code, body = self.request(self.replicas[0], "POST", path, obj)
            if code not in (201, 409):
                raise RuntimeError(f"POST {path}: {code} {body}")

    def _start_prometheus(self) -> None:
        rules = self.dir / "rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": rule_groups(self.fast)}, sort_keys=False))
        token = self.dir / "prometheus.token"
        token.write_text(PROMETHEUS_TOKEN)
        jobs = scrape_jobs([r.target for r in self.replicas], self.ca_file, token, self.interval if self.fast else None)
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(prometheus_config(jobs, rules, self.interval), sort_keys=False))
        check = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"promtool check config:\n{check.stdout}{check.stderr}")
        port = free_port()
        self.prometheus_url = f"http://127.0.0.1:{port}"
        log = open(self.dir / "prometheus.log", "ab")
        self.prometheus = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        self.procs.append(self.prometheus)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.prometheus_url}/-/ready", timeout=2):
                    return
            except (OSError, urllib.error.URLError):
                if self.prometheus.poll() is not None:
                    break
                time.sleep(0.2)
        raise RuntimeError(f"prometheus did not start:\n{(self.dir / 'prometheus.log').read_text()[-4000:]}")

    def stop(self) -> None:
        for r in self.replicas:
            r.stop()
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    # --- clients ---------------------------------------------------------------

    def tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.check_hostname = False  # the replicas are reached by address
        return ctx

    def request(
        self,
        replica: Replica,
        method: str,
        path: str,
        body: dict | None = None,
        token: str = LOADER_TOKEN,
        timeout: float = 30,
    ) -> tuple[int, str]:
        """One HTTPS request to a replica with a bearer token: (code, body)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"https://{replica.target}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.tls(), timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.api("/api/v1/query", params)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
        return self.api("/api/v1/query_range", params)["result"]

    def api(self, path: str, params: dict | None = None) -> dict | list:
        url = self.prometheus_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=30) as r:
            answer = json.loads(r.read())
        if answer.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {answer}")
        return answer["data"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="where configuration, logs and data go (default: a temporary directory)")
    parser.add_argument("--etcd-servers", help="use this etcd instead of starting one")
    parser.add_argument("--fast", action="store_true", help="scrape and evaluate every second, as the test does")
    args = parser.parse_args()
    for tool in ("etcd", "prometheus", "promtool"):
        if not shutil.which(tool) and not (tool == "etcd" and args.etcd_servers):
            print(f"{tool} is missing: run ./tools/install-deps.sh and ./tools/install-test-deps.sh", file=sys.stderr)
            return 1
    if not server_binary().exists():
        print(f"{server_binary()} is missing: run cargo build --bin apiserver", file=sys.stderr)
        return 1
    work = args.dir or Path(tempfile.mkdtemp(prefix="apiserver-monitor-"))
    m = Monitoring(work.resolve(), fast=args.fast, etcd_servers=args.etcd_servers)
    try:
        m.start()
        print(f"""
Prometheus:  {m.prometheus_url}
  alerts:    {m.prometheus_url}/alerts
  rules:     {m.prometheus_url}/rules
  targets:   {m.prometheus_url}/targets
Replicas:    {', '.join('https://' + r.target for r in m.replicas)}
  (CA {m.ca_file}; token "{LOADER_TOKEN}" is system:masters, e.g.
   kubectl --server https://{m.replicas[0].target} --certificate-authority {m.ca_file} --token {LOADER_TOKEN} get ns)
Files:       {work} (prometheus.yml, rules.yaml, logs)
Dashboards:  import {KUBE_DASHBOARD} and {DASHBOARD} into a Grafana whose Prometheus data source is {m.prometheus_url}
Ctrl-C stops everything.""", flush=True)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        while not stop:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        m.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
