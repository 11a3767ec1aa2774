//! API aggregation end to end: a small HTTPS extension API server written
//! here (group `metrics.example.com/v1beta1`, one resource `widgets` with
//! get, list and watch) behind a Service and an EndpointSlice, registered
//! by an APIService, driven through real kubectl, the kube crate and the
//! Python client. The extension insists on the front-proxy client
//! certificate (verified against the CA the server publishes in
//! `kube-system/extension-apiserver-authentication`, CN
//! `front-proxy-client`) and on `X-Remote-User`, and records who each
//! request ran as.

use bytes::Bytes;
use e2e::{stderr, Server};
use futures_util::StreamExt as _;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watchcache::testing::TestEtcd;

const GROUP: &str = "metrics.example.com";
const VERSION: &str = "v1beta1";
const SERVICE: &str = "metrics-ext";

/// One request as the extension saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    user: String,
    groups: Vec<String>,
    authorization: bool,
    impersonation: bool,
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The extension API server; stops (closing its connections) when dropped.
struct Extension {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Extension {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The extension's serving certificate, for `metrics-ext.default.svc`.
struct Pki {
    ca_pem: String,
    cert: CertificateDer<'static>,
    key_der: Vec<u8>,
}

fn serving_pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "extension-ca");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![format!("{SERVICE}.default.svc")])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        cert: CertificateDer::from(cert.der().to_vec()),
        key_der: key.serialize_der(),
    }
}

fn widget(name: &str, seen_by: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "7",
                     "annotations": {"seen-by": seen_by}},
        "spec": {"size": 3},
    })
}

fn json_response(code: u16, v: &Value) -> hyper::Response<BoxBody> {
    hyper::Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(v).unwrap())).boxed())
        .unwrap()
}

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "description": "A widget of the extension.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "description": "What the widget is.",
                     "properties": {"size": {"type": "integer", "description": "How big."}}},
        },
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": "Widget"}],
    })
}

fn openapi_v3() -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "metrics-ext", "version": "v0.1"},
        "paths": {format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/widgets"): {
            "get": {"operationId": "listWidgets", "responses": {"200": {"description": "OK"}}}}},
        "components": {"schemas": {"com.example.metrics.v1beta1.Widget": widget_schema()}},
    })
}

fn openapi_v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "metrics-ext", "version": "v0.1"},
        "paths": {
            format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/widgets"): {
                "get": {"operationId": "listWidgets", "responses": {"200": {"description": "OK"}}}},
            "/apis/other.example.com/v1/things": {
                "get": {"operationId": "notOurs", "responses": {"200": {"description": "OK"}}}},
        },
        "definitions": {"com.example.metrics.v1beta1.Widget": widget_schema()},
    })
}

