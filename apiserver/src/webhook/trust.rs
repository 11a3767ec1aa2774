//! Which server certificates a `caBundle` trusts, as Go's crypto/x509
//! decides it (kube-apiserver calls webhooks, conversion webhooks and
//! extension API servers through Go's TLS client).
//!
//! webpki and Go differ in one case real deployments hit: a self-signed
//! serving certificate that is itself the whole `caBundle`. `openssl req
//! -x509` marks such a certificate `CA:TRUE`, and webpki refuses a CA as
//! the end entity (`CaUsedAsEndEntity`), while Go's `Verify` takes a leaf
//! found in the root pool as a chain of its own. [`ServerTrust`] does what
//! Go does there: a presented certificate byte-for-byte equal to a trust
//! anchor is trusted as itself, and its validity period, names, extended
//! key usage and critical extensions are still checked. Every other
//! certificate goes to webpki unchanged.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::{FromDer, X509Certificate};

/// A `caBundle` that is not PEM certificates webpki can take as anchors.
#[derive(Debug, thiserror::Error)]
#[error("invalid caBundle: {0}")]
pub struct InvalidBundle(String);

/// The server-certificate verifier of a client trusting one `caBundle`.
#[derive(Debug)]
pub struct ServerTrust {
    /// The bundle's certificates as they were given (DER).
    anchors: Vec<CertificateDer<'static>>,
    /// webpki over the same anchors; `None` for an empty bundle, which
    /// trusts nothing.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerTrust {
    /// Trusts the PEM certificates of `ca_bundle` (none: nothing).
    pub fn new(
        ca_bundle: Option<&[u8]>,
        provider: Arc<CryptoProvider>,
    ) -> Result<ServerTrust, InvalidBundle> {
        let anchors: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(ca_bundle.unwrap_or_default())
                .collect::<Result<_, _>>()
                .map_err(|e| InvalidBundle(e.to_string()))?;
        let mut roots = RootCertStore::empty();
        for cert in &anchors {
            roots
                .add(cert.clone())
                .map_err(|e| InvalidBundle(e.to_string()))?;
        }
        let webpki = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| InvalidBundle(e.to_string()))?,
            )
        };
        Ok(ServerTrust {
            anchors,
            webpki,
            provider,
        })
    }

    /// Go's checks of a leaf that is its own chain: the validity period,
    /// the name, the extended key usage (absent, any, or serverAuth) and no
    /// critical extension it does not know.
    fn verify_anchor_as_leaf(
        &self,
        der: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|_| CertificateError::BadEncoding)?;
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let validity = cert.validity();
        if now < validity.not_before.timestamp() {
            return Err(CertificateError::NotValidYet.into());
        }
        if now > validity.not_after.timestamp() {
            return Err(CertificateError::Expired.into());
        }
        let parsed = rustls::server::ParsedCertificate::try_from(der)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        for ext in cert.extensions() {
            match ext.parsed_extension() {
                ParsedExtension::ExtendedKeyUsage(eku) if !(eku.any || eku.server_auth) => {
                    return Err(CertificateError::InvalidPurpose.into());
                }
                ParsedExtension::UnsupportedExtension { .. } if ext.critical => {
                    return Err(rustls::Error::General(format!(
                        "x509: unhandled critical extension {}",
                        ext.oid
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl ServerCertVerifier for ServerTrust {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .anchors
            .iter()
            .any(|a| a.as_ref() == end_entity.as_ref())
        {
            self.verify_anchor_as_leaf(end_entity, server_name, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        match &self.webpki {
            Some(webpki) => {
                webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            }
            None => Err(CertificateError::UnknownIssuer.into()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A self-signed certificate for `names`, marked CA as `openssl req
    /// -x509` marks it, valid from `not_before` to `not_after` (years).
    fn self_signed_ca(names: &[&str], not_before: i32, not_after: i32) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(not_before, 1, 1);
        params.not_after = rcgen::date_time_ymd(not_after, 1, 1);
        params.self_signed(&key).unwrap().pem()
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn verify(trust: &ServerTrust, pem: &str, name: &str) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_string()).unwrap();
        trust
            .verify_server_cert(&der(pem), &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn a_ca_certificate_that_is_the_bundle_serves_for_its_names() {
        let cert = self_signed_ca(&["webhook.default.svc", "127.0.0.1"], 2020, 2090);
        let trust = ServerTrust::new(Some(cert.as_bytes()), provider()).unwrap();
        verify(&trust, &cert, "webhook.default.svc").unwrap();
        verify(&trust, &cert, "127.0.0.1").unwrap();
        // Not for another name.
        let err = verify(&trust, &cert, "other.default.svc").unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn the_period_is_still_checked() {
        let expired = self_signed_ca(&["webhook.default.svc"], 2000, 2001);
        let trust = ServerTrust::new(Some(expired.as_bytes()), provider()).unwrap();
        let err = verify(&trust, &expired, "webhook.default.svc").unwrap_err();
        assert_eq!(err, CertificateError::Expired.into());
        let future = self_signed_ca(&["webhook.default.svc"], 2090, 2091);
        let trust = ServerTrust::new(Some(future.as_bytes()), provider()).unwrap();
        let err = verify(&trust, &future, "webhook.default.svc").unwrap_err();
        assert_eq!(err, CertificateError::NotValidYet.into());
    }

    #[test]
    fn another_self_signed_certificate_is_unknown() {
        let trusted = self_signed_ca(&["webhook.default.svc"], 2020, 2090);
        let other = self_signed_ca(&["webhook.default.svc"], 2020, 2090);
        let trust = ServerTrust::new(Some(trusted.as_bytes()), provider()).unwrap();
        let err = verify(&trust, &other, "webhook.default.svc").unwrap_err();
        assert!(
            matches!(err, rustls::Error::InvalidCertificate(_)),
            "{err:?}"
        );
        // An empty bundle trusts nothing.
        let none = ServerTrust::new(None, provider()).unwrap();
        let err = verify(&none, &trusted, "webhook.default.svc").unwrap_err();
        assert_eq!(err, CertificateError::UnknownIssuer.into());
    }

    #[test]
    fn a_serving_certificate_under_the_ca_still_goes_through_webpki() {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, &ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["webhook.default.svc".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let trust = ServerTrust::new(Some(ca.pem().as_bytes()), provider()).unwrap();
        verify(&trust, &leaf.pem(), "webhook.default.svc").unwrap();
        let err = verify(&trust, &leaf.pem(), "other.default.svc").unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_bundle_that_is_not_certificates_is_refused() {
        let err = ServerTrust::new(
            Some(b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"),
            provider(),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("invalid caBundle: "), "{err}");
    }
}
