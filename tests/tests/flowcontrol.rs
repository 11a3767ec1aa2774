//! API Priority and Fairness through raw HTTP and kubectl: every response
//! names its FlowSchema and priority level by UID; a FlowSchema and
//! priority level made with kubectl take effect; a flooding user in a
//! small level gets 429s with Retry-After while another user's requests
//! keep succeeding quickly, and system:masters is never held back; the
//! metrics and the debug dumps show the levels; a FlowSchema naming a
//! missing level is marked Dangling; with the feature off, no headers.

use e2e::{eventually_async, Server};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FS_UID: &str = "x-kubernetes-pf-flowschema-uid";
const PL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";

fn uid(s: &Server, kind: &str, name: &str) -> String {
    let v = s.get_json(&[kind, name]);
    v["metadata"]["uid"].as_str().expect("uid").to_string()
}

/// The (FlowSchema, level) UIDs a GET as `user` (impersonated) is given.
async fn classified_as(s: &Server, user: Option<&str>, path: &str) -> (u16, String, String) {
    let headers: Vec<(&str, &str)> = user.map(|u| ("Impersonate-User", u)).into_iter().collect();
    let r = s.request("GET", path, &headers, b"").await;
    (
        r.status,
        r.header(FS_UID).unwrap_or("").to_string(),
        r.header(PL_UID).unwrap_or("").to_string(),
    )
}

const FLOOD: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: flood-level
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Queue
      queuing:
        queues: 1
        handSize: 1
        queueLengthLimit: 1
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: flood
spec:
  priorityLevelConfiguration:
    name: flood-level
  matchingPrecedence: 500
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: User
      user:
        name: flooder
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      namespaces: ["*"]
      clusterScope: true
"#;

#[tokio::test]
async fn headers_name_the_flow_schema_and_level() {
    let s = Server::start().await;
    let (exempt_fs, exempt_pl) = (
        uid(&s, "flowschema", "exempt"),
        uid(&s, "prioritylevelconfiguration", "exempt"),
    );
    let (global_fs, global_pl) = (
        uid(&s, "flowschema", "global-default"),
        uid(&s, "prioritylevelconfiguration", "global-default"),
    );
    // The loopback admin is in system:masters: exempt.
    eventually_async(
        "admin classified exempt",
        Duration::from_secs(20),
        || async {
            let got = classified_as(&s, None, "/api/v1/namespaces").await;
            (got == (200, exempt_fs.clone(), exempt_pl.clone())).then_some(())
        },
    )
    .await;
    // An ordinary user: global-default. Classification comes before
    // authorization: a denied request is classified too.
    let got = classified_as(&s, Some("alice"), "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(got, (403, global_fs.clone(), global_pl.clone()));
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
    ]);
    eventually_async("alice may list", Duration::from_secs(20), || async {
        let got = classified_as(&s, Some("alice"), "/api/v1/namespaces/default/configmaps").await;
        (got == (200, global_fs.clone(), global_pl.clone())).then_some(())
    })
    .await;
    let got = classified_as(
        &s,
        Some("alice"),
        "/api/v1/namespaces/default/configmaps/none",
    )
    .await;
    assert_eq!(got, (404, global_fs, global_pl));
    // kubectl sees the same through its verbose output of headers.
    let out = s.kubectl_ok(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_priority_levels",
    ]);
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .collect();
    assert_eq!(header, LEVEL_COLUMNS, "{out}");
    for level in ["exempt", "catch-all", "global-default", "workload-low"] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{level},"))),
            "{level}: {out}"
        );
    }
    // kube's exempt queue set: no queues, and it counts what it runs.
    let exempt = level_row(&s, "exempt").await;
    assert_eq!(exempt["ActiveQueues"], "0", "{exempt:?}");
    assert_eq!(exempt["WaitingRequests"], "0", "{exempt:?}");
    assert!(count(&exempt, "DispatchedRequests") > 0, "{exempt:?}");
    // One request of alice's: global-default's dispatched count moves.
    let before = count(&level_row(&s, "global-default").await, "DispatchedRequests");
    let got = classified_as(&s, Some("alice"), "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(got.0, 200);
    let after = level_row(&s, "global-default").await;
    assert!(
        count(&after, "DispatchedRequests") > before,
        "{before} -> {after:?}"
    );
    assert_eq!(after["RejectedRequests"], "0", "{after:?}");
}

