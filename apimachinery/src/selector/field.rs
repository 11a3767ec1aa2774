//! Field selectors (`?fieldSelector=`), as kube's `fields.ParseSelector`:
//! comma-separated `field=value`, `field==value` or `field!=value` terms. In
//! values, `\,`, `\=` and `\\` stand for `,`, `=` and `\`; any other backslash
//! sequence, or a bare `,`/`=`, is an error. Field names are taken verbatim
//! (no escaping, no trimming); which names a kind supports is checked by the
//! caller.

use super::SelectorError;
use std::fmt;

/// One term: `field=value` (`not == false`) or `field!=value` (`not == true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub not: bool,
    pub value: String,
}

impl FieldRequirement {
    /// Whether a field value (absent reads as empty) satisfies the term.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let value = value.unwrap_or("");
        (value == self.value) != self.not
    }
}

impl fmt::Display for FieldRequirement {
    /// `field=value` or `field!=value`, with the value escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.not { "!=" } else { "=" };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A parsed field selector: the AND of its terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector of the given terms (kept in canonical order).
    pub fn from_requirements(reqs: Vec<FieldRequirement>) -> Self {
        let mut s = FieldSelector { reqs };
        s.sort();
        s
    }

    /// `field=value` alone (kube's `OneTermEqualSelector`).
    pub fn one_term_equal(field: &str, value: &str) -> Self {
        FieldSelector {
            reqs: vec![FieldRequirement {
                field: field.to_string(),
                not: false,
                value: value.to_string(),
            }],
        }
    }

    /// Terms in the order of their string form, which is the order kube
    /// sorts the raw terms in whenever they are written canonically.
    fn sort(&mut self) {
        self.reqs.sort_by_cached_key(|r| r.to_string());
    }

    /// Parses the string form. Errors read exactly as kube-apiserver's.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        // kube sorts the raw terms first, so that the first bad term in that
        // order is the one reported.
        parts.sort_unstable();
        let mut reqs = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, not, raw_value)) = split_term(part) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            reqs.push(FieldRequirement {
                field: field.to_string(),
                not,
                value: unescape_value(raw_value)?,
            });
        }
        Ok(Self::from_requirements(reqs))
    }

    /// Whether the selector restricts nothing.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.reqs
    }

    /// Whether an object matches, given its field values: `get(field)` is the
    /// value of a field, `None` when the object has none, which reads as the
    /// empty string (as kube's `fields.Set`): `f=` and `f!=x` match it,
    /// `f=x` does not.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.reqs
            .iter()
            .all(|r| r.matches(get(&r.field).as_deref()))
    }

    /// The value a `field=value` term pins `field` to (kube's
    /// `RequiresExactMatch`), e.g. `metadata.name` to narrow a list or watch
    /// to one key.
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|r| !r.not && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Rewrites every term with `f(field, value)` (kube's `Transform`, used to
    /// convert or reject field labels); a term rewritten to an empty field and
    /// an empty value is dropped.
    pub fn transform<E>(
        &self,
        mut f: impl FnMut(&str, &str) -> Result<(String, String), E>,
    ) -> Result<Self, E> {
        let mut reqs = Vec::with_capacity(self.reqs.len());
        for r in &self.reqs {
            let (field, value) = f(&r.field, &r.value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            reqs.push(FieldRequirement {
                field,
                not: r.not,
                value,
            });
        }
        Ok(Self::from_requirements(reqs))
    }
}

impl fmt::Display for FieldSelector {
    /// The terms joined by `,`; `==` prints as `=`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Escapes `\`, `,` and `=` in a value with a backslash (kube's
/// `fields.EscapeValue`).
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reverses `escape_value` (kube's `fields.UnescapeValue`), rejecting
/// unknown escapes and bare `,` or `=`.
pub fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its code point number.
            ',' | '=' => {
                return Err(SelectorError(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )))
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError(
            "invalid field selector: invalid escape sequence: \\".into(),
        ));
    }
    Ok(out)
}

