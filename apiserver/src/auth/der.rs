//! Just enough DER to read what authentication needs out of certificates
//! and keys: the subject's common name and organizations of a client
//! certificate, and the key inside a SubjectPublicKeyInfo. Never panics on
//! garbage (property-tested).

/// One tag-length-value.
#[derive(Debug, Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    body: &'a [u8],
}

/// Reads one TLV off the front of `input`; `None` on anything malformed.
fn read(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let (body, rest) = rest.split_at(len);
    Some((Tlv { tag, body }, rest))
}

/// Reads a TLV that must carry `tag`.
fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (tlv, rest) = read(input)?;
    (tlv.tag == tag).then_some((tlv.body, rest))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const BIT_STRING: u8 = 0x03;
const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// A certificate subject as kube's x509 authenticator reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    pub common_name: String,
    pub organizations: Vec<String>,
}

/// The subject of a DER certificate.
pub fn certificate_subject(cert: &[u8]) -> Option<Subject> {
    let (cert, _) = expect(cert, SEQUENCE)?;
    let (mut tbs, _) = expect(cert, SEQUENCE)?;
    let (first, rest) = read(tbs)?;
    if first.tag == 0xa0 {
        tbs = rest; // explicit version
    }
    let (_serial, tbs) = expect(tbs, 0x02)?;
    let (_sig_alg, tbs) = expect(tbs, SEQUENCE)?;
    let (_issuer, tbs) = expect(tbs, SEQUENCE)?;
    let (_validity, tbs) = expect(tbs, SEQUENCE)?;
    let (mut name, _) = expect(tbs, SEQUENCE)?;
    let mut subject = Subject::default();
    while !name.is_empty() {
        let (mut set, rest) = expect(name, SET)?;
        name = rest;
        while !set.is_empty() {
            let (atv, rest) = expect(set, SEQUENCE)?;
            set = rest;
            let (oid, atv) = expect(atv, OID)?;
            let (value, _) = read(atv)?;
            // UTF8String, PrintableString, T61String, IA5String.
            if !matches!(value.tag, 0x0c | 0x13 | 0x14 | 0x16) {
                continue;
            }
            let Ok(text) = std::str::from_utf8(value.body) else {
                continue;
            };
            if oid == OID_CN {
                subject.common_name = text.to_string();
            } else if oid == OID_O {
                subject.organizations.push(text.to_string());
            }
        }
    }
    Some(subject)
}

/// When a DER certificate stops being valid (`notAfter`), in Unix seconds.
pub fn certificate_not_after(cert: &[u8]) -> Option<i64> {
    let (cert, _) = expect(cert, SEQUENCE)?;
    let (mut tbs, _) = expect(cert, SEQUENCE)?;
    let (first, rest) = read(tbs)?;
    if first.tag == 0xa0 {
        tbs = rest;
    }
    let (_serial, tbs) = expect(tbs, 0x02)?;
    let (_sig_alg, tbs) = expect(tbs, SEQUENCE)?;
    let (_issuer, tbs) = expect(tbs, SEQUENCE)?;
    let (validity, _) = expect(tbs, SEQUENCE)?;
    let (_not_before, rest) = read(validity)?;
    let (not_after, _) = read(rest)?;
    let text = std::str::from_utf8(not_after.body).ok()?;
    let full = match not_after.tag {
        // UTCTime: YYMMDDHHMMSSZ, years 1950-2049.
        0x17 if text.len() == 13 => {
            let yy: i32 = text.get(..2)?.parse().ok()?;
            let century = if yy >= 50 { "19" } else { "20" };
            format!("{century}{text}")
        }
        // GeneralizedTime: YYYYMMDDHHMMSSZ.
        0x18 if text.len() == 15 => text.to_string(),
        _ => return None,
    };
    let t = chrono::NaiveDateTime::parse_from_str(full.strip_suffix('Z')?, "%Y%m%d%H%M%S").ok()?;
    Some(t.and_utc().timestamp())
}

/// The algorithm of a public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    Rsa,
    EcP256,
}

/// The key inside a DER SubjectPublicKeyInfo: for RSA the PKCS#1
/// RSAPublicKey, for P-256 the uncompressed point (what `ring` verifies
/// with).
pub fn spki_public_key(spki: &[u8]) -> Option<(KeyAlgorithm, Vec<u8>)> {
    let (spki, _) = expect(spki, SEQUENCE)?;
    let (alg, rest) = expect(spki, SEQUENCE)?;
    let (oid, params) = expect(alg, OID)?;
    let alg = if oid == OID_RSA {
        KeyAlgorithm::Rsa
    } else if oid == OID_EC {
        let (curve, _) = expect(params, OID)?;
        if curve != OID_P256 {
            return None;
        }
        KeyAlgorithm::EcP256
    } else {
        return None;
    };
    let (bits, _) = expect(rest, BIT_STRING)?;
    let (&unused, key) = bits.split_first()?;
    (unused == 0 && !key.is_empty()).then(|| (alg, key.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_generated_certificate_subjects() {
        let mut params = rcgen::CertificateParams::new(vec!["x".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "dev");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            certificate_subject(cert.der()),
            Some(Subject {
                common_name: "alice".into(),
                organizations: vec!["dev".into()],
            })
        );
        // GeneralizedTime (rcgen's default: year 4096), then UTCTime.
        let not_after = certificate_not_after(cert.der()).unwrap();
        assert_eq!(not_after, params.not_after.unix_timestamp());
        let mut utc = params.clone();
        utc.not_after = rcgen::date_time_ymd(2031, 7, 9);
        let c = utc.self_signed(&key).unwrap();
        assert_eq!(
            certificate_not_after(c.der()),
            Some(utc.not_after.unix_timestamp())
        );
        let (alg, point) =
            spki_public_key(&rcgen::PublicKeyData::subject_public_key_info(&key)).unwrap();
        assert_eq!(alg, KeyAlgorithm::EcP256);
        assert_eq!(point, key.public_key_raw());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = certificate_subject(&bytes);
            let _ = spki_public_key(&bytes);
            let _ = certificate_not_after(&bytes);
        }

        #[test]
        fn truncated_certificates_never_panic(cut in 0usize..2000) {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["y".to_string()]).unwrap().self_signed(&key).unwrap();
            let der = cert.der();
            let cut = cut.min(der.len());
            let _ = certificate_subject(&der[..cut]);
            let _ = certificate_not_after(&der[..cut]);
        }
    }
}
