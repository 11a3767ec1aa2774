//! Phase 8, admission on the write path, on a server of its own, with
//! three namespaces: one where nothing applies, one where a
//! ValidatingAdmissionPolicy of three validations is bound (by namespace
//! selector), one where a validating webhook applies (an HTTPS server in
//! this process, over loopback, by namespace selector). N rounds of one
//! 2 KiB ConfigMap create in each namespace, one request at a time, the
//! order rotating each round, so that the three series share the same
//! moments of the machine and of etcd. What each configuration adds is the
//! difference of its median from the bare one's. Then the same, paired
//! with bare creates, in a fourth namespace holding a ResourceQuota on
//! ConfigMaps: each create there also writes the quota's `status.used`
//! (a compare-and-swap in etcd) before the object.

use super::fixture::configmap;
use super::report::{Budget, Row};
use super::stats::{fmt_duration, Histogram};
use super::{Bench, Error, Result};
use e2e::webhook::{Answer, WebhookServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PHASE: &str = "8 admission";
const PREFIX: &str = "/bench-admission";
const BARE: &str = "bench-admission-none";
const VAP: &str = "bench-admission-vap";
const HOOK: &str = "bench-admission-hook";
const QUOTA: &str = "bench-admission-quota";
/// Budgets (issue 15): a matched policy of three validations under 50 µs
/// p50; a webhook round trip under 1 ms p50.
const POLICY_US_BUDGET: f64 = 50.0;
const WEBHOOK_US_BUDGET: f64 = 1000.0;
/// How long a configuration may take to be enforced.
const LOADED: Duration = Duration::from_secs(20);

const POLICY: &str = r#"{
  "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
  "metadata": {"name": "bench"},
  "spec": {
    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
    "validations": [
      {"expression": "object.metadata.name.size() < 64"},
      {"expression": "!has(object.data) || object.data.size() < 100"},
      {"expression": "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)"}
    ]
  }
}"#;

const BINDING: &str = r#"{
  "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
  "metadata": {"name": "bench"},
  "spec": {"policyName": "bench", "validationActions": ["Deny"],
           "matchResources": {"namespaceSelector": {"matchLabels": {"bench-admission": "vap"}}}}
}"#;

async fn create(http: &super::client::Http, ns: &str, name: &str, i: u64) -> Result<Duration> {
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let body = configmap(ns, name, i, None);
    let t = Instant::now();
    http.post(&path, body).await?;
    Ok(t.elapsed())
}

/// Creates a ConfigMap in `ns` that the configuration refuses, until it
/// does.
async fn until_refused(http: &super::client::Http, ns: &str) -> Result<()> {
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let t = Instant::now();
    let mut i = 0;
    loop {
        i += 1;
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("probe-{i}"), "labels": {"forbidden": "1"}}});
        let bytes = bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        if http.post(&path, bytes).await.is_err() {
            return Ok(());
        }
        if t.elapsed() > LOADED {
            return Err(Error::Setup(format!(
                "nothing was enforced in {ns} in time"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates namespace `name` with the label `bench-admission: <tag>`.
async fn labelled_namespace(http: &super::client::Http, name: &str, tag: &str) -> Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"bench-admission": tag}}});
    http.post(
        "/api/v1/namespaces",
        bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
    )
    .await
    .map(drop)
}

fn json_body(s: &str) -> bytes::Bytes {
    bytes::Bytes::from(s.to_string())
}

