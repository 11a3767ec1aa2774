//! The ClusterIP and NodePort repair loops, end to end. Leaks of the kind a
//! crash between reservation and the Service write leaves are made by
//! writing to etcd directly under the server's prefix (an `IPAddress`
//! naming a Service that does not exist; a bitmap bit no Service holds),
//! and a Service's `IPAddress` is deleted behind its back; the leader's
//! repair loops release the leaks and put the missing allocations back,
//! which kubectl then sees.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use e2e::{eventually, eventually_async, stderr, Server};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use watchcache::testing::TestEtcd;

const SETTLE: Duration = Duration::from_secs(20);

async fn etcd() -> etcd_client::Client {
    let etcd = TestEtcd::shared().await;
    etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .expect("etcd")
}

async fn server(extra: &[&str]) -> Server {
    let etcd = TestEtcd::shared().await;
    let mut flags = vec!["--allocation-repair-interval=1s"];
    flags.extend_from_slice(extra);
    Server::start_on(&etcd.endpoint(), &flags).await
}

fn ipaddress_key(s: &Server, ip: &str) -> String {
    format!("{}/ipaddresses/{ip}", s.prefix)
}

/// An `IPAddress` as the allocator writes it, for the Service `ns/name`.
fn ipaddress(ip: &str, ns: &str, name: &str, created: &str) -> Value {
    json!({
        "kind": "IPAddress",
        "apiVersion": "networking.k8s.io/v1",
        "metadata": {
            "name": ip,
            "uid": format!("uid-{ip}"),
            "creationTimestamp": created,
            "labels": {
                "ipaddress.kubernetes.io/ip-family": "IPv4",
                "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
            },
        },
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": ns, "name": name}},
    })
}

fn exists(s: &Server, args: &[&str]) -> Option<bool> {
    let out = s.kubectl(args);
    if out.status.success() {
        Some(true)
    } else if stderr(&out).contains("NotFound") {
        Some(false)
    } else {
        None
    }
}

/// The reasons of the Events in `default` about `kind/name`.
fn event_reasons(s: &Server, kind: &str, name: &str) -> Vec<String> {
    let events = s.get_json(&["events", "-n", "default"]);
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["kind"] == kind && e["involvedObject"]["name"] == name)
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_leaked_cluster_ip_is_released_after_the_grace_and_a_young_one_is_kept() {
    let s = server(&[]).await;
    let mut etcd = etcd().await;
    // A crash after the address was taken and before the Service was
    // stored, long ago; and one a moment ago (maybe a create in flight).
    let old = ipaddress("10.96.5.5", "default", "ghost", "2020-01-01T00:00:00Z");
    let young_created = utc_now();
    let young = ipaddress("10.96.5.6", "default", "ghost", &young_created);
    for (ip, obj) in [("10.96.5.5", &old), ("10.96.5.6", &young)] {
        etcd.put(ipaddress_key(&s, ip), obj.to_string(), None)
            .await
            .expect("put");
    }
    eventually("the old leaked IPAddress to be released", SETTLE, || {
        exists(&s, &["get", "ipaddress", "10.96.5.5"])
            .map(|e| !e)?
            .then_some(())
    })
    .await;
    // The young one waits out kube's 60 s grace.
    assert_eq!(
        exists(&s, &["get", "ipaddress", "10.96.5.6"]),
        Some(true),
        "a young orphan must be kept for the grace period"
    );
    eventually("the leak's event", SETTLE, || {
        event_reasons(&s, "IPAddress", "10.96.5.5")
            .contains(&"IPAddressNotAllocated".to_string())
            .then_some(())
    })
    .await;
    // The address is free again: a Service can ask for it.
    s.kubectl_ok(&[
        "create",
        "service",
        "clusterip",
        "again",
        "--tcp=80:80",
        "--clusterip=10.96.5.5",
    ]);
}