/// What the extension answers.
fn answer(req: &hyper::Request<hyper::body::Incoming>, user: &str) -> hyper::Response<BoxBody> {
    let path = req.uri().path();
    let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
    let base = format!("/apis/{GROUP}/{VERSION}");
    let collection = format!("{base}/namespaces/default/widgets");
    if path == base {
        return json_response(
            200,
            &json!({
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": format!("{GROUP}/{VERSION}"),
                "resources": [{
                    "name": "widgets", "singularName": "widget", "namespaced": true,
                    "kind": "Widget", "verbs": ["get", "list", "watch"], "shortNames": ["wd"],
                }],
            }),
        );
    }
    if path == format!("/openapi/v3{base}") {
        return json_response(200, &openapi_v3());
    }
    if path == "/openapi/v2" {
        return json_response(200, &openapi_v2());
    }
    if path == collection && watch {
        // One ADDED event, then the stream stays open a while.
        let event = format!(
            "{}\n",
            json!({"type": "ADDED", "object": widget("w1", user)})
        );
        let frames = futures_util::stream::once(async move {
            Ok::<_, Infallible>(Frame::data(Bytes::from(event)))
        })
        .chain(futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, Infallible>(Frame::data(Bytes::new()))
        }));
        return hyper::Response::builder()
            .status(200)
            .header("Content-Type", "application/json")
            .body(BodyExt::boxed(StreamBody::new(frames)))
            .unwrap();
    }
    if path == collection {
        return json_response(
            200,
            &json!({
                "apiVersion": format!("{GROUP}/{VERSION}"),
                "kind": "WidgetList",
                "metadata": {"resourceVersion": "7"},
                "items": [widget("w1", user)],
            }),
        );
    }
    if path == format!("{collection}/w1") {
        return json_response(200, &widget("w1", user));
    }
    json_response(
        404,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

impl Extension {
    /// Serves on `addr` (port 0: any), trusting client certificates of
    /// `client_ca_pem` only.
    async fn start(addr: SocketAddr, pki: &Pki, client_ca_pem: &str) -> Extension {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![pki.cert.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key_der.clone())),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let record = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                while connections.try_join_next().is_some() {}
                let (acceptor, record) = (acceptor.clone(), Arc::clone(&record));
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let cn = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|leaf| apiserver::auth::der::certificate_subject(leaf))
                        .map(|s| s.common_name)
                        .unwrap_or_default();
                    let service = hyper::service::service_fn(
                        move |mut req: hyper::Request<hyper::body::Incoming>| {
                            let record = Arc::clone(&record);
                            let cn = cn.clone();
                            async move {
                                // An upgrade (as exec and attach make):
                                // 101, then every byte echoed back.
                                if req.uri().path().ends_with("/echo")
                                    && req.headers().contains_key("upgrade")
                                {
                                    let upgraded = hyper::upgrade::on(&mut req);
                                    tokio::spawn(async move {
                                        if let Ok(io) = upgraded.await {
                                            let mut io = hyper_util::rt::TokioIo::new(io);
                                            let (mut r, mut w) = tokio::io::split(&mut io);
                                            let _ = tokio::io::copy(&mut r, &mut w).await;
                                        }
                                    });
                                    return Ok::<_, Infallible>(
                                        hyper::Response::builder()
                                            .status(101)
                                            .header("Connection", "Upgrade")
                                            .header("Upgrade", "test-echo")
                                            .body(BodyExt::boxed(Full::new(Bytes::new())))
                                            .unwrap(),
                                    );
                                }
                                let h = req.headers();
                                let user = h
                                    .get("x-remote-user")
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or("")
                                    .to_string();
                                if cn != "front-proxy-client" || user.is_empty() {
                                    return Ok::<_, Infallible>(json_response(
                                        401,
                                        &json!({"kind": "Status", "code": 401}),
                                    ));
                                }
                                record.lock().unwrap().push(Seen {
                                    path: req.uri().to_string(),
                                    user: user.clone(),
                                    groups: h
                                        .get_all("x-remote-group")
                                        .iter()
                                        .filter_map(|v| v.to_str().ok())
                                        .map(str::to_string)
                                        .collect(),
                                    authorization: h.contains_key("authorization"),
                                    impersonation: h
                                        .keys()
                                        .any(|k| k.as_str().starts_with("impersonate-")),
                                });
                                Ok(answer(&req, &user))
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        Extension { addr, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The request-header CA the server publishes for extension servers.
fn published_auth(server: &Server) -> Value {
    server.get_json(&[
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
    ])
}

fn raw(server: &Server, path: &str) -> Value {
    serde_json::from_str(&server.kubectl_ok(&["get", "--raw", path])).unwrap()
}

fn available(server: &Server, name: &str) -> Option<Value> {
    let v = server.get_json(&["apiservice", name]);
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")
        .cloned()
}

async fn wait_available(server: &Server, name: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let c = available(server, name);
        if let Some(c) = c.as_ref().filter(|c| c["status"] == status) {
            return c.clone();
        }
        if std::time::Instant::now() > deadline {
            let log = server.log();
            let tail: String = log.lines().rev().take(40).collect::<Vec<_>>().join("\n");
            panic!("APIService {name} not Available={status}: {c:?}\nserver log (last lines, newest first):\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Registers the extension at `ip:port` as Service `metrics-ext` (port
/// 443 → the extension's port) with its EndpointSlice, and the APIService.
fn register(server: &Server, ip: IpAddr, port: u16, ca_pem: &str) {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": SERVICE, "namespace": "default"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": format!("{SERVICE}-1"), "namespace": "default",
                      "labels": {"kubernetes.io/service-name": SERVICE}},
         "addressType": if ip.is_ipv4() { "IPv4" } else { "IPv6" },
         "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": format!("{VERSION}.{GROUP}")},
         "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100,
                  "versionPriority": 100, "caBundle": ca,
                  "service": {"namespace": "default", "name": SERVICE, "port": 443}}},
    ]});
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &objects.to_string());
}

