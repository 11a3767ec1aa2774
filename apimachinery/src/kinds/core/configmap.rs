//! ConfigMaps and Secrets: kube's defaults (Secret type, `stringData`
//! folded into `data` as its conversion does), `ValidateConfigMap`,
//! `ValidateSecret` and their update rules (`immutable`), and printers.

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::kinds::common::default_str;
use crate::kinds::print::{self, column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static CONFIG_MAP: KindRules = KindRules {
    validate: Some(validate_config_map),
    columns: CONFIG_MAP_COLUMNS,
    ..KindRules::NONE
};

pub static SECRET: KindRules = KindRules {
    defaults: Some(secret_defaults),
    validate: Some(validate_secret),
    columns: SECRET_COLUMNS,
    ..KindRules::NONE
};

/// kube's `MaxSecretSize`, also the limit of a ConfigMap's data.
const MAX_SIZE: usize = 1024 * 1024;
const IMMUTABLE: &str = "field is immutable when `immutable` is set";

fn secret_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    default_str(o, "type", "Opaque");
    // v1's write-only `stringData` overrides `data` keys, base64-encoded.
    if let Some(Value::Object(strings)) = o.remove("stringData") {
        if strings.is_empty() {
            return;
        }
        let data = o.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if data.is_null() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, s) in strings {
                let text = s.as_str().unwrap_or("");
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                data.insert(k, Value::String(encoded));
            }
        }
    }
}

fn entries<'a>(obj: &'a Value, key: &str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    obj.get(key)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// Bytes of a base64 value once decoded.
fn decoded_len(v: &Value) -> usize {
    let s = v.as_str().unwrap_or("").trim_end_matches('=');
    s.len() * 3 / 4
}

fn key_errors(path: &str, key: &str, errs: &mut Vec<StatusCause>) {
    for msg in v::is_config_map_key(key) {
        errs.push(v::invalid(&format!("{path}[{key}]"), key, &msg));
    }
}

fn is_immutable(obj: &Value) -> bool {
    obj.get("immutable").and_then(Value::as_bool) == Some(true)
}

/// A map field as compared on update: absent, null and `{}` are alike.
fn map_of<'a>(obj: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    obj.get(key)
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
}

fn immutable_errors(obj: &Value, old: Option<&Value>, keys: &[&str]) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    if let Some(old) = old.filter(|o| is_immutable(o)) {
        if !is_immutable(obj) {
            errs.push(v::forbidden("immutable", IMMUTABLE));
        }
        for k in keys {
            if map_of(obj, k) != map_of(old, k) {
                errs.push(v::forbidden(k, IMMUTABLE));
            }
        }
    }
    errs
}

fn validate_config_map(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = immutable_errors(obj, old, &["data", "binaryData"]);
    let binary = obj.get("binaryData").and_then(Value::as_object);
    let mut total = 0usize;
    for (k, val) in entries(obj, "data") {
        key_errors("data", k, &mut errs);
        if binary.is_some_and(|b| b.contains_key(k)) {
            errs.push(v::invalid(
                &format!("data[{k}]"),
                k,
                "duplicate of key present in binaryData",
            ));
        }
        total += val.as_str().map_or(0, str::len);
    }
    for (k, val) in entries(obj, "binaryData") {
        key_errors("binaryData", k, &mut errs);
        total += decoded_len(val);
    }
    if total > MAX_SIZE {
        errs.push(v::too_long("", MAX_SIZE));
    }
    errs
}

fn validate_secret(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = immutable_errors(obj, old, &["data"]);
    let data = obj.get("data").and_then(Value::as_object);
    let mut total = 0usize;
    for (k, val) in entries(obj, "data") {
        key_errors("data", k, &mut errs);
        total += decoded_len(val);
    }
    if total > MAX_SIZE {
        errs.push(v::too_long("data", MAX_SIZE));
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let req = |k: &str| v::required(&format!("data[{k}]"), "");
    match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let name = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_empty() {
                errs.push(v::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => docker_config(data, ".dockercfg", &mut errs),
        "kubernetes.io/dockerconfigjson" => docker_config(data, ".dockerconfigjson", &mut errs),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(req("username"));
            errs.push(req("password"));
        }
        "kubernetes.io/ssh-auth" => {
            let empty = data
                .and_then(|d| d.get("ssh-privatekey"))
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty {
                errs.push(req("ssh-privatekey"));
            }
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    errs.push(req(k));
                }
            }
        }
        _ => {}
    }
    errs
}