/// Splits on commas not escaped by a backslash; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at its first operator (`!=`, `==` or `=`): field, whether
/// it is `!=`, and the raw (escaped) value.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        if let Some(v) = rest.strip_prefix("!=") {
            return Some((&term[..i], true, v));
        }
        if let Some(v) = rest.strip_prefix("==") {
            return Some((&term[..i], false, v));
        }
        if let Some(v) = rest.strip_prefix('=') {
            return Some((&term[..i], false, v));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn req(field: &str, not: bool, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.into(),
            not,
            value: value.into(),
        }
    }

    fn err(s: &str) -> String {
        FieldSelector::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn parses_terms() {
        let s = FieldSelector::parse("metadata.name=foo,spec.nodeName!=n1,status.phase==Running")
            .unwrap();
        assert_eq!(
            s.requirements(),
            &[
                req("metadata.name", false, "foo"),
                req("spec.nodeName", true, "n1"),
                req("status.phase", false, "Running"),
            ]
        );
        assert_eq!(
            s.to_string(),
            "metadata.name=foo,spec.nodeName!=n1,status.phase=Running"
        );
        assert_eq!(s.exact_match("metadata.name"), Some("foo"));
        assert_eq!(s.exact_match("spec.nodeName"), None);
        assert_eq!(s.exact_match("metadata.namespace"), None);
    }

    #[test]
    fn empty_and_blank_terms() {
        assert!(FieldSelector::parse("").unwrap().is_empty());
        assert!(FieldSelector::parse(",,").unwrap().is_empty());
        let s = FieldSelector::parse(",a=b,,").unwrap();
        assert_eq!(s.requirements(), &[req("a", false, "b")]);
        // Field names are not trimmed, values may be empty.
        let s = FieldSelector::parse(" a = ").unwrap();
        assert_eq!(s.requirements(), &[req(" a ", false, " ")]);
        let s = FieldSelector::parse("a=").unwrap();
        assert_eq!(s.requirements(), &[req("a", false, "")]);
        assert_eq!(
            FieldSelector::parse("=x").unwrap().requirements(),
            &[req("", false, "x")]
        );
    }

    #[test]
    fn sorted_canonically() {
        let s = FieldSelector::parse("b=1,a=2").unwrap();
        assert_eq!(s.to_string(), "a=2,b=1");
    }

    #[test]
    fn escapes() {
        let s = FieldSelector::parse(r"a=x\,y\=z\\w").unwrap();
        assert_eq!(s.requirements(), &[req("a", false, r"x,y=z\w")]);
        assert_eq!(s.to_string(), r"a=x\,y\=z\\w");
        // An escaped comma does not split terms; the field part keeps escapes.
        let s = FieldSelector::parse(r"a\,b=c").unwrap();
        assert_eq!(s.requirements(), &[req(r"a\,b", false, "c")]);
        assert_eq!(escape_value(r"\,="), r"\\\,\=");
        assert_eq!(unescape_value(r"\\\,\=").unwrap(), r"\,=");
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            err("abc"),
            "invalid selector: 'abc'; can't understand 'abc'"
        );
        assert_eq!(
            err("a=b,zzz"),
            "invalid selector: 'a=b,zzz'; can't understand 'zzz'"
        );
        assert_eq!(
            err("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            err("a!==c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            err(r"a=\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            err(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        // The first bad term in sorted order is reported.
        assert_eq!(
            err(r"b,a=\q"),
            r"invalid field selector: invalid escape sequence: \q"
        );
    }

    #[test]
    fn matching() {
        let obj: HashMap<&str, &str> = [("metadata.name", "web"), ("spec.nodeName", "")].into();
        let get = |f: &str| obj.get(f).map(|v| v.to_string());
        let yes = |s: &str| FieldSelector::parse(s).unwrap().matches(get);
        assert!(yes(""));
        assert!(yes("metadata.name=web"));
        assert!(yes("metadata.name==web"));
        assert!(!yes("metadata.name=db"));
        assert!(yes("metadata.name!=db"));
        assert!(!yes("metadata.name!=web"));
        assert!(yes("spec.nodeName="));
        // A missing field reads as the empty string.
        assert!(yes("status.phase="));
        assert!(yes("status.phase!=Running"));
        assert!(!yes("status.phase=Running"));
        assert!(!yes("metadata.name=web,status.phase=Running"));
    }

    #[test]
    fn transform_drops_emptied_terms() {
        let s = FieldSelector::parse("a=1,b=2").unwrap();
        let t = s
            .transform::<String>(|f, v| {
                if f == "a" {
                    Ok((String::new(), String::new()))
                } else {
                    Ok((format!("x.{f}"), v.to_string()))
                }
            })
            .unwrap();
        assert_eq!(t.to_string(), "x.b=2");
        let e = s.transform(|f, _| Err(format!("field label not supported: {f}")));
        assert_eq!(e.unwrap_err(), "field label not supported: a");
    }

    fn term() -> impl Strategy<Value = FieldRequirement> {
        ("[a-z][a-z.]{0,10}", any::<bool>(), any::<String>())
            .prop_map(|(field, not, value)| FieldRequirement { field, not, value })
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in any::<String>()) {
            if let Ok(sel) = FieldSelector::parse(&s) {
                let again = FieldSelector::parse(&sel.to_string());
                prop_assert_eq!(again, Ok(sel));
            }
        }

        #[test]
        fn parse_never_panics_on_operators(s in r"[a=!,\\ é]{0,20}") {
            if let Ok(sel) = FieldSelector::parse(&s) {
                let again = FieldSelector::parse(&sel.to_string());
                prop_assert_eq!(again, Ok(sel));
            }
        }

        #[test]
        fn escaping_round_trips(v in any::<String>()) {
            prop_assert_eq!(unescape_value(&escape_value(&v)), Ok(v));
        }

        #[test]
        fn generated_selectors_round_trip(terms in proptest::collection::vec(term(), 0..5)) {
            let text: Vec<String> = terms.iter().map(|t| t.to_string()).collect();
            let parsed = FieldSelector::parse(&text.join(",")).unwrap();
            let mut want = terms.clone();
            want.sort_by_cached_key(|r| r.to_string());
            prop_assert_eq!(parsed.requirements(), want.as_slice());
            prop_assert_eq!(FieldSelector::parse(&parsed.to_string()), Ok(parsed));
        }
    }
}
