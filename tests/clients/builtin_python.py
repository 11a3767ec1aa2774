"""Built-in kinds through the Python `kubernetes` client (a client nobody
here wrote): kube's defaults and strategy values come back on create, and
invalid objects are refused with 422 and kube's causes.

Run by tests/tests/builtin_semantics.rs with the server's URL as the only
argument; exits non-zero (an assertion or an ApiException) on any mismatch.
"""
import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException


def main(url):
    conf = client.Configuration()
    conf.host = url
    api = client.ApiClient(conf)
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    ns = "default"

    dep = apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "py"},
        "spec": {
            "selector": {"matchLabels": {"app": "py"}},
            "template": {
                "metadata": {"labels": {"app": "py"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                                         "ports": [{"containerPort": 80}]}]},
            },
        },
    })
    assert dep.spec.strategy.type == "RollingUpdate", dep.spec.strategy
    assert dep.spec.strategy.rolling_update.max_surge == "25%"
    assert dep.spec.revision_history_limit == 10
    assert dep.spec.progress_deadline_seconds == 600
    c = dep.spec.template.spec.containers[0]
    assert c.image_pull_policy == "IfNotPresent", c
    assert c.ports[0].protocol == "TCP", c.ports
    assert c.termination_message_policy == "File"
    assert dep.spec.template.spec.scheduler_name == "default-scheduler"

    pod = core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "py-pod"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
    })
    assert pod.status.phase == "Pending", pod.status
    assert pod.status.qos_class == "Guaranteed", pod.status
    assert pod.spec.service_account_name == "default"
    # Requests default to limits.
    assert pod.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}, \
        pod.spec.containers[0].resources

    svc = core.create_namespaced_service(ns, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "py-svc"},
        "spec": {"selector": {"app": "py"}, "ports": [{"port": 80}]},
    })
    assert svc.spec.cluster_ip and svc.spec.cluster_ip != "None", svc.spec
    assert svc.spec.ports[0].target_port == 80, svc.spec.ports
    assert svc.spec.session_affinity == "None"

    try:
        core.create_namespaced_service(ns, {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "py-bad"},
            "spec": {"selector": {"app": "py"}, "ports": [{"port": 70000}]},
        })
        raise AssertionError("a Service on port 70000 was accepted")
    except ApiException as e:
        assert e.status == 422, e
        body = json.loads(e.body)
        assert body["reason"] == "Invalid", body
        fields = [c["field"] for c in body["details"]["causes"]]
        assert "spec.ports[0].port" in fields, body

    try:
        apps.patch_namespaced_deployment("py", ns, {
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": ""}]}}}})
        raise AssertionError("an empty image was accepted")
    except ApiException as e:
        assert e.status == 422, e
        body = json.loads(e.body)
        fields = [c["field"] for c in body["details"]["causes"]]
        assert "spec.template.spec.containers[0].image" in fields, body
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
