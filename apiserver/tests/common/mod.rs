//! Shared harness of the HTTP API tests: one server state per test on its own
//! etcd key prefix, driven in-process through the router with `oneshot`.

#![allow(dead_code)]

use apiserver::server::{router, AppState};
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;
use watchcache::testing::TestEtcd;
use watchcache::{Cacher, CacherConfig};

/// How long a test waits for something that happens in the background.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A prefix no other test of this binary uses.
pub fn unique_prefix(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("/t-{name}-{}-{n}", std::process::id())
}

/// One API server (state + router) over its own etcd prefix.
pub struct Api {
    pub state: Arc<AppState>,
    router: Router,
}

/// A response: status code, headers and the body as JSON (or, when it is not
/// JSON, the body text as a JSON string).
pub struct Resp {
    pub code: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: Bytes,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn header_all(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    pub fn rv(&self) -> String {
        rv(&self.body)
    }

    /// `(code, reason, message)` of a Status body.
    pub fn status(&self) -> (u16, &str, &str) {
        (
            self.code.as_u16(),
            self.body["reason"].as_str().unwrap_or(""),
            self.body["message"].as_str().unwrap_or(""),
        )
    }
}

/// `metadata.resourceVersion` of an object or list.
pub fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The `metadata.name` of every item of a list, in order.
pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// No controllers run in these servers, so no namespace gets its
/// `default` ServiceAccount: the ServiceAccount admission plugin is off
/// here, as kube's own integration servers turn it off.
pub fn without_controllers(mut state: AppState) -> AppState {
    state.admission =
        apiserver::admission::plugins::Chain::new(&[], &["ServiceAccount".to_string()])
            .expect("known plugin");
    state
}

impl Api {
    /// A server on the shared etcd of this test binary, bootstrapped.
    pub async fn new(name: &str) -> Api {
        Self::on(TestEtcd::shared().await, name).await
    }

    /// A server on the given etcd, bootstrapped.
    pub async fn on(etcd: &TestEtcd, name: &str) -> Api {
        let store = etcd.store().await;
        let prefix = unique_prefix(name);
        // The production path: reads and watches through the watch cache.
        let cache = Cacher::new(
            store.clone(),
            CacherConfig {
                prefix: format!("{prefix}/"),
                ..CacherConfig::default()
            },
        );
        let state = Arc::new(without_controllers(
            AppState::new(Arc::new(store.clone()), &prefix).with_cache(cache),
        ));
        // As `run` does: etcd requests go to this state's metrics.
        state.observe_etcd(&store);
        apiserver::bootstrap::run(Arc::clone(&state)).await;
        let router = router(Arc::clone(&state));
        Api { state, router }
    }

    /// A server on `prefix` (which may hold another server's data) whose
    /// etcd store transforms values with `transformers` (encryption at
    /// rest), with the watch cache, bootstrapped.
    pub async fn transformed(prefix: &str, transformers: watchcache::Transformers) -> Api {
        let store = TestEtcd::shared()
            .await
            .store()
            .await
            .with_transformers(transformers);
        let cache = Cacher::new(
            store.clone(),
            CacherConfig {
                prefix: format!("{prefix}/"),
                ..CacherConfig::default()
            },
        );
        let state = Arc::new(without_controllers(
            AppState::new(Arc::new(store), prefix).with_cache(cache),
        ));
        apiserver::bootstrap::run(Arc::clone(&state)).await;
        let router = router(Arc::clone(&state));
        Api { state, router }
    }

    /// A server whose state `f` adjusts first (auditing, authenticator,
    /// authorizer); the secure port's router when `secure`, else the plain
    /// one.
    pub async fn customized(name: &str, secure: bool, f: impl FnOnce(&mut AppState)) -> Api {
        let Api { state, .. } = Self::new(name).await;
        let mut state = Arc::into_inner(state).expect("no other reference to the state yet");
        f(&mut state);
        let state = Arc::new(state);
        let router = if secure {
            apiserver::server::secure_router(Arc::clone(&state))
        } else {
            router(Arc::clone(&state))
        };
        Api { state, router }
    }

    /// A server whose router is the secure port's (requests authenticated
    /// by `authenticator`, authorized by `authorizer`).
    pub async fn secure(
        name: &str,
        authenticator: Arc<dyn apiserver::auth::Authenticator>,
        authorizer: Arc<dyn apiserver::auth::Authorizer>,
        anonymous_auth: bool,
    ) -> Api {
        let Api { state, .. } = Self::new(name).await;
        let mut state = Arc::into_inner(state).expect("no other reference to the state yet");
        state.authenticator = Some(authenticator);
        state.authorizer = authorizer;
        state.anonymous_auth = anonymous_auth;
        let state = Arc::new(state);
        let router = apiserver::server::secure_router(Arc::clone(&state));
        Api { state, router }
    }

