//! Kubernetes' URL library: `url(<string>)`, `isURL(<string>)` and, on a
//! URL, `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`,
//! `getQuery`.
//!
//! Kubernetes parses with Go's `url.ParseRequestURI`: an absolute URI or an
//! absolute path, nothing relative, no fragment split off (a `#...` stays in
//! the query or path). The parser here follows those rules: control
//! characters are refused; a scheme is a letter then letters, digits, `+`,
//! `-` or `.`; `scheme:rest` without `/` is opaque (`mailto:x`); the
//! authority's port must be digits; host characters are restricted; a `%`
//! must start a valid escape. Paths are kept as written and escaped on
//! demand as Go's `EscapedPath` does.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use cel::common::types::{Type, STRING_TYPE};
use cel::objects::{Key, Map, Opaque};
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::native::{err, native, opaque, string, wrap};

const TYPE_NAME: &str = "kubernetes.URL";

fn url_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// A parsed URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    raw: String,
    scheme: String,
    /// `host[:port]`, brackets kept around an IPv6 address.
    host: String,
    /// The path as written (still escaped).
    raw_path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Url {
    pub(crate) fn parse(raw: &str) -> Result<Url, String> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        if raw.is_empty() {
            return Err("empty url".into());
        }
        let (scheme, rest) = split_scheme(raw)?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, q),
            None => (rest, ""),
        };
        let mut url = Url {
            raw: raw.to_owned(),
            scheme: scheme.to_ascii_lowercase(),
            host: String::new(),
            raw_path: String::new(),
            query: query.to_owned(),
        };
        if !rest.starts_with('/') {
            if scheme.is_empty() {
                return Err("invalid URI for request".into());
            }
            return Ok(url); // opaque: `mailto:someone`
        }
        let mut path = rest;
        if !scheme.is_empty() && rest.starts_with("//") {
            let after = &rest[2..];
            let (authority, p) = match after.find('/') {
                Some(i) => after.split_at(i),
                None => (after, ""),
            };
            url.host = parse_authority(authority)?;
            path = p;
        }
        unescape(path, false).ok_or_else(|| "invalid URL escape".to_string())?;
        url.raw_path = path.to_owned();
        Ok(url)
    }

    fn hostname_and_port(&self) -> (&str, &str) {
        let host = self.host.as_str();
        if let Some(rest) = host.strip_prefix('[') {
            if let Some(end) = rest.rfind(']') {
                let port = rest[end + 1..].strip_prefix(':').unwrap_or("");
                return (&rest[..end], port);
            }
        }
        match host.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => (host, ""),
        }
    }

    /// Go's `EscapedPath`: the path as written if it is validly escaped,
    /// else the path escaped.
    fn escaped_path(&self) -> String {
        let raw = self.raw_path.as_str();
        if raw
            .bytes()
            .all(|b| b == b'%' || b"!$&'()*+,;=:@[]".contains(&b) || !escape_in_path(b))
        {
            return raw.to_owned();
        }
        let decoded = unescape(raw, false).unwrap_or_default();
        let mut out = String::with_capacity(decoded.len());
        for b in decoded {
            if escape_in_path(b) {
                out.push_str(&format!("%{b:02X}"));
            } else {
                out.push(b as char);
            }
        }
        out
    }

    /// Go's `Query()`: `&`-separated `key=value` pairs, `+` a space,
    /// undecodable or `;`-holding pairs skipped.
    fn query_map(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Some(k), Some(v)) = (unescape(k, true), unescape(v, true)) else {
                continue;
            };
            let k = String::from_utf8_lossy(&k).into_owned();
            let v = String::from_utf8_lossy(&v).into_owned();
            match out.iter_mut().find(|(key, _)| *key == k) {
                Some((_, values)) => values.push(v),
                None => out.push((k, vec![v])),
            }
        }
        out
    }
}

fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn parse_authority(authority: &str) -> Result<String, String> {
    let host = match authority.rfind('@') {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    let port = if let Some(rest) = host.strip_prefix('[') {
        let end = rest.rfind(']').ok_or("missing ']' in host")?;
        &rest[end + 1..]
    } else {
        host.rfind(':').map(|i| &host[i..]).unwrap_or("")
    };
    let valid_port =
        port.is_empty() || port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit());
    if !valid_port {
        return Err(format!("invalid port {port:?} after host"));
    }
    let bad = host.bytes().any(|b| {
        b < 0x80 && !(b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"%".contains(&b))
    });
    if bad {
        return Err(format!("invalid character in host name {host:?}"));
    }
    unescape(host, false).ok_or("invalid URL escape in host")?;
    Ok(host.to_owned())
}

