//! Auditing through the filter chain: one JSON line per event with kube's
//! fields, the authorizer's decision as annotations, failed authentication
//! recorded, policy levels and omitStages honoured, watch stages, and a
//! secret's data never in the log whatever the policy.

use crate::common::{configmap, read_lines, Api};
use apimachinery::auth::{RequestInfo, UserInfo};
use apiserver::audit::policy::Policy;
use apiserver::audit::{Auditor, LogConfig, Sink};
use apiserver::auth::{Authentication, Authenticator, Authorizer, Decision};
use async_trait::async_trait;
use axum::body::Body;
use axum::http::request::Parts;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `X-Test-User: name[,group...]`; `bad` is an invalid credential.
struct HeaderUser;

#[async_trait]
impl Authenticator for HeaderUser {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        match request
            .headers
            .get("x-test-user")
            .and_then(|v| v.to_str().ok())
        {
            None => Authentication::NoCredentials,
            Some("bad") => Authentication::Invalid("bad test credential".into()),
            Some(v) => {
                let mut parts = v.split(',').map(str::to_string);
                let name = parts.next().unwrap_or_default();
                Authentication::User(UserInfo::new(name, parts.collect()))
            }
        }
    }
}

/// Allows reading configmaps; says why it denies everything else.
struct ReadConfigMaps;

#[async_trait]
impl Authorizer for ReadConfigMaps {
    async fn authorize(&self, _: &UserInfo, r: &RequestInfo) -> Decision {
        if r.resource == "configmaps" && (r.verb == "get" || r.verb == "list") {
            Decision::Allow
        } else {
            Decision::NoOpinion("only reads of configmaps".into())
        }
    }
}

struct Audited {
    api: Api,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Audited {
    async fn new(name: &str, policy: &str, secure: bool) -> Audited {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let sink = Sink::start(LogConfig {
            path: path.clone(),
            max_bytes: 0,
            max_backups: 0,
        })
        .expect("audit log");
        let policy = Policy::parse(policy).expect("valid policy");
        let api = Api::customized(name, secure, |s| {
            s.audit = Some(Arc::new(Auditor { policy, sink }));
            if secure {
                s.authenticator = Some(Arc::new(HeaderUser));
                s.authorizer = Arc::new(ReadConfigMaps);
            }
        })
        .await;
        Audited {
            api,
            path,
            _dir: dir,
        }
    }

    /// Every event written so far.
    fn events(&self) -> Vec<Value> {
        if let Some(a) = &self.api.state.audit {
            a.sink.flush();
        }
        std::fs::read_to_string(&self.path)
            .expect("audit log")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }

    fn events_of(&self, id: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["auditID"] == id)
            .collect()
    }
}

fn stages(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["stage"].as_str()).collect()
}

fn is_micro_time(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    chrono::DateTime::parse_from_rfc3339(s).is_ok() && s.len() == 27 && s.ends_with('Z')
}

const EVERYTHING_METADATA: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";
const CMS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

