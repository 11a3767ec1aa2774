//! Kubernetes' format library: `format.named(<string>)` (an optional
//! format), `format.dns1123Label()` and the other named formats below, and
//! `<format>.validate(<string>)`: `optional.none()` when the string is
//! valid, else `optional.of(<list of error messages>)`.
//!
//! The checks are those of Kubernetes' validators; the messages say the
//! same things in this crate's words.

use std::fmt;
use std::sync::OnceLock;

use cel::common::types::{Type, STRING_TYPE};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use regex::Regex;

use crate::native::{err, native, opaque, optional, string, string_list, wrap};

const TYPE_NAME: &str = "kubernetes.NamedFormat";

fn format_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// The formats, by name.
const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// A named format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Format(&'static str);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

const LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const LABEL_1035: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const NAME: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

fn full(pattern: &str) -> Regex {
    Regex::new(&format!("^(?:{pattern})$")).expect("the format patterns are valid")
}

fn label_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| full(LABEL))
}

fn subdomain_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| full(&format!(r"{LABEL}(\.{LABEL})*")))
}

fn label_1035_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| full(LABEL_1035))
}

fn name_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| full(NAME))
}

fn uuid_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        full("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
    })
}

fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

fn check(s: &str, max: usize, re: &Regex, what: &str, pattern: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > max {
        errors.push(too_long(max));
    }
    if !re.is_match(s) {
        errors.push(format!("{what} (matching the regex '{pattern}')"));
    }
    errors
}

fn dns1123_label(s: &str) -> Vec<String> {
    check(s, 63, label_re(), "a lowercase RFC 1123 label: lower case letters, digits and '-', starting and ending with a letter or digit, e.g. 'my-name' or '123-abc'", LABEL)
}

fn dns1123_subdomain(s: &str) -> Vec<String> {
    let pattern = format!(r"{LABEL}(\.{LABEL})*");
    check(s, 253, subdomain_re(), "a lowercase RFC 1123 subdomain: lower case letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. 'example.com'", &pattern)
}

fn dns1035_label(s: &str) -> Vec<String> {
    check(s, 63, label_1035_re(), "a DNS-1035 label: lower case letters, digits and '-', starting with a letter and ending with a letter or digit, e.g. 'my-name' or 'abc-123'", LABEL_1035)
}

fn qualified_name(s: &str) -> Vec<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let mut errors = Vec::new();
    match prefix {
        Some("") => errors.push("prefix part must be non-empty".to_owned()),
        Some(p) => errors.extend(
            dns1123_subdomain(p)
                .into_iter()
                .map(|e| format!("prefix part {e}")),
        ),
        None => {}
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else {
        errors.extend(check(name, 63, name_re(), "name part must be a qualified name: letters, digits, '-', '_' and '.', starting and ending with a letter or digit, e.g. 'MyName', 'my.name' or '123-abc', optionally prefixed by a DNS subdomain and '/', e.g. 'example.com/MyName'", NAME));
    }
    if name.contains('/') {
        errors.push("a qualified name has at most one '/'".to_owned());
    }
    errors
}

/// A `generateName` prefix may end in `-`: check it as if it did not.
fn prefix(s: &str, validate: fn(&str) -> Vec<String>) -> Vec<String> {
    match s.strip_suffix('-') {
        Some(head) => validate(&format!("{head}a")),
        None => validate(s),
    }
}

fn label_value(s: &str) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    check(s, 63, name_re(), "a valid label value: empty, or letters, digits, '-', '_' and '.', starting and ending with a letter or digit, e.g. 'MyValue', 'my_value' or '12345'", NAME)
}

fn validate_with(name: &str, s: &str) -> Vec<String> {
    match name {
        "dns1123Label" => dns1123_label(s),
        "dns1123Subdomain" => dns1123_subdomain(s),
        "dns1035Label" => dns1035_label(s),
        "qualifiedName" => qualified_name(s),
        "dns1123LabelPrefix" => prefix(s, dns1123_label),
        "dns1123SubdomainPrefix" => prefix(s, dns1123_subdomain),
        "dns1035LabelPrefix" => prefix(s, dns1035_label),
        "labelValue" => label_value(s),
        "uri" => match super::url::Url::parse(s) {
            Ok(_) => Vec::new(),
            Err(e) => vec![format!("invalid URI: {e}")],
        },
        "uuid" if uuid_re().is_match(s) => Vec::new(),
        "uuid" => {
            vec!["does not match the UUID format, e.g. 123e4567-e89b-12d3-a456-426614174000".into()]
        }
        "byte" if is_base64(s) => Vec::new(),
        "byte" => vec!["invalid base64".into()],
        "date" if chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() && s.len() == 10 => {
            Vec::new()
        }
        "date" => vec!["invalid date".into()],
        "datetime" if chrono::DateTime::parse_from_rfc3339(s).is_ok() => Vec::new(),
        "datetime" => vec!["invalid datetime".into()],
        _ => vec![format!("unknown format {name}")],
    }
}

