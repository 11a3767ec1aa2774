//! `componentstatuses` (kube's deprecated ComponentStatus), probed when
//! asked, as kube probes them: `scheduler` and `controller-manager` by a
//! GET of `/healthz` on their secure localhost ports (10259 and 10257,
//! certificates not verified, as kube does not), and each etcd member
//! this server uses as `etcd-0`, `etcd-1`, ... in `--etcd-servers` order.
//! With no scheduler beside this replica, `scheduler` is listed unhealthy
//! with the connection error, as kube lists it.
//!
//! Below the state: the caller passes the etcd members.

use futures_util::future::join_all;
use serde_json::{json, Value};
use std::time::Duration;

/// kube's probe timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// A ComponentStatus: its `Healthy` condition from a probe's outcome
/// (healthy or not, with a message), or from why it could not probe.
fn status(name: String, outcome: Result<(bool, String), String>) -> Value {
    let mut condition = json!({"type": "Healthy"});
    match outcome {
        Ok((healthy, message)) => {
            condition["status"] = json!(if healthy { "True" } else { "False" });
            if !message.is_empty() {
                condition["message"] = json!(message);
            }
        }
        Err(e) => {
            condition["status"] = json!("False");
            condition["error"] = json!(e);
        }
    }
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [condition],
    })
}

/// One member, on a connection of its own (the shared client balances
/// over every member and would not tell which one answered).
async fn probe(endpoint: &str) -> Result<(), String> {
    let store = watchcache::etcd::EtcdStore::connect(&[endpoint.to_string()], PROBE_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    store.health().await.map_err(|e| e.to_string())
}

/// A component's `/healthz` over TLS on localhost: whether it answered
/// below 400 (kube's HTTP probe) and the message (the body, or kube's
/// words for the code), or why it could not be asked.
async fn healthz(port: u16) -> Result<(bool, String), String> {
    use http_body_util::{BodyExt, Empty, Limited};
    let url = format!("https://127.0.0.1:{port}/healthz");
    let failed = |e: String| format!("Get {url:?}: {e}");
    let call = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| {
                let why = match e.kind() {
                    std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                    _ => e.to_string(),
                };
                failed(format!("dial tcp 127.0.0.1:{port}: connect: {why}"))
            })?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1")
            .map_err(|e| failed(e.to_string()))?;
        let tls = tokio_rustls::TlsConnector::from(insecure_tls())
            .connect(name, tcp)
            .await
            .map_err(|e| failed(format!("tls: {e}")))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| failed(e.to_string()))?;
        let driver = tokio::spawn(conn);
        let req = hyper::Request::get("/healthz")
            .header(hyper::header::HOST, format!("127.0.0.1:{port}"))
            .body(Empty::<bytes::Bytes>::new())
            .map_err(|e| failed(e.to_string()))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let code = resp.status();
        let body = Limited::new(resp.into_body(), 10 * 1024)
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        driver.abort();
        let body = String::from_utf8_lossy(&body).into_owned();
        if code.as_u16() >= 200 && code.as_u16() < 400 {
            Ok((true, body))
        } else {
            Ok((
                false,
                format!("HTTP probe failed with statuscode: {}", code.as_u16()),
            ))
        }
    };
    match tokio::time::timeout(PROBE_TIMEOUT, call).await {
        Ok(r) => r,
        Err(_) => Err(failed("context deadline exceeded".into())),
    }
}

/// TLS that accepts any server certificate: kube's component probes do
/// not verify (the components serve self-signed certificates).
fn insecure_tls() -> std::sync::Arc<rustls::ClientConfig> {
    let provider = rustls::crypto::ring::default_provider();
    let verifier = std::sync::Arc::new(crate::auth::tls::AnyServerCertificate(
        std::sync::Arc::new(provider.clone()),
    ));
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth()
        })
        .expect("ring supports the default protocol versions");
    std::sync::Arc::new(config)
}

/// kube's component probes: the scheduler's and the controller manager's
/// secure ports.
const COMPONENTS: &[(&str, u16)] = &[("scheduler", 10259), ("controller-manager", 10257)];

/// The statuses of the components and of `etcd_endpoints`, in that order.
pub async fn statuses(etcd_endpoints: &[String]) -> Vec<Value> {
    let components = join_all(COMPONENTS.iter().map(|(_, port)| healthz(*port)));
    let members = join_all(etcd_endpoints.iter().map(|ep| probe(ep)));
    let (components, members) = tokio::join!(components, members);
    let components = COMPONENTS
        .iter()
        .zip(components)
        .map(|((name, _), r)| status(name.to_string(), r));
    let members = members.into_iter().enumerate().map(|(i, r)| {
        let ok = r.map(|()| (true, "ok".to_string()));
        status(format!("etcd-{i}"), ok)
    });
    components.chain(members).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-answer HTTPS server with a self-signed certificate.
    async fn component(answer: &'static str) -> u16 {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut buf = [0u8; 1024];
            let n = tls.read(&mut buf).await.unwrap();
            assert!(buf[..n].starts_with(b"GET /healthz HTTP/1.1"));
            tls.write_all(answer.as_bytes()).await.unwrap();
            tls.shutdown().await.ok();
        });
        port
    }

    #[tokio::test]
    async fn components_are_probed_on_their_healthz() {
        let up = component("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
        assert_eq!(healthz(up).await, Ok((true, "ok".into())));
        let sick =
            component("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n").await;
        assert_eq!(
            healthz(sick).await,
            Ok((false, "HTTP probe failed with statuscode: 500".into()))
        );
        let gone = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        assert_eq!(
            healthz(gone).await,
            Err(format!(
                "Get \"https://127.0.0.1:{gone}/healthz\": dial tcp 127.0.0.1:{gone}: connect: connection refused"
            ))
        );
    }
}
