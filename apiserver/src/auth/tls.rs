//! The secure port: TLS 1.2/1.3 (rustls on ring, its default AEAD-only
//! cipher suites), optional client certificates verified against the client
//! CA, HTTP/2 or HTTP/1.1 by ALPN, and an accept loop that hands each
//! request its connection's verified client certificates and peer address.
//!
//! HTTP/2 is offered because kubectl and client-go prefer it: many
//! concurrent requests and watches share one connection. Watch streams are
//! plain response bodies to hyper, so they stream the same way over h2 DATA
//! frames as over chunked HTTP/1.1.

use super::der;
use axum::extract::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt as _;

/// A request extension: the client certificate chain the TLS handshake
/// verified against the client CA (leaf first).
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// A request extension: the client's address.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", path.display()));
    }
    Ok(certs)
}

pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The rustls server configuration: the serving chain and key, client
/// certificates optional (verified against `client_ca` when one is sent).
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    client_ca: &[CertificateDer<'static>],
) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = if client_ca.is_empty() {
        WebPkiClientVerifier::no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        for c in client_ca {
            roots
                .add(c.clone())
                .map_err(|e| format!("invalid client CA certificate: {e}"))?;
        }
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("client certificate verifier: {e}"))?
    };
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("serving certificate: {e}"))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The user a verified client certificate names: CN is the user name, each
/// O a group (kube's x509 authenticator).
pub fn certificate_user(leaf: &[u8]) -> Option<apimachinery::auth::UserInfo> {
    let s = der::certificate_subject(leaf)?;
    if s.common_name.is_empty() {
        return None;
    }
    Some(apimachinery::auth::UserInfo::new(
        s.common_name,
        s.organizations,
    ))
}

/// Accepts TLS connections on `listener` and serves `app` on each until
/// `stop` turns true; then stops accepting and waits for open connections
/// to finish (watch streams end on their own when the server stops).
/// The most header bytes a request may carry on the secure port.
pub const MAX_HEADER_BYTES: usize = (1 << 20) + 4096;

pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<ServerConfig>,
    app: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors and the like: back off a little
                    // rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let certs = tls
                .get_ref()
                .1
                .peer_certificates()
                .filter(|c| !c.is_empty())
                .map(|c| {
                    PeerCertificates(Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()))
                });
            let service = app.map_request(move |mut req: Request<hyper::body::Incoming>| {
                if let Some(c) = &certs {
                    req.extensions_mut().insert(c.clone());
                }
                req.extensions_mut().insert(ClientAddr(peer));
                req.map(axum::body::Body::new)
            });
            let service = hyper_util::service::TowerToHyperService::new(service);
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // With a timer, HTTP/1 connections that do not finish sending
            // their headers within hyper's default 30 s are closed.
            // Headers up to kube's 1 MiB (Go's DefaultMaxHeaderBytes plus
            // its slack); past that, hyper answers 431.
            builder
                .http1()
                .timer(TokioTimer::new())
                .max_buf_size(MAX_HEADER_BYTES);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_header_list_size(MAX_HEADER_BYTES as u32);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A client-side verifier that takes any server certificate (signatures
/// over the handshake are still checked, so the peer holds its key): an
/// APIService's `insecureSkipTLSVerify`, kube's component probes.
#[derive(Debug)]
pub struct AnyServerCertificate(pub Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