/// Whether Go escapes byte `b` in a path.
fn escape_in_path(b: u8) -> bool {
    !(b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b))
}

/// Percent-decodes `s` (and `+` to a space in a query); `None` for a bad
/// escape.
fn unescape(s: &str, query: bool) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], native!(url))?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], native!(is_url))?;
    let getters = [
        ("getScheme", native!(get_scheme)),
        ("getHost", native!(get_host)),
        ("getHostname", native!(get_hostname)),
        ("getPort", native!(get_port)),
        ("getEscapedPath", native!(get_escaped_path)),
        ("getQuery", native!(get_query)),
    ];
    for (name, f) in getters {
        env.add_member_overload(name, &format!("url_{name}"), url_type(), vec![], f)?;
    }
    Ok(())
}

fn get_scheme(a: &[Value]) -> Result<Value, ExecutionError> {
    Ok(str_value(&the(a)?.scheme))
}

fn get_host(a: &[Value]) -> Result<Value, ExecutionError> {
    Ok(str_value(&the(a)?.host))
}

fn get_hostname(a: &[Value]) -> Result<Value, ExecutionError> {
    Ok(str_value(the(a)?.hostname_and_port().0))
}

fn get_port(a: &[Value]) -> Result<Value, ExecutionError> {
    Ok(str_value(the(a)?.hostname_and_port().1))
}

fn get_escaped_path(a: &[Value]) -> Result<Value, ExecutionError> {
    Ok(str_value(&the(a)?.escaped_path()))
}

fn the(args: &[Value]) -> Result<&Url, ExecutionError> {
    opaque::<Url>("url", &args[0])
}

fn str_value(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn url(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string("url", &args[0])?;
    Url::parse(s).map(wrap).map_err(|e| {
        err(
            "url",
            format!("URL parse error during conversion from string: {e}"),
        )
    })
}

fn is_url(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string("isURL", &args[0])?;
    Ok(Value::Bool(Url::parse(s).is_ok()))
}

fn get_query(args: &[Value]) -> Result<Value, ExecutionError> {
    let map: HashMap<Key, Value> = the(args)?
        .query_map()
        .into_iter()
        .map(|(k, vs)| (Key::String(Arc::new(k)), crate::native::string_list(vs)))
        .collect();
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_error, assert_true};

    #[test]
    fn documented_examples() {
        assert_true(&[
            "url('https://example.com').getScheme() == 'https'",
            "url('HTTPS://example.com').getScheme() == 'https'",
            "url('https://example.com:80').getHost() == 'example.com:80'",
            "url('https://example.com').getHost() == 'example.com'",
            "url('https://[::1]:80').getHost() == '[::1]:80'",
            "url('https://[::1]').getHost() == '[::1]'",
            "url('/path').getHost() == ''",
            "url('https://example.com:80').getHostname() == 'example.com'",
            "url('https://127.0.0.1:80').getHostname() == '127.0.0.1'",
            "url('https://[::1]:80').getHostname() == '::1'",
            "url('/path').getHostname() == ''",
            "url('https://example.com:80').getPort() == '80'",
            "url('https://example.com').getPort() == ''",
            "url('/path').getPort() == ''",
            "url('https://example.com/path').getEscapedPath() == '/path'",
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
            "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'",
            "url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?a+b=c%20d').getQuery() == {'a b': ['c d']}",
            "url('https://example.com/path?').getQuery() == {}",
            "url('https://example.com/path').getQuery() == {}",
            "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
            "isURL('/absolute-path')",
            "isURL('mailto:someone@example.com')",
            "!isURL('https://a:b:c/')",
            "!isURL('../relative-path')",
            "!isURL('')",
            "!isURL('https://exa mple.com/')",
            "!isURL('https://example.com/%zz')",
            "!isURL(':no-scheme')",
            "url('https://example.com') == url('https://example.com')",
        ]);
        assert_error(&[(
            "url('../x')",
            "URL parse error during conversion from string",
        )]);
    }
}