/// Now, as the server writes creationTimestamp.
fn utc_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn a_services_ipaddress_deleted_behind_its_back_is_recreated() {
    let s = server(&[]).await;
    s.kubectl_ok(&["create", "service", "clusterip", "web", "--tcp=80:80"]);
    let svc = s.get_json(&["service", "web"]);
    let ip = svc["spec"]["clusterIP"]
        .as_str()
        .expect("clusterIP")
        .to_string();
    let mut etcd = etcd().await;
    let deleted = etcd
        .delete(ipaddress_key(&s, &ip), None)
        .await
        .expect("delete");
    assert_eq!(deleted.deleted(), 1, "the IPAddress was stored at the key");
    let back = eventually("the IPAddress to be recreated", SETTLE, || {
        let out = s.kubectl(&["get", "ipaddress", &ip, "-o", "json"]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).ok())
            .flatten()
    })
    .await;
    // kube's `group` is omitempty: the core group's "" reads back absent.
    assert_eq!(
        back["spec"]["parentRef"],
        json!({"resource": "services", "namespace": "default", "name": "web"}),
        "{back}"
    );
    assert_eq!(
        back["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"],
        "ipallocator.k8s.io"
    );
    eventually("the repair's event", SETTLE, || {
        event_reasons(&s, "Service", "web")
            .contains(&"ClusterIPNotAllocated".to_string())
            .then_some(())
    })
    .await;
    // And the address is held again: nobody else can take it.
    let (_, err) = s.kubectl_err(&[
        "create",
        "service",
        "clusterip",
        "thief",
        "--tcp=80:80",
        &format!("--clusterip={ip}"),
    ]);
    assert!(err.contains("provided IP is already allocated"), "{err}");
}

/// The ports the stored bitmap marks, for the range starting at `start`.
async fn bitmap_ports(etcd: &mut etcd_client::Client, key: &str, start: u16) -> BTreeSet<u16> {
    let resp = etcd.get(key, None).await.expect("get");
    let Some(kv) = resp.kvs().first() else {
        return BTreeSet::new();
    };
    let v: Value = serde_json::from_slice(kv.value()).expect("json");
    let data = STANDARD
        .decode(v["data"].as_str().unwrap_or(""))
        .expect("base64");
    // Big-endian bytes of a number whose bit i stands for port start + i.
    let mut out = BTreeSet::new();
    for (byte_index, b) in data.iter().rev().enumerate() {
        for bit in 0..8 {
            if b & (1 << bit) != 0 {
                out.insert(start + (byte_index * 8 + bit) as u16);
            }
        }
    }
    out
}

#[tokio::test]
async fn a_leaked_node_port_is_released_and_a_lost_one_is_put_back() {
    let s = server(&["--service-node-port-range=30000-30015"]).await;
    s.kubectl_ok(&[
        "create",
        "service",
        "nodeport",
        "np",
        "--tcp=80:80",
        "--node-port=30001",
    ]);
    let key = format!("{}/ranges/servicenodeports", s.prefix);
    let mut etcd = etcd().await;
    assert_eq!(
        bitmap_ports(&mut etcd, &key, 30000).await,
        BTreeSet::from([30001])
    );
    // A crash's leftovers: 30003 marked with no Service holding it, and
    // the Service's own 30001 lost (bit i is port 30000 + i: 1 << 3 = 8).
    let bitmap = json!({
        "apiVersion": "v1",
        "kind": "RangeAllocation",
        "metadata": {"name": "", "creationTimestamp": null},
        "range": "30000-30015",
        "data": STANDARD.encode([0x08u8]),
    });
    etcd.put(key.as_str(), bitmap.to_string(), None)
        .await
        .expect("put");
    eventually_async(
        "the bitmap to mark exactly the Service's port",
        SETTLE,
        || {
            let mut etcd = etcd.clone();
            let key = key.clone();
            async move {
                (bitmap_ports(&mut etcd, &key, 30000).await == BTreeSet::from([30001]))
                    .then_some(())
            }
        },
    )
    .await;
    // The pass writes the bitmap before it logs what it found.
    for line in [
        "the node port 30003 may have leaked",
        "the node port 30003 appears to have leaked: cleaning up",
        "the node port 30001 for service default/np is not allocated; repairing",
    ] {
        eventually(line, SETTLE, || s.log().contains(line).then_some(())).await;
    }
    eventually("the repair's event", SETTLE, || {
        event_reasons(&s, "Service", "np")
            .contains(&"PortNotAllocated".to_string())
            .then_some(())
    })
    .await;
    // Through kubectl: the leaked port can be had, the repaired one not.
    s.kubectl_ok(&[
        "create",
        "service",
        "nodeport",
        "reuse",
        "--tcp=81:81",
        "--node-port=30003",
    ]);
    let (_, err) = s.kubectl_err(&[
        "create",
        "service",
        "nodeport",
        "clash",
        "--tcp=82:82",
        "--node-port=30001",
    ]);
    assert!(err.contains("provided port is already allocated"), "{err}");
}
