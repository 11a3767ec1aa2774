//! Calls to webhooks: one JSON document POSTed over HTTPS, one JSON
//! document back. CRD conversion webhooks use it (and admission webhooks
//! will): the server is named by URL, trusted through the `caBundle` the
//! configuration carries, and answers within the configured timeout.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::{http1, http2};
use rustls::pki_types::ServerName;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub mod trust;

/// The most a webhook may answer (kube reads at most its request limit).
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Why a call failed, worded as Go's HTTP client words it where kube shows
/// that text (`Post "https://...": ...`).
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Config(String),
    #[error("Post \"{url}\": {message}")]
    Transport { url: String, message: String },
    #[error("Post \"{url}\": context deadline exceeded")]
    Timeout { url: String },
    #[error("{0}")]
    Response(String),
}

/// One webhook endpoint.
#[derive(Clone)]
pub struct Webhook {
    url: String,
    uri: hyper::Uri,
    host: String,
    port: u16,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
    /// The name the server's certificate must carry, when it is not the
    /// host dialled (a Service reached at an endpoint's address).
    server_name: Option<String>,
    /// Connections kept open for the next calls (shared by clones).
    pool: Arc<std::sync::Mutex<Pool>>,
}

/// Open connections to one webhook: an HTTP/2 one is shared by every call;
/// idle HTTP/1.1 ones wait for the next call, at most [`MAX_IDLE`].
#[derive(Default)]
struct Pool {
    h2: Option<http2::SendRequest<Full<Bytes>>>,
    idle: Vec<http1::SendRequest<Full<Bytes>>>,
}

/// Idle HTTP/1.1 connections kept per webhook.
const MAX_IDLE: usize = 16;

enum Conn {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook").field("url", &self.url).finish()
    }
}

impl Webhook {
    /// An HTTPS endpoint at `url`, trusting the PEM certificates of
    /// `ca_bundle` (without one, nothing is trusted: this server ships no
    /// system roots).
    pub fn new(
        url: &str,
        ca_bundle: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Webhook, WebhookError> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| WebhookError::Config(format!("invalid webhook URL {url:?}: {e}")))?;
        if uri.scheme_str() != Some("https") {
            return Err(WebhookError::Config(format!(
                "invalid webhook URL {url:?}: 'https' is the only allowed URL scheme"
            )));
        }
        let host = uri
            .host()
            .ok_or_else(|| WebhookError::Config(format!("invalid webhook URL {url:?}: no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(443);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let trust = trust::ServerTrust::new(ca_bundle, Arc::clone(&provider))
            .map_err(|e| WebhookError::Config(e.to_string()))?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| WebhookError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(trust))
            .with_no_client_auth();
        let mut tls = tls;
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Webhook {
            url: url.to_string(),
            uri,
            host,
            port,
            tls: Arc::new(tls),
            timeout,
            server_name: None,
            pool: Arc::default(),
        })
    }