#[tokio::test]
async fn allowed_denied_and_unauthenticated_requests_are_recorded() {
    let a = Audited::new("audit-chain", EVERYTHING_METADATA, true).await;
    let alice = [
        ("x-test-user", "alice,devs"),
        ("user-agent", "kubectl/v1.35"),
    ];

    let ok = a
        .api
        .call("GET", &format!("{CMS}?limit=5"), &alice, Body::empty())
        .await;
    assert_eq!(ok.code, 200, "{}", ok.text());
    let id = ok.header("audit-id").expect("Audit-Id header").to_string();
    let events = a.events_of(&id);
    assert_eq!(stages(&events), ["RequestReceived", "ResponseComplete"]);
    let done = &events[1];
    assert_eq!(done["kind"], "Event");
    assert_eq!(done["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(done["level"], "Metadata");
    assert_eq!(done["verb"], "list");
    assert_eq!(done["requestURI"], format!("{CMS}?limit=5"));
    assert_eq!(done["userAgent"], "kubectl/v1.35");
    assert_eq!(done["user"]["username"], "alice");
    assert_eq!(
        done["user"]["groups"],
        json!(["devs", "system:authenticated"])
    );
    assert_eq!(
        done["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "apiVersion": "v1"})
    );
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 200}));
    assert_eq!(
        done["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert!(is_micro_time(&done["requestReceivedTimestamp"]), "{done}");
    assert!(is_micro_time(&done["stageTimestamp"]), "{done}");
    assert!(done.get("requestObject").is_none() && done.get("responseObject").is_none());

    // A client's Audit-ID is kept.
    let denied = a
        .api
        .call(
            "DELETE",
            &format!("{CMS}/x"),
            &[("x-test-user", "alice"), ("audit-id", "my-audit-id")],
            Body::empty(),
        )
        .await;
    assert_eq!(denied.code, 403);
    assert_eq!(denied.header("audit-id"), Some("my-audit-id"));
    let events = a.events_of("my-audit-id");
    assert_eq!(stages(&events), ["RequestReceived", "ResponseComplete"]);
    let done = &events[1];
    assert_eq!(
        done["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert_eq!(
        done["annotations"]["authorization.k8s.io/reason"],
        "only reads of configmaps"
    );
    assert_eq!(done["responseStatus"]["code"], 403);
    assert_eq!(done["responseStatus"]["reason"], "Forbidden");
    assert_eq!(done["responseStatus"]["status"], "Failure");
    assert_eq!(done["objectRef"]["name"], "x");

    // Failed authentication: one ResponseStarted event without a user.
    let bad = a
        .api
        .call(
            "GET",
            CMS,
            &[("authorization", "Bearer nope")],
            Body::empty(),
        )
        .await;
    assert_eq!(bad.code, 401);
    let id = bad.header("audit-id").expect("Audit-Id header").to_string();
    let events = a.events_of(&id);
    assert_eq!(stages(&events), ["ResponseStarted"], "{events:?}");
    assert_eq!(events[0]["user"], json!({}));
    assert_eq!(
        events[0]["responseStatus"],
        json!({"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401})
    );
}

#[tokio::test]
async fn levels_and_omitted_stages_follow_the_policy() {
    let policy = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
- level: Request
  resources: [{group: "", resources: [pods]}]
- level: Metadata
  omitStages: [ResponseComplete]
  resources: [{group: "", resources: [services]}]
"#;
    let a = Audited::new("audit-levels", policy, false).await;
    let created = a.api.post(CMS, &configmap("c1", &[("k", "v")])).await;
    assert_eq!(created.code, 201);
    let id = created.header("audit-id").expect("audit id").to_string();
    let events = a.events_of(&id);
    assert_eq!(stages(&events), ["ResponseComplete"]);
    assert_eq!(events[0]["level"], "RequestResponse");
    assert_eq!(events[0]["requestObject"]["data"]["k"], "v");
    assert_eq!(events[0]["responseObject"]["metadata"]["name"], "c1");
    assert_eq!(events[0]["responseStatus"]["code"], 201);
    // The loopback admin is allowed by the privileged group.
    assert_eq!(
        events[0]["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let created = a.api.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created.code, 201, "{}", created.text());
    let id = created.header("audit-id").expect("audit id").to_string();
    let events = a.events_of(&id);
    assert_eq!(events[0]["level"], "Request");
    assert_eq!(
        events[0]["requestObject"]["spec"]["containers"][0]["image"],
        "i"
    );
    assert!(events[0].get("responseObject").is_none());

    let pods = a.api.get("/api/v1/namespaces/default/pods").await;
    let id = pods.header("audit-id").expect("audit id").to_string();
    let events = a.events_of(&id);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["level"], "Request");
    assert!(events[0].get("responseObject").is_none());

    let services = a.api.get("/api/v1/namespaces/default/services").await;
    let id = services.header("audit-id").expect("audit id").to_string();
    assert!(a.events_of(&id).is_empty(), "both stages omitted");

    let before = a.events().len();
    assert_eq!(a.api.get("/healthz").await.code, 200);
    assert_eq!(a.api.get("/version").await.code, 200);
    // No rule: None.
    a.api.get("/api/v1/namespaces/default/endpoints").await;
    assert_eq!(a.events().len(), before);

    // Counted for /metrics: three events written so far (the services
    // request's were omitted before reaching the queue).
    let metrics = a.api.get("/metrics").await.text();
    assert!(
        metrics
            .lines()
            .any(|l| l == "apiserver_audit_event_total 3"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("audit"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test]
async fn a_watch_is_recorded_when_it_starts_and_when_it_ends() {
    let a = Audited::new("audit-watch", EVERYTHING_METADATA, false).await;
    let resp = a
        .api
        .send(
            "GET",
            &format!("{CMS}?watch=true&timeoutSeconds=1"),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let id = resp
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .expect("audit id")
        .to_string();
    assert_eq!(
        stages(&a.events_of(&id)),
        ["RequestReceived", "ResponseStarted"]
    );
    let (_, ended) = read_lines(resp, usize::MAX, Duration::from_secs(20)).await;
    assert!(ended);
    let events = a.events_of(&id);
    assert_eq!(
        stages(&events),
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );
    assert_eq!(events[2]["verb"], "watch");
    assert_eq!(events[2]["responseStatus"]["code"], 200);
}

#[tokio::test]
async fn secret_data_never_reaches_the_log() {
    let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n";
    let a = Audited::new("audit-secrets", policy, false).await;
    let data = "dG9wLXNlY3JldC12YWx1ZQ=="; // base64 of "top-secret-value"
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                        "data": {"password": data}, "stringData": {"token": "plain-token"}});
    assert_eq!(a.api.post(SECRETS, &secret).await.code, 201);
    assert_eq!(a.api.get(&format!("{SECRETS}/s")).await.code, 200);
    assert_eq!(a.api.get(SECRETS).await.code, 200);
    let r = a
        .api
        .call(
            "PUT",
            &format!("{SECRETS}/s"),
            &[("content-type", "application/yaml")],
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ndata: {{password: {data}}}\n"
            ),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.text());
    // Other resources are logged in full at this level.
    let cm = a
        .api
        .post(CMS, &configmap("c", &[("visible", "yes")]))
        .await;
    assert_eq!(cm.code, 201);

    let text = std::fs::read_to_string(&a.path).unwrap_or_default();
    let events = a.events();
    let secrets: Vec<&Value> = events
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "secrets")
        .collect();
    assert_eq!(secrets.len(), 8, "4 requests, 2 stages each");
    assert!(secrets.iter().all(|e| e["level"] == "Metadata"));
    let full = std::fs::read_to_string(&a.path).unwrap_or(text);
    assert!(!full.contains(data) && !full.contains("plain-token"));
    assert!(full.contains("\"visible\":\"yes\""));
}

#[tokio::test]
async fn source_ips_come_from_forwarding_headers_and_the_peer() {
    use std::future::IntoFuture;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let a = Audited::new("audit-ips", EVERYTHING_METADATA, false).await;
    let r = a
        .api
        .call(
            "GET",
            CMS,
            &[
                ("x-forwarded-for", "10.0.0.1, 10.0.0.2"),
                ("audit-id", "fwd"),
            ],
            Body::empty(),
        )
        .await;
    assert_eq!(r.code, 200);
    let events = a.events_of("fwd");
    assert_eq!(events[0]["sourceIPs"], json!(["10.0.0.1", "10.0.0.2"]));

    // Over a real connection, as `run` serves: the peer's address.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let app = a
        .api
        .router()
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(
        format!("GET {CMS} HTTP/1.1\r\nhost: x\r\naudit-id: peer\r\nconnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(crate::common::DEADLINE, conn.read_to_end(&mut answer))
        .await
        .expect("answer in time")
        .expect("read");
    server.abort();
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let events = a.events_of("peer");
    assert_eq!(events[0]["sourceIPs"], json!(["127.0.0.1"]));
}

#[tokio::test]
async fn request_objects_follow_the_handler_and_managed_fields_can_be_omitted() {
    let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n\
                  - level: RequestResponse\n  omitManagedFields: true\n  resources: [{group: '', resources: [configmaps]}]\n\
                  - level: RequestResponse\n";
    let a = Audited::new("audit-objects", policy, false).await;
    let created = a.api.post(CMS, &configmap("m", &[("k", "v")])).await;
    assert_eq!(created.code, 201);
    assert!(
        created.body["metadata"]["managedFields"].is_array(),
        "the server records them"
    );
    let id = created.header("audit-id").expect("audit id").to_string();
    let events = a.events_of(&id);
    assert_eq!(stages(&events), ["RequestReceived", "ResponseComplete"]);
    assert!(events[0].get("requestObject").is_none(), "{}", events[0]);
    assert_eq!(events[1]["requestObject"]["data"]["k"], "v");
    assert_eq!(events[1]["responseObject"]["metadata"]["name"], "m");
    assert!(events[1]["responseObject"]["metadata"]
        .get("managedFields")
        .is_none());

    // Without omitManagedFields they stay.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let created = a.api.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created.code, 201, "{}", created.text());
    assert!(created.body["metadata"]["managedFields"].is_array());
    let id = created.header("audit-id").expect("audit id").to_string();
    let events = a.events_of(&id);
    assert!(
        events[1]["responseObject"]["metadata"]["managedFields"].is_array(),
        "{}",
        events[1]
    );
}
