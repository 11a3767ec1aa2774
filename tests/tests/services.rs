//! Service ClusterIP and NodePort allocation, end to end: kubectl and raw
//! HTTP against real servers on a real etcd, two replicas racing for one
//! range, and Event expiry through etcd leases.

use e2e::{eventually_async, unique_prefix, Server};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::time::Duration;
use watchcache::testing::TestEtcd;

fn service(name: &str, spec: Value) -> Vec<u8> {
    let mut spec = spec;
    if spec.get("ports").is_none() {
        spec["ports"] = json!([{"port": 80, "targetPort": 8080, "protocol": "TCP"}]);
    }
    if spec.get("selector").is_none() {
        spec["selector"] = json!({"app": name});
    }
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

async fn post(s: &Server, path: &str, body: &[u8]) -> (u16, Value) {
    let r = s
        .http("POST", path, &[("Content-Type", "application/json")], body)
        .await
        .expect("request");
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

async fn create(s: &Server, name: &str, spec: Value) -> (u16, Value) {
    post(
        s,
        "/api/v1/namespaces/default/services",
        &service(name, spec),
    )
    .await
}

async fn get(s: &Server, path: &str) -> (u16, Value) {
    let r = s.http("GET", path, &[], b"").await.expect("request");
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

async fn delete(s: &Server, name: &str) -> u16 {
    s.http(
        "DELETE",
        &format!("/api/v1/namespaces/default/services/{name}"),
        &[],
        b"",
    )
    .await
    .expect("request")
    .status
}

fn in_default_range(ip: &str) -> bool {
    let ip: Ipv4Addr = ip.parse().expect("an IPv4 address");
    let n = u32::from(ip);
    let base = u32::from(Ipv4Addr::new(10, 96, 0, 0));
    n > base + 1 && n < base + (1 << 20) - 1
}

fn message(status: &Value) -> &str {
    status["message"].as_str().unwrap_or("")
}

#[tokio::test]
async fn cluster_ips_are_allocated_held_and_released() {
    let s = Server::start().await;

    // The kubernetes Service holds the first address, as an IPAddress.
    let (code, k) = get(&s, "/api/v1/namespaces/default/services/kubernetes").await;
    assert_eq!(code, 200);
    assert_eq!(k["spec"]["clusterIP"], "10.96.0.1", "{k}");
    let (code, cidr) = get(&s, "/apis/networking.k8s.io/v1/servicecidrs/kubernetes").await;
    assert_eq!(code, 200, "{cidr}");
    assert_eq!(cidr["spec"]["cidrs"], json!(["10.96.0.0/12"]));

    let (code, svc) = create(&s, "web", json!({})).await;
    assert_eq!(code, 201, "{svc}");
    let ip = svc["spec"]["clusterIP"]
        .as_str()
        .expect("clusterIP")
        .to_string();
    assert!(in_default_range(&ip), "{ip}");
    assert_eq!(svc["spec"]["clusterIPs"], json!([ip]));
    assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv4"]));
    assert_eq!(svc["spec"]["ipFamilyPolicy"], "SingleStack");
    let (code, addr) = get(&s, &format!("/apis/networking.k8s.io/v1/ipaddresses/{ip}")).await;
    assert_eq!(code, 200, "{addr}");
    // kube's `group` is omitempty: stored as protobuf, the core group's ""
    // reads back absent, as kube-apiserver serves it.
    assert_eq!(
        addr["spec"]["parentRef"],
        json!({"resource": "services", "namespace": "default", "name": "web"})
    );
    assert_eq!(
        addr["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"],
        "ipallocator.k8s.io"
    );

    // Asking for a held address, or one outside the range: 422, kube's words.
    let (code, st) = create(&s, "copy", json!({"clusterIP": ip})).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        message(&st),
        format!(
            "Service \"copy\" is invalid: spec.clusterIPs: Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: provided IP is already allocated"
        )
    );
    let (code, st) = create(&s, "outside", json!({"clusterIP": "192.168.7.7"})).await;
    assert_eq!(code, 422, "{st}");
    assert!(
        message(&st).ends_with("failed to allocate IP 192.168.7.7: provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12"),
        "{st}"
    );
    let (code, _) = get(&s, "/api/v1/namespaces/default/services/copy").await;
    assert_eq!(code, 404, "a refused Service is not stored");

    // A dry run takes nothing.
    let (code, dry) = post(
        &s,
        "/api/v1/namespaces/default/services?dryRun=All",
        &service("dry", json!({"clusterIP": "10.96.3.3"})),
    )
    .await;
    assert_eq!(code, 201, "{dry}");
    assert_eq!(dry["spec"]["clusterIP"], "10.96.3.3");
    let (code, _) = get(&s, "/apis/networking.k8s.io/v1/ipaddresses/10.96.3.3").await;
    assert_eq!(code, 404);
    let (code, st) = create(&s, "chosen", json!({"clusterIP": "10.96.3.3"})).await;
    assert_eq!(code, 201, "{st}");

    // An update that leaves clusterIP out keeps it (kubectl replace).
    let (code, replaced) = {
        let r = s
            .http(
                "PUT",
                "/api/v1/namespaces/default/services/chosen",
                &[("Content-Type", "application/json")],
                &service(
                    "chosen",
                    json!({"ports": [{"port": 81, "protocol": "TCP"}]}),
                ),
            )
            .await
            .unwrap();
        (r.status, serde_json::from_slice::<Value>(&r.body).unwrap())
    };
    assert_eq!(code, 200, "{replaced}");
    assert_eq!(replaced["spec"]["clusterIP"], "10.96.3.3");

    // Delete frees the address: it can be had again at once.
    assert_eq!(delete(&s, "web").await, 200);
    let (code, _) = get(&s, &format!("/apis/networking.k8s.io/v1/ipaddresses/{ip}")).await;
    assert_eq!(code, 404, "the IPAddress goes with its Service");
    let (code, again) = create(&s, "again", json!({"clusterIP": ip})).await;
    assert_eq!(code, 201, "{again}");

    // Turning into an ExternalName Service frees the address too.
    let r = s
        .http(
            "PATCH",
            "/api/v1/namespaces/default/services/again",
            &[("Content-Type", "application/merge-patch+json")],
            br#"{"spec": {"type": "ExternalName", "externalName": "example.com"}}"#,
        )
        .await
        .unwrap();
    let external: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 200, "{external}");
    assert!(external["spec"].get("clusterIP").is_none(), "{external}");
    let (code, _) = get(&s, &format!("/apis/networking.k8s.io/v1/ipaddresses/{ip}")).await;
    assert_eq!(code, 404);

    // Headless Services get no address.
    let (code, headless) = create(&s, "headless", json!({"clusterIP": "None"})).await;
    assert_eq!(code, 201, "{headless}");
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
}

#[tokio::test]
async fn node_ports_are_allocated_and_released() {
    let s = Server::start().await;

    // kubectl's own generator.
    let out = s.kubectl_ok(&["create", "service", "nodeport", "np", "--tcp=80:8080"]);
    assert_eq!(out.trim(), "service/np created");
    let svc = s.get_json(&["service", "np"]);
    let port = svc["spec"]["ports"][0]["nodePort"]
        .as_u64()
        .expect("nodePort");
    assert!((30000..=32767).contains(&port), "{svc}");

    // The same port again, and one outside the range: 422.
    let (code, st) = create(
        &s,
        "clash",
        json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP", "nodePort": port}]}),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        message(&st),
        format!("Service \"clash\" is invalid: spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated")
    );
    let (code, st) = create(
        &s,
        "low",
        json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 8080}]}),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(
        message(&st),
        "Service \"low\" is invalid: spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
    );

    // TCP and UDP of one port number share one node port.
    let (code, dns) = create(
        &s,
        "dns",
        json!({"type": "NodePort", "ports": [
            {"name": "tcp", "port": 53, "protocol": "TCP"},
            {"name": "udp", "port": 53, "protocol": "UDP"}]}),
    )
    .await;
    assert_eq!(code, 201, "{dns}");
    assert_eq!(
        dns["spec"]["ports"][0]["nodePort"], dns["spec"]["ports"][1]["nodePort"],
        "{dns}"
    );

    // Back to ClusterIP: the node port is dropped and free again.
    let r = s
        .http(
            "PATCH",
            "/api/v1/namespaces/default/services/np",
            &[("Content-Type", "application/merge-patch+json")],
            br#"{"spec": {"type": "ClusterIP"}}"#,
        )
        .await
        .unwrap();
    let back: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(r.status, 200, "{back}");
    assert!(back["spec"]["ports"][0].get("nodePort").is_none(), "{back}");
    let (code, taken) = create(
        &s,
        "taker",
        json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP", "nodePort": port}]}),
    )
    .await;
    assert_eq!(code, 201, "{taken}");

    // Delete frees it as well.
    assert_eq!(delete(&s, "taker").await, 200);
    let (code, st) = create(
        &s,
        "taker2",
        json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP", "nodePort": port}]}),
    )
    .await;
    assert_eq!(code, 201, "{st}");
}

