"""The `default/kubernetes` Endpoints and EndpointSlice through the Python
`kubernetes` client: both list the same replicas, in order, ready, on the
`https` TCP port, with kube's labels.

Run by tests/tests/kubernetes_endpoints.rs with the server's URL and the
expected addresses (comma-separated) and port; exits non-zero on any
mismatch.
"""
import sys

from kubernetes import client


def main(url, expected, port):
    conf = client.Configuration()
    conf.host = url
    api = client.ApiClient(conf)
    core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)

    ep = core.read_namespaced_endpoints("kubernetes", "default")
    assert ep.metadata.labels == {"endpointslice.kubernetes.io/skip-mirror": "true"}, ep.metadata.labels
    assert len(ep.subsets) == 1, ep.subsets
    subset = ep.subsets[0]
    ips = [a.ip for a in subset.addresses]
    assert ips == expected, (ips, expected)
    assert [(p.name, p.port, p.protocol) for p in subset.ports] == [("https", port, "TCP")], subset.ports

    es = discovery.read_namespaced_endpoint_slice("kubernetes", "default")
    assert es.metadata.labels == {"kubernetes.io/service-name": "kubernetes"}, es.metadata.labels
    assert es.address_type == "IPv4", es.address_type
    assert [e.addresses for e in es.endpoints] == [[ip] for ip in expected], es.endpoints
    assert all(e.conditions.ready for e in es.endpoints), es.endpoints
    assert [(p.name, p.port, p.protocol) for p in es.ports] == [("https", port, "TCP")], es.ports
    print("endpoints:", ips)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]))
