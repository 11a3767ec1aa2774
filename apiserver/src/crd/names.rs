//! Names: which of a CRD's requested names it may have (kube's naming
//! controller).

use serde_json::{json, Map, Value};
use std::collections::HashSet;

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list(v: &Value, key: &str) -> Vec<String> {
    crate::object::strings(v.get(key))
}

/// The requested names with kube's defaults (singular: lowercased kind;
/// listKind: kind + "List").
pub fn requested_names(crd: &Value) -> Value {
    let n = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut m = n.as_object().cloned().unwrap_or_default();
    let kind = text(&n, "kind").to_string();
    if text(&n, "singular").is_empty() {
        m.insert("singular".into(), Value::String(kind.to_lowercase()));
    }
    if text(&n, "listKind").is_empty() {
        m.insert("listKind".into(), Value::String(format!("{kind}List")));
    }
    Value::Object(m)
}

/// The outcome of name acceptance: the names to record in
/// `status.acceptedNames` and the `NamesAccepted` condition's
/// (status, reason, message).
#[derive(Debug, Clone, PartialEq)]
pub struct Acceptance {
    pub names: Value,
    pub accepted: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Decides which requested names `crd` may have, given the other CRDs
/// (their accepted names claim resources and kinds in their group) and the
/// built-in resources of the same group (`builtin`: plural, singular,
/// short names and kinds).
pub fn accepted_names<'a>(
    crd: &Value,
    others: impl Iterator<Item = &'a Value>,
    builtin: &[(&str, &str, &[&str], &str)],
) -> Acceptance {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut resources: HashSet<String> = HashSet::new();
    let mut kinds: HashSet<String> = HashSet::new();
    for (plural, singular, short, kind) in builtin {
        resources.insert(plural.to_string());
        resources.insert(singular.to_string());
        resources.extend(short.iter().map(|s| s.to_string()));
        kinds.insert(kind.to_string());
        kinds.insert(format!("{kind}List"));
    }
    for o in others {
        if o.pointer("/spec/group").and_then(Value::as_str) != Some(group) {
            continue;
        }
        let Some(a) = o.pointer("/status/acceptedNames") else {
            continue;
        };
        for k in ["plural", "singular"] {
            resources.insert(text(a, k).to_string());
        }
        resources.extend(list(a, "shortNames"));
        for k in ["kind", "listKind"] {
            kinds.insert(text(a, k).to_string());
        }
    }
    resources.remove("");
    kinds.remove("");
    let requested = requested_names(crd);
    let current = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or(json!({}));
    let mut names: Map<String, Value> = current.as_object().cloned().unwrap_or_default();
    let mut failure: Option<(&'static str, String)> = None;
    let fresh = |want: &str, have: &str, used: &HashSet<String>| -> Result<(), String> {
        if want == have || !used.contains(want) {
            Ok(())
        } else {
            Err(format!("{want:?} is already in use"))
        }
    };
    for (key, reason, used) in [
        ("plural", "PluralConflict", &resources),
        ("singular", "SingularConflict", &resources),
    ] {
        match fresh(text(&requested, key), text(&current, key), used) {
            Ok(()) => {
                names.insert(key.into(), json!(text(&requested, key)));
            }
            Err(e) => failure = Some((reason, e)),
        }
    }
    let want_short = list(&requested, "shortNames");
    let have_short = list(&current, "shortNames");
    if want_short != have_short {
        let mut errs = Vec::new();
        for s in &want_short {
            if have_short.contains(s)
                || s == text(&current, "plural")
                || s == text(&current, "singular")
            {
                continue;
            }
            if let Err(e) = fresh(s, "", &resources) {
                errs.push(e);
            }
        }
        if errs.is_empty() {
            names.insert("shortNames".into(), json!(want_short));
        } else {
            let msg = if errs.len() == 1 {
                errs.remove(0)
            } else {
                format!("[{}]", errs.join(", "))
            };
            failure = Some(("ShortNamesConflict", msg));
        }
    }
    for (key, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        match fresh(text(&requested, key), text(&current, key), &kinds) {
            Ok(()) => {
                names.insert(key.into(), json!(text(&requested, key)));
            }
            Err(e) => failure = Some((reason, e)),
        }
    }
    match requested.get("categories") {
        Some(c) => {
            names.insert("categories".into(), c.clone());
        }
        None => {
            names.remove("categories");
        }
    }
    match failure {
        None => Acceptance {
            names: Value::Object(names),
            accepted: true,
            reason: "NoConflicts",
            message: "no conflicts found".into(),
        },
        Some((reason, message)) => Acceptance {
            names: Value::Object(names),
            accepted: false,
            reason,
            message,
        },
    }
}
