//! The `default/kubernetes` Service's endpoints with several replicas: each
//! replica serves its secure port on its own loopback address
//! (`127.0.0.2`, `.3`, `.4`, one port number for all, as kube's replicas
//! share the secure port), so the Endpoints and the EndpointSlice list
//! every replica's address, read through kubectl and the Python client. A
//! killed replica leaves within its lease TTL; one stopped with SIGTERM
//! leaves at once (its lease is removed on shutdown, well before the TTL).

use e2e::{eventually, run_python_client_with, unique_prefix, Server, StartError};
use serde_json::Value;
use std::net::TcpListener;
use std::time::{Duration, Instant};
use watchcache::testing::TestEtcd;

/// One port number free on each of `hosts`.
fn shared_free_port(hosts: &[&str]) -> u16 {
    'next: for _ in 0..20 {
        let first = TcpListener::bind((hosts[0], 0)).expect("bind");
        let port = first.local_addr().expect("addr").port();
        let mut held = vec![first];
        for h in &hosts[1..] {
            match TcpListener::bind((*h, port)) {
                Ok(l) => held.push(l),
                Err(_) => continue 'next,
            }
        }
        return port;
    }
    panic!("no port free on all of {hosts:?}");
}

/// Replicas of one cluster, replica `i` with its secure port on `hosts[i]`.
async fn replicas(hosts: &[&str], extra: &[&str]) -> (Vec<Server>, u16) {
    let etcd = TestEtcd::shared().await;
    let prefix = unique_prefix();
    'attempt: for _ in 0..4 {
        let port = shared_free_port(hosts);
        let mut servers = Vec::new();
        for h in hosts {
            let secure = format!("--secure-listen={h}:{port}");
            let mut flags = vec![secure.as_str()];
            flags.extend_from_slice(extra);
            match Server::try_start_with_prefix(&etcd.endpoint(), &prefix, &flags).await {
                Ok(s) => servers.push(s),
                Err(StartError::PortTaken(_)) => continue 'attempt,
                Err(StartError::Exited(log)) => panic!("replica exited:\n{log}"),
            }
        }
        return (servers, port);
    }
    panic!("could not start the replicas on one shared port");
}

/// The addresses and ports `kubectl get endpoints kubernetes` shows, after
/// checking kube's form (one subset, its label).
fn endpoint_addresses(s: &Server) -> Option<(Vec<String>, Value)> {
    let out = s.kubectl(&["get", "endpoints", "kubernetes", "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    let e: Value = serde_json::from_slice(&out.stdout).ok()?;
    assert_eq!(
        e["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"], "true",
        "{e}"
    );
    let subsets = e["subsets"].as_array()?;
    assert_eq!(subsets.len(), 1, "{e}");
    let ips = subsets[0]["addresses"]
        .as_array()?
        .iter()
        .map(|a| a["ip"].as_str().unwrap_or("").to_string())
        .collect();
    Some((ips, subsets[0]["ports"].clone()))
}

fn slice_addresses(s: &Server) -> Option<(Vec<String>, Value)> {
    let out = s.kubectl(&["get", "endpointslice", "kubernetes", "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    let es: Value = serde_json::from_slice(&out.stdout).ok()?;
    assert_eq!(
        es["metadata"]["labels"]["kubernetes.io/service-name"], "kubernetes",
        "{es}"
    );
    assert_eq!(es["addressType"], "IPv4", "{es}");
    let mut ips = Vec::new();
    for ep in es["endpoints"].as_array()? {
        assert_eq!(ep["conditions"]["ready"], true, "{es}");
        ips.push(ep["addresses"][0].as_str().unwrap_or("").to_string());
    }
    Some((ips, es["ports"].clone()))
}

/// Waits until both objects, read through `s`, list exactly `want`.
async fn wait_for_list(s: &Server, want: &[&str], port: u16, within: Duration) {
    let ports = serde_json::json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    eventually(
        &format!("the kubernetes endpoints to be {want:?}"),
        within,
        || {
            let (ips, p) = endpoint_addresses(s)?;
            let (slice_ips, slice_p) = slice_addresses(s)?;
            (ips == want && slice_ips == want && p == ports && slice_p == ports).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn endpoints_list_every_replica_and_a_killed_one_leaves_within_its_ttl() {
    let ttl = Duration::from_secs(4);
    let hosts = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let (mut servers, port) = replicas(&hosts, &["--endpoint-reconciler-lease-ttl=4s"]).await;
    wait_for_list(&servers[0], &hosts, port, Duration::from_secs(30)).await;
    // The Service sends its port 443 to the secure port.
    let svc = servers[0].get_json(&["service", "kubernetes"]);
    assert_eq!(svc["spec"]["ports"][0]["port"], 443, "{svc}");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port, "{svc}");
    // Every replica serves the same list.
    wait_for_list(&servers[1], &hosts, port, Duration::from_secs(5)).await;
    run_python_client_with(
        &servers[1],
        "endpoints_python.py",
        &[&hosts.join(","), &port.to_string()],
    );

    // A crash: no clean-up, the lease runs out.
    let killed = Instant::now();
    servers[2].kill();
    wait_for_list(
        &servers[0],
        &hosts[..2],
        port,
        ttl + Duration::from_secs(10),
    )
    .await;
    let took = killed.elapsed();
    eprintln!("the killed replica left the endpoints after {took:?} (lease TTL {ttl:?})");
    // The lease was renewed at most TTL before the kill; etcd checks
    // expiries every half second or so, and the replicas then rewrite the
    // list; a little slack for a loaded machine.
    assert!(
        took <= ttl + Duration::from_secs(3),
        "left after {took:?}, lease TTL {ttl:?}"
    );
    run_python_client_with(
        &servers[0],
        "endpoints_python.py",
        &[&hosts[..2].join(","), &port.to_string()],
    );
}

#[tokio::test]
async fn a_replica_stopped_cleanly_leaves_the_endpoints_at_once() {
    // The default TTL (15 s): leaving sooner than that shows the lease was
    // removed on shutdown, not left to expire.
    let hosts = ["127.0.0.5", "127.0.0.6"];
    let (mut servers, port) = replicas(&hosts, &[]).await;
    wait_for_list(&servers[0], &hosts, port, Duration::from_secs(30)).await;
    let stopped = Instant::now();
    let status = servers[1].stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    wait_for_list(&servers[0], &hosts[..1], port, Duration::from_secs(8)).await;
    eprintln!(
        "the stopped replica left the endpoints after {:?}",
        stopped.elapsed()
    );
    assert!(servers[1]
        .log()
        .contains("removed this replica's endpoint lease"));
}
