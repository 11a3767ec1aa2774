//! Everything the secure port needs, from the flags: the serving
//! certificate (given, or made under the data directory), the client CA,
//! the authenticators, and the admin kubeconfig.

use super::serviceaccount::ServiceAccounts;
use super::token_file::TokenFile;
use super::{jwt, pki, tls, Authentication, Authenticator, Union};
use crate::aggregator::requestheader::{ChainVerifier, RequestHeader};
use crate::config::Config;
use async_trait::async_trait;
use axum::http::request::Parts;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Client certificates: the TLS handshake verified the chain against the
/// client CA (see `tls`); the leaf's CN is the user, its Os the groups.
/// When the port also accepts another CA's certificates (request-header
/// authentication), `verify` checks the chain against the client CA alone.
/// (Here, beside the request-header authenticator it works with, rather
/// than in `auth`, which `aggregator::requestheader` itself imports.)
pub struct ClientCertificates {
    pub verify: Option<ChainVerifier>,
}

#[async_trait]
impl Authenticator for ClientCertificates {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        let Some(tls::PeerCertificates(chain)) = request.extensions.get::<tls::PeerCertificates>()
        else {
            return Authentication::NoCredentials;
        };
        if self.verify.as_ref().is_some_and(|v| !v.verifies(chain)) {
            return Authentication::NoCredentials;
        }
        match chain.first().and_then(|leaf| tls::certificate_user(leaf)) {
            Some(u) => Authentication::User(u),
            None => Authentication::Invalid("client certificate has no common name".into()),
        }
    }
}

/// What `setup` made.
pub struct Secure {
    pub tls: Arc<rustls::ServerConfig>,
    pub authenticator: Arc<dyn Authenticator>,
    pub service_accounts: Arc<ServiceAccounts>,
    /// `data_dir/admin.kubeconfig`, when the server made its own CA.
    pub admin_kubeconfig: Option<PathBuf>,
    /// The CA (PEM) that issued the serving certificate, when the server
    /// made it.
    pub ca_pem: Option<String>,
}

/// The names the generated serving certificate is for.
pub fn serving_names(addr: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "kubernetes.default.svc.cluster.local".into(),
    ];
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() {
            names.push(h.to_string());
        }
    }
    if !addr.ip().is_unspecified() {
        names.push(addr.ip().to_string());
    }
    names.extend(extra.iter().filter(|s| !s.is_empty()).cloned());
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

pub fn setup(
    cfg: &Config,
    addr: SocketAddr,
    store: Arc<dyn watchcache::Storage>,
) -> Result<Secure, String> {
    let (chain, key, generated) = match (&cfg.tls_cert_file, &cfg.tls_private_key_file) {
        (Some(c), Some(k)) => (tls::load_certs(c)?, tls::load_key(k)?, None),
        (None, None) => {
            let g = pki::ensure(&cfg.data_dir, &serving_names(addr, &cfg.tls_san))?;
            (
                tls::load_certs(&g.serving_cert)?,
                tls::load_key(&g.serving_key)?,
                Some(g),
            )
        }
        _ => return Err("--tls-cert-file and --tls-private-key-file go together".into()),
    };
    let client_ca = match (&cfg.client_ca_file, &generated) {
        (Some(f), _) => tls::load_certs(f)?,
        (None, Some(g)) => tls::load_certs(&g.ca_cert)?,
        (None, None) => Vec::new(),
    };
    // Request-header authentication: the port also accepts certificates of
    // the request-header CA, which then name no user themselves.
    let requestheader = match &cfg.requestheader_client_ca_file {
        Some(f) => Some(tls::load_certs(f)?),
        None => None,
    };
    let mut accepted = client_ca.clone();
    accepted.extend(requestheader.iter().flatten().cloned());
    let tls = Arc::new(tls::server_config(chain, key, &accepted)?);

    let mut ca_pem = None;
    let admin_kubeconfig = match &generated {
        Some(g) => {
            let host = if addr.ip().is_unspecified() || addr.ip().is_loopback() {
                "127.0.0.1".to_string()
            } else {
                addr.ip().to_string()
            };
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            let ca = std::fs::read_to_string(&g.ca_cert)
                .map_err(|e| format!("{}: {e}", g.ca_cert.display()))?;
            ca_pem = Some(ca.clone());
            Some(pki::write_admin_kubeconfig(
                &cfg.data_dir,
                &ca,
                &format!("https://{host}:{}", addr.port()),
            )?)
        }
        None => None,
    };

    let service_accounts = service_accounts(cfg, store)?;

    let mut chain: Vec<Arc<dyn Authenticator>> = Vec::new();
    if let Some(roots) = &requestheader {
        let clean = |v: &[String]| -> Vec<String> {
            v.iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        chain.push(Arc::new(RequestHeader {
            verifier: ChainVerifier::new(roots)?,
            allowed_names: clean(&cfg.requestheader_allowed_names),
            username_headers: clean(&cfg.requestheader_username_headers),
            uid_headers: clean(&cfg.requestheader_uid_headers),
            group_headers: clean(&cfg.requestheader_group_headers),
            extra_prefixes: clean(&cfg.requestheader_extra_headers_prefix),
        }));
    }
    if !client_ca.is_empty() {
        // With a second CA on the port, a certificate must verify against
        // the client CA itself to name a user.
        let verify = match &requestheader {
            Some(_) => Some(ChainVerifier::new(&client_ca)?),
            None => None,
        };
        chain.push(Arc::new(ClientCertificates { verify }));
    }
    if let Some(f) = &cfg.token_auth_file {
        let tokens = TokenFile::load(f)?;
        tracing::info!(tokens = tokens.len(), "loaded the token file");
        chain.push(Arc::new(tokens));
    }
    chain.push(service_accounts.clone());
    Ok(Secure {
        tls,
        authenticator: Arc::new(Union(chain)),
        service_accounts,
        admin_kubeconfig,
        ca_pem,
    })
}

/// The service-account token issuer and verifier: the signing key of
/// `--service-account-signing-key-file`, or one made (once) under
/// `--data-dir`. Used by the secure port's authenticator, and for
/// `serviceaccounts/token` whether or not the secure port is on.
pub fn service_accounts(
    cfg: &crate::config::Config,
    store: Arc<dyn watchcache::Storage>,
) -> Result<Arc<ServiceAccounts>, String> {
    let signing_path = match &cfg.service_account_signing_key_file {
        Some(p) => p.clone(),
        None => pki::ensure_sa_key(&cfg.data_dir)?,
    };
    let signing_pem = std::fs::read(&signing_path)
        .map_err(|e| format!("cannot read {}: {e}", signing_path.display()))?;
    let signer = jwt::SigningKey::from_pem(&signing_pem)
        .map_err(|e| format!("{}: {e}", signing_path.display()))?;
    let mut keys = Vec::new();
    for f in &cfg.service_account_key_file {
        let pem = std::fs::read(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        keys.extend(
            jwt::verifying_keys_from_pem(&pem).map_err(|e| format!("{}: {e}", f.display()))?,
        );
    }
    Ok(Arc::new(ServiceAccounts::new(
        signer,
        keys,
        cfg.service_account_issuer.clone(),
        store,
        &cfg.etcd_prefix,
    )))
}
