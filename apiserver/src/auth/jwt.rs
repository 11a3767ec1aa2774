//! Compact JWS (JWT) signing and verification for service-account tokens,
//! RS256 and ES256, on `ring`. Parsing never panics on garbage and every
//! failure is an `Err` with a reason for the log (property-tested).

use super::der::{self, KeyAlgorithm};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair, UnparsedPublicKey};
use rustls::pki_types::pem::{PemObject, SectionKind};
use serde_json::{json, Value};

/// Longest token we look at (kube bounds request headers anyway).
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Clock skew allowed on `nbf` and `iat`.
const LEEWAY_SECONDS: i64 = 60;

/// A key that verifies signatures of one algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey {
    pub alg: KeyAlgorithm,
    /// PKCS#1 RSAPublicKey (RSA) or the uncompressed point (P-256).
    pub key: Vec<u8>,
    /// base64url(SHA-256(key)), the `kid` header of tokens it signs.
    pub kid: String,
}

impl VerifyingKey {
    fn new(alg: KeyAlgorithm, key: Vec<u8>) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, &key);
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        VerifyingKey { alg, key, kid }
    }

    fn jws_alg(&self) -> &'static str {
        match self.alg {
            KeyAlgorithm::Rsa => "RS256",
            KeyAlgorithm::EcP256 => "ES256",
        }
    }

    fn verify(&self, message: &[u8], sig: &[u8]) -> bool {
        let alg: &dyn signature::VerificationAlgorithm = match self.alg {
            KeyAlgorithm::Rsa => &signature::RSA_PKCS1_2048_8192_SHA256,
            KeyAlgorithm::EcP256 => &signature::ECDSA_P256_SHA256_FIXED,
        };
        UnparsedPublicKey::new(alg, &self.key)
            .verify(message, sig)
            .is_ok()
    }
}

enum Key {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

/// A private key that signs tokens.
pub struct SigningKey {
    key: Key,
    public: VerifyingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.public.jws_alg())
    }
}

impl SigningKey {
    /// Reads the first private key of a PEM file: PKCS#8 (RSA or P-256) or
    /// PKCS#1 RSA.
    pub fn from_pem(pem: &[u8]) -> Result<SigningKey, String> {
        for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
            let (kind, der) = section.map_err(|e| format!("invalid PEM: {e}"))?;
            match kind {
                SectionKind::PrivateKey => return Self::from_pkcs8(&der),
                SectionKind::RsaPrivateKey => {
                    let k = RsaKeyPair::from_der(&der)
                        .map_err(|e| format!("invalid RSA private key: {e}"))?;
                    return Ok(Self::rsa(k));
                }
                SectionKind::EcPrivateKey => {
                    return Err("EC PRIVATE KEY (SEC1) is not supported: convert it to PKCS#8 (openssl pkcs8 -topk8 -nocrypt)".into())
                }
                _ => continue,
            }
        }
        Err("no private key in PEM data".into())
    }

    fn from_pkcs8(der: &[u8]) -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        if let Ok(k) =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
        {
            let public = VerifyingKey::new(KeyAlgorithm::EcP256, k.public_key().as_ref().to_vec());
            return Ok(SigningKey {
                key: Key::Ec(k),
                public,
            });
        }
        RsaKeyPair::from_pkcs8(der)
            .map(Self::rsa)
            .map_err(|e| format!("unsupported private key (want RSA or P-256): {e}"))
    }

    fn rsa(k: RsaKeyPair) -> SigningKey {
        let public = VerifyingKey::new(KeyAlgorithm::Rsa, k.public().as_ref().to_vec());
        SigningKey {
            key: Key::Rsa(k),
            public,
        }
    }

    /// A new P-256 key as PKCS#8 PEM (what the server generates when no
    /// signing key is configured).
    pub fn generate_pem() -> Result<String, String> {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| format!("cannot generate a key: {e}"))?;
        Ok(pem_encode("PRIVATE KEY", der.as_ref()))
    }

    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// Signs `claims` into a compact JWS.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": self.public.jws_alg(), "kid": self.public.kid});
        let mut token = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let sig = match &self.key {
            Key::Ec(k) => k
                .sign(&rng, token.as_bytes())
                .map_err(|e| format!("signing failed: {e}"))?
                .as_ref()
                .to_vec(),
            Key::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    token.as_bytes(),
                    &mut sig,
                )
                .map_err(|e| format!("signing failed: {e}"))?;
                sig
            }
        };
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(sig));
        Ok(token)
    }
}

