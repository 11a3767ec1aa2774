//! Orders of API versions and a stable content hash: pure facts every
//! floor of the server shares (discovery, OpenAPI, CRD rows).

use std::cmp::Ordering;

/// Parses `v<major>[(alpha|beta)<minor>]`; the stability rank is 2 for GA,
/// 1 for beta and 0 for alpha.
fn parse_kube_version(v: &str) -> Option<(u32, u64, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok()?;
    if major == 0 {
        return None;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((2, major, 0));
    }
    let (rank, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((rank, major, minor.parse().ok()?))
}

/// Kube-aware version order, most preferred first: GA before beta before
/// alpha, higher numbers first, then anything else alphabetically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_kube_version(a), parse_kube_version(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// A stable hash of a document's bytes as 32 upper-case hex digits
/// (128-bit FNV-1a), used for entity tags and OpenAPI `?hash=` values.
/// Stable across processes and builds, so clients' caches stay valid until
/// the content changes.
pub fn content_hash(data: &[u8]) -> String {
    let mut h = ContentHash::default();
    h.update(data);
    h.finish()
}

/// [`content_hash`] of a document written in pieces (a document streamed
/// into a compressor is hashed without ever being whole).
#[derive(Debug, Clone, Copy)]
pub struct ContentHash(u128);

impl Default for ContentHash {
    fn default() -> Self {
        ContentHash(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d)
    }
}

impl ContentHash {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    /// Adds the next bytes of the document.
    pub fn update(&mut self, data: &[u8]) {
        self.0 = data.iter().fold(self.0, |h, b| {
            (h ^ u128::from(*b)).wrapping_mul(Self::PRIME)
        });
    }

    /// The hash of everything added, as [`content_hash`] writes it.
    pub fn finish(&self) -> String {
        format!("{:032X}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_version_priority() {
        let mut v = vec!["v1beta1", "foo", "v2", "v1", "v1alpha1", "v10beta3", "bar"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            ["v2", "v1", "v10beta3", "v1beta1", "v1alpha1", "bar", "foo"]
        );
    }

    #[test]
    fn content_hash_is_stable() {
        assert_eq!(content_hash(b""), "6C62272E07BB014262B821756295C58D");
        let mut pieces = ContentHash::default();
        pieces.update(b"open");
        pieces.update(b"api");
        assert_eq!(pieces.finish(), content_hash(b"openapi"));
        assert_ne!(content_hash(b"a"), content_hash(b"b"));
    }
}