// Multi-threaded: the extension server in this process answers while the
// test blocks on kubectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_api_server_through_the_aggregator() {
    let Some(ip) = e2e::webhook::local_address() else {
        eprintln!("skipped: this machine has no non-loopback address for an EndpointSlice");
        return;
    };
    let etcd = TestEtcd::shared().await;
    let server = Server::start_on(&etcd.endpoint(), &[]).await;

    // The published authentication ConfigMap, as kube writes it.
    let auth = e2e::eventually_async(
        "extension-apiserver-authentication",
        Duration::from_secs(20),
        || async {
            let v = published_auth(&server);
            v.pointer("/data/requestheader-client-ca-file")
                .is_some()
                .then_some(v)
        },
    )
    .await;
    let data = &auth["data"];
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        "[\"X-Remote-Extra-\"]"
    );
    let front_proxy_ca = data["requestheader-client-ca-file"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(front_proxy_ca.contains("BEGIN CERTIFICATE"));

    let pki = serving_pki();
    let ext = Extension::start(SocketAddr::new(ip, 0), &pki, &front_proxy_ca).await;
    let port = ext.addr.port();
    register(&server, ip, port, &pki.ca_pem);
    let name = format!("{VERSION}.{GROUP}");

    // kubectl get apiservices: Available, as kube words it.
    let cond = wait_available(&server, &name, "True").await;
    assert_eq!(cond["reason"], "Passed");
    assert_eq!(cond["message"], "all checks passed");
    let table = server.kubectl_ok(&["get", "apiservices", &name]);
    assert!(table.contains(&format!("default/{SERVICE}")), "{table}");
    assert!(table.contains("True"), "{table}");

    // Discovery: kubectl api-resources (aggregated), /apis (legacy).
    let resources = e2e::eventually_async("api-resources", Duration::from_secs(20), || async {
        let out = server.kubectl_ok(&["api-resources", "--api-group", GROUP, "-o", "name"]);
        out.contains("widgets.metrics.example.com").then_some(out)
    })
    .await;
    assert_eq!(resources.trim(), "widgets.metrics.example.com");
    let groups = raw(&server, "/apis");
    let ours = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == GROUP)
        .expect("group in /apis")
        .clone();
    assert_eq!(
        ours["preferredVersion"]["groupVersion"],
        format!("{GROUP}/{VERSION}")
    );
    let group_doc = raw(&server, &format!("/apis/{GROUP}"));
    assert_eq!(group_doc["kind"], "APIGroup");

    // OpenAPI: the extension's v3 document is served for its
    // group-version, and its v2 paths and definitions join /openapi/v2.
    let v3_root = raw(&server, "/openapi/v3");
    let url = v3_root["paths"][format!("apis/{GROUP}/{VERSION}")]["serverRelativeURL"]
        .as_str()
        .expect("the group-version in /openapi/v3")
        .to_string();
    assert!(
        url.starts_with(&format!("/openapi/v3/apis/{GROUP}/{VERSION}?hash=")),
        "{url}"
    );
    assert_eq!(raw(&server, &url), openapi_v3());
    assert!(v3_root["paths"]["apis/apps/v1"].is_object());
    let v2 = raw(&server, "/openapi/v2");
    assert!(
        v2["paths"][format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/widgets")]
            .is_object()
    );
    assert!(v2["paths"]["/apis/other.example.com/v1/things"].is_null());
    assert_eq!(
        v2["definitions"]["com.example.metrics.v1beta1.Widget"],
        widget_schema()
    );
    assert!(v2["definitions"]["io.k8s.api.apps.v1.Deployment"].is_object());

    // get and list through the proxy, as the loopback admin.
    let listed = server.kubectl_ok(&["get", "widgets", "-o", "name"]);
    assert_eq!(listed.trim(), "widget.metrics.example.com/w1");
    let one = server.get_json(&["wd", "w1"]);
    assert_eq!(
        one["metadata"]["annotations"]["seen-by"],
        "system:apiserver"
    );

    // An RBAC-allowed user reaches the backend as itself, with its groups
    // and none of the client's credentials or impersonation headers.
    server.kubectl_ok(&[
        "create",
        "clusterrole",
        "widget-reader",
        "--verb=get,list,watch",
        &format!("--resource=widgets.{GROUP}"),
    ]);
    server.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "alice-widgets",
        "--clusterrole=widget-reader",
        "--user=alice",
    ]);
    let as_alice =
        e2e::eventually_async("alice may get widgets", Duration::from_secs(20), || async {
            let out = server.kubectl(&[
                "get",
                "widget",
                "w1",
                "--as=alice",
                "--as-group=team-a",
                "-o",
                "json",
            ]);
            out.status
                .success()
                .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
        })
        .await;
    assert_eq!(as_alice["metadata"]["annotations"]["seen-by"], "alice");
    let alice: Vec<Seen> = ext
        .seen()
        .into_iter()
        .filter(|s| s.user == "alice")
        .collect();
    assert!(
        alice
            .iter()
            .any(|s| s.path.ends_with("/namespaces/default/widgets/w1")),
        "{alice:?}"
    );
    assert!(
        alice
            .iter()
            .all(|s| s.groups == ["team-a", "system:authenticated"]),
        "{alice:?}"
    );
    assert!(ext
        .seen()
        .iter()
        .all(|s| !s.authorization && !s.impersonation));

    // RBAC denies here: the backend never sees the request.
    let (code, err) = server.kubectl_err(&["get", "widgets", "--as=jane"]);
    assert_ne!(code, 0);
    assert!(
        err.contains(r#"widgets.metrics.example.com is forbidden: User "jane" cannot list resource "widgets" in API group "metrics.example.com" in the namespace "default""#),
        "{err}"
    );
    assert!(ext.seen().iter().all(|s| s.user != "jane"));

    // Watch through the proxy with the kube crate: the event streams
    // through while the backend holds the stream open.
    let client = kube::Client::try_from(kube::Config::new(server.url.parse().unwrap())).unwrap();
    let ar = kube::discovery::ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api: kube::Api<kube::core::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "default", &ar);
    let started = std::time::Instant::now();
    let mut stream = api
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(4), stream.next())
        .await
        .expect("the first event arrives before the backend ends the stream")
        .expect("an event")
        .expect("not an error");
    match first {
        kube::core::WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("w1")),
        other => panic!("unexpected event {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(4));
    drop(stream);

    // An upgrade passes through: 101 from the extension, then bytes both ways.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        let req = format!(
            "GET /apis/{GROUP}/{VERSION}/namespaces/default/widgets/w1/echo HTTP/1.1\r\n\
             Host: {}\r\nConnection: Upgrade\r\nUpgrade: test-echo\r\n\r\n",
            server.addr()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut byte))
                .await
                .expect("the 101 arrives")
                .unwrap();
            assert_eq!(
                n,
                1,
                "connection closed after {:?}",
                String::from_utf8_lossy(&head)
            );
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_string();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("upgrade: test-echo"),
            "{head}"
        );
        s.write_all(b"ping through the aggregator").await.unwrap();
        let mut echoed = vec![0u8; 27];
        tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut echoed))
            .await
            .expect("the echo arrives")
            .unwrap();
        assert_eq!(&echoed, b"ping through the aggregator");
    }

    // The kube crate's own discovery of the group.
    let group = kube::discovery::oneshot::group(&client, GROUP)
        .await
        .expect("group discovery");
    assert_eq!(group.preferred_version_or_latest(), VERSION);
    let (res, _) = group
        .recommended_kind("Widget")
        .expect("Widget in the group");
    assert_eq!(res.plural, "widgets");

    // A figure, not a limit: proxied GETs against local ones.
    let time = |path: String| {
        let server = &server;
        async move {
            let started = std::time::Instant::now();
            for _ in 0..50 {
                assert_eq!(server.request("GET", &path, &[], b"").await.status, 200);
            }
            started.elapsed() / 50
        }
    };
    let proxied = time(format!(
        "/apis/{GROUP}/{VERSION}/namespaces/default/widgets/w1"
    ))
    .await;
    let local = time("/api/v1/namespaces/default".to_string()).await;
    eprintln!("aggregation figure: proxied GET {proxied:?}, local GET {local:?} (mean of 50)");

    // The backend goes away: Available=False and 503, then back.
    drop(ext);
    let cond = wait_available(&server, &name, "False").await;
    assert_eq!(cond["reason"], "FailedDiscoveryCheck");
    let msg = cond["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!(
            "failing or missing response from https://{ip}:{port}/apis/{GROUP}/{VERSION}"
        )),
        "{msg}"
    );
    let down = server
        .request(
            "GET",
            &format!("/apis/{GROUP}/{VERSION}/namespaces/default/widgets"),
            &[],
            b"",
        )
        .await;
    assert_eq!(down.status, 503, "{}", down.text());
    let status: Value = serde_json::from_slice(&down.body).unwrap();
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert_eq!(status["message"], "service unavailable");
    let (code, err) = server.kubectl_err(&["get", "widgets"]);
    assert_ne!(code, 0);
    assert!(err.contains("ServiceUnavailable"), "{err}");

    let ext = Extension::start(SocketAddr::new(ip, port), &pki, &front_proxy_ca).await;
    let cond = wait_available(&server, &name, "True").await;
    assert_eq!(cond["reason"], "Passed");
    let listed = server.kubectl_ok(&["get", "widgets", "-o", "name"]);
    assert_eq!(listed.trim(), "widget.metrics.example.com/w1");
    drop(ext);

    // A Service that is not there, and EndpointSlices without a ready
    // address, in kube's words.
    server.kubectl_ok(&["delete", "endpointslice", &format!("{SERVICE}-1")]);
    let cond = wait_available(&server, &name, "False").await;
    assert_eq!(cond["reason"], "EndpointsNotFound", "{cond}");
    assert_eq!(
        cond["message"],
        format!("cannot find endpointslices for service/{SERVICE} in \"default\"")
    );
    server.kubectl_ok(&["delete", "service", SERVICE]);
    let cond = e2e::eventually_async("ServiceNotFound", Duration::from_secs(20), || async {
        available(&server, &name).filter(|c| c["reason"] == "ServiceNotFound")
    })
    .await;
    assert_eq!(
        cond["message"],
        format!("service/{SERVICE} in \"default\" is not present")
    );
}