    /// A secure-port server authorized by RBAC over its own (bootstrapped)
    /// objects, as `--authorization-mode=RBAC` runs it; returns once the
    /// policy index has its first snapshot.
    pub async fn secure_rbac(
        name: &str,
        authenticator: Arc<dyn apiserver::auth::Authenticator>,
    ) -> Api {
        let Api { state, .. } = Self::new(name).await;
        let mut state = Arc::into_inner(state).expect("no other reference to the state yet");
        let (authorizer, index) = apiserver::authorizer(
            &["RBAC".to_string()],
            Arc::clone(&state.store),
            &state.prefix,
        );
        let index = index.expect("RBAC mode has an index");
        tokio::time::timeout(DEADLINE, index.wait_synced())
            .await
            .expect("RBAC index synced");
        state.authenticator = Some(authenticator);
        state.authorizer = authorizer;
        state.rbac = Some(index);
        let state = Arc::new(state);
        let router = apiserver::server::secure_router(Arc::clone(&state));
        Api { state, router }
    }

    /// The router, to serve over TCP.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// The one request helper: method, path (with query), extra headers,
    /// body.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Resp {
        let resp = self.send(method, path, headers, body).await;
        let code = resp.status();
        let headers = resp.headers().clone();
        let raw = match tokio::time::timeout(DEADLINE, resp.into_body().collect()).await {
            Ok(Ok(c)) => c.to_bytes(),
            Ok(Err(e)) => panic!("{method} {path}: reading the body: {e}"),
            Err(_) => panic!("{method} {path}: the body did not end within {DEADLINE:?}"),
        };
        let body = serde_json::from_slice(&raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into_owned()));
        Resp {
            code,
            headers,
            body,
            raw,
        }
    }

    /// Sends a request and returns the response with its body unread (for
    /// streams).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> axum::response::Response {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(body.into()).expect("request");
        match self.router.clone().oneshot(req).await {
            Ok(r) => r,
            Err(e) => match e {},
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call("GET", path, &[], Body::empty()).await
    }

    /// POST/PUT with a JSON body.
    pub async fn send_json(&self, method: &str, path: &str, body: &Value) -> Resp {
        self.call(
            method,
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send_json("POST", path, body).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.send_json("PUT", path, body).await
    }

    /// PATCH with the given patch content type.
    pub async fn patch(&self, path: &str, ctype: &str, body: &Value) -> Resp {
        self.call(
            "PATCH",
            path,
            &[("content-type", ctype)],
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call("DELETE", path, &[], Body::empty()).await
    }

    pub async fn delete_with(&self, path: &str, options: &Value) -> Resp {
        self.send_json("DELETE", path, options).await
    }

    /// POST that must succeed with 201; returns the created object.
    pub async fn create(&self, collection: &str, body: &Value) -> Value {
        let r = self.post(collection, body).await;
        assert_eq!(
            r.code,
            StatusCode::CREATED,
            "create at {collection}: {}",
            r.body
        );
        r.body
    }

    /// GET that must succeed; returns the object.
    pub async fn must_get(&self, path: &str) -> Value {
        let r = self.get(path).await;
        assert_eq!(r.code, StatusCode::OK, "GET {path}: {}", r.body);
        r.body
    }

    /// Creates a namespace and returns its name.
    pub async fn namespace(&self, name: &str) -> String {
        self.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
        name.to_string()
    }

    /// Polls `path` until it answers 404, within the deadline.
    pub async fn wait_gone(&self, path: &str) {
        let start = Instant::now();
        loop {
            let r = self.get(path).await;
            if r.code == StatusCode::NOT_FOUND {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{path} still there after {DEADLINE:?}: {}",
                r.body
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A ConfigMap manifest.
pub fn configmap(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// A ConfigMap with labels.
pub fn labelled_configmap(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut cm = configmap(name, &[("k", "v")]);
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    cm["metadata"]["labels"] = Value::Object(labels);
    cm
}

/// A Deployment with one container, selecting `app=<name>`.
pub fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [
                    {"name": "web", "image": "nginx:1.27"},
                    {"name": "sidecar", "image": "busybox:1.36"}
                ]}
            }
        }
    })
}

/// A Pod, optionally bound to a node, with a phase in its status.
pub fn pod(name: &str, node: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

/// Reads lines of a streaming body until `want` lines arrived, the stream
/// ended, or the deadline passed. Returns the parsed lines and whether the
/// stream ended.
pub async fn read_lines(
    resp: axum::response::Response,
    want: usize,
    deadline: Duration,
) -> (Vec<Value>, bool) {
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    let mut lines = Vec::new();
    let start = Instant::now();
    loop {
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let trimmed = String::from_utf8_lossy(&line).trim().to_string();
            if !trimmed.is_empty() {
                lines.push(serde_json::from_str(&trimmed).expect("a JSON watch event"));
            }
        }
        if lines.len() >= want {
            return (lines, false);
        }
        let left = deadline.saturating_sub(start.elapsed());
        if left.is_zero() {
            return (lines, false);
        }
        match tokio::time::timeout(left, body.frame()).await {
            Err(_) => return (lines, false),
            Ok(None) => return (lines, true),
            Ok(Some(Err(e))) => panic!("watch stream failed: {e}"),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
}
