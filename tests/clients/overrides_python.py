"""One API over three etcd clusters, through the Python `kubernetes` client:
ConfigMaps (main cluster), Events (events cluster) and Leases (leases
cluster) are created, listed and read alike; a watch on events from a
list's resourceVersion delivers the event created after it; and the
resourceVersions of events and leases are their own cluster's revisions
(read back with etcdctl).

Run by tests/tests/etcd_overrides.rs with the server's URL, the events
cluster's endpoint, the leases cluster's endpoint and the server's etcd
prefix; exits non-zero (an assertion or an ApiException) on any mismatch.
"""
import json
import os
import subprocess
import sys

from kubernetes import client, watch

NS = "pyoverrides"


def etcd_get(endpoint, key):
    """(mod revision of key or -1, the cluster's revision) from etcdctl."""
    out = subprocess.run(
        ["etcdctl", "--endpoints", endpoint, "get", "-w", "json", key],
        env={**os.environ, "ETCDCTL_API": "3"},
        check=True, capture_output=True).stdout
    v = json.loads(out)
    kvs = v.get("kvs") or [{}]
    return kvs[0].get("mod_revision", -1), v["header"]["revision"]


def event(name):
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm",
                           "namespace": NS},
        "reason": "Tested", "message": "from python", "type": "Normal",
    }


def main(url, events_etcd, leases_etcd, prefix):
    conf = client.Configuration()
    conf.host = url
    api = client.ApiClient(conf)
    core = client.CoreV1Api(api)
    coord = client.CoordinationV1Api(api)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})

    cm = core.create_namespaced_config_map(NS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
        "data": {"k": "v"}})
    ev1 = core.create_namespaced_event(NS, event("ev1"))
    lease = coord.create_namespaced_lease(NS, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
        "spec": {"holderIdentity": "python", "leaseDurationSeconds": 30}})

    # One API: each is read and listed where the client expects it.
    assert core.read_namespaced_config_map("cm", NS).data == {"k": "v"}
    assert core.read_namespaced_event("ev1", NS).message == "from python"
    assert coord.read_namespaced_lease("l1", NS).spec.holder_identity == "python"
    cms = core.list_namespaced_config_map(NS)
    events = core.list_namespaced_event(NS)
    leases = coord.list_namespaced_lease(NS)
    assert "cm" in [i.metadata.name for i in cms.items], cms
    assert [i.metadata.name for i in events.items] == ["ev1"], events
    assert [i.metadata.name for i in leases.items] == ["l1"], leases

    # resourceVersions are the owning cluster's revisions.
    ev_rev, ev_cluster = etcd_get(events_etcd, f"{prefix}/events/{NS}/ev1")
    assert int(ev1.metadata.resource_version) == ev_rev, (ev1.metadata, ev_rev)
    l_rev, _ = etcd_get(leases_etcd, f"{prefix}/leases/{NS}/l1")
    assert int(lease.metadata.resource_version) == l_rev, (lease.metadata, l_rev)
    assert int(events.metadata.resource_version) <= ev_cluster, (events.metadata, ev_cluster)
    # The main cluster is far ahead (bootstrap wrote there), so the events
    # list cannot be at main's revision.
    assert int(events.metadata.resource_version) < int(cm.metadata.resource_version), \
        (events.metadata, cm.metadata)
    # Nothing of the main cluster's resources is on the events cluster.
    assert etcd_get(events_etcd, f"{prefix}/configmaps/{NS}/cm")[0] == -1

    # A watch on events from the list's resourceVersion: the next event
    # arrives, at its events-cluster revision, with no ERROR first.
    ev2 = core.create_namespaced_event(NS, event("ev2"))
    seen = []
    w = watch.Watch()
    for e in w.stream(core.list_namespaced_event, NS,
                      resource_version=events.metadata.resource_version,
                      timeout_seconds=10):
        assert e["type"] != "ERROR", e
        seen.append((e["type"], e["object"].metadata.name, e["object"].metadata.resource_version))
        if e["object"].metadata.name == "ev2":
            w.stop()
    assert seen == [("ADDED", "ev2", ev2.metadata.resource_version)], seen
    assert int(ev2.metadata.resource_version) == \
        etcd_get(events_etcd, f"{prefix}/events/{NS}/ev2")[0], ev2.metadata
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:5])
