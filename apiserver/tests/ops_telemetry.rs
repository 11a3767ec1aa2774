//! Request ids and tracing: every response carries `Audit-Id` (the client's
//! `Audit-ID` when it sent one), and with `--tracing-endpoint` the real
//! binary exports the request's span (in the caller's trace when it sent
//! `traceparent`) and its etcd spans over OTLP/gRPC to a collector run by
//! the test, the request's id on both; its JSON log lines carry the id too.

mod common;

use axum::body::Body;
use axum::http::StatusCode;
use common::{configmap, Api};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use watchcache::testing::TestEtcd;

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn every_response_carries_an_audit_id() {
    let api = Api::new("audit-id").await;
    let ns = api.namespace("audit-id").await;
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let responses = [
        api.get("/healthz").await,
        api.get("/readyz").await,
        api.get("/metrics").await,
        api.get("/version").await,
        api.get(&format!("{cms}/missing")).await,
        api.get("/api/v1/nonsense").await,
        api.post(&cms, &serde_json::json!({"kind": "ConfigMap"}))
            .await,
        api.post(&cms, &configmap("a", &[("k", "v")])).await,
    ];
    let mut ids = std::collections::HashSet::new();
    for r in &responses {
        let id = r.header("audit-id").unwrap_or_default().to_string();
        assert_eq!(id.len(), 36, "{:?} {:?}", r.code, r.headers);
        assert!(ids.insert(id), "ids repeat");
    }
    assert!(responses.iter().any(|r| r.code.is_client_error()));
    // An id the client sent is kept; an unusable one is replaced.
    let r = api
        .call(
            "GET",
            "/healthz",
            &[("Audit-ID", "client-id-1")],
            Body::empty(),
        )
        .await;
    assert_eq!(r.header("audit-id"), Some("client-id-1"));
    let r = api
        .call(
            "GET",
            &format!("{cms}/missing"),
            &[("audit-id", "x y")],
            Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
    assert_eq!(r.header("audit-id").map(str::len), Some(36));
    // A watch's response (a stream) has it in its headers.
    let watch = api
        .send(
            "GET",
            &format!("{cms}?watch=1"),
            &[("Audit-ID", "w-1")],
            Body::empty(),
        )
        .await;
    assert_eq!(
        watch
            .headers()
            .get("audit-id")
            .and_then(|v| v.to_str().ok()),
        Some("w-1")
    );
}

/// An OTLP trace collector: keeps every span it is sent.
#[derive(Default)]
struct Collector {
    spans: Mutex<Vec<Span>>,
    services: Mutex<Vec<String>>,
    arrived: tokio::sync::watch::Sender<usize>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut n = 0;
        for rs in request.into_inner().resource_spans {
            if let Some(resource) = &rs.resource {
                if let Some(name) = string_attr(&resource.attributes, "service.name") {
                    lock(&self.services).push(name.to_string());
                }
            }
            for ss in rs.scope_spans {
                n += ss.spans.len();
                lock(&self.spans).extend(ss.spans);
            }
        }
        self.arrived.send_modify(|c| *c += n);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn string_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}

/// The trace and span a caller sends in `traceparent`.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// Kills the server if the test fails before it exits.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request on a fresh connection; `(status, whole response)`.
async fn request(addr: SocketAddr, head: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    let req = format!(
        "{head}\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text))
}

#[tokio::test]
async fn spans_of_a_request_and_its_etcd_call_reach_the_collector() {
    let collector = Arc::new(Collector::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the collector");
    let collector_addr = listener.local_addr().expect("addr");
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let service = TraceServiceServer::from_arc(Arc::clone(&collector));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );

    let etcd = TestEtcd::shared().await;
    let addr = free_addr();
    let prefix = format!("/t-tracing-{}", std::process::id());
    let mut child = Command::new(env!("CARGO_BIN_EXE_apiserver"))
        .args(["--etcd-servers", &etcd.endpoint()])
        .args(["--etcd-prefix", &prefix])
        .args(["--listen", &addr.to_string()])
        .args(["--etcd-compaction-interval", "0"])
        .args(["--tracing-endpoint", &format!("http://{collector_addr}")])
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info,apiserver::telemetry=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the apiserver binary");
    // Drain the log as it comes (a full pipe would block the server).
    let mut stderr = child.stderr.take().expect("stderr");
    let log = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut server = Server(child);
    let start = Instant::now();
    while request(addr, "GET /readyz HTTP/1.1", "").await.map(|r| r.0) != Some(200) {
        assert!(start.elapsed() < DEADLINE, "the server never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let id = format!("otlp-{}", std::process::id());
    let body = serde_json::to_string(&configmap("traced", &[("k", "v")])).expect("json");
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\n\
         Content-Type: application/json\r\nUser-Agent: tracing-test\r\nAudit-ID: {id}\r\n\
         traceparent: 00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    );
    let (code, response) = request(addr, &head, &body).await.expect("create");
    assert_eq!(code, 201, "{response}");
    assert!(
        response
            .to_ascii_lowercase()
            .contains(&format!("audit-id: {id}")),
        "{response}"
    );

    // SIGTERM: the server stops and flushes the spans it has not sent.
    let status = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = server.0.try_wait().expect("wait") {
            break exit;
        }
        assert!(start.elapsed() < DEADLINE, "the server did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{exit:?}");

    let ours = |s: &Span| string_attr(&s.attributes, "audit_id") == Some(id.as_str());
    let mut arrived = collector.arrived.subscribe();
    let found = tokio::time::timeout(
        DEADLINE,
        arrived.wait_for(|_| {
            let spans = lock(&collector.spans);
            let request = spans.iter().any(|s| ours(s) && s.name == "KubernetesAPI");
            let etcd = spans.iter().any(|s| ours(s) && s.name == "etcd");
            request && etcd
        }),
    )
    .await;
    let spans = lock(&collector.spans).clone();
    assert!(
        matches!(found, Ok(Ok(_))),
        "spans did not arrive: {:?}",
        spans
            .iter()
            .map(|s| (&s.name, &s.attributes))
            .collect::<Vec<_>>()
    );
    let request_span = spans
        .iter()
        .find(|s| ours(s) && s.name == "KubernetesAPI")
        .expect("request span");
    let attrs = &request_span.attributes;
    assert_eq!(string_attr(attrs, "method"), Some("POST"));
    assert_eq!(
        string_attr(attrs, "path"),
        Some("/api/v1/namespaces/default/configmaps")
    );
    assert_eq!(string_attr(attrs, "user_agent"), Some("tracing-test"));
    assert!(
        attrs.iter().any(|kv| kv.key == "status"
            && matches!(
                kv.value.as_ref().and_then(|v| v.value.as_ref()),
                Some(any_value::Value::IntValue(201))
            )),
        "{attrs:?}"
    );
    // The request joined the caller's trace (W3C traceparent).
    assert_eq!(hex(&request_span.trace_id), CALLER_TRACE);
    assert_eq!(hex(&request_span.parent_span_id), CALLER_SPAN);
    // The etcd create is a child of the request, in the same trace.
    let create = spans
        .iter()
        .find(|s| {
            ours(s) && s.name == "etcd" && string_attr(&s.attributes, "operation") == Some("create")
        })
        .expect("the etcd create span");
    assert_eq!(create.trace_id, request_span.trace_id);
    assert_eq!(create.parent_span_id, request_span.span_id);
    assert_eq!(
        string_attr(&create.attributes, "key"),
        Some(format!("{prefix}/configmaps/default/traced").as_str())
    );
    assert!(lock(&collector.services).iter().all(|s| s == "apiserver"));

    // The JSON log line written inside the request carries its id.
    let log = log.join().expect("log reader");
    let served = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["message"] == "served" && v["span"]["audit_id"] == id.as_str());
    assert!(
        served.is_some(),
        "no JSON log line with the request id:\n{log}"
    );
}