/// Creates NodePort Services `svc-<i>` for every `i` of `range` at once,
/// alternating between `servers`.
async fn node_port_services(
    servers: &[&Server],
    range: std::ops::Range<usize>,
) -> Vec<(u16, Value)> {
    let creates = range.map(|i| {
        let s = servers[i % servers.len()];
        async move {
            let spec = json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]});
            create(s, &format!("svc-{i}"), spec).await
        }
    });
    futures_util::future::join_all(creates).await
}

/// Two replicas of one cluster create Services at the same time from a
/// small range: no address and no port is handed out twice.
#[tokio::test]
async fn concurrent_creates_through_two_replicas_never_share() {
    let etcd = TestEtcd::shared().await.endpoint();
    let prefix = unique_prefix();
    let flags = [
        "--service-cluster-ip-range",
        "10.40.0.0/26",
        "--service-node-port-range",
        "30000-30049",
    ];
    let a = Server::start_with_prefix(&etcd, &prefix, &flags).await;
    let b = Server::start_with_prefix(&etcd, &prefix, &flags).await;
    let servers = [&a, &b];
    let results = node_port_services(&servers, 0..40).await;
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for (code, svc) in &results {
        assert_eq!(*code, 201, "{svc}");
        let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
        let n = u32::from(ip.parse::<Ipv4Addr>().unwrap());
        assert!(
            n > u32::from(Ipv4Addr::new(10, 40, 0, 1))
                && n < u32::from(Ipv4Addr::new(10, 40, 0, 63)),
            "{ip} is outside 10.40.0.0/26 or is the first address"
        );
        assert!(ips.insert(ip.clone()), "{ip} handed out twice");
        let p = svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
        assert!(ports.insert(p), "node port {p} handed out twice");
    }
    // What etcd holds agrees: one IPAddress per Service (plus kubernetes').
    let (_, list) = get(&a, "/apis/networking.k8s.io/v1/ipaddresses").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 41, "{list}");
    // The port range has 50 ports; 10 are left.
    let results = node_port_services(&servers, 40..52).await;
    let ok = results.iter().filter(|(c, _)| *c == 201).count();
    assert_eq!(ok, 10, "{results:?}");
    for (code, st) in results.iter().filter(|(c, _)| *c != 201) {
        assert_eq!(*code, 500, "{st}");
        assert!(
            message(st).contains("failed to allocate a nodePort: range is full"),
            "{st}"
        );
    }
    // The refused creates gave their addresses back: 51 Services, 51 IPAddresses.
    let (_, list) = get(&a, "/apis/networking.k8s.io/v1/ipaddresses").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 51, "{list}");
}

