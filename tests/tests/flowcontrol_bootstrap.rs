//! kube-apiserver 1.35's API Priority and Fairness bootstrap configuration:
//! a fresh server has its PriorityLevelConfigurations and FlowSchemas, with
//! kube's specs, listed by kubectl; a second replica or a restart on the
//! same etcd keeps what is there, except that it brings back, as kube's
//! ensurer does, a deleted object, a mandatory object's spec, and the spec
//! of a suggested one whose `apf.kubernetes.io/autoupdate-spec` is true.

use e2e::Server;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const BASE: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";
const ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

const LEVELS: &[&str] = &[
    "catch-all",
    "exempt",
    "global-default",
    "leader-election",
    "node-high",
    "system",
    "workload-high",
    "workload-low",
];
const SCHEMAS: &[&str] = &[
    "catch-all",
    "exempt",
    "global-default",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-system-service-accounts",
    "probes",
    "service-accounts",
    "system-leader-election",
    "system-node-high",
    "system-nodes",
];

async fn request(s: &Server, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let headers: &[(&str, &str)] = match method {
        "PATCH" => &[("Content-Type", "application/merge-patch+json")],
        _ => &[("Content-Type", "application/json")],
    };
    let r = s
        .http(method, path, headers, bytes.as_bytes())
        .await
        .expect("request");
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

async fn get(s: &Server, path: &str) -> Value {
    let (status, v) = request(s, "GET", path, None).await;
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

/// name -> object of a list.
async fn list(s: &Server, plural: &str) -> BTreeMap<String, Value> {
    get(s, &format!("{BASE}/{plural}")).await["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o.clone(),
            )
        })
        .collect()
}

fn names(m: &BTreeMap<String, Value>) -> Vec<&str> {
    m.keys().map(String::as_str).collect()
}

#[tokio::test]
async fn a_fresh_server_has_kubes_bootstrap_configuration() {
    let s = Server::start().await;
    let levels = list(&s, "prioritylevelconfigurations").await;
    let schemas = list(&s, "flowschemas").await;
    assert_eq!(names(&levels), LEVELS);
    assert_eq!(names(&schemas), SCHEMAS);
    for o in levels.values().chain(schemas.values()) {
        assert_eq!(o["metadata"]["annotations"][ANNOTATION], "true", "{o}");
        assert_eq!(o["metadata"]["generation"], 1, "{o}");
    }

    assert_eq!(
        levels["exempt"]["spec"],
        json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})
    );
    assert_eq!(
        levels["catch-all"]["spec"],
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": 5, "lendablePercent": 0,
            "limitResponse": {"type": "Reject"}}})
    );
    assert_eq!(
        levels["global-default"]["spec"],
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": 20, "lendablePercent": 50,
            "limitResponse": {"type": "Queue", "queuing": {
                "queues": 128, "handSize": 6, "queueLengthLimit": 50}}}})
    );
    assert_eq!(
        levels["leader-election"]["spec"]["limited"]["limitResponse"]["queuing"],
        json!({"queues": 16, "handSize": 4, "queueLengthLimit": 50})
    );

    let everything = json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                           "namespaces": ["*"], "clusterScope": true}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    });
    let catch_all = &schemas["catch-all"]["spec"];
    assert_eq!(catch_all["matchingPrecedence"], 10000);
    assert_eq!(catch_all["priorityLevelConfiguration"]["name"], "catch-all");
    assert_eq!(catch_all["distinguisherMethod"]["type"], "ByUser");
    let rule = &catch_all["rules"][0];
    assert_eq!(
        rule["subjects"],
        json!([
            {"kind": "Group", "group": {"name": "system:unauthenticated"}},
            {"kind": "Group", "group": {"name": "system:authenticated"}},
        ])
    );
    assert_eq!(rule["resourceRules"], everything["resourceRules"]);
    assert_eq!(rule["nonResourceRules"], everything["nonResourceRules"]);
    let exempt = &schemas["exempt"]["spec"];
    assert_eq!(exempt["matchingPrecedence"], 1);
    assert!(exempt.get("distinguisherMethod").is_none(), "{exempt}");
    assert_eq!(
        exempt["rules"][0]["subjects"],
        json!([{"kind": "Group", "group": {"name": "system:masters"}}])
    );
    let ksa = &schemas["kube-system-service-accounts"]["spec"];
    assert_eq!(ksa["matchingPrecedence"], 900);
    assert_eq!(ksa["priorityLevelConfiguration"]["name"], "workload-high");
    assert_eq!(ksa["distinguisherMethod"]["type"], "ByNamespace");
    assert_eq!(
        ksa["rules"][0]["subjects"],
        json!([{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}}])
    );

    // kubectl lists them all, with kube's columns.
    let out = s.kubectl_ok(&["get", "flowschemas"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ]
    );
    let row = |out: &str, name: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .find(|cells| cells.first().map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{out}"))
    };
    for name in SCHEMAS {
        row(&out, name);
    }
    let catch_all = row(&out, "catch-all");
    assert_eq!(
        catch_all[..4],
        ["catch-all", "catch-all", "10000", "ByUser"]
    );
    assert_eq!(
        row(&out, "probes")[..4],
        ["probes", "exempt", "2", "<none>"]
    );
    let out = s.kubectl_ok(&["get", "prioritylevelconfigurations"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ]
    );
    assert_eq!(
        row(&out, "exempt")[..6],
        ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]
    );
    assert_eq!(
        row(&out, "global-default")[..6],
        ["global-default", "Limited", "20", "128", "6", "50"]
    );
    let out = s.kubectl_ok(&["get", "prioritylevelconfigurations", "-o", "name"]);
    let mut printed: Vec<&str> = out.lines().map(str::trim).collect();
    printed.sort();
    let wanted: Vec<String> = LEVELS
        .iter()
        .map(|n| format!("prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/{n}"))
        .collect();
    assert_eq!(printed, wanted);
}

