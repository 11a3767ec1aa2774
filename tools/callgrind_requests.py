#!/usr/bin/env python3
"""Instructions per request of an apiserver binary, counted by callgrind.

Starts etcd and the server under `valgrind --tool=callgrind` with
instrumentation off, warms up, turns it on, then counts the whole server
(etcd apart, background loops included) over a fixed number of requests on
one keep-alive connection, one at a time:

- `get`: GETs of one 2 KiB ConfigMap at resourceVersion=0 (JSON);
- `create`: ConfigMap creates of 2 KiB each;
- `deployment`: Deployment creates of about 2 KiB each, the one-container
  pod template of the bench's Deployment row (kube's defaults and
  validation have work to do on it);
- `cr-get`: GETs of one 2 KiB custom resource at resourceVersion=0 (JSON),
  of a CRD with a small structural schema, to set beside `get`.

    python3 tools/callgrind_requests.py BIN [--requests 2000] [--kind get]

`KEEP=1` keeps the work directory (the callgrind dump) and prints it.

Prints `instructions per <kind>: N`. The count does not depend on the
machine's load, so two binaries compare on a shared machine where wall
clock figures do not (BENCHMARKS.md).
"""

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait(port, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"port {port} did not open")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--kind", choices=["get", "create", "deployment", "cr-get"], default="get")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cg-")
    cport, pport, sport = free_port(), free_port(), free_port()
    etcd = subprocess.Popen(
        ["etcd", "--data-dir", f"{work}/etcd", "--listen-client-urls", f"http://127.0.0.1:{cport}",
         "--advertise-client-urls", f"http://127.0.0.1:{cport}", "--listen-peer-urls",
         f"http://127.0.0.1:{pport}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = f"{work}/callgrind.out"
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         args.bin, f"--etcd-servers=http://127.0.0.1:{cport}", "--etcd-prefix=/cg",
         f"--listen=127.0.0.1:{sport}", "--secure-listen=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(cport)
        wait(sport, 300)
        conn = http.client.HTTPConnection("127.0.0.1", sport, timeout=120)
        base = "/api/v1/namespaces/default/configmaps"
        n = [0]

        def cm():
            n[0] += 1
            return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"cm-{n[0]}"}, "data": {"k": "x" * 2048}})

        deployments = "/apis/apps/v1/namespaces/default/deployments"

        def deployment():
            n[0] += 1
            container = {"name": "web", "image": "nginx:1.27",
                         "ports": [{"containerPort": 80, "name": "http"}],
                         "env": [{"name": "MODE", "value": "bench"}],
                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                       "limits": {"cpu": "500m", "memory": "128Mi"}},
                         "readinessProbe": {"httpGet": {"path": "/", "port": 80}}}
            return json.dumps({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": f"d-{n[0]}", "labels": {"app": "bench"},
                             "annotations": {"pad": "x" * 1200}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "bench"}},
                         "template": {"metadata": {"labels": {"app": "bench"}},
                                      "spec": {"containers": [container]}}}})

        def request(method, path, body=None):
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            return r.status

        # the server is ready once default exists and a create succeeds
        end = time.time() + 300
        while request("POST", base, cm()) != 201:
            if time.time() > end:
                raise SystemExit("the server never accepted a create")
            time.sleep(1)

        crs = "/apis/bench.example.com/v1/namespaces/default/widgets"
        if args.kind == "cr-get":
            spec = {"type": "object", "properties": {
                "f000": {"type": "string"}, "f001": {"type": "string"},
                "f002": {"type": "integer"}, "f003": {"type": "boolean"},
                "replicas": {"type": "integer"}, "payload": {"type": "string"}}}
            crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "widgets.bench.example.com"},
                   "spec": {"group": "bench.example.com", "scope": "Namespaced",
                            "names": {"plural": "widgets", "kind": "Widget"},
                            "versions": [{"name": "v1", "served": True, "storage": True,
                                          "schema": {"openAPIV3Schema": {
                                              "type": "object", "properties": {"spec": spec}}}}]}}
            assert request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           json.dumps(crd)) == 201
            cr = json.dumps({"apiVersion": "bench.example.com/v1", "kind": "Widget",
                             "metadata": {"name": "cr-1"},
                             "spec": {"f000": "Always", "f001": "bench-1", "f002": 8080,
                                      "f003": True, "replicas": 1, "payload": "x" * 1900}})
            end = time.time() + 120
            while request("POST", crs, cr) != 201:
                if time.time() > end:
                    raise SystemExit("the custom resource was never created")
                time.sleep(0.5)

        def one():
            if args.kind == "cr-get":
                assert request("GET", f"{crs}/cr-1?resourceVersion=0") == 200
            elif args.kind == "get":
                assert request("GET", f"{base}/cm-1?resourceVersion=0") == 200
            elif args.kind == "deployment":
                assert request("POST", deployments, deployment()) == 201
            else:
                assert request("POST", base, cm()) == 201

        for _ in range(args.warmup):
            one()
        subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        for _ in range(args.requests):
            one()
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        time.sleep(2)
        total = 0
        for f in os.listdir(work):
            if f.startswith("callgrind.out"):
                with open(os.path.join(work, f)) as fh:
                    for line in fh:
                        m = re.match(r"summary: (\d+)", line) or re.match(r"totals: (\d+)", line)
                        if m:
                            total += int(m.group(1))
                            break
        print(f"instructions per {args.kind}: {total / args.requests:,.0f}")
    finally:
        server.kill()
        etcd.kill()
        server.wait()
        etcd.wait()
        if not os.environ.get("KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(work)


if __name__ == "__main__":
    main()
