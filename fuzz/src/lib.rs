//! Fuzz targets: every decoder and parser a request's bytes reach before
//! they are trusted. Each target takes arbitrary bytes; it must never panic,
//! and where a parse has an inverse it checks the round trip (a target
//! panics, with `assert!`, when an invariant breaks).
//!
//! The same table is driven two ways:
//! - `tests/replay.rs` (in `cargo test`, so in CI): every input under
//!   `corpus/<target>/` (seeds, and every crash found so far, kept as a
//!   regression), then a few seconds of proptest mutations of those inputs;
//! - `src/bin/afl.rs`, built with `cargo afl` (stable toolchain), for
//!   coverage-guided runs of minutes; `tools/fuzz.sh` runs it.

use apimachinery::managedfields::FieldSet;
use apimachinery::media::{self, BodyFormat, Serves};
use apimachinery::{
    cbor, continue_token, fieldvalidation, patch, query, request, schema, selector,
};
use serde_json::Value;

/// One fuzz target.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, by the name its corpus directory has.
pub const TARGETS: &[Target] = &[
    Target {
        name: "label_selector",
        run: label_selector,
    },
    Target {
        name: "field_selector",
        run: field_selector,
    },
    Target {
        name: "continue_token",
        run: continue_token,
    },
    Target {
        name: "query",
        run: query_params,
    },
    Target {
        name: "path",
        run: path,
    },
    Target {
        name: "media_type",
        run: media_type,
    },
    Target {
        name: "json_body",
        run: json_body,
    },
    Target {
        name: "yaml_body",
        run: yaml_body,
    },
    Target {
        name: "protobuf",
        run: protobuf,
    },
    Target {
        name: "cbor",
        run: cbor_body,
    },
    Target {
        name: "patch",
        run: patches,
    },
    Target {
        name: "fieldset",
        run: fieldset,
    },
    Target {
        name: "cel",
        run: cel,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// Splits an input into two parts at its first NUL byte (the second part is
/// empty without one): how targets with two inputs read theirs.
fn split(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// A label selector that parses prints as one that parses to itself.
fn label_selector(data: &[u8]) {
    let s = text(data);
    if let Ok(sel) = selector::LabelSelector::parse(&s) {
        let printed = sel.to_string();
        let again = selector::LabelSelector::parse(&printed);
        assert_eq!(again.as_ref(), Ok(&sel), "{s:?} printed as {printed:?}");
    }
}

/// A field selector that parses prints as one that parses to itself.
fn field_selector(data: &[u8]) {
    let s = text(data);
    if let Ok(sel) = selector::FieldSelector::parse(&s) {
        let printed = sel.to_string();
        let again = selector::FieldSelector::parse(&printed);
        assert_eq!(again.as_ref(), Ok(&sel), "{s:?} printed as {printed:?}");
    }
    let _ = selector::unescape_value(&s);
}

/// A token that decodes re-encodes to one that decodes to the same place,
/// and the start key stays inside the list's prefix.
fn continue_token(data: &[u8]) {
    let s = text(data);
    if let Ok(from) = continue_token::decode(&s) {
        assert!(!from.start_key.starts_with('/'), "{s:?}: {from:?}");
        assert!(
            !from
                .start_key
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == ".."),
            "{s:?}: {from:?}"
        );
        let again = continue_token::decode(&continue_token::encode(&from.start_key, from.revision));
        assert_eq!(again.as_ref(), Ok(&from));
    }
}

/// A query string through every option parser: resourceVersion and its
/// match, limit, continue, selectors, timeouts, dry run, field managers,
/// propagation policies.
fn query_params(data: &[u8]) {
    let s = text(data);
    let Ok(q) = query::parse(Some(&s)) else {
        return;
    };
    if let Ok(p) = query::list_params(&q) {
        let _ = query::list_plan(&p);
        let _ = query::watch_plan(&p);
    }
    let _ = query::get_freshness(q.get("resourceVersion"));
    for verb in [
        query::WriteVerb::Create,
        query::WriteVerb::Update,
        query::WriteVerb::Patch(BodyFormat::ApplyYaml),
        query::WriteVerb::Patch(BodyFormat::MergePatch),
    ] {
        let _ = query::write_params(&q, verb);
    }
    let _ = query::delete_params(&q, None);
    let _ = query::table_include_object(&q);
    let _ = query::pretty(&q, None);
}

/// A request path, as the router resolves it.
fn path(data: &[u8]) {
    let s = text(data);
    if let Some(request::ApiPath::Resource(r)) = request::parse(&s) {
        assert!(!r.resource.is_empty(), "{s:?}: {r:?}");
        assert!(r.name.as_deref() != Some(""), "{s:?}: {r:?}");
    }
}

/// `Accept`, `Content-Type` and `Accept-Encoding` headers.
fn media_type(data: &[u8]) {
    let s = text(data);
    for serves in [Serves::BuiltIn, Serves::JsonOnly] {
        let _ = media::negotiate(Some(&s), false, serves);
        let _ = media::negotiate(Some(&s), true, serves);
        let _ = media::negotiate_watch(Some(&s), serves);
    }
    let _ = media::request_body(Some(&s), false);
    let _ = media::request_body(Some(&s), true);
    let _ = media::custom_resource_patch_body(Some(&s));
    let _ = media::accepts_gzip(Some(&s));
}

/// The schema a decoded body is checked against: its own kind's if it names
/// a built-in one, else Pod's (the largest).
fn schema_for(value: &Value) -> Option<schema::TypeRef<'static>> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("Pod");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let s = schema::builtin();
    s.by_gvk(group, version, kind)
        .or_else(|| s.by_gvk("", "v1", "Pod"))
}

fn check_decoded(decoded: &fieldvalidation::Decoded) {
    let ty = schema_for(&decoded.value);
    for level in [
        fieldvalidation::FieldValidationLevel::Strict,
        fieldvalidation::FieldValidationLevel::Warn,
    ] {
        let _ = fieldvalidation::check(level, ty, decoded);
        let _ = fieldvalidation::check_unstructured(level, ty, decoded);
    }
}

/// A JSON request body: decoded with duplicate tracking, then checked
/// against its kind's schema at every field validation level.
fn json_body(data: &[u8]) {
    match fieldvalidation::decode_json(data) {
        Ok(decoded) => check_decoded(&decoded),
        Err(e) => {
            let _ = e.to_status("Pod", data);
        }
    }
    let _ = fieldvalidation::missing_kind_message(data);
}

/// A YAML request body, as `sigs.k8s.io/yaml` reads it.
fn yaml_body(data: &[u8]) {
    match fieldvalidation::decode_yaml(data) {
        Ok(decoded) => check_decoded(&decoded),
        Err(e) => {
            let _ = e.to_status("Pod", data);
        }
    }
}

/// Messages a protobuf body may claim to be (the `k8s\0` envelope names
/// the kind; these cover nesting, maps, oneofs, quantities and times).
const MESSAGES: &[&str] = &[
    "k8s.io.api.core.v1.Pod",
    "k8s.io.api.core.v1.ConfigMap",
    "k8s.io.api.apps.v1.Deployment",
    "k8s.io.api.coordination.v1.Lease",
    "k8s.io.api.core.v1.Service",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
];

/// A protobuf body: the envelope, then the message it names; a raw message
/// of each kind; and what decodes re-encodes to something that decodes the
/// same.
fn protobuf(data: &[u8]) {
    let _ = k8s_proto::decode_unknown(data);
    let _ = k8s_proto::decode_object(data);
    let Some((&selector, raw)) = data.split_first() else {
        return;
    };
    let message = MESSAGES[usize::from(selector) % MESSAGES.len()];
    if let Ok(json) = k8s_proto::decode_to_json(message, raw) {
        if let Ok(bytes) = k8s_proto::encode_from_json(message, &json) {
            let again = k8s_proto::decode_to_json(message, &bytes);
            assert_eq!(
                again.as_ref().ok(),
                Some(&json),
                "{message} did not round-trip"
            );
        }
    }
}

/// A CBOR body (and sequence): what decodes encodes to bytes that decode to
/// the same value.
fn cbor_body(data: &[u8]) {
    let _ = cbor::decode_sequence(data);
    if let Ok(value) = cbor::decode(data) {
        let again = cbor::decode(&cbor::encode(&value));
        assert_eq!(again.as_ref().ok(), Some(&value), "CBOR did not round-trip");
    }
}

/// A document and a patch (split at the first NUL), applied as each patch
/// kind. A merge patch is idempotent (RFC 7386): applying it twice gives
/// what applying it once gave.
fn patches(data: &[u8]) {
    let (doc, p) = split(data);
    let (Ok(doc), Ok(p)) = (
        serde_json::from_slice::<Value>(doc),
        serde_json::from_slice::<Value>(p),
    ) else {
        return;
    };
    let _ = patch::apply_json_patch(&doc, &p);
    if let Ok(once) = patch::apply_merge_patch(&doc, &p) {
        let twice = patch::apply_merge_patch(&once, &p);
        assert_eq!(
            twice.as_ref().ok(),
            Some(&once),
            "merge patch is not idempotent"
        );
    }
    let _ = patch::apply_strategic_merge_patch(&doc, &p, schema_for(&doc));
    let _ = patch::apply_strategic_merge_patch(&doc, &p, None);
}

/// A `managedFields[].fieldsV1` set: it prints as a set that reads back as
/// itself, and the set algebra holds on it.
fn fieldset(data: &[u8]) {
    let Ok(json) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(set) = FieldSet::from_fields_v1(&json) else {
        return;
    };
    let again = FieldSet::from_fields_v1(&set.to_fields_v1());
    assert_eq!(again.as_ref(), Ok(&set), "fieldsV1 did not round-trip");
    assert_eq!(set.union(&set), set);
    assert_eq!(set.intersection(&set), set);
    assert!(set.difference(&set).is_empty());
}

/// A CEL expression: compiled, then evaluated with nothing bound under a
/// small cost limit.
fn cel(data: &[u8]) {
    let s = text(data);
    if let Ok(program) = k8s_cel::Program::compile(&s) {
        let _ = program.evaluate_with_limit(&k8s_cel::Bindings::new(), 10_000);
    }
}
