//! Request-header authentication (`--requestheader-*`), so that this server
//! can run behind a front proxy or another aggregator: a request whose
//! client certificate verifies against `--requestheader-client-ca-file`
//! (and, when `--requestheader-allowed-names` is set, whose CN is one of
//! them) is the user its headers name: the first non-empty username
//! header, every value of the group headers, and extras from the headers
//! under each prefix (the rest of the name, lower-cased and unescaped, is
//! the key). A certificate from any other CA is not this authenticator's.

use crate::auth::{tls, Authentication, Authenticator};
use apimachinery::auth::UserInfo;
use async_trait::async_trait;
use axum::http::request::Parts;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use std::sync::Arc;

/// Verifies a client certificate chain against one set of roots, outside
/// of the handshake (the handshake accepted every CA the port trusts).
#[derive(Clone)]
pub struct ChainVerifier(Arc<dyn ClientCertVerifier>);

impl ChainVerifier {
    pub fn new(roots: &[CertificateDer<'static>]) -> Result<ChainVerifier, String> {
        let mut store = rustls::RootCertStore::empty();
        for c in roots {
            store
                .add(c.clone())
                .map_err(|e| format!("invalid CA certificate: {e}"))?;
        }
        let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(store),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| format!("client certificate verifier: {e}"))?;
        Ok(ChainVerifier(v))
    }

    /// Whether `chain` (leaf first) verifies against the roots.
    pub fn verifies(&self, chain: &[CertificateDer<'static>]) -> bool {
        let Some((leaf, rest)) = chain.split_first() else {
            return false;
        };
        self.0
            .verify_client_cert(leaf, rest, UnixTime::now())
            .is_ok()
    }
}

/// The request-header authenticator.
pub struct RequestHeader {
    pub verifier: ChainVerifier,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

#[async_trait]
impl Authenticator for RequestHeader {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        let Some(tls::PeerCertificates(chain)) = request.extensions.get::<tls::PeerCertificates>()
        else {
            return Authentication::NoCredentials;
        };
        if !self.verifier.verifies(chain) {
            return Authentication::NoCredentials;
        }
        if !self.allowed_names.is_empty() {
            let cn = chain
                .first()
                .and_then(|leaf| crate::auth::der::certificate_subject(leaf))
                .map(|s| s.common_name)
                .unwrap_or_default();
            if !self.allowed_names.contains(&cn) {
                return Authentication::Invalid(format!(
                    "x509: subject with cn={cn} is not in the allowed list"
                ));
            }
        }
        match user_from_headers(
            &request.headers,
            &self.username_headers,
            &self.uid_headers,
            &self.group_headers,
            &self.extra_prefixes,
        ) {
            Some(u) => Authentication::User(u),
            None => Authentication::NoCredentials,
        }
    }
}

/// The user the headers name (`None`: no username header is set).
pub fn user_from_headers(
    headers: &axum::http::HeaderMap,
    username: &[String],
    uid: &[String],
    group: &[String],
    extra_prefixes: &[String],
) -> Option<UserInfo> {
    let first = |names: &[String]| {
        names.iter().find_map(|h| {
            headers
                .get_all(h.as_str())
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::trim)
                .find(|v| !v.is_empty())
                .map(str::to_string)
        })
    };
    let name = first(username)?;
    let mut user = UserInfo::new(name, Vec::new());
    user.uid = first(uid).unwrap_or_default();
    for h in group {
        user.groups.extend(
            headers
                .get_all(h.as_str())
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string),
        );
    }
    for (name, value) in headers {
        let lower = name.as_str();
        let Some(rest) = extra_prefixes.iter().find_map(|p| {
            lower
                .strip_prefix(p.to_ascii_lowercase().as_str())
                .filter(|r| !r.is_empty())
        }) else {
            continue;
        };
        let key = percent_encoding::percent_decode_str(rest)
            .decode_utf8_lossy()
            .to_lowercase();
        if let Ok(v) = value.to_str() {
            user.extra.entry(key).or_default().push(v.to_string());
        }
    }
    Some(user)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn headers_name_the_user() {
        let mut h = HeaderMap::new();
        h.append("x-remote-user", "".parse().unwrap());
        h.append("x-remote-user", "jane".parse().unwrap());
        h.append("x-remote-uid", "42".parse().unwrap());
        h.append("x-remote-group", "dev".parse().unwrap());
        h.append("x-remote-group", "ops".parse().unwrap());
        h.append("x-remote-extra-scopes", "a".parse().unwrap());
        h.append("x-remote-extra-example.org%2Fkey", "b".parse().unwrap());
        let u = user_from_headers(
            &h,
            &strings(&["X-Remote-User"]),
            &strings(&["X-Remote-Uid"]),
            &strings(&["X-Remote-Group"]),
            &strings(&["X-Remote-Extra-"]),
        )
        .unwrap();
        assert_eq!(u.username, "jane");
        assert_eq!(u.uid, "42");
        assert_eq!(u.groups, ["dev", "ops"]);
        assert_eq!(u.extra["scopes"], ["a"]);
        assert_eq!(u.extra["example.org/key"], ["b"]);
    }

    #[test]
    fn no_username_header_is_no_user() {
        let mut h = HeaderMap::new();
        h.append("x-remote-group", "dev".parse().unwrap());
        assert!(user_from_headers(&h, &strings(&["X-Remote-User"]), &[], &[], &[]).is_none());
    }
}