/// ConfigMap creates in a namespace with a ResourceQuota that counts them,
/// paired with creates in the bare namespace.
async fn with_quota(http: &super::client::Http, n: usize) -> Result<Row> {
    labelled_namespace(http, QUOTA, "quota").await?;
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "bench"},
        "spec": {"hard": {"configmaps": "100000000"}}});
    http.post(
        &format!("/api/v1/namespaces/{QUOTA}/resourcequotas"),
        bytes::Bytes::from(serde_json::to_vec(&quota).unwrap_or_default()),
    )
    .await?;
    // Enforced once the quota controller has filled its status.
    let t = Instant::now();
    loop {
        let q = http
            .get(&format!("/api/v1/namespaces/{QUOTA}/resourcequotas/bench"))
            .await?;
        let v: Value = serde_json::from_slice(&q.body).unwrap_or_default();
        if v.pointer("/status/used/configmaps").is_some() {
            break;
        }
        if t.elapsed() > LOADED {
            return Err(Error::Setup("the quota got no status in time".into()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut bare, mut quota) = (Histogram::default(), Histogram::default());
    for i in 0..(n / 10 + 1) {
        create(http, QUOTA, &format!("w-{i:07}"), i as u64).await?;
    }
    for i in 0..n {
        let name = format!("q-{i:07}");
        if i % 2 == 0 {
            bare.record(create(http, BARE, &name, i as u64).await?);
            quota.record(create(http, QUOTA, &name, i as u64).await?);
        } else {
            quota.record(create(http, QUOTA, &name, i as u64).await?);
            bare.record(create(http, BARE, &name, i as u64).await?);
        }
    }
    let p50 = |h: &Histogram| h.quantile(0.5).as_secs_f64() * 1e6;
    let mut row = Row::new(
        PHASE,
        format!(
            "create p50 in a namespace with a ResourceQuota counting it ({n} creates each, paired)"
        ),
    );
    row.server = format!(
        "{} (p99 {})",
        fmt_duration(quota.quantile(0.5)),
        fmt_duration(quota.quantile(0.99))
    );
    row.limit = format!(
        "the same creates in a namespace nothing applies to: {} (p99 {})",
        fmt_duration(bare.quantile(0.5)),
        fmt_duration(bare.quantile(0.99))
    );
    row.ratio = format!("+{:.0} µs", p50(&quota) - p50(&bare));
    row.plot(
        "create p50 (bare namespace as the limit)",
        "µs",
        p50(&quota),
        Some(p50(&bare)),
    );
    Ok(row)
}

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let n = b.plan.admission_creates;
    let server = b.start_server(PREFIX, "admission").await?;
    let http = &server.http;
    for (ns, tag) in [(BARE, "none"), (VAP, "vap"), (HOOK, "hook")] {
        labelled_namespace(http, ns, tag).await?;
    }
    http.post(
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        json_body(POLICY),
    )
    .await?;
    http.post(
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        json_body(BINDING),
    )
    .await?;
    let hook = WebhookServer::start(|req: Value| {
        let obj = &req["request"]["object"];
        let allowed = obj.pointer("/metadata/labels/forbidden").is_none();
        Answer::Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": req["request"]["uid"], "allowed": allowed}}),
        )
    })
    .await;
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bench"},
        "webhooks": [{
            "name": "bench.example.com",
            "clientConfig": {"url": hook.url("/validate"), "caBundle": hook.ca_bundle()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"bench-admission": "hook"}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"]
        }]
    });
    http.post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        bytes::Bytes::from(serde_json::to_vec(&config).unwrap_or_default()),
    )
    .await?;
    until_refused(http, VAP).await?;
    until_refused(http, HOOK).await?;

    let (mut bare, mut with_policy, mut with_webhook) = (
        Histogram::default(),
        Histogram::default(),
        Histogram::default(),
    );
    // Warm up, unmeasured.
    for i in 0..(n / 10 + 1) {
        for ns in [BARE, VAP, HOOK] {
            create(http, ns, &format!("w-{i:07}"), i as u64).await?;
        }
    }
    for i in 0..n {
        let name = format!("c-{i:07}");
        for k in 0..3 {
            match (i + k) % 3 {
                0 => bare.record(create(http, BARE, &name, i as u64).await?),
                1 => with_policy.record(create(http, VAP, &name, i as u64).await?),
                _ => with_webhook.record(create(http, HOOK, &name, i as u64).await?),
            }
        }
    }
    let (with_plugins, without_plugins) = pods(b, http, n).await?;
    let quota_row = with_quota(http, n).await?;
    server.stop();

    let p50 = |h: &Histogram| h.quantile(0.5).as_secs_f64() * 1e6;
    let base = p50(&bare);
    let mut rows = Vec::new();
    for (case, h, budget, target) in [
        (
            "create p50 with a matched ValidatingAdmissionPolicy of 3 validations",
            &with_policy,
            POLICY_US_BUDGET,
            "adds < 50 µs p50",
        ),
        (
            "create p50 with a validating webhook over loopback",
            &with_webhook,
            WEBHOOK_US_BUDGET,
            "adds < 1 ms p50",
        ),
    ] {
        let added = p50(h) - base;
        let mut row = Row::new(
            PHASE,
            format!("{case} ({n} creates each, one at a time, interleaved)"),
        );
        row.server = format!(
            "{} (p99 {})",
            fmt_duration(h.quantile(0.5)),
            fmt_duration(h.quantile(0.99))
        );
        row.limit = format!(
            "the same creates in a namespace nothing applies to: {} (p99 {})",
            fmt_duration(bare.quantile(0.5)),
            fmt_duration(bare.quantile(0.99))
        );
        row.ratio = format!("+{added:.0} µs");
        row.plot(
            "create p50 (bare namespace as the limit)",
            "µs",
            p50(h),
            Some(base),
        );
        row.budget = Some(Budget::under(target, added, budget, " µs"));
        rows.push(row);
    }
    let mut row = Row::new(
        PHASE,
        format!("pod create p50 with kube's default admission plugins ({n} creates each, one at a time, interleaved)"),
    );
    row.server = format!(
        "{} (p99 {})",
        fmt_duration(with_plugins.quantile(0.5)),
        fmt_duration(with_plugins.quantile(0.99))
    );
    row.limit = format!(
        "the same creates on a server with the built-in plugins off: {} (p99 {})",
        fmt_duration(without_plugins.quantile(0.5)),
        fmt_duration(without_plugins.quantile(0.99))
    );
    row.ratio = format!("+{:.0} µs", p50(&with_plugins) - p50(&without_plugins));
    row.plot(
        "create p50 (bare namespace as the limit)",
        "µs",
        p50(&with_plugins),
        Some(p50(&without_plugins)),
    );
    rows.push(row);
    rows.push(quota_row);
    Ok(rows)
}