/// kube's `dump_priority_levels` columns, in its order.
const LEVEL_COLUMNS: [&str; 10] = [
    "PriorityLevelName",
    "ActiveQueues",
    "IsIdle",
    "IsQuiescing",
    "WaitingRequests",
    "ExecutingRequests",
    "DispatchedRequests",
    "RejectedRequests",
    "TimedoutRequests",
    "CancelledRequests",
];

/// One level's row of `dump_priority_levels`, by column name.
async fn level_row(s: &Server, level: &str) -> std::collections::HashMap<String, String> {
    let dump = s
        .request(
            "GET",
            "/debug/api_priority_and_fairness/dump_priority_levels",
            &[],
            b"",
        )
        .await
        .text();
    let row = dump
        .lines()
        .find(|l| l.split(',').next() == Some(level))
        .unwrap_or_else(|| panic!("no row for {level}: {dump}"));
    let cells: Vec<&str> = row.split(',').map(str::trim).collect();
    assert_eq!(cells.len(), LEVEL_COLUMNS.len(), "{row}");
    LEVEL_COLUMNS
        .iter()
        .zip(cells)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn count(row: &std::collections::HashMap<String, String>, column: &str) -> u64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column}: {row:?}"))
}

#[tokio::test]
async fn a_flooding_user_is_held_back_and_others_are_not() {
    let s = Arc::new(Server::start().await);
    s.kubectl_stdin_ok(&["apply", "-f", "-"], FLOOD);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "readers",
        "--clusterrole=view",
        "--user=flooder",
        "--user=bob",
    ]);
    let (flood_fs, flood_pl) = (
        uid(&s, "flowschema", "flood"),
        uid(&s, "prioritylevelconfiguration", "flood-level"),
    );
    eventually_async(
        "the flood schema in effect",
        Duration::from_secs(20),
        || async {
            let got =
                classified_as(&s, Some("flooder"), "/api/v1/namespaces/default/configmaps").await;
            (got == (200, flood_fs.clone(), flood_pl.clone())).then_some(())
        },
    )
    .await;
    // The flood: 3 seats (1 share of 600 over 246), one queue of one.
    let flood: Vec<_> = (0..300)
        .map(|_| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let h = [("Impersonate-User", "flooder")];
                s.http("GET", "/api/v1/namespaces/default/configmaps", &h, b"")
                    .await
                    .ok()
            })
        })
        .collect();
    // Meanwhile another user, and the admin, in other levels.
    let mut worst = Duration::ZERO;
    for i in 0..20 {
        let started = Instant::now();
        let who = if i % 2 == 0 { Some("bob") } else { None };
        let (status, ..) = classified_as(&s, who, "/api/v1/namespaces/default/configmaps").await;
        assert_eq!(status, 200, "{who:?} was held back");
        worst = worst.max(started.elapsed());
    }
    let mut rejected: u64 = 0;
    let mut served: u64 = 0;
    for f in flood {
        let Some(r) = f.await.expect("flood task") else {
            continue;
        };
        match r.status {
            200 => served += 1,
            429 => {
                rejected += 1;
                assert_retry_after(&r);
                assert_eq!(r.header(PL_UID), Some(flood_pl.as_str()));
                let v: Value = serde_json::from_slice(&r.body).expect("a Status");
                assert_eq!(v["reason"], "TooManyRequests", "{v}");
                assert_eq!(v["code"], 429);
            }
            other => panic!("flooder got {other}: {}", r.text()),
        }
    }
    eprintln!("flood: {served} served, {rejected} rejected; others' worst latency {worst:?}");
    assert!(rejected > 0, "no 429 among {served} served");
    assert!(served > 0, "nothing of the flood was served");
    assert!(worst < Duration::from_secs(5), "others waited {worst:?}");
    // The level's totals count what the clients saw (a queued request
    // the flood's end left waiting may still be counted as cancelled).
    let level = level_row(&s, "flood-level").await;
    assert!(count(&level, "DispatchedRequests") >= served, "{level:?}");
    assert!(count(&level, "RejectedRequests") >= rejected, "{level:?}");
    assert_eq!(level["TimedoutRequests"], "0", "{level:?}");
    // The metrics and the dumps show the level and its rejections.
    let metrics = s.request("GET", "/metrics", &[], b"").await.text();
    let has = |needle: &str| metrics.lines().any(|l| l.starts_with(needle));
    assert!(
        has(
            r#"apiserver_flowcontrol_rejected_requests_total{flow_schema="flood",priority_level="flood-level",reason="queue-full"}"#
        ),
        "no queue-full rejections in the metrics"
    );
    assert!(has(
        r#"apiserver_flowcontrol_nominal_limit_seats{priority_level="flood-level"} 3"#
    ));
    assert!(has(
        r#"apiserver_flowcontrol_current_limit_seats{priority_level="flood-level"} 3"#
    ));
    assert!(has(
        r#"apiserver_flowcontrol_dispatched_requests_total{flow_schema="flood",priority_level="flood-level"}"#
    ));
    assert!(has(
        r#"apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"}"#
    ));
    assert!(has(
        "apiserver_flowcontrol_request_wait_duration_seconds_bucket{"
    ));
    assert!(has(
        "apiserver_flowcontrol_request_execution_seconds_bucket{"
    ));
    assert!(has("apiserver_flowcontrol_current_executing_requests{"));
    assert!(has("apiserver_flowcontrol_current_inqueue_requests{"));
    let queues = s.kubectl_ok(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_queues",
    ]);
    assert!(
        queues.lines().any(|l| l.starts_with("flood-level, ")),
        "{queues}"
    );
    let requests = s.kubectl_ok(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1",
    ]);
    assert!(
        requests.starts_with("PriorityLevelName, FlowSchemaName, "),
        "{requests}"
    );
    assert!(requests.lines().next().unwrap_or("").contains("UserName"));
    // Deleting the level: its schema dangles (kube's condition), and the
    // flooder falls back to what matches next.
    s.kubectl_ok(&["delete", "prioritylevelconfiguration", "flood-level"]);
    eventually_async("flood marked dangling", Duration::from_secs(20), || async {
        let fs = s.get_json(&["flowschema", "flood"]);
        let c = fs["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling").cloned())?;
        (c["status"] == "True" && c["reason"] == "NotFound").then_some(c)
    })
    .await;
    let global_fs = uid(&s, "flowschema", "global-default");
    eventually_async(
        "flooder back in global-default",
        Duration::from_secs(20),
        || async {
            let (_, fs, _) = classified_as(&s, Some("flooder"), "/api/v1/namespaces").await;
            (fs == global_fs).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn disabled_means_no_classification() {
    let etcd = watchcache::testing::TestEtcd::shared().await;
    let s = Server::start_on(&etcd.endpoint(), &["--enable-priority-and-fairness=false"]).await;
    let r = s.request("GET", "/api/v1/namespaces", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header(FS_UID), None);
    assert_eq!(r.header(PL_UID), None);
}

/// Requests that hold their seats (a validating webhook that takes 2.5 s)
/// leave the rest of the flood queued; a queued request that waits past a
/// quarter of `--request-timeout` (here 1 s) is answered 429, and the
/// queued ones show in `dump_requests` meanwhile. A queued request whose
/// client goes away leaves its queue, counted as rejected "cancelled".
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_wait_past_the_limit_is_429() {
    use e2e::webhook::{Answer, WebhookServer};
    let etcd = watchcache::testing::TestEtcd::shared().await;
    let s = Arc::new(Server::start_on(&etcd.endpoint(), &["--request-timeout=4s"]).await);
    let slow = WebhookServer::start(|req| {
        // Blocking, but off the runtime's other tasks.
        tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(2500)));
        Answer::Json(serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": req["request"]["uid"], "allowed": true},
        }))
    })
    .await;
    s.kubectl_ok(&["create", "namespace", "slow"]);
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &format!(
            r#"{}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: slow}}
webhooks:
- name: slow.example.com
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: slow}}}}
  sideEffects: None
  timeoutSeconds: 10
  admissionReviewVersions: [v1]
