"""PodSecurity seen through the Python `kubernetes` client: in a namespace
labelled `pod-security.kubernetes.io/enforce=restricted` a privileged pod
is refused with an ApiException carrying kube's 403 Status, and a pod that
meets the restricted level is created.

Run by tests/tests/pod_security.rs with the server's URL and the
namespace as arguments.
"""
import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException


def main(url, namespace):
    conf = client.Configuration()
    conf.host = url
    core = client.CoreV1Api(client.ApiClient(conf))
    try:
        core.create_namespaced_pod(namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "py-priv"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "securityContext": {"privileged": True}}]},
        })
        raise AssertionError("the privileged pod was allowed")
    except ApiException as e:
        status = json.loads(e.body)
        assert e.status == 403, (e.status, status)
        assert status["reason"] == "Forbidden", status
        assert status["message"].startswith(
            'pods "py-priv" is forbidden: violates PodSecurity "restricted:latest": '
            'privileged (container "c" must not set securityContext.privileged=true), '
            'allowPrivilegeEscalation != false'), status
        assert status["details"]["kind"] == "pods", status
    created = core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "py-ok"},
        "spec": {
            "securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "busybox",
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}}}]},
    })
    assert created.metadata.name == "py-ok"
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
