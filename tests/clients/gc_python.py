"""Garbage collection and namespace deletion through the Python
`kubernetes` client (a client nobody here wrote), with kube's default
propagation per kind: a batch/v1 Job and a v1 ReplicationController orphan
their dependents when the delete names no policy, a Deployment's
dependents are collected, and an explicit `propagation_policy` wins.

Run by tests/tests/garbage_collection.rs with the server's URL as the only
argument; exits non-zero (an assertion or an ApiException) on any mismatch.
"""
import sys
import time

from kubernetes import client
from kubernetes.client.rest import ApiException

NS = "default"


def eventually(what, check, timeout=20.0):
    deadline = time.time() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def gone(read):
    try:
        read()
        return False
    except ApiException as e:
        if e.status == 404:
            return True
        raise


def template(label):
    return {
        "metadata": {"labels": {"app": label}},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }


def owned_pod(core, name, owner):
    return core.create_namespaced_pod(NS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    })


def ref(api_version, kind, obj):
    return {"apiVersion": api_version, "kind": kind,
            "name": obj.metadata.name, "uid": obj.metadata.uid,
            "controller": True, "blockOwnerDeletion": True}


def main(url):
    conf = client.Configuration()
    conf.host = url
    api = client.ApiClient(conf)
    core, apps, batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)

    # batch/v1 Job: no policy given -> its pods are orphaned.
    job = batch.create_namespaced_job(NS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j1"},
        "spec": {"template": template("j1")},
    })
    owned_pod(core, "j1-pod", ref("batch/v1", "Job", job))
    batch.delete_namespaced_job("j1", NS)
    eventually("job j1 to go", lambda: gone(lambda: batch.read_namespaced_job("j1", NS)))
    pod = eventually("j1-pod to be released",
                     lambda: (lambda p: p if not p.metadata.owner_references else None)(
                         core.read_namespaced_pod("j1-pod", NS)))
    assert pod.metadata.deletion_timestamp is None, pod.metadata

    # The same with an explicit Background policy -> collected.
    job = batch.create_namespaced_job(NS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j2"},
        "spec": {"template": template("j2")},
    })
    owned_pod(core, "j2-pod", ref("batch/v1", "Job", job))
    batch.delete_namespaced_job(
        "j2", NS, body=client.V1DeleteOptions(propagation_policy="Background"))
    eventually("j2-pod to be collected",
               lambda: gone(lambda: core.read_namespaced_pod("j2-pod", NS)))

    # v1 ReplicationController: orphans by default too.
    rc = core.create_namespaced_replication_controller(NS, {
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {"replicas": 0, "selector": {"app": "rc"}, "template": {
            "metadata": {"labels": {"app": "rc"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}},
    })
    owned_pod(core, "rc-pod", ref("v1", "ReplicationController", rc))
    core.delete_namespaced_replication_controller("rc", NS)
    eventually("rc-pod to be released",
               lambda: not core.read_namespaced_pod("rc-pod", NS).metadata.owner_references)

    # apps/v1 Deployment: its ReplicaSet is collected.
    dep = apps.create_namespaced_deployment(NS, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    })
    apps.create_namespaced_replica_set(NS, {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "ownerReferences": [ref("apps/v1", "Deployment", dep)]},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    })
    apps.delete_namespaced_deployment("web", NS)
    eventually("the replica set to be collected",
               lambda: gone(lambda: apps.read_namespaced_replica_set("web-1", NS)))

    # Foreground through the client: the owner is still readable, marked.
    cm = core.create_namespaced_config_map(NS, {"metadata": {"name": "fg"}})
    core.create_namespaced_config_map(NS, {"metadata": {
        "name": "fg-dep", "finalizers": ["example.com/hold"],
        "ownerReferences": [ref("v1", "ConfigMap", cm)]}})
    core.delete_namespaced_config_map(
        "fg", NS, body=client.V1DeleteOptions(propagation_policy="Foreground"))
    owner = core.read_namespaced_config_map("fg", NS)
    assert owner.metadata.finalizers == ["foregroundDeletion"], owner.metadata
    eventually("fg-dep to be deleting",
               lambda: core.read_namespaced_config_map("fg-dep", NS).metadata.deletion_timestamp)
    core.patch_namespaced_config_map("fg-dep", NS, {"metadata": {"finalizers": None}})
    eventually("the foreground owner to go",
               lambda: gone(lambda: core.read_namespaced_config_map("fg", NS)))
    # Namespace deletion: Terminating, emptied, then gone.
    core.create_namespace({"metadata": {"name": "py-doomed"}})
    core.create_namespaced_config_map("py-doomed", {"metadata": {"name": "c"}})
    core.delete_namespace("py-doomed")
    ns = None
    try:
        ns = core.read_namespace("py-doomed")
    except ApiException as e:
        assert e.status == 404, e
    if ns is not None:
        assert ns.status.phase == "Terminating", ns.status
    eventually("the namespace to go",
               lambda: gone(lambda: core.read_namespace("py-doomed")))
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