"#,
            FLOOD
                .replace("queues: 1\n", "queues: 2\n")
                .replace("handSize: 1", "handSize: 2")
                .replace("queueLengthLimit: 1", "queueLengthLimit: 20"),
            url = slow.url("/validate"),
            ca = slow.ca_bundle(),
        ),
    );
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "editors",
        "--clusterrole=edit",
        "--user=flooder",
    ]);
    let flood_pl = uid(&s, "prioritylevelconfiguration", "flood-level");
    eventually_async(
        "the flood level in effect",
        Duration::from_secs(20),
        || async {
            let (_, _, pl) =
                classified_as(&s, Some("flooder"), "/api/v1/namespaces/slow/configmaps").await;
            (pl == flood_pl).then_some(())
        },
    )
    .await;
    // Three seats: three creates run (2.5 s each), the rest wait.
    let creates: Vec<_> = (0..8)
        .map(|i| {
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let body = format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{i}"}}}}"#
                );
                let h = [
                    ("Impersonate-User", "flooder"),
                    ("Content-Type", "application/json"),
                ];
                s.request(
                    "POST",
                    "/api/v1/namespaces/slow/configmaps",
                    &h,
                    body.as_bytes(),
                )
                .await
            })
        })
        .collect();
    let queued = eventually_async("requests queued", Duration::from_secs(3), || async {
        let dump = s
            .request(
                "GET",
                "/debug/api_priority_and_fairness/dump_requests",
                &[],
                b"",
            )
            .await
            .text();
        let rows: Vec<String> = dump
            .lines()
            .filter(|l| l.starts_with("flood-level, "))
            .map(str::to_string)
            .collect();
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert!(queued[0].contains("flooder"), "{queued:?}");
    let mut codes = Vec::new();
    for c in creates {
        let r = c.await.expect("create task");
        if r.status == 429 {
            assert_retry_after(&r);
            assert_eq!(status_reason(&r.body), "TooManyRequests");
        }
        codes.push(r.status);
    }
    codes.sort_unstable();
    assert_eq!(codes.iter().filter(|c| **c == 201).count(), 3, "{codes:?}");
    assert!(
        codes.iter().filter(|c| **c == 429).count() >= 4,
        "{codes:?}"
    );
    // A wait past the limit is, as kube counts it, a request rejected and
    // cancelled (kube never counts into TimedoutRequests).
    let timed_out = codes.iter().filter(|c| **c == 429).count() as u64;
    let level = level_row(&s, "flood-level").await;
    assert!(count(&level, "CancelledRequests") >= timed_out, "{level:?}");
    assert!(count(&level, "RejectedRequests") >= timed_out, "{level:?}");
    assert_eq!(level["TimedoutRequests"], "0", "{level:?}");
    assert!(count(&level, "DispatchedRequests") >= 3, "{level:?}");
    let metrics = s.request("GET", "/metrics", &[], b"").await.text();
    assert!(
        metrics.lines().any(|l| l.starts_with(
            r#"apiserver_flowcontrol_rejected_requests_total{flow_schema="flood",priority_level="flood-level",reason="time-out"}"#
        )),
        "no time-out rejections in the metrics"
    );

    // A client that goes away while its request waits in the queue: as
    // kube's queue set does, the request is taken out of its queue and
    // counted as rejected, reason "cancelled".
    let cancelled = |metrics: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(
                r#"apiserver_flowcontrol_rejected_requests_total{flow_schema="flood",priority_level="flood-level",reason="cancelled"}"#,
            ))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let before = cancelled(&metrics);
    let create = |name: String| {
        let s = Arc::clone(&s);
        tokio::spawn(async move {
            let body = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#
            );
            let h = [
                ("Impersonate-User", "flooder"),
                ("Content-Type", "application/json"),
            ];
            s.request(
                "POST",
                "/api/v1/namespaces/slow/configmaps",
                &h,
                body.as_bytes(),
            )
            .await
        })
    };
    // Three hold the level's three seats (in the slow webhook)...
    let holders: Vec<_> = (0..3).map(|i| create(format!("holder{i}"))).collect();
    eventually_async("the seats taken", Duration::from_secs(3), || async {
        let metrics = s.request("GET", "/metrics", &[], b"").await.text();
        metrics
            .lines()
            .any(|l| {
                l.starts_with(r#"apiserver_flowcontrol_current_executing_requests{flow_schema="flood",priority_level="flood-level"}"#)
                    && l.ends_with(" 3")
            })
            .then_some(())
    })
    .await;
    // ... so these three wait in the queue.
    let gone: Vec<_> = (0..3).map(|i| create(format!("gone{i}"))).collect();
    eventually_async("requests queued again", Duration::from_secs(3), || async {
        let dump = s
            .request(
                "GET",
                "/debug/api_priority_and_fairness/dump_requests",
                &[],
                b"",
            )
            .await
            .text();
        dump.lines()
            .any(|l| l.starts_with("flood-level, "))
            .then_some(())
    })
    .await;
    // Well inside the 1 s wait limit: the queued ones are still waiting.
    for task in &gone {
        task.abort();
    }
    let after = eventually_async(
        "cancelled rejections counted",
        Duration::from_secs(5),
        || async {
            let metrics = s.request("GET", "/metrics", &[], b"").await.text();
            let n = cancelled(&metrics);
            (n > before).then_some(n)
        },
    )
    .await;
    eprintln!("cancelled rejections: {before} -> {after}");
    for holder in holders {
        assert_eq!(holder.await.expect("holder").status, 201);
    }
}

