//! Object metadata lifecycle shared by every write verb: system fields on
//! create, what an update may and may not change, metadata validation.

use crate::registry::{NameRule, Resource, Subresource};
use apimachinery::schema::{Shape, TypeRef};
use apimachinery::status::{cause, StatusCause};
use apimachinery::validation;
use rand::Rng;
use serde_json::{Map, Value};

/// Characters kube-apiserver uses for generated name suffixes (no vowels, no
/// look-alike digits).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const SUFFIX_LEN: usize = 5;
/// Longest name a generated name may have before its suffix is added.
const MAX_GENERATE_NAME_PREFIX: usize = 63 - SUFFIX_LEN;

/// The current time as metav1.Time serializes it (RFC 3339, seconds, UTC).
/// The finalizer of an object whose dependents lose their reference to it
/// before it goes (orphan propagation).
pub const FINALIZER_ORPHAN: &str = "orphan";

/// The finalizer of an object that waits for its blocking dependents to be
/// deleted (foreground propagation).
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `generateName` plus a random suffix, the prefix cut so the whole fits 63.
pub fn generate_name(prefix: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATE_NAME_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut rng = rand::rng();
    let suffix: String = (0..SUFFIX_LEN)
        .map(|_| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char)
        .collect();
    format!("{}{}", &prefix[..cut], suffix)
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata` as a mutable map, created if missing or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("object ensured above");
    let m = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut().expect("object ensured above")
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name").filter(|s| !s.is_empty())
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    strings(meta(obj).and_then(|m| m.get("finalizers")))
}

/// The strings of a JSON array (other items and non-arrays: none).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// Validates `metadata` of an object about to be stored (name, generateName,
/// labels, annotations, finalizers).
pub fn validate_meta(res: &Resource, obj: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    // kube validates generateName as a name prefix, before the name
    // generated from it.
    if let Some(prefix) = meta_str(obj, "generateName").filter(|g| !g.is_empty()) {
        let errs = match res.name_rule {
            NameRule::Subdomain => validation::name_is_dns_subdomain(prefix, true),
            NameRule::Label => validation::name_is_dns_label(prefix, true),
            NameRule::PathSegment => validation::name_is_path_segment(prefix, true),
        };
        for e in errs {
            causes.push(validation::invalid("metadata.generateName", prefix, &e));
        }
    }
    let name = meta_str(obj, "name").unwrap_or("");
    if name.is_empty() {
        causes.push(StatusCause::new(
            cause::FIELD_VALUE_REQUIRED,
            "Required value: name or generateName is required",
            "metadata.name",
        ));
    } else {
        let errs = match res.name_rule {
            NameRule::Subdomain => validation::is_dns1123_subdomain(name),
            NameRule::Label => validation::is_dns1123_label(name),
            NameRule::PathSegment => validation::is_path_segment_name(name),
        };
        for e in errs {
            causes.push(StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                format!("Invalid value: {}: {e}", quote(name)),
                "metadata.name",
            ));
        }
    }
    if let Some(m) = meta(obj) {
        if let Some(labels) = m.get("labels").filter(|v| !v.is_null()) {
            causes.extend(validation::validate_labels(labels, "metadata.labels"));
        }
        if let Some(ann) = m.get("annotations").filter(|v| !v.is_null()) {
            causes.extend(validation::validate_annotations(
                ann,
                "metadata.annotations",
            ));
        }
        if let Some(fins) = m.get("finalizers").and_then(Value::as_array) {
            for (i, f) in fins.iter().enumerate() {
                let field = format!("metadata.finalizers[{i}]");
                match f.as_str() {
                    Some(s) => {
                        for e in validation::is_qualified_name(s) {
                            causes.push(StatusCause::new(
                                cause::FIELD_VALUE_INVALID,
                                format!("Invalid value: {}: {e}", quote(s)),
                                field.clone(),
                            ));
                        }
                    }
                    None => causes.push(StatusCause::new(
                        cause::FIELD_VALUE_INVALID,
                        "Invalid value: finalizers must be strings",
                        field,
                    )),
                }
            }
        }
    }
    causes
}

/// Go's `%q`-like quoting used in field error messages.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Sets the system fields of a new object. `namespace` is the request's.
pub fn prepare_create(res: &Resource, obj: &mut Value, namespace: Option<&str>, now: &str) {
    let generation = res.generation;
    let m = meta_mut(obj);
    m.insert(
        "uid".into(),
        Value::String(uuid::Uuid::new_v4().to_string()),
    );
    m.insert("creationTimestamp".into(), Value::String(now.to_string()));
    m.remove("resourceVersion");
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("selfLink");
    match namespace {
        Some(ns) => {
            m.insert("namespace".into(), Value::String(ns.to_string()));
        }
        None => {
            m.remove("namespace");
        }
    }
    if generation {
        m.insert("generation".into(), Value::from(1));
    } else {
        m.remove("generation");
    }
}

/// On a write of a status-like subresource, only resourceVersion (the
/// precondition) and managedFields follow the request's metadata.
fn carry_request_meta(o: &mut Map<String, Value>, request_meta: Option<Map<String, Value>>) {
    let Some(mut km) = request_meta else { return };
    let m = o
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = m.as_object_mut() {
        if let Some(rv) = km.remove("resourceVersion") {
            m.insert("resourceVersion".into(), rv);
        }
        if let Some(mf) = km.remove("managedFields") {
            m.insert("managedFields".into(), mf);
        }
    }
}

/// Carries the fields a client may not change from `old` to `new` for an
/// update of the main resource or a subresource, and bumps `generation` when
/// anything outside metadata and status changed.
pub fn prepare_update(
    res: &Resource,
    old: &Value,
    new: &mut Value,
    subresource: Option<&Subresource>,
) {
    // System-owned metadata always comes from the stored object.
    let old_meta = meta(old).cloned().unwrap_or_default();
    {
        let m = meta_mut(new);
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ] {
            match old_meta.get(f) {
                Some(v) => {
                    m.insert(f.into(), v.clone());
                }
                None => {
                    m.remove(f);
                }
            }
        }
        m.remove("selfLink");
    }
    match subresource {
        Some(Subresource::Part(part)) => {
            let keep_meta = meta(new).cloned();
            let mut merged = old.clone();
            (part.take)(&mut merged, new);
            if let Some(o) = merged.as_object_mut() {
                carry_request_meta(o, keep_meta);
            }
            *new = merged;
        }
        Some(Subresource::Status) => {
            // A status write changes status only (and metadata kube lets
            // status writers touch: none of labels/annotations here).
            let status = new.get("status").cloned();
            let keep_meta = meta(new).cloned();
            let mut merged = old.clone();
            if let Some(o) = merged.as_object_mut() {
                match status {
                    Some(s) => o.insert("status".into(), s),
                    None => o.remove("status"),
                };
                carry_request_meta(o, keep_meta);
            }
            *new = merged;
        }
        _ => {
            if res.has_status() {
                if let Some(o) = new.as_object_mut() {
                    match old.get("status") {
                        Some(s) => o.insert("status".into(), s.clone()),
                        None => o.remove("status"),
                    };
                }
            }
        }
    }
    if res.generation && spec_changed(old, new) {
        let g = meta(old)
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(new).insert("generation".into(), Value::from(g + 1));
    }
}

/// Whether anything but metadata and status differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

/// Removes the fields the schema does not know, as decoding a body into
/// kube's Go types does (objects that preserve unknown fields and untyped
/// nodes keep everything).
pub fn prune_unknown_fields(ty: TypeRef<'_>, value: &mut Value) {
    prune(ty, value, 0);
}

fn prune(ty: TypeRef<'_>, value: &mut Value, depth: usize) {
    // Decoded values nest at most 128 deep; this bounds patched ones.
    if depth > 512 {
        return;
    }
    match (ty.shape(), value) {
        (Shape::Object, Value::Object(obj)) => {
            if !ty.preserves_unknown_fields() {
                obj.retain(|k, _| ty.field(k).is_some());
            }
            for (k, child) in obj.iter_mut() {
                if let Some(f) = ty.field(k) {
                    prune(f.ty, child, depth + 1);
                }
            }
        }
        (Shape::Map, Value::Object(obj)) => {
            if let Some(vt) = ty.values() {
                for child in obj.values_mut() {
                    prune(vt, child, depth + 1);
                }
            }
        }
        (Shape::Array, Value::Array(items)) => {
            if let Some(it) = ty.items() {
                for child in items {
                    prune(it, child, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Field errors for immutable fields an update changed.
pub fn immutable_errors(res: &Resource, old: &Value, new: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    for ptr in res.immutable {
        let (a, b) = (old.pointer(ptr), new.pointer(ptr));
        if a != b {
            let field = ptr.trim_start_matches('/').replace('/', ".");
            let shown = b.map(|v| v.to_string()).unwrap_or_else(|| "null".into());
            causes.push(StatusCause::new(
                cause::FIELD_VALUE_INVALID,
                format!("Invalid value: {shown}: field is immutable"),
                field,
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    #[test]
    fn generated_names_fit() {
        let n = generate_name(&"a".repeat(100));
        assert_eq!(n.len(), 63);
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
        assert!(n[4..].bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }

    #[test]
    fn update_keeps_system_fields_and_bumps_generation() {
        let reg = Registry::builtin();
        let deploy = reg.lookup("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "uid": "u1", "generation": 3, "creationTimestamp": "t"},
                         "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut new = json!({"metadata": {"name": "d", "uid": "other"}, "spec": {"replicas": 2}, "status": {"replicas": 9}});
        prepare_update(&deploy, &old, &mut new, None);
        assert_eq!(new["metadata"]["uid"], "u1");
        assert_eq!(new["metadata"]["generation"], 4);
        assert_eq!(
            new["status"]["replicas"], 1,
            "status is ignored on the main resource"
        );

        let mut status_write = json!({"metadata": {"name": "d", "resourceVersion": "5"}, "spec": {"replicas": 7}, "status": {"replicas": 2}});
        prepare_update(&deploy, &old, &mut status_write, Some(&Subresource::Status));
        assert_eq!(
            status_write["spec"]["replicas"], 1,
            "status write keeps spec"
        );
        assert_eq!(status_write["status"]["replicas"], 2);
        assert_eq!(status_write["metadata"]["generation"], 3);
        assert_eq!(status_write["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn immutable_selector() {
        let reg = Registry::builtin();
        let jobs = reg.lookup("batch", "v1", "jobs").unwrap();
        let old = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}});
        let new = json!({"spec": {"selector": {"matchLabels": {"a": "c"}}}});
        let errs = immutable_errors(&jobs, &old, &new);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.selector");
        assert!(errs[0].message.ends_with("field is immutable"));
    }
}
