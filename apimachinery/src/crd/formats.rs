//! Formats of CRD schemas, as kube-apiserver checks them: kube keeps a
//! schema's `format` only when it supports it for the node's type
//! (`StripUnsupportedFormatsPostProcessor`), and go-openapi's `strfmt`
//! checks string values against the string formats. Numeric formats
//! (`int32`, `int64`, `float`, `double`) only take part in the type check.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use base64::Engine;
use regex::Regex;

#[cfg(test)]
use super::types::JSONSchemaProps;

/// The string formats kube supports (as of 1.34), dashes removed.
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "quantity",
    "k8sshortname",
    "k8slongname",
];

/// go-openapi's format name normalization: dashes are dropped.
fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// The format kube validates a node with: its `format` if supported for the
/// node's type, else none.
#[cfg(test)]
pub(crate) fn effective(s: &JSONSchemaProps) -> &str {
    effective_of(&s.type_, &s.format, s.x_int_or_string)
}

/// [`effective`] from a node's `type`, `format` and
/// `x-kubernetes-int-or-string`, whichever form holds them.
pub(crate) fn effective_of<'a>(type_: &str, f: &'a str, int_or_string: bool) -> &'a str {
    if f.is_empty() {
        return "";
    }
    let t = if int_or_string { "" } else { type_ };
    let keep = match t {
        "" | "string" => SUPPORTED.contains(&normalize(f).as_str()),
        "integer" => f == "int32" || f == "int64",
        "number" => f == "float" || f == "double",
        _ => false,
    };
    if keep {
        f
    } else {
        ""
    }
}

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

macro_rules! regex_fn {
    ($name:ident, $pat:expr) => {
        fn $name(s: &str) -> bool {
            static CELL: OnceLock<Option<Regex>> = OnceLock::new();
            re(&CELL, $pat).is_some_and(|r| r.is_match(s))
        }
    };
}

regex_fn!(
    is_hostname_re,
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
);
regex_fn!(
    is_uuid,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
regex_fn!(
    is_uuid3,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
regex_fn!(
    is_uuid4,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
regex_fn!(
    is_uuid5,
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
regex_fn!(
    is_creditcard_re,
    r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$"
);
regex_fn!(is_quantity, r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$");
regex_fn!(
    is_datetime_time,
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
);
regex_fn!(is_hexcolor, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
regex_fn!(
    is_rgbcolor,
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
);
regex_fn!(is_ssn, r"^\d{3}[- ]?\d{2}[- ]?\d{4}$");
regex_fn!(is_bson, r"^[0-9a-fA-F]{24}$");
regex_fn!(
    is_duration_re,
    r"^(\s*[-+]?[0-9]+(\.[0-9]*)?\s*(ns|us|µs|μs|ms|s|m|h|d|w|mins?|minutes?|hours?|days?|weeks?|seconds?|secs?)\s*)+$"
);
regex_fn!(is_email_re, r"^[^@\s<>()\[\]\\,;:]+@[^@\s<>()\[\]\\,;:]+$");

fn is_hostname(s: &str) -> bool {
    s.len() <= 255 && is_hostname_re(s)
}

fn is_ipv4(s: &str) -> bool {
    s.parse::<Ipv4Addr>().is_ok()
}

fn is_ipv6(s: &str) -> bool {
    // Go's net.ParseIP also reads dotted IPv4 here when the text has a colon.
    s.contains(':') && s.parse::<IpAddr>().is_ok()
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, bits)) = s.split_once('/') else {
        return false;
    };
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let Ok(bits) = bits.parse::<u32>() else {
        return false;
    };
    if addr.parse::<Ipv4Addr>().is_ok() {
        bits <= 32
    } else {
        addr.parse::<Ipv6Addr>().is_ok() && bits <= 128
    }
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets, `:`/`-` separated pairs or `.`
/// separated quads.
fn is_mac(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() > 1 {
            return matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex(p, 2));
        }
    }
    let parts: Vec<&str> = s.split('.').collect();
    matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex(p, 4))
}

fn is_byte(s: &str) -> bool {
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}

fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn num(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// `YYYY-MM-DD` with a real day.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (num(&b[..4]), num(&b[5..7]), num(&b[8..10])) else {
        return false;
    };
    (1..=12).contains(&m) && d >= 1 && d <= days_in(m, i64::from(y))
}

/// strfmt's `IsDateTime`: lowercased and split at `t`, a valid date, then
/// `hh:mm:ss[.frac](z|±hh:mm)` with hours < 24 and minutes, seconds < 60.
fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) || !is_datetime_time(parts[1]) {
        return false;
    }
    let t = parts[1].as_bytes();
    let (Some(h), Some(m), Some(sec)) = (num(&t[..2]), num(&t[3..5]), num(&t[6..8])) else {
        return false;
    };
    h <= 23 && m <= 59 && sec <= 59
}

/// k8s-short-name: a DNS-1123 label.
fn is_k8s_short_name(s: &str) -> bool {
    crate::validation::is_dns1123_label(s).is_empty()
}

