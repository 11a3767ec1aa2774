//! Moving a resource to an etcd cluster of its own, the documented way
//! (README, "Moving a resource"): stop the server, copy the resource's keys
//! with `tools/etcd_move.py`, start it again with `--etcd-servers-overrides`.
//! Values arrive byte for byte, leased keys keep a lease with the TTL left,
//! the tool refuses to overwrite and its verify catches a corrupted value.

use e2e::cluster::EtcdCluster;
use e2e::Server;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

/// Runs `tools/etcd_move.py` with `args`.
fn etcd_move(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tools/etcd_move.py"
        ))
        .args(args)
        .output()
        .expect("python3 runs")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint])
        .args(args)
        .output()
        .expect("etcdctl runs");
    assert!(out.status.success(), "etcdctl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every key under `prefix` → (value as etcd's base64, lease id, mod
/// revision), as etcdctl reads them.
fn etcd_kvs(endpoint: &str, prefix: &str) -> BTreeMap<String, (String, i64, i64)> {
    let v: Value = serde_json::from_str(&etcdctl(
        endpoint,
        &["get", "--prefix", "-w", "json", prefix],
    ))
    .expect("etcdctl json");
    let kvs = v["kvs"].as_array().cloned().unwrap_or_default();
    kvs.iter()
        .map(|kv| {
            let key = kv["key"].as_str().expect("key");
            let key = String::from_utf8(base64_decode(key)).expect("utf-8 key");
            let value = kv["value"].as_str().unwrap_or_default().to_string();
            let lease = kv["lease"].as_i64().unwrap_or(0);
            (
                key,
                (value, lease, kv["mod_revision"].as_i64().unwrap_or(0)),
            )
        })
        .collect()
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// (granted, remaining) seconds of lease `id`, from `etcdctl lease
/// timetolive` ("lease … granted with TTL(3600s), remaining(3598s)").
fn lease_ttl(endpoint: &str, id: i64) -> (i64, i64) {
    let out = etcdctl(endpoint, &["lease", "timetolive", &format!("{id:x}")]);
    let number_after = |tag: &str| -> i64 {
        let start = out.find(tag).unwrap_or_else(|| panic!("no {tag} in {out}")) + tag.len();
        out[start..]
            .split(|c: char| !c.is_ascii_digit() && c != '-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number after {tag} in {out}"))
    };
    (number_after("TTL("), number_after("remaining("))
}

fn event(name: &str, message: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "namespace": "default"},
        "reason": "Tested", "message": message, "type": "Normal",
    })
    .to_string()
}

