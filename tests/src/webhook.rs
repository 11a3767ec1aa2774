//! Small HTTPS webhook servers for tests (conversion webhooks now,
//! admission webhooks later): a CA and a serving certificate for 127.0.0.1
//! made per server (naming 127.0.0.1, localhost and the Service
//! `webhook.default.svc`), and a handler from JSON request to JSON response.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What the handler answers: a JSON body with status 200, or a bare status.
pub enum Answer {
    Json(Value),
    Status(u16, String),
}

/// A running webhook server; it stops when dropped.
pub struct WebhookServer {
    pub addr: SocketAddr,
    /// The CA certificate (PEM) that signed the serving certificate.
    pub ca_pem: String,
    /// How many requests it has answered.
    pub calls: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    /// `https://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The CA as a `caBundle` value (base64 of the PEM).
    pub fn ca_bundle(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes())
    }

    /// Starts a server on 127.0.0.1 calling `handler` with each request's
    /// JSON body.
    pub async fn start<F>(handler: F) -> WebhookServer
    where
        F: Fn(Value) -> Answer + Send + Sync + 'static,
    {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST.into(), handler).await
    }

    /// [`WebhookServer::start`] listening on `ip` (an address of this
    /// machine: an EndpointSlice may not name a loopback address).
    pub async fn start_on<F>(ip: std::net::IpAddr, handler: F) -> WebhookServer
    where
        F: Fn(Value) -> Answer + Send + Sync + 'static,
    {
        let ca_key = rcgen::KeyPair::generate().expect("ca key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "webhook-test-ca");
        let ca = ca_params.self_signed(&ca_key).expect("ca cert");
        let issuer = rcgen::Issuer::new(ca_params, &ca_key);
        let key = rcgen::KeyPair::generate().expect("server key");
        let params = rcgen::CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "webhook.default.svc".to_string(),
        ])
        .expect("server params");
        let cert = params.signed_by(&key, &issuer).expect("server cert");
        Self::serve(
            ip,
            CertificateDer::from(cert.der().to_vec()),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            ca.pem(),
            handler,
        )
        .await
    }

    /// [`WebhookServer::start`] serving a certificate of the test's own
    /// (PEM), e.g. a self-signed one made by `openssl req -x509`; `ca_pem`
    /// is then that certificate.
    pub async fn start_with_identity<F>(cert_pem: &str, key_pem: &str, handler: F) -> WebhookServer
    where
        F: Fn(Value) -> Answer + Send + Sync + 'static,
    {
        use rustls::pki_types::pem::PemObject;
        Self::serve(
            std::net::Ipv4Addr::LOCALHOST.into(),
            CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("certificate PEM"),
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("key PEM"),
            cert_pem.to_string(),
            handler,
        )
        .await
    }

    async fn serve<F>(
        ip: std::net::IpAddr,
        cert: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
        ca_pem: String,
        handler: F,
    ) -> WebhookServer
    where
        F: Fn(Value) -> Answer + Send + Sync + 'static,
    {
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("tls versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("tls config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let handler = Arc::new(handler);
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let task = tokio::spawn(async move {
            // Connections belong to the server: stopping it closes them
            // (a client's pooled connection sees the server go away).
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                while connections.try_join_next().is_some() {}
                let acceptor = acceptor.clone();
                let handler = Arc::clone(&handler);
                let counter = Arc::clone(&counter);
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let handler = Arc::clone(&handler);
                            let counter = Arc::clone(&counter);
                            async move {
                                let body = req
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let value: Value =
                                    serde_json::from_slice(&body).unwrap_or(Value::Null);
                                counter.fetch_add(1, Ordering::SeqCst);
                                let (code, bytes) = match handler(value) {
                                    Answer::Json(v) => {
                                        (200, serde_json::to_vec(&v).unwrap_or_default())
                                    }
                                    Answer::Status(code, text) => (code, text.into_bytes()),
                                };
                                let resp = hyper::Response::builder()
                                    .status(code)
                                    .header("Content-Type", "application/json")
                                    .body(Full::new(Bytes::from(bytes)))
                                    .expect("response");
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        WebhookServer {
            addr,
            ca_pem,
            calls,
            task,
        }
    }
}

/// This machine's address on its default route, if it has one (found
/// without sending anything: a UDP socket is only connected).
pub fn local_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:1").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}