#[tokio::test]
async fn replicas_and_restarts_keep_the_objects_and_follow_kubes_ensurer() {
    let mut first = Server::start().await;
    let levels = list(&first, "prioritylevelconfigurations").await;
    let schemas = list(&first, "flowschemas").await;

    // A second replica on the same etcd and prefix: nothing duplicated,
    // nothing rewritten.
    let second = Server::start_with_prefix(&first.etcd_endpoint, &first.prefix, &[]).await;
    assert_eq!(list(&second, "prioritylevelconfigurations").await, levels);
    assert_eq!(list(&second, "flowschemas").await, schemas);

    // Operator changes: a suggested level edited and annotated false (to be
    // kept), a suggested level edited with the annotation left true and a
    // mandatory level annotated false (both to be restored), a
    // suggested schema deleted (to be recreated).
    let path = |plural: &str, name: &str| format!("{BASE}/{plural}/{name}");
    let shares = |n: i64| json!({"spec": {"limited": {"nominalConcurrencyShares": n}}});
    let kept = json!({"metadata": {"annotations": {ANNOTATION: "false"}},
                      "spec": {"limited": {"nominalConcurrencyShares": 7}}});
    let pl = "prioritylevelconfigurations";
    let (status, v) = request(&second, "PATCH", &path(pl, "workload-low"), Some(&kept)).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = request(&second, "PATCH", &path(pl, "system"), Some(&shares(8))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["metadata"]["generation"], 2);
    // A mandatory level's spec is fixed (kube's validation refuses an
    // edit); its annotation can be set false, and is restored.
    let (status, v) = request(&second, "PATCH", &path(pl, "catch-all"), Some(&shares(9))).await;
    assert_eq!(status, 422, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("spec of 'catch-all' must equal the fixed value"),
        "{v}"
    );
    let mandatory = json!({"metadata": {"annotations": {ANNOTATION: "false"}}});
    let (status, v) = request(&second, "PATCH", &path(pl, "catch-all"), Some(&mandatory)).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = request(&second, "DELETE", &path("flowschemas", "probes"), None).await;
    assert_eq!(status, 200, "{v}");

    // Restart both replicas: the next one to start re-asserts the bootstrap.
    drop(second);
    first.stop();
    let third = Server::start_with_prefix(&first.etcd_endpoint, &first.prefix, &[]).await;

    let after = list(&third, pl).await;
    assert_eq!(names(&after), LEVELS);
    let low = &after["workload-low"];
    assert_eq!(low["spec"]["limited"]["nominalConcurrencyShares"], 7);
    assert_eq!(low["metadata"]["annotations"][ANNOTATION], "false");
    let system = &after["system"];
    assert_eq!(system["spec"], levels["system"]["spec"]);
    assert_eq!(system["metadata"]["generation"], 3);
    assert_eq!(
        system["metadata"]["uid"],
        levels["system"]["metadata"]["uid"]
    );
    let catch_all = &after["catch-all"];
    assert_eq!(catch_all["spec"], levels["catch-all"]["spec"]);
    assert_eq!(catch_all["metadata"]["annotations"][ANNOTATION], "true");
    // Untouched objects are not rewritten.
    for name in ["exempt", "global-default", "node-high"] {
        assert_eq!(after[name], levels[name], "{name}");
    }

    let after = list(&third, "flowschemas").await;
    assert_eq!(names(&after), SCHEMAS);
    assert_eq!(after["probes"]["spec"], schemas["probes"]["spec"]);
    assert_ne!(
        after["probes"]["metadata"]["uid"],
        schemas["probes"]["metadata"]["uid"]
    );
    for name in SCHEMAS.iter().filter(|n| **n != "probes") {
        assert_eq!(after[*name], schemas[*name], "{name}");
    }
}