/// Standard base64, padding required.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return false;
    }
    let body = s.trim_end_matches('=');
    b.len() - body.len() <= 2
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "format.named",
        "format_named",
        vec![STRING_TYPE],
        native!(named),
    )?;
    env.add_member_overload(
        "validate",
        "format_validate",
        format_type(),
        vec![STRING_TYPE],
        native!(validate),
    )?;
    macro_rules! constructor {
        ($($name:literal),*) => {$({
            fn make(_: &[Value]) -> Result<Value, ExecutionError> {
                Ok(wrap(Format($name)))
            }
            env.add_overload(concat!("format.", $name), concat!("format_", $name), vec![], native!(make))?;
        })*};
    }
    constructor!(
        "dns1123Label",
        "dns1123Subdomain",
        "dns1035Label",
        "qualifiedName",
        "dns1123LabelPrefix",
        "dns1123SubdomainPrefix",
        "dns1035LabelPrefix",
        "labelValue",
        "uri",
        "uuid",
        "byte",
        "date",
        "datetime"
    );
    Ok(())
}

fn named(args: &[Value]) -> Result<Value, ExecutionError> {
    let name = string("format.named", &args[0])?;
    Ok(optional(
        NAMES.iter().find(|n| **n == name).map(|n| wrap(Format(n))),
    ))
}

fn validate(args: &[Value]) -> Result<Value, ExecutionError> {
    let format = opaque::<Format>("validate", &args[0])?;
    let s = string("validate", &args[1])?;
    if !NAMES.contains(&format.0) {
        return Err(err("validate", format!("unknown format {}", format.0)));
    }
    let errors = validate_with(format.0, s);
    Ok(optional((!errors.is_empty()).then(|| string_list(errors))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::testing::assert_true;

    #[test]
    fn documented_examples() {
        assert_true(&[
            "format.dns1123Label().validate('my-label-name') == optional.none()",
            "format.dns1123Label().validate('MyLabel').hasValue()",
            "format.named('dns1123Label').hasValue()",
            "!format.named('unknown').hasValue()",
            "format.named('dns1123Subdomain').value().validate('apiextensions.k8s.io') == optional.none()",
            "format.dns1123Subdomain().validate('a..b').hasValue()",
            "format.dns1035Label().validate('1abc').hasValue()",
            "!format.dns1035Label().validate('abc-1').hasValue()",
            "!format.qualifiedName().validate('example.com/MyName').hasValue()",
            "format.qualifiedName().validate('/MyName').hasValue()",
            "!format.dns1123LabelPrefix().validate('my-prefix-').hasValue()",
            "format.dns1123Label().validate('my-prefix-').hasValue()",
            "!format.labelValue().validate('').hasValue()",
            "!format.labelValue().validate('My_Value.1').hasValue()",
            "format.labelValue().validate('-bad').hasValue()",
            "!format.uri().validate('https://example.com/x').hasValue()",
            "format.uri().validate('relative/path').hasValue()",
            "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
            "format.uuid().validate('123e4567').hasValue()",
            "!format.byte().validate('aGVsbG8=').hasValue()",
            "format.byte().validate('aGVsbG8').hasValue()",
            "!format.date().validate('2024-02-29').hasValue()",
            "format.date().validate('2023-02-29').hasValue()",
            "!format.datetime().validate('2024-02-29T10:00:00Z').hasValue()",
            "format.datetime().validate('2024-02-29 10:00').hasValue()",
            "format.qualifiedName().validate('apiextensions.k8s.io/v1beta1') == optional.none()",
            "format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-') == optional.none()",
            "format.dns1035LabelPrefix().validate('my-label-prefix-') == optional.none()",
            "format.uri().validate('http://example.com') == optional.none()",
            "format.dns1123Label().validate('contains a space').value().size() == 1",
            "format.qualifiedName().validate('contains a space').value().size() == 1",
            "format.byte().validate('aGVsbG8') == optional.of(['invalid base64'])",
            "format.date().validate('2020-01-32') == optional.of(['invalid date'])",
            "format.datetime().validate('2020-01-32T00:00:00Z') == optional.of(['invalid datetime'])",
            "format.labelValue().validate('my-cool-label-Value!!\\n\\n!!!').hasValue()",
            "format.named('uuid').value() == format.uuid()",
            "format.dns1123Label() != format.dns1035Label()",
            "type(format.uri()) == kubernetes.NamedFormat",
        ]);
        for name in NAMES {
            assert_true(&[
                format!("format.named('{name}').hasValue()").as_str(),
                format!("format.named('{name}').value() == format.{name}()").as_str(),
            ]);
        }
    }

    #[test]
    fn messages() {
        let long = "a".repeat(64);
        assert_eq!(dns1123_label(&long), vec![too_long(63)]);
        assert_eq!(dns1123_label("Ab").len(), 1);
        assert!(qualified_name("a/b/c")
            .iter()
            .any(|e| e.contains("at most one '/'")));
    }
}
