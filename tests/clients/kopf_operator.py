"""A small kopf operator for tests/tests/operator_kopf.rs (issue 33).

Run as `kopf run --peering=e2e -n NS tests/clients/kopf_operator.py` with
KUBECONFIG pointing at the load balancer in front of two replicas. For each
`Widget` (widgets.ops.example.com) it:

- creates a ConfigMap `<name>-data` owned by the Widget (kopf.adopt sets the
  ownerReference, so the garbage collector removes it with the Widget);
- records an Event on the Widget (kopf.info);
- sets `status.phase` and `status.configMap` (through the status
  subresource, as kopf does when the CRD has one) and kopf's own
  `status.reconcile` (the handler's return value);
- on deletion (kopf's finalizer holds the Widget until it has run) writes
  a ConfigMap `<name>-deleted` that nobody owns, the trace that the delete
  handler ran before the Widget went.

The handlers use the Python `kubernetes` client, which kopf's own login
(through that client, when it is installed) has configured from KUBECONFIG.
"""

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    # Quick retries: the test restarts a replica under the operator.
    settings.watching.reconnect_backoff = 0.5
    settings.networking.error_backoffs = [0.5, 1, 2]


@kopf.on.create("ops.example.com", "v1", "widgets", backoff=1)
def reconcile(spec, name, namespace, body, patch, logger, **_):
    import kubernetes

    data = {"size": str(spec.get("size", 0)), "owner": name}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-data", "namespace": namespace},
        "data": data,
    }
    kopf.adopt(config_map, owner=body)
    api = kubernetes.client.CoreV1Api()
    try:
        api.create_namespaced_config_map(namespace, config_map)
    except kubernetes.client.ApiException as e:
        # A retried handler finds the ConfigMap of its earlier attempt.
        if e.status != 409:
            raise
    kopf.info(body, reason="ConfigMapCreated", message=f"created {name}-data")
    patch.status["phase"] = "Ready"
    patch.status["configMap"] = f"{name}-data"
    logger.info(f"reconciled {namespace}/{name}")
    return {"size": spec.get("size", 0)}


@kopf.on.delete("ops.example.com", "v1", "widgets", backoff=1)
def cleanup(name, namespace, logger, **_):
    import kubernetes

    api = kubernetes.client.CoreV1Api()
    trace = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-deleted", "namespace": namespace},
        "data": {"widget": name},
    }
    try:
        api.create_namespaced_config_map(namespace, trace)
    except kubernetes.client.ApiException as e:
        if e.status != 409:
            raise
    logger.info(f"cleaned up {namespace}/{name}")