fn status_reason(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    v["reason"].as_str().unwrap_or("").to_string()
}

/// kube's Retry-After: 1 s, growing under sustained drops up to 32 s.
fn assert_retry_after(r: &e2e::HttpResponse) {
    let secs: u32 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=32).contains(&secs), "Retry-After {secs}");
    let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    assert_eq!(v["details"]["retryAfterSeconds"], secs, "{v}");
}

/// flowcontrol/v1 takes `nominalConcurrencyShares: 0` as given (only an
/// absent value is defaulted to 30, as in kube 1.29 and later): such a
/// level has no seats of its own and lives on what it borrows.
#[tokio::test]
async fn zero_nominal_shares_are_kept() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: borrower
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 0
    limitResponse:
      type: Reject
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: defaulted
spec:
  type: Limited
  limited:
    limitResponse:
      type: Reject
"#,
    );
    let zero = s.get_json(&["prioritylevelconfiguration", "borrower"]);
    assert_eq!(
        zero["spec"]["limited"]["nominalConcurrencyShares"], 0,
        "{zero}"
    );
    let thirty = s.get_json(&["prioritylevelconfiguration", "defaulted"]);
    assert_eq!(
        thirty["spec"]["limited"]["nominalConcurrencyShares"], 30,
        "{thirty}"
    );
    // A negative count is refused with kube's words.
    let (_, err) = s.kubectl_err(&[
        "patch",
        "prioritylevelconfiguration",
        "borrower",
        "--type=merge",
        "-p",
        r#"{"spec":{"limited":{"nominalConcurrencyShares":-1}}}"#,
    ]);
    assert!(
        err.contains("spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer"),
        "{err}"
    );
}