    /// Verifies the server's certificate for `name` instead of the URL's
    /// host (kube checks a Service's webhook for `<service>.<namespace>.svc`).
    pub fn with_server_name(mut self, name: &str) -> Webhook {
        self.server_name = Some(name.to_string());
        self
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// POSTs `body` and returns the JSON answer of a 2xx response.
    pub async fn post_json(&self, body: &Value) -> Result<Value, WebhookError> {
        match tokio::time::timeout(self.timeout, self.call(body)).await {
            Ok(r) => r,
            Err(_) => Err(WebhookError::Timeout {
                url: self.url.clone(),
            }),
        }
    }

    fn transport(&self, message: impl std::fmt::Display) -> WebhookError {
        WebhookError::Transport {
            url: self.url.clone(),
            message: message.to_string(),
        }
    }

    /// A pooled connection, if one is open.
    fn pooled(&self) -> Option<Conn> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h2) = pool.h2.as_ref().filter(|c| !c.is_closed()) {
            return Some(Conn::H2(h2.clone()));
        }
        pool.h2 = None;
        while let Some(c) = pool.idle.pop() {
            if !c.is_closed() {
                return Some(Conn::H1(c));
            }
        }
        None
    }

    fn give_back(&self, conn: Conn) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        match conn {
            Conn::H2(c) => pool.h2 = Some(c),
            Conn::H1(c) if pool.idle.len() < MAX_IDLE && !c.is_closed() => pool.idle.push(c),
            Conn::H1(_) => {}
        }
    }

    /// A new connection: TLS with ALPN, HTTP/2 when the server offers it.
    async fn connect(&self) -> Result<Conn, WebhookError> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| self.transport(format!("dial tcp {}:{}: {e}", self.host, self.port)))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(
            self.server_name
                .clone()
                .unwrap_or_else(|| self.host.clone()),
        )
        .map_err(|e| self.transport(e))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls))
            .connect(name, tcp)
            .await
            .map_err(|e| self.transport(format!("tls: {e}")))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = hyper_util::rt::TokioIo::new(tls);
        // The connection task ends when the server closes it or every
        // handle to it is dropped.
        if h2 {
            let (sender, conn) = http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .map_err(|e| self.transport(e))?;
            tokio::spawn(conn);
            Ok(Conn::H2(sender))
        } else {
            let (sender, conn) = http1::handshake(io).await.map_err(|e| self.transport(e))?;
            tokio::spawn(conn);
            Ok(Conn::H1(sender))
        }
    }

    async fn call(&self, body: &Value) -> Result<Value, WebhookError> {
        let payload = Bytes::from(serde_json::to_vec(body).map_err(|e| self.transport(e))?);
        // A pooled connection the server closed meanwhile fails at once:
        // then once more on a new one.
        let resp = match self.pooled() {
            Some(conn) => match self.send(conn, payload.clone()).await {
                Ok(r) => r,
                Err(_) => self.send(self.connect().await?, payload).await?,
            },
            None => self.send(self.connect().await?, payload).await?,
        };
        let (status, bytes) = resp;
        if !status.is_success() {
            return Err(WebhookError::Response(format!(
                "the server responded with status {}: {}",
                status.as_u16(),
                String::from_utf8_lossy(&bytes[..bytes.len().min(256)])
            )));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| WebhookError::Response(format!("unable to decode the response: {e}")))
    }

    /// One request on `conn`; the connection goes back to the pool once
    /// its answer is read.
    async fn send(
        &self,
        conn: Conn,
        payload: Bytes,
    ) -> Result<(hyper::StatusCode, Bytes), WebhookError> {
        let path = self.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let mut req = hyper::Request::post(path)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json");
        let resp = match conn {
            Conn::H1(mut sender) => {
                sender.ready().await.map_err(|e| self.transport(e))?;
                req = req.header(hyper::header::HOST, format!("{}:{}", self.host, self.port));
                let req = req
                    .body(Full::new(payload))
                    .map_err(|e| self.transport(e))?;
                let resp = sender
                    .send_request(req)
                    .await
                    .map_err(|e| self.transport(e))?;
                let out = self.read(resp).await?;
                self.give_back(Conn::H1(sender));
                out
            }
            Conn::H2(mut sender) => {
                sender.ready().await.map_err(|e| self.transport(e))?;
                let uri = format!("https://{}:{}{path}", self.host, self.port);
                let req = req
                    .uri(uri)
                    .body(Full::new(payload))
                    .map_err(|e| self.transport(e))?;
                let resp = sender
                    .send_request(req)
                    .await
                    .map_err(|e| self.transport(e))?;
                self.give_back(Conn::H2(sender));
                self.read(resp).await?
            }
        };
        Ok(resp)
    }

    async fn read(
        &self,
        resp: hyper::Response<hyper::body::Incoming>,
    ) -> Result<(hyper::StatusCode, Bytes), WebhookError> {
        let status = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| self.transport(e))?
            .to_bytes();
        Ok((status, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    /// Self-signed (`CA:TRUE`) certificates made by `openssl req -x509`
    /// for webhook.default.svc, localhost and 127.0.0.1 (testdata/README.md).
    const CERT: &str = include_str!("webhook/testdata/selfsigned.pem");
    const KEY: &str = include_str!("webhook/testdata/selfsigned-key.pem");
    const OTHER_CERT: &str = include_str!("webhook/testdata/other-selfsigned.pem");

    /// An HTTPS server on 127.0.0.1 serving `cert` that answers every POST
    /// with `{"echo": <the body>}`; it stops when the task is dropped.
    async fn serve(cert: &str, key: &str) -> (String, tokio::task::JoinHandle<()>) {
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/validate", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        |req: hyper::Request<hyper::body::Incoming>| async move {
                            let body = req.into_body().collect().await?.to_bytes();
                            let seen: Value = serde_json::from_slice(&body).unwrap_or_default();
                            let answer = serde_json::to_vec(&serde_json::json!({"echo": seen}))
                                .unwrap_or_default();
                            Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from(
                                answer,
                            ))))
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        (url, task)
    }

    fn hook(url: &str, bundle: &str) -> Webhook {
        Webhook::new(url, Some(bundle.as_bytes()), Duration::from_secs(10)).unwrap()
    }

    #[tokio::test]
    async fn an_openssl_self_signed_certificate_that_is_the_ca_bundle_is_trusted() {
        let (url, _server) = serve(CERT, KEY).await;
        let body = serde_json::json!({"kind": "AdmissionReview"});
        // Dialled by address, as a URL webhook is.
        let answer = hook(&url, CERT).post_json(&body).await.unwrap();
        assert_eq!(answer["echo"], body);
        // Checked for the Service's name, as a Service webhook is.
        let svc = hook(&url, CERT).with_server_name("webhook.default.svc");
        assert_eq!(svc.post_json(&body).await.unwrap()["echo"], body);
    }

    #[tokio::test]
    async fn a_wrong_name_or_another_certificate_still_fails() {
        let (url, _server) = serve(CERT, KEY).await;
        let body = serde_json::json!({});
        let err = hook(&url, CERT)
            .with_server_name("other.default.svc")
            .post_json(&body)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("Post \"{url}\": tls: "))
                && text.contains("certificate not valid for name \"other.default.svc\""),
            "{text}"
        );
        // Another self-signed certificate with the same names and subject:
        // its signature does not verify under the trusted one's key.
        let err = hook(&url, OTHER_CERT).post_json(&body).await.unwrap_err();
        assert!(
            matches!(err, WebhookError::Transport { ref message, .. } if message.starts_with("tls: ")),
            "{err}"
        );
        // No bundle: nothing is trusted.
        let err = Webhook::new(&url, None, Duration::from_secs(10))
            .unwrap()
            .post_json(&body)
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid peer certificate: UnknownIssuer"),
            "{err}"
        );
    }
}
