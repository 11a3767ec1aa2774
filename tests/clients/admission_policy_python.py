"""A ValidatingAdmissionPolicy denial seen through the Python `kubernetes`
client (a client nobody here wrote): the create fails with an ApiException
carrying kube's Status (403 from the policy's reason, the denial as the
only cause).

Run by tests/tests/admission_policy.rs with the server's URL as the only
argument, while the `from-params` binding has no param (every Deployment
create is denied).
"""
import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException


def main(url):
    conf = client.Configuration()
    conf.host = url
    apps = client.AppsV1Api(client.ApiClient(conf))
    try:
        apps.create_namespaced_deployment("default", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "py"},
            "spec": {"selector": {"matchLabels": {"app": "py"}},
                     "template": {"metadata": {"labels": {"app": "py"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        })
    except ApiException as e:
        status = json.loads(e.body)
        assert e.status == 422, (e.status, status)
        assert status["reason"] == "Invalid", status
        causes = status["details"]["causes"]
        assert len(causes) == 1, causes
        assert causes[0]["message"].startswith(
            "ValidatingAdmissionPolicy 'from-params' with binding 'from-params' denied request:"), causes
        print("ok")
        return
    raise AssertionError("the create was allowed")


if __name__ == "__main__":
    main(sys.argv[1])
