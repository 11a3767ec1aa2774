"""Custom resources through the Python `kubernetes` client (a client nobody
here wrote): ApiextensionsV1Api creates a CRD, CustomObjectsApi creates,
reads, lists, patches (spec and /status), scales and deletes custom objects.

Run by tests/tests/crd.rs with the server's URL as the only argument; exits
non-zero (an assertion or an ApiException) on any mismatch.
"""
import sys
import time

from kubernetes import client

GROUP, VERSION, PLURAL = "python.example.com", "v1", "gizmos"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "gizmo", "kind": "Gizmo", "shortNames": ["gz"]},
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas"}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "string"},
                        "replicas": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"},
                        "replicas": {"type": "integer"}}},
                },
            }},
        }],
    },
}


def main(url):
    cfg = client.Configuration()
    cfg.host = url
    api = client.ApiClient(cfg)
    ext = client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)

    ext.create_custom_resource_definition(CRD)
    deadline = time.time() + 20
    while True:
        crd = ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        status = crd.status
        conds = {c.type: c.status for c in ((status and status.conditions) or [])}
        if conds.get("Established") == "True":
            break
        assert time.time() < deadline, f"not established: {conds}"
        time.sleep(0.1)
    assert crd.status.accepted_names.kind == "Gizmo"
    assert crd.status.stored_versions == [VERSION]

    # The CRD's group is served: wait for this replica's registry.
    deadline = time.time() + 20
    while True:
        try:
            custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
            break
        except client.ApiException as e:
            assert e.status == 404 and time.time() < deadline, e
            time.sleep(0.1)

    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gizmo",
            "metadata": {"name": "g1", "labels": {"tier": "a"}},
            "spec": {"size": "large", "replicas": 1},
            "status": {"phase": "ignored on create"}}
    made = custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    assert made["metadata"]["generation"] == 1, made
    assert "status" not in made, "status is the /status subresource's"

    got = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
    assert got["spec"] == {"size": "large", "replicas": 1}, got

    listed = custom.list_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, label_selector="tier=a")
    assert listed["kind"] == "GizmoList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["g1"]
    none = custom.list_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, label_selector="tier=b")
    assert none["items"] == []

    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "g1", {"spec": {"size": "small"}})
    assert patched["spec"]["size"] == "small"
    assert patched["metadata"]["generation"] == 2

    st = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "g1", {"status": {"phase": "Ready", "replicas": 1}})
    assert st["status"]["phase"] == "Ready"
    assert st["metadata"]["generation"] == 2, "a status write leaves generation alone"

    scale = custom.get_namespaced_custom_object_scale(GROUP, VERSION, "default", PLURAL, "g1")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1", scale
    assert scale["spec"]["replicas"] == 1 and scale["status"]["replicas"] == 1
    custom.patch_namespaced_custom_object_scale(
        GROUP, VERSION, "default", PLURAL, "g1", {"spec": {"replicas": 4}})
    got = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
    assert got["spec"]["replicas"] == 4

    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
    try:
        custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
        raise AssertionError("g1 still there")
    except client.ApiException as e:
        assert e.status == 404, e

    ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    deadline = time.time() + 20
    while True:
        try:
            ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        except client.ApiException as e:
            assert e.status == 404, e
            break
        assert time.time() < deadline, "CRD not removed"
        time.sleep(0.1)
    print("python CustomObjectsApi: ok")


if __name__ == "__main__":
    main(sys.argv[1])
