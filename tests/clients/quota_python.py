"""ResourceQuota and LimitRange through the Python `kubernetes` client:
the quota's status is filled and kept, a create over it is an
ApiException 403 with kube's message, and LimitRange defaults come back on
a created pod.

Run by tests/tests/resource_quota.rs with the server's URL as the only
argument; exits non-zero (an assertion or an ApiException) on any mismatch.
"""
import json
import sys
import time

from kubernetes import client
from kubernetes.client.rest import ApiException


def wait(what, check, timeout=30):
    deadline = time.time() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def pod(name, cpu=None):
    container = {"name": "c", "image": "nginx"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container]}}


def main(url):
    conf = client.Configuration()
    conf.host = url
    core = client.CoreV1Api(client.ApiClient(conf))
    ns = "pyquota"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait("the default service account",
         lambda: any(sa.metadata.name == "default"
                     for sa in core.list_namespaced_service_account(ns).items))
    core.create_namespaced_limit_range(ns, {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "250m"}}]}})
    core.create_namespaced_resource_quota(ns, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small"},
        "spec": {"hard": {"pods": "2", "limits.cpu": "400m"}}})
    q = wait("the quota's status",
             lambda: (lambda q: q if q.status and q.status.used else None)(
                 core.read_namespaced_resource_quota("small", ns)))
    assert q.status.hard == {"pods": "2", "limits.cpu": "400m"}, q.status
    assert q.status.used == {"pods": "0", "limits.cpu": "0"}, q.status

    # The LimitRange's default limit is what the quota counts.
    created = core.create_namespaced_pod(ns, pod("a"))
    assert created.spec.containers[0].resources.limits == {"cpu": "250m"}, created.spec
    assert created.metadata.annotations["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu request for container c; cpu limit for container c", \
        created.metadata.annotations
    used = core.read_namespaced_resource_quota("small", ns).status.used
    assert used == {"pods": "1", "limits.cpu": "250m"}, used

    try:
        core.create_namespaced_pod(ns, pod("b"))
        raise AssertionError("a pod over limits.cpu was created")
    except ApiException as e:
        assert e.status == 403, e
        body = json.loads(e.body)
        assert body["reason"] == "Forbidden", body
        assert body["message"] == ('pods "b" is forbidden: exceeded quota: small, '
                                   'requested: limits.cpu=250m, used: limits.cpu=250m, '
                                   'limited: limits.cpu=400m'), body["message"]

    core.create_namespaced_pod(ns, pod("b", cpu="150m"))
    used = core.read_namespaced_resource_quota("small", ns).status.used
    assert used == {"pods": "2", "limits.cpu": "400m"}, used

    # Deleting a pod releases what it held.
    core.delete_namespaced_pod("a", ns)
    wait("the quota to release pod a",
         lambda: core.read_namespaced_resource_quota("small", ns).status.used
         == {"pods": "1", "limits.cpu": "150m"})
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