/// `utils.create_from_yaml` of an APIService, as the Python client's own
/// tests do, and its condition read back through ApiregistrationV1Api.
#[tokio::test]
async fn python_create_apiservice_from_yaml() {
    let server = Server::start().await;
    e2e::run_python_client(&server, "apiservice_python.py");
}

/// Every CRD group-version gets a local APIService, and loses it with the CRD.
#[tokio::test]
async fn crd_versions_have_local_apiservices() {
    let server = Server::start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.agg.example.com"},
        "spec": {"group": "agg.example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v2alpha1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &crd.to_string());
    for name in ["v1.agg.example.com", "v2alpha1.agg.example.com"] {
        let v = e2e::eventually_async(name, Duration::from_secs(20), || async {
            let out = server.kubectl(&["get", "apiservice", name, "-o", "json"]);
            out.status
                .success()
                .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
        })
        .await;
        assert_eq!(
            v["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
            "true"
        );
        assert_eq!(v["spec"]["groupPriorityMinimum"], 1000);
        assert_eq!(v["spec"]["versionPriority"], 100);
        assert!(v["spec"].get("service").is_none_or(Value::is_null));
        let cond = &v["status"]["conditions"][0];
        assert_eq!(cond["reason"], "Local");
        assert_eq!(cond["status"], "True");
    }
    server.kubectl_ok(&["delete", "crd", "gadgets.agg.example.com"]);
    server
        .wait_gone(
            Duration::from_secs(30),
            "automanaged APIService",
            &["get", "apiservice", "v1.agg.example.com"],
        )
        .await;
    // An unrelated failure would print here.
    let (_, err) = server.kubectl_err(&["get", "apiservice", "v2alpha1.agg.example.com"]);
    assert!(
        err.contains("NotFound"),
        "{}",
        stderr(&server.kubectl(&["get", "apiservice"]))
    );
}

/// A client certificate (leaf PEM, key PEM) for `cn` from `issuer`.
fn client_cert(issuer: &rcgen::Issuer<'_, &rcgen::KeyPair>, cn: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = p.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// One HTTPS request to `port` on 127.0.0.1 with a client certificate:
/// (status, body).
async fn https(
    port: u16,
    server_ca: &str,
    client: Option<&(String, String)>,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Value) {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(server_ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::post(path)
        .header("Host", format!("127.0.0.1:{port}"))
        .header("Content-Type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::from(body.to_string()))).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Request-header authentication on this server's secure port: a front
/// proxy's certificate from --requestheader-client-ca-file with an allowed
/// CN makes the X-Remote-* headers the user; any other CN is refused, and
/// a client-CA certificate is its own user whatever headers it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_header_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test-front-proxy-ca");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, &ca_key);
    let ca_file = dir.path().join("front-proxy-ca.crt");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let data = dir.path().join("data");
    let etcd = TestEtcd::shared().await;
    let (server, port) = 'started: {
        for _ in 0..4 {
            let port = e2e::free_port();
            let args = [
                format!("--secure-listen=127.0.0.1:{port}"),
                format!("--data-dir={}", data.display()),
                format!("--requestheader-client-ca-file={}", ca_file.display()),
                "--requestheader-allowed-names=test-proxy".to_string(),
            ];
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match Server::try_start_with_prefix(&etcd.endpoint(), &e2e::unique_prefix(), &args)
                .await
            {
                Ok(s) => break 'started (s, port),
                Err(e2e::StartError::PortTaken(_)) => continue,
                Err(e2e::StartError::Exited(log)) => panic!("server exited:\n{log}"),
            }
        }
        panic!("no free secure port");
    };
    let server_ca = std::fs::read_to_string(data.join("pki/ca.crt")).unwrap();
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let proxy = client_cert(&issuer, "test-proxy");
    let headers = [
        ("X-Remote-User", "bob"),
        ("X-Remote-Group", "qa"),
        ("X-Remote-Extra-Scopes", "read"),
    ];
    let (code, body) = https(port, &server_ca, Some(&proxy), path, &headers, &review).await;
    assert_eq!(code, 201, "{body}\n{}", server.log());
    let info = &body["status"]["userInfo"];
    assert_eq!(info["username"], "bob");
    assert_eq!(info["groups"], json!(["qa", "system:authenticated"]));
    assert_eq!(info["extra"]["scopes"], json!(["read"]));

    // A CN outside --requestheader-allowed-names: 401.
    let intruder = client_cert(&issuer, "intruder");
    let (code, _) = https(port, &server_ca, Some(&intruder), path, &headers, &review).await;
    assert_eq!(code, 401);
    // The proxy's certificate without a username header names nobody.
    let (code, _) = https(port, &server_ca, Some(&proxy), path, &[], &review).await;
    assert_eq!(code, 401);
    // The admin's client certificate is the admin, whatever the headers say.
    let admin = (
        std::fs::read_to_string(data.join("pki/admin.crt")).unwrap(),
        std::fs::read_to_string(data.join("pki/admin.key")).unwrap(),
    );
    let (code, body) = https(port, &server_ca, Some(&admin), path, &headers, &review).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "kubernetes-admin");
    // And a front-proxy certificate is not a client certificate of its own
    // (it does not verify against the client CA): the CN is no user.
    let (code, _) = https(
        port,
        &server_ca,
        Some(&proxy),
        path,
        &[("X-Remote-Group", "qa")],
        &review,
    )
    .await;
    assert_eq!(code, 401);
}