/// Event name → message, as kubectl lists them.
fn event_messages(s: &Server) -> BTreeMap<String, String> {
    let list = s.get_json(&["events"]);
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| {
            (
                e["metadata"]["name"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn events_move_to_their_own_cluster() {
    let main = EtcdCluster::start(1).await;
    let events = EtcdCluster::start(1).await;
    let (m, e) = (main.endpoint(0), events.endpoint(0));
    let prefix = e2e::unique_prefix();
    let events_prefix = format!("{prefix}/events/");

    // Before: everything on the main cluster.
    let mut s = Server::start_with_prefix(&m, &prefix, &[]).await;
    s.kubectl_ok(&["create", "configmap", "cm1", "--from-literal=a=b"]);
    for i in 0..5 {
        s.kubectl_stdin_ok(
            &["apply", "-f", "-"],
            &event(&format!("ev{i}"), &format!("hello {i}")),
        );
    }
    let reported = s
        .request(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &[("Content-Type", "application/json")],
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "reported", "namespace": "default"},
                "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "e2e",
                "reportingInstance": "e2e-1", "action": "Test", "reason": "Tested",
                "type": "Normal", "note": "from events.k8s.io",
                "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "namespace": "default"},
            })
            .to_string()
            .as_bytes(),
        )
        .await;
    assert_eq!(reported.status, 201, "{}", reported.text());
    let old_list = s
        .request("GET", "/api/v1/namespaces/default/events", &[], b"")
        .await;
    let old_list: Value = serde_json::from_slice(&old_list.body).expect("a list");
    let old_rv = old_list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_string();
    let before = event_messages(&s);
    assert_eq!(before.len(), 6, "{before:?}");
    assert_eq!(before["ev3"], "hello 3");

    // 1. Stop writes: here, the only replica stops.
    s.stop();
    let source = etcd_kvs(&m, &events_prefix);
    assert_eq!(source.len(), 6, "{:?}", source.keys());
    assert!(
        source.values().all(|(_, lease, _)| *lease != 0),
        "Events carry their TTL lease: {source:?}"
    );

    // A dry run lists the keys and writes nothing.
    let flags = ["--source", &m, "--target", &e, "--etcd-prefix", &prefix];
    let with = |more: &[&'static str]| -> Vec<&str> {
        let mut v: Vec<&str> = flags.to_vec();
        v.extend_from_slice(more);
        v
    };
    let dry = etcd_move(&with(&["--resource", "/events", "--dry-run"]));
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(
        text(&dry).contains(&format!("would copy {prefix}/events/default/ev3 ")),
        "{}",
        text(&dry)
    );
    assert!(etcd_kvs(&e, &format!("{prefix}/")).is_empty());

    // 2. Copy and verify.
    let copied = etcd_move(&with(&["--resource", "/events"]));
    let report = text(&copied);
    assert!(copied.status.success(), "{report}");
    assert!(
        report.contains(&format!("{events_prefix}: verify: source 6 keys ("))
            && report.contains("target 6 keys: identical"),
        "{report}"
    );
    let target = etcd_kvs(&e, &format!("{prefix}/"));
    assert_eq!(
        target.keys().collect::<Vec<_>>(),
        source.keys().collect::<Vec<_>>(),
        "exactly the events' keys are copied (no progress mark, nothing else)"
    );
    for (key, (value, _, _)) in &source {
        assert_eq!(&target[key].0, value, "{key} byte for byte");
    }
    // One target lease per source lease, with the TTL the source had left.
    let source_leases: BTreeSet<i64> = source.values().map(|v| v.1).collect();
    let target_leases: BTreeSet<i64> = target.values().map(|v| v.1).collect();
    assert!(!target_leases.contains(&0), "{target:?}");
    assert_eq!(target_leases.len(), source_leases.len(), "{target:?}");
    for lease in &target_leases {
        let (granted, remaining) = lease_ttl(&e, *lease);
        let (_, source_left) = lease_ttl(&m, *source_leases.iter().next().unwrap());
        assert!(
            remaining > 0 && (granted - source_left).abs() <= 60,
            "lease {lease:x}: granted {granted}, remaining {remaining}, source {source_left}"
        );
    }

    // A second run does not overwrite what the target holds.
    let again = etcd_move(&with(&["--resource", "/events"]));
    assert_eq!(again.status.code(), Some(3), "{}", text(&again));
    assert!(
        text(&again).contains(&format!(
            "{events_prefix}: the target already holds 6 keys under the prefix; nothing written"
        )),
        "{}",
        text(&again)
    );
    assert_eq!(etcd_kvs(&e, &format!("{prefix}/")), target);

    // Verify catches a value that differs.
    let ev1 = format!("{prefix}/events/default/ev1");
    etcdctl(&e, &["put", &ev1, "garbage"]);
    let check = etcd_move(&with(&["--resource", "/events", "--verify-only"]));
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(
        text(&check).contains(&format!("value differs: {ev1}"))
            && text(&check).contains("1 differences"),
        "{}",
        text(&check)
    );

    // --overwrite repairs it; --delete-source then empties the old range.
    let repaired = etcd_move(&with(&[
        "--resource",
        "/events",
        "--overwrite",
        "--delete-source",
    ]));
    assert!(repaired.status.success(), "{}", text(&repaired));
    assert!(
        text(&repaired).contains(&format!("{events_prefix}: deleted from the source")),
        "{}",
        text(&repaired)
    );
    let target = etcd_kvs(&e, &format!("{prefix}/"));
    assert_eq!(target[&ev1].0, source[&ev1].0);
    assert_ne!(target[&ev1].1, 0, "the repaired key has a lease again");
    assert!(etcd_kvs(&m, &events_prefix).is_empty());

    // 3. Start with the flag: the events are served from their cluster.
    let flag = format!("--etcd-servers-overrides=/events#{e}");
    let s = Server::start_with_prefix(&m, &prefix, &[&flag]).await;
    assert_eq!(event_messages(&s), before);
    let ev3 = s.get_json(&["events", "ev3"]);
    assert_eq!(ev3["message"], "hello 3");
    assert_eq!(
        ev3["metadata"]["resourceVersion"].as_str().unwrap(),
        target[&format!("{prefix}/events/default/ev3")]
            .2
            .to_string(),
        "resourceVersions are the new cluster's revisions"
    );
    let note = s.get_json(&["events.v1.events.k8s.io", "reported"]);
    assert_eq!(note["note"], "from events.k8s.io");
    assert_eq!(s.get_json(&["configmap", "cm1"])["data"]["a"], "b");
    // A resourceVersion of the old cluster means nothing on the new one
    // (main's is far ahead: bootstrap wrote there): a client that lists or
    // watches from it is told to relist, as kube tells it.
    let stale = s
        .request(
            "GET",
            &format!("/api/v1/namespaces/default/events?resourceVersion={old_rv}&resourceVersionMatch=NotOlderThan"),
            &[],
            b"",
        )
        .await;
    assert_eq!(stale.status, 504, "{}", stale.text());
    assert!(
        stale.text().contains("Too large resource version"),
        "{}",
        stale.text()
    );

    // New events land on the events cluster, ConfigMaps on the main one.
    s.kubectl_stdin_ok(&["apply", "-f", "-"], &event("after", "moved"));
    s.kubectl_ok(&["create", "configmap", "cm2", "--from-literal=c=d"]);
    let after = format!("{prefix}/events/default/after");
    assert!(etcd_kvs(&e, &events_prefix).contains_key(&after));
    assert!(etcd_kvs(&m, &events_prefix).is_empty());
    assert!(etcd_kvs(&m, &format!("{prefix}/configmaps/"))
        .contains_key(&format!("{prefix}/configmaps/default/cm2")));
    assert!(etcd_kvs(&e, &format!("{prefix}/configmaps/")).is_empty());
}