/// PEM armour around DER.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The public keys of a PEM file, as `--service-account-key-file` takes
/// them: `PUBLIC KEY` (RSA or P-256), or private keys (their public half).
pub fn verifying_keys_from_pem(pem: &[u8]) -> Result<Vec<VerifyingKey>, String> {
    let mut keys = Vec::new();
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        let (kind, der) = section.map_err(|e| format!("invalid PEM: {e}"))?;
        match kind {
            SectionKind::PublicKey => {
                let (alg, key) = der::spki_public_key(&der)
                    .ok_or("unsupported public key (want RSA or P-256)")?;
                keys.push(VerifyingKey::new(alg, key));
            }
            SectionKind::PrivateKey | SectionKind::RsaPrivateKey => {
                let pem = pem_encode(
                    if kind == SectionKind::PrivateKey {
                        "PRIVATE KEY"
                    } else {
                        "RSA PRIVATE KEY"
                    },
                    &der,
                );
                keys.push(SigningKey::from_pem(pem.as_bytes())?.public);
            }
            _ => {}
        }
    }
    if keys.is_empty() {
        return Err("no public or private key in PEM data".into());
    }
    Ok(keys)
}

/// Checks a compact JWS's signature against `keys` and returns its claims.
pub fn verify(token: &str, keys: &[VerifyingKey]) -> Result<Value, String> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err("token too long".into());
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a compact JWS".into());
    };
    let header: Value = decode_json(h).ok_or("invalid JWS header")?;
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
    let sig = URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| "invalid JWS signature encoding")?;
    let message = &token.as_bytes()[..h.len() + 1 + p.len()];
    let signed = keys
        .iter()
        .filter(|k| k.jws_alg() == alg)
        .any(|k| k.verify(message, &sig));
    if !signed {
        return Err(format!("invalid signature (alg {alg:?})"));
    }
    let claims: Value = decode_json(p).ok_or("invalid JWT claims")?;
    if !claims.is_object() {
        return Err("JWT claims are not an object".into());
    }
    Ok(claims)
}