/// k8s-long-name: dot-separated labels, at most 253 characters in all.
fn is_k8s_long_name(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Go's `url.ParseRequestURI`: an absolute URI (`scheme:...`) or an
/// absolute path, without control characters or bad percent escapes.
fn is_uri(s: &str) -> bool {
    if s.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    let has_scheme = s.split_once(':').is_some_and(|(scheme, _)| {
        let b = scheme.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphabetic()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    });
    if !has_scheme && !s.starts_with('/') {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() {
                return false;
            }
            if !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

fn is_isbn10(s: &str) -> bool {
    let d: Vec<char> = s.chars().filter(|c| *c != '-' && *c != ' ').collect();
    if d.len() != 10 {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in d.iter().enumerate() {
        let v = match c {
            '0'..='9' => *c as u32 - '0' as u32,
            'X' | 'x' if i == 9 => 10,
            _ => return false,
        };
        sum += v * (10 - i as u32);
    }
    sum % 11 == 0
}

fn is_isbn13(s: &str) -> bool {
    let d: Vec<u32> = s
        .chars()
        .filter(|c| *c != '-' && *c != ' ')
        .map(|c| c.to_digit(10).unwrap_or(99))
        .collect();
    if d.len() != 13 || d.iter().any(|x| *x > 9) {
        return false;
    }
    let sum: u32 = d
        .iter()
        .enumerate()
        .map(|(i, x)| if i % 2 == 0 { *x } else { *x * 3 })
        .sum();
    sum % 10 == 0
}

/// strfmt's credit card check: the digits (other characters are ignored)
/// match one of the card number patterns.
fn is_creditcard(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    is_creditcard_re(&digits)
}

/// Whether `value` is valid for `format`; unknown formats always pass.
pub(crate) fn check(format: &str, value: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => is_bson(value),
        "uri" => is_uri(value),
        "email" => is_email_re(value),
        "hostname" => is_hostname(value),
        "ipv4" => is_ipv4(value),
        "ipv6" => is_ipv6(value),
        "cidr" => is_cidr(value),
        "mac" => is_mac(value),
        "uuid" => is_uuid(value),
        "uuid3" => is_uuid3(value),
        "uuid4" => is_uuid4(value),
        "uuid5" => is_uuid5(value),
        "isbn" => is_isbn10(value) || is_isbn13(value),
        "isbn10" => is_isbn10(value),
        "isbn13" => is_isbn13(value),
        "creditcard" => is_creditcard(value),
        "ssn" => is_ssn(value),
        "hexcolor" => is_hexcolor(value),
        "rgbcolor" => is_rgbcolor(value),
        "byte" => is_byte(value),
        "date" => is_date(value),
        "duration" => is_duration_re(value),
        "datetime" => is_datetime(value),
        "quantity" => is_quantity(value),
        "k8sshortname" => is_k8s_short_name(value),
        "k8slongname" => is_k8s_long_name(value),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_refuse() {
        let cases: &[(&str, &str, bool)] = &[
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("date", "2024-1-01", false),
            ("date-time", "2024-01-02T03:04:05Z", true),
            ("date-time", "2024-01-02t03:04:05z", true),
            ("date-time", "2024-01-02T03:04:05.123+01:00", true),
            ("date-time", "2024-01-02T03:04:05", false),
            ("date-time", "2024-01-02T03:04:05+0100", false),
            ("date-time", "2024-01-02T24:04:05Z", false),
            ("date-time", "2024-01-02", false),
            ("date-time", "yesterday", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "123e4567", false),
            ("uuid4", "123e4567-e89b-42d3-a456-426614174000", true),
            ("uuid4", "123e4567-e89b-12d3-a456-426614174000", false),
            ("email", "a@example.com", true),
            ("email", "nope", false),
            ("hostname", "example.com", true),
            ("hostname", "-bad-", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "10.0.0.256", false),
            ("ipv6", "::1", true),
            ("ipv6", "10.0.0.1", false),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("cidr", "fd00::/64", true),
            ("mac", "00:1a:2b:3c:4d:5e", true),
            ("mac", "00:1a:2b", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "not base64!", false),
            ("duration", "1h30m", true),
            ("duration", "3 days", true),
            ("duration", "soon", false),
            ("hexcolor", "#ffF", true),
            ("hexcolor", "#ff", false),
            ("int32", "anything", true),
            ("quantity", "1Gi", true),
            ("quantity", "500m", true),
            ("quantity", "lots", false),
            ("k8s-short-name", "my-name", true),
            ("k8s-short-name", "My-name", false),
            ("k8s-long-name", "a.b-c", true),
            ("k8s-long-name", "a..b", false),
            ("creditcard", "4111 1111 1111 1111", true),
            ("creditcard", "1234", false),
            ("uuid", "123e4567e89b12d3a456426614174000", true),
            ("uri", "/just/a/path", true),
            ("uri", "relative/path", false),
            ("uri", "https://example.com/a%20b", true),
            ("uri", "a%zz", false),
        ];
        for (f, v, ok) in cases {
            assert_eq!(check(f, v), *ok, "{f} {v}");
        }
        let node = |t: &str, f: &str| JSONSchemaProps {
            type_: t.into(),
            format: f.into(),
            ..Default::default()
        };
        assert_eq!(effective(&node("string", "date-time")), "date-time");
        assert_eq!(effective(&node("string", "Date-Time")), "");
        assert_eq!(effective(&node("integer", "int32")), "int32");
        assert_eq!(effective(&node("integer", "date")), "");
        assert_eq!(effective(&node("number", "double")), "double");
        assert_eq!(effective(&node("object", "date")), "");
    }
}