/// The built-in plugins a pod create goes through, turned off on the
/// comparison server.
const POD_PLUGINS: &str = "--disable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,Priority,DefaultTolerationSeconds,RuntimeClass,ResourceQuota";

fn pod(ns: &str, name: &str) -> bytes::Bytes {
    let body = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}});
    bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// Pod creates in `BARE` on `http` (kube's default plugins) and on a
/// second server with the built-in plugins off, interleaved.
async fn pods(b: &Bench, http: &super::client::Http, n: usize) -> Result<(Histogram, Histogram)> {
    let bare = b
        .start_server_with(&format!("{PREFIX}-off"), "admission-off", &[POD_PLUGINS])
        .await?;
    labelled_namespace(&bare.http, BARE, "none").await?;
    // The ServiceAccount plugin needs the namespace's default account.
    let t = Instant::now();
    while http
        .get(&format!(
            "/api/v1/namespaces/{BARE}/serviceaccounts/default"
        ))
        .await
        .is_err()
    {
        if t.elapsed() > LOADED {
            return Err(Error::Setup("no default service account in time".into()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let path = format!("/api/v1/namespaces/{BARE}/pods");
    let (mut on, mut off) = (Histogram::default(), Histogram::default());
    for i in 0..(n + n / 10 + 1) {
        let name = format!("p-{i:07}");
        let warm = i < n / 10 + 1;
        for k in 0..2 {
            let (client, h) = if (i + k) % 2 == 0 {
                (http, &mut on)
            } else {
                (&bare.http, &mut off)
            };
            let t = Instant::now();
            client.post(&path, pod(BARE, &name)).await?;
            if !warm {
                h.record(t.elapsed());
            }
        }
    }
    bare.stop();
    Ok((on, off))
}