fn decode_json(part: &str) -> Option<Value> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Checks the registered claims: issuer, audience, expiry, not-before.
pub fn validate_claims(
    claims: &Value,
    issuers: &[String],
    audiences: &[String],
    now: i64,
) -> Result<(), String> {
    let iss = claims.get("iss").and_then(Value::as_str).unwrap_or("");
    if !issuers.iter().any(|i| i == iss) {
        return Err(format!("unexpected issuer {iss:?}"));
    }
    let aud: Vec<&str> = match claims.get("aud") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !aud.iter().any(|a| audiences.iter().any(|b| b == a)) {
        return Err("token audiences are not accepted".into());
    }
    let exp = claims
        .get("exp")
        .and_then(Value::as_i64)
        .ok_or("token has no expiry")?;
    if now >= exp {
        return Err("token has expired".into());
    }
    if let Some(nbf) = claims.get("nbf").and_then(Value::as_i64) {
        if now + LEEWAY_SECONDS < nbf {
            return Err("token is not valid yet".into());
        }
    }
    if let Some(iat) = claims.get("iat").and_then(Value::as_i64) {
        if now + LEEWAY_SECONDS < iat {
            return Err("token was issued in the future".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    fn key() -> &'static SigningKey {
        static K: OnceLock<SigningKey> = OnceLock::new();
        K.get_or_init(|| {
            SigningKey::from_pem(SigningKey::generate_pem().unwrap().as_bytes()).unwrap()
        })
    }

    fn claims(exp: i64) -> Value {
        json!({"iss": "https://issuer", "aud": ["api"], "exp": exp, "iat": 1000, "nbf": 1000, "sub": "x"})
    }

    fn accepted(token: &str, now: i64) -> Result<Value, String> {
        let c = verify(token, std::slice::from_ref(key().verifying_key()))?;
        validate_claims(&c, &["https://issuer".into()], &["api".into()], now)?;
        Ok(c)
    }

    #[test]
    fn round_trip_and_rejections() {
        let t = key().sign(&claims(5000)).unwrap();
        assert_eq!(accepted(&t, 2000).unwrap()["sub"], "x");
        assert_eq!(accepted(&t, 5000).unwrap_err(), "token has expired");
        assert!(accepted(&t, 950).is_ok(), "nbf leeway");
        assert!(accepted(&t, 100).is_err(), "not valid yet");
        let c = verify(&t, std::slice::from_ref(key().verifying_key())).unwrap();
        assert!(validate_claims(&c, &["https://issuer".into()], &["other".into()], 2000).is_err());
        assert!(validate_claims(&c, &["https://else".into()], &["api".into()], 2000).is_err());
        // Another key's signature.
        let other = SigningKey::from_pem(SigningKey::generate_pem().unwrap().as_bytes()).unwrap();
        let forged = other.sign(&claims(5000)).unwrap();
        assert!(accepted(&forged, 2000).unwrap_err().contains("signature"));
        // Claims swapped under a valid signature.
        let parts: Vec<&str> = t.split('.').collect();
        let swapped = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(claims(9999).to_string()),
            parts[2]
        );
        assert!(accepted(&swapped, 2000).is_err());
        // alg=none is never accepted.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            parts[1]
        );
        assert!(accepted(&none, 2000).is_err());
    }

    #[test]
    fn public_key_files() {
        let pem = SigningKey::generate_pem().unwrap();
        let k = SigningKey::from_pem(pem.as_bytes()).unwrap();
        let from_private = verifying_keys_from_pem(pem.as_bytes()).unwrap();
        assert_eq!(from_private, vec![k.verifying_key().clone()]);
        let rc = rcgen::KeyPair::from_pem(&pem).unwrap();
        let from_public = verifying_keys_from_pem(rc.public_key_pem().as_bytes()).unwrap();
        assert_eq!(from_public, vec![k.verifying_key().clone()]);
        assert!(verifying_keys_from_pem(b"nothing").is_err());
    }

    /// RS256 with a test-only RSA key (testdata/, made with openssl):
    /// PKCS#1 and PKCS#8 private keys sign, the SPKI public key verifies.
    #[test]
    fn rs256_keys() {
        let pkcs1 = SigningKey::from_pem(include_bytes!("testdata/rsa-pkcs1.pem")).unwrap();
        let pkcs8 = SigningKey::from_pem(include_bytes!("testdata/rsa-pkcs8.pem")).unwrap();
        assert_eq!(pkcs1.verifying_key(), pkcs8.verifying_key());
        assert_eq!(pkcs1.verifying_key().alg, KeyAlgorithm::Rsa);
        let public = verifying_keys_from_pem(include_bytes!("testdata/rsa-public.pem")).unwrap();
        assert_eq!(public, vec![pkcs1.verifying_key().clone()]);
        let t = pkcs8.sign(&claims(5000)).unwrap();
        assert!(t.starts_with(
            &URL_SAFE_NO_PAD
                .encode(json!({"alg": "RS256", "kid": pkcs1.verifying_key().kid}).to_string())
        ));
        let c = verify(&t, &public).unwrap();
        validate_claims(&c, &["https://issuer".into()], &["api".into()], 2000).unwrap();
        // Not with the EC key, and an RS256 header over an EC signature
        // is not accepted either.
        assert!(verify(&t, std::slice::from_ref(key().verifying_key())).is_err());
        let ec = key().sign(&claims(5000)).unwrap();
        let parts: Vec<&str> = ec.split('.').collect();
        let relabelled = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256"}"#),
            parts[1],
            parts[2]
        );
        let mut both = public.clone();
        both.push(key().verifying_key().clone());
        assert!(verify(&relabelled, &both).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics_nor_passes(token in "[A-Za-z0-9_.-]{0,200}") {
            prop_assert!(accepted(&token, 2000).is_err());
        }

        #[test]
        fn any_bit_flip_is_rejected(pos in 0usize..400, bit in 0u8..6) {
            let t = key().sign(&claims(5000)).unwrap();
            let mut bytes = t.into_bytes();
            let pos = pos % bytes.len();
            if bytes[pos] == b'.' { return Ok(()); }
            const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let idx = ALPHABET.iter().position(|c| *c == bytes[pos]).unwrap();
            let flipped = ALPHABET[idx ^ (1 << bit)];
            bytes[pos] = flipped;
            let t = String::from_utf8(bytes).unwrap();
            // A flip in the last character's padding bits may decode to the
            // same bytes; anything else must fail.
            if let Ok(c) = accepted(&t, 2000) {
                prop_assert_eq!(c, claims(5000));
            }
        }
    }
}