#[tokio::test]
async fn events_expire_after_the_event_ttl() {
    let etcd = TestEtcd::shared().await.endpoint();
    let s = Server::start_on(&etcd, &["--event-ttl", "2s"]).await;
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "short-lived"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Test", "message": "goes away", "type": "Normal",
    });
    let (code, created) = post(
        &s,
        "/api/v1/namespaces/default/events",
        &serde_json::to_vec(&event).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let (code, _) = get(&s, "/api/v1/namespaces/default/events/short-lived").await;
    assert_eq!(code, 200);
    eventually_async("the event expires", Duration::from_secs(20), || async {
        let (code, _) = get(&s, "/api/v1/namespaces/default/events/short-lived").await;
        (code == 404).then_some(())
    })
    .await;
}

/// Changing `spec.clusterIP` alone (a patch, or a PUT of the object read
/// back): `clusterIPs` follows it first, as kube's update does, so the
/// answer is kube's immutability error on `spec.clusterIPs[0]`, and
/// nothing changes.
#[tokio::test]
async fn changing_the_cluster_ip_is_refused_as_immutable() {
    let s = Server::start().await;
    let (code, svc) = create(&s, "fixed", json!({"clusterIP": "10.96.5.5"})).await;
    assert_eq!(code, 201, "{svc}");
    let want = r#"spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set"#;

    // kubectl patch (strategic merge): kube's words on stderr.
    let (_, err) = s.kubectl_err(&[
        "patch",
        "service",
        "fixed",
        "-p",
        r#"{"spec":{"clusterIP":"10.96.0.99"}}"#,
    ]);
    assert!(
        err.contains(&format!(r#"The Service "fixed" is invalid: {want}"#)),
        "{err}"
    );

    // A PUT of the object read back with only clusterIP changed.
    let path = "/api/v1/namespaces/default/services/fixed";
    let (_, mut current) = get(&s, path).await;
    current["spec"]["clusterIP"] = json!("10.96.0.99");
    let r = s
        .http(
            "PUT",
            path,
            &[("Content-Type", "application/json")],
            &serde_json::to_vec(&current).unwrap(),
        )
        .await
        .expect("request");
    let st: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    assert_eq!(r.status, 422, "{st}");
    assert_eq!(st["reason"], "Invalid", "{st}");
    assert_eq!(
        message(&st),
        format!(r#"Service "fixed" is invalid: {want}"#)
    );
    assert_eq!(
        st["details"]["causes"],
        json!([{
            "reason": "FieldValueInvalid",
            "message": r#"Invalid value: ["10.96.0.99"]: may not change once set"#,
            "field": "spec.clusterIPs[0]",
        }]),
        "{st}"
    );

    // Nothing changed, nothing was allocated.
    let (_, after) = get(&s, path).await;
    assert_eq!(after["spec"]["clusterIP"], "10.96.5.5");
    assert_eq!(after["spec"]["clusterIPs"], json!(["10.96.5.5"]));
    assert_eq!(
        after["metadata"]["resourceVersion"],
        svc["metadata"]["resourceVersion"]
    );
    let (code, _) = get(&s, "/apis/networking.k8s.io/v1/ipaddresses/10.96.0.99").await;
    assert_eq!(code, 404);
}