/// The docker config key must be there and hold a JSON object.
fn docker_config(data: Option<&Map<String, Value>>, key: &str, errs: &mut Vec<StatusCause>) {
    let field = format!("data[{key}]");
    let Some(val) = data.and_then(|d| d.get(key)) else {
        errs.push(v::required(&field, ""));
        return;
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(val.as_str().unwrap_or(""))
        .unwrap_or_default();
    if let Err(e) = serde_json::from_slice::<Map<String, Value>>(&bytes) {
        let detail = if bytes.is_empty() {
            "unexpected end of JSON input".to_string()
        } else {
            e.to_string()
        };
        errs.push(v::invalid(&field, "<secret contents redacted>", &detail));
    }
}

// ---------------------------------------------------------------------------
// Printers.

const CONFIG_MAP_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Data",
        "string",
        "Data contains the configuration data.",
        0,
        config_map_data,
    ),
    AGE,
];

const SECRET_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data.",
        0,
        secret_type,
    ),
    column(
        "Data",
        "string",
        "Data contains the secret data.",
        0,
        secret_data,
    ),
    AGE,
];

fn config_map_data(obj: &Value, _: &PrintContext) -> Value {
    json!(print::count_at(obj, "/data") + print::count_at(obj, "/binaryData"))
}

fn secret_type(obj: &Value, _: &PrintContext) -> Value {
    json!(print::str_at(obj, "/type", ""))
}

fn secret_data(obj: &Value, _: &PrintContext) -> Value {
    json!(print::count_at(obj, "/data"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: Vec<StatusCause>) -> Vec<String> {
        errs.iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn secret_defaults_type_and_string_data() {
        let mut s = json!({"data": {"a": "eA=="}, "stringData": {"b": "hi"}});
        secret_defaults(&mut s);
        assert_eq!(
            s,
            json!({"type": "Opaque", "data": {"a": "eA==", "b": "aGk="}})
        );
        let again = s.clone();
        secret_defaults(&mut s);
        assert_eq!(s, again);
        let mut tls = json!({"type": "kubernetes.io/tls"});
        secret_defaults(&mut tls);
        assert_eq!(tls["type"], "kubernetes.io/tls");
    }

    #[test]
    fn config_map_rules() {
        assert!(validate_config_map(&json!({"data": {"a.b": "x", "C_D-1": ""}}), None).is_empty());
        assert_eq!(
            msgs(validate_config_map(&json!({"data": {"a b": "x"}}), None)),
            vec!["data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]
        );
        assert_eq!(
            msgs(validate_config_map(
                &json!({"data": {"..a": "x"}, "binaryData": {"..a": ""}}),
                None
            ))[1],
            "data[..a]: Invalid value: \"..a\": duplicate of key present in binaryData"
        );
        let big = "x".repeat(MAX_SIZE + 1);
        assert_eq!(
            msgs(validate_config_map(&json!({"data": {"a": big}}), None)),
            vec![": Too long: may not be more than 1048576 bytes"]
        );
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(validate_config_map(&old, Some(&old)).is_empty());
        assert_eq!(
            msgs(validate_config_map(
                &json!({"data": {"a": "2"}}),
                Some(&old)
            )),
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set"
            ]
        );
    }

    #[test]
    fn secret_rules() {
        let cases = [
            (json!({"type": "Opaque", "data": {"a": "eA=="}}), vec![]),
            (
                json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}}),
                vec!["data[tls.key]: Required value"],
            ),
            (
                json!({"type": "kubernetes.io/service-account-token"}),
                vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"],
            ),
            (
                json!({"type": "kubernetes.io/dockerconfigjson"}),
                vec!["data[.dockerconfigjson]: Required value"],
            ),
            (
                json!({"type": "kubernetes.io/basic-auth", "data": {}}),
                vec![
                    "data[username]: Required value",
                    "data[password]: Required value",
                ],
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(msgs(validate_secret(&obj, None)), want, "{obj}");
        }
        let ok = base64::engine::general_purpose::STANDARD.encode("{\"auths\":{}}");
        let obj =
            json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": ok}});
        assert!(validate_secret(&obj, None).is_empty());
    }

    #[test]
    fn columns() {
        let ctx = PrintContext { now: 0 };
        let cm = json!({"data": {"a": "1"}, "binaryData": {"b": ""}});
        assert_eq!((CONFIG_MAP_COLUMNS[1].cell)(&cm, &ctx), json!(2));
        let s = json!({"type": "Opaque", "data": {"a": "", "b": ""}});
        assert_eq!((SECRET_COLUMNS[1].cell)(&s, &ctx), json!("Opaque"));
        assert_eq!((SECRET_COLUMNS[2].cell)(&s, &ctx), json!(2));
    }
}
