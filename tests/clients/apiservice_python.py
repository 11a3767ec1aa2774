"""An APIService through the Python `kubernetes` client (a client nobody
here wrote), as its own e2e tests do it: `utils.create_from_yaml` creates a
remote APIService from a YAML file, ApiregistrationV1Api reads it back and
waits for the availability controller's `Available` condition (False:
the Service it names does not exist), then deletes it.

Run by tests/tests/aggregation.rs with the server's URL as the only
argument; exits non-zero (an assertion or an ApiException) on any mismatch.
"""
import os
import sys
import tempfile
import time

from kubernetes import client, utils

YAML = """\
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.python.example.com
spec:
  group: python.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
  service:
    namespace: default
    name: no-such-service
    port: 443
"""


def main(url):
    cfg = client.Configuration()
    cfg.host = url
    api = client.ApiClient(cfg)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(YAML)
        path = f.name
    try:
        created = utils.create_from_yaml(api, path)
    finally:
        os.unlink(path)
    flat = [o for group in created for o in (group if isinstance(group, list) else [group])]
    assert [o.metadata.name for o in flat] == ["v1alpha1.python.example.com"], created

    reg = client.ApiregistrationV1Api(api)
    deadline = time.time() + 60
    cond = None
    while time.time() < deadline:
        svc = reg.read_api_service("v1alpha1.python.example.com")
        conds = [c for c in (svc.status.conditions or []) if c.type == "Available"]
        if conds:
            cond = conds[0]
            break
        time.sleep(0.2)
    assert cond is not None, "no Available condition"
    assert cond.status == "False", cond
    assert cond.reason == "ServiceNotFound", cond
    assert cond.message == 'service/no-such-service in "default" is not present', cond
    assert svc.spec.service.port == 443
    assert svc.spec.insecure_skip_tls_verify is True

    reg.delete_api_service("v1alpha1.python.example.com")
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
