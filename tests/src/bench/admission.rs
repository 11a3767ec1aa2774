//! Phase 8, admission on the write path, on a server of its own: the
//! latency of N ConfigMap creates (2 KiB, one at a time) with nothing
//! configured, then with a ValidatingAdmissionPolicy of three validations
//! bound to every ConfigMap, then with a validating webhook (an HTTPS
//! server in this process, over loopback) instead. What each adds is the
//! difference of the medians, measured in the same run.

use super::fixture::{self, configmap};
use super::report::{Budget, Row};
use super::stats::{fmt_duration, Histogram};
use super::{Bench, Error, Result};
use e2e::webhook::{Answer, WebhookServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PHASE: &str = "8 admission";
const PREFIX: &str = "/bench-admission";
const NS: &str = "bench-admission";
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
  "spec": {"policyName": "bench", "validationActions": ["Deny"]}
}"#;

async fn creates(http: &super::client::Http, tag: &str, n: usize) -> Result<Histogram> {
    let mut hist = Histogram::default();
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    for i in 0..n {
        let body = configmap(NS, &format!("{tag}-{i:07}"), i as u64, None);
        let t = Instant::now();
        http.post(&path, body).await?;
        hist.record(t.elapsed());
    }
    Ok(hist)
}

/// Creates a ConfigMap that the configuration refuses, until it does.
async fn until_refused(http: &super::client::Http, what: &str) -> Result<()> {
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    let t = Instant::now();
    let mut i = 0;
    loop {
        i += 1;
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("probe-{what}-{i}"), "labels": {"forbidden": "1"}}});
        let bytes = bytes::Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        if http.post(&path, bytes).await.is_err() {
            return Ok(());
        }
        if t.elapsed() > LOADED {
            return Err(Error::Setup(format!("the {what} was not enforced in time")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn json_body(s: &str) -> bytes::Bytes {
    bytes::Bytes::from(s.to_string())
}

pub async fn run(b: &Bench) -> Result<Vec<Row>> {
    let n = b.plan.admission_creates;
    let server = b.start_server(PREFIX, "admission").await?;
    let http = &server.http;
    fixture::namespace(http, NS).await?;
    // Warm up, then the baseline.
    creates(http, "warm", n / 10 + 1).await?;
    let bare = creates(http, "bare", n).await?;

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
    until_refused(http, "policy").await?;
    let with_policy = creates(http, "vap", n).await?;
    http.call(
        hyper::Method::DELETE,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/bench",
        None,
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
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"]
        }]
    });
    http.post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        bytes::Bytes::from(serde_json::to_vec(&config).unwrap_or_default()),
    )
    .await?;
    until_refused(http, "webhook").await?;
    let with_webhook = creates(http, "hook", n).await?;
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
        let mut row = Row::new(PHASE, format!("{case} ({n} creates, one at a time)"));
        row.server = format!(
            "{} (p99 {})",
            fmt_duration(h.quantile(0.5)),
            fmt_duration(h.quantile(0.99))
        );
        row.limit = format!(
            "the same creates with nothing configured: {} (p99 {})",
            fmt_duration(bare.quantile(0.5)),
            fmt_duration(bare.quantile(0.99))
        );
        row.ratio = format!("+{added:.0} µs");
        row.budget = Some(Budget::under(target, added, budget, " µs"));
        rows.push(row);
    }
    Ok(rows)
}
