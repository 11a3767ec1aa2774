//! What a CustomResourceDefinition says of one served version
//! ([`CustomInfo`]): the part of a custom resource's registry row
//! (`Resource::custom`) that built-in kinds do not have. Its schema is
//! kept as the CRD's JSON and compiled on first use, once per CRD
//! definition ([`VersionSchema`]), and freed with the row; `crate::crd`
//! builds both from a CRD.
//!
//! Model floor, under the registry: imports [`super::cel`] and the webhook
//! client (`crate::webhook`, which imports nothing of this crate), nothing
//! of `crd`, `conversion`, `error` or `object`.

use super::cel;
use crate::webhook::Webhook;
use apimachinery::crd::{SchemaValidator, Structural};
use apimachinery::jsonpath;
use apimachinery::status::StatusCause;
use serde_json::{json, Map, Value};
use std::io::Read;
use std::sync::{Arc, OnceLock};

/// One `additionalPrinterColumns` entry, its path parsed.
#[derive(Debug)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub path: jsonpath::Path,
}

/// How many [`VersionSchema`]s (one per served version of a CRD, in its
/// [`CustomInfo`], with validators and CEL programs) are alive in this
/// process: the registry's, and those still held by requests, watches and
/// controllers after the registry dropped them
/// (`apiserver_custom_resource_rows`).
static LIVE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The number of custom resource rows alive (see [`LIVE`]).
pub fn live_rows() -> i64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

/// What a CRD says of one served version.
#[derive(Debug)]
pub struct CustomInfo {
    /// The CRD's name (`<plural>.<group>`).
    pub crd: String,
    /// The version objects are stored in.
    pub storage_version: String,
    /// `deprecationWarning` (or kube's default text) when the version is
    /// deprecated.
    pub deprecation: Option<String>,
    pub columns: Vec<PrinterColumn>,
    /// The version's schema, compiled.
    pub compiled: VersionSchema,
    /// The conversion webhook (strategy `Webhook`; `Err`: unusable
    /// configuration); `None` for strategy `None`.
    pub conversion: Option<Result<Webhook, String>>,
    /// Whether the CRD is being deleted: its resources may be read and
    /// deleted, not created.
    pub terminating: bool,
}

/// A served version's schema in the forms the paths use: OpenAPI, its
/// structural form and its compiled `x-kubernetes-validations`.
///
/// A row keeps only the CRD's `openAPIV3Schema` as JSON text, deflated
/// (a Crossplane-size schema's 55 KiB of text, repetitive descriptions,
/// shrink to a tenth, and the watch cache holds the CRD's JSON anyway);
/// each form is
/// built from it on the first request that needs it and kept while the row
/// lives (kube-apiserver, too, builds a CRD's validators, structural schemas
/// and CEL programs on the first request for its resources:
/// apiextensions-apiserver `crdHandler.getOrCreateServingInfoFor`). Most
/// CRDs of a large platform have no custom resources and never pay for
/// them.
#[derive(Debug)]
pub struct VersionSchema {
    /// The CRD's `openAPIV3Schema` for this version, as compact JSON,
    /// deflated ([`VersionSchema::openapi`] inflates it).
    deflated: Box<[u8]>,
    /// Whether the text has a `"default":` key anywhere: false means no
    /// node has a default, so reads of a CRD without defaults need not
    /// compile the schema to know it.
    maybe_defaults: bool,
    /// `[group, version, kind]`.
    gvk: Box<[String; 3]>,
    /// The OpenAPI definition name of the kind.
    definition: String,
    /// The definitions every version refers to (the ObjectMeta family),
    /// kept once for all.
    shared: Arc<Map<String, Value>>,
    /// The version's schema as a one-kind definitions set (the CR kind
    /// plus the shared ObjectMeta family), built on first use.
    schema: OnceLock<apimachinery::schema::Schema>,
    /// The structural form, validators and CEL rules, built on first use
    /// (`None` inside: the schema is not structural, which only a CRD
    /// stored before validation could have).
    compiled: OnceLock<Option<Compiled>>,
}

/// A version's definitions set as [`CustomInfo::schema_hold`] lends it.
pub enum SchemaHold<'a> {
    /// The one the version keeps.
    Kept(&'a apimachinery::schema::Schema),
    /// Built for one reader, dropped with it.
    Built(apimachinery::schema::Schema),
}

impl SchemaHold<'_> {
    pub fn get(&self) -> &apimachinery::schema::Schema {
        match self {
            SchemaHold::Kept(s) => s,
            SchemaHold::Built(s) => s,
        }
    }
}

/// What validation, pruning and defaulting read.
#[derive(Debug)]
struct Compiled {
    /// The structural schema, defaults pruned. Boxed: the compiled rules
    /// know schema nodes by address, so the schema must not move once they
    /// are compiled.
    validator: Box<SchemaValidator>,
    /// Its `x-kubernetes-validations`, compiled.
    rules: cel::Rules,
    /// Whether the schema has any `default`.
    has_defaults: bool,
}

impl Compiled {
    fn new(openapi: &str) -> Option<Compiled> {
        let v: Value = serde_json::from_str(openapi).ok()?;
        let mut st = Structural::from_json(&v).ok()?;
        drop(v);
        apimachinery::crd::prune_defaults(&mut st);
        // Validation never reads descriptions; OpenAPI has them.
        drop_descriptions(&mut st);
        let validator = Box::new(SchemaValidator::new(st));
        // Compiled against the boxed schema, whose nodes stay put.
        let rules = cel::Rules::compile(validator.schema());
        let has_defaults = has_defaults(validator.schema());
        Some(Compiled {
            validator,
            rules,
            has_defaults,
        })
    }
}

impl VersionSchema {
    /// A version's schema: `openapi` is the CRD's `openAPIV3Schema` for it
    /// (`None`: the version has none, and preserves every field), `gvk`
    /// its group, version and kind. `shared` are the definitions every
    /// version refers to (the ObjectMeta family), kept once for all.
    /// Nothing is compiled yet.
    pub fn new(
        group: &str,
        version: &str,
        kind: &str,
        shared: Arc<Map<String, Value>>,
        openapi: Option<&Value>,
    ) -> Self {
        let openapi = match openapi {
            Some(v) => v.to_string(),
            None => {
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}).to_string()
            }
        };
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        VersionSchema {
            // Compact JSON writes a key as `"default":`; a property named
            // `default` matches too, which only costs a compile.
            maybe_defaults: openapi.contains("\"default\":"),
            deflated: deflate(openapi.as_bytes()),
            definition: definition_name(group, version, kind),
            gvk: Box::new([group.to_string(), version.to_string(), kind.to_string()]),
            shared,
            schema: OnceLock::new(),
            compiled: OnceLock::new(),
        }
    }

    /// The `openAPIV3Schema` text, inflated for one build.
    fn openapi(&self) -> String {
        let mut text = String::new();
        // The bytes are our own deflate of a `String`: reading them back
        // fails only on a bug, which leaves the text empty and the schema
        // unbuildable (as a schema that does not parse).
        if let Err(e) =
            flate2::read::DeflateDecoder::new(&self.deflated[..]).read_to_string(&mut text)
        {
            tracing::error!(error = %e, definition = %self.definition, "cannot inflate a CRD schema");
            text.clear();
        }
        text
    }

    /// The definitions set, built on the first call.
    fn schema(&self) -> &apimachinery::schema::Schema {
        self.schema.get_or_init(|| self.build_schema())
    }

    fn build_schema(&self) -> apimachinery::schema::Schema {
        let openapi: Value = serde_json::from_str(&self.openapi()).unwrap_or(Value::Null);
        let [group, version, kind] = &*self.gvk;
        let root = cr_definition(group, version, kind, openapi);
        let mut defs = Map::new();
        defs.insert(self.definition.clone(), root);
        apimachinery::schema::Schema::with_shared(defs, Some(self.shared.clone()))
    }

    /// The structural form, validators and rules, built on the first call.
    fn compiled(&self) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| Compiled::new(&self.openapi()))
            .as_ref()
    }

    /// Whether the structural form has been built, and where it lives (the
    /// same address on every later use: built once).
    #[cfg(test)]
    pub(crate) fn compiled_at(&self) -> Option<usize> {
        self.compiled
            .get()
            .map(|c| c.as_ref().map_or(0, |c| &*c.validator as *const _ as usize))
    }

    /// Whether the definitions set has been built.
    #[cfg(test)]
    pub(crate) fn schema_built(&self) -> bool {
        self.schema.get().is_some()
    }
}

/// kube's OpenAPI definition name of a custom kind: the group reversed,
/// then version and kind (`com.example.v1.Widget`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// `text` deflated at the fastest level: it is built once per CRD change,
/// on the controller's blocking pool.
fn deflate(text: &[u8]) -> Box<[u8]> {
    use std::io::Write;
    let mut enc = flate2::write::DeflateEncoder::new(
        Vec::with_capacity(text.len() / 8),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(text);
    enc.finish().unwrap_or_default().into_boxed_slice()
}

/// A version's OpenAPI definition from its `openAPIV3Schema`, as kube
/// publishes it: `metadata` is a reference to ObjectMeta, `apiVersion` and
/// `kind` are strings, and the kind is named.
fn cr_definition(group: &str, version: &str, kind: &str, openapi: Value) -> Value {
    let mut root = match openapi {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    root.entry("type").or_insert_with(|| json!("object"));
    let mut props = root
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    props.insert(
        "metadata".into(),
        json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}),
    );
    props
        .entry("apiVersion")
        .or_insert_with(|| json!({"type": "string"}));
    props
        .entry("kind")
        .or_insert_with(|| json!({"type": "string"}));
    root.insert("properties".into(), Value::Object(props));
    root.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": group, "version": version, "kind": kind}]),
    );
    Value::Object(root)
}

impl Drop for VersionSchema {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn has_defaults(s: &Structural) -> bool {
    s.default.is_some()
        || s.properties.values().any(has_defaults)
        || s.items.as_deref().is_some_and(has_defaults)
        || s.additional_properties
            .as_ref()
            .and_then(|a| a.schema())
            .is_some_and(has_defaults)
}

/// Whether `apimachinery::crd::default` would change `v` (the same walk,
/// reading only, so that reads copy an object only when they must).
fn would_default(s: &Structural, v: &Value) -> bool {
    let null_defaulted =
        |v: &Value, s: &Structural| v.is_null() && !s.nullable && s.default.is_some();
    match v {
        Value::Object(m) => {
            for (k, ps) in &s.properties {
                if ps.default.is_some() && m.get(k).is_none_or(|x| x.is_null() && !ps.nullable) {
                    return true;
                }
            }
            let ap = s.additional_properties.as_ref().and_then(|a| a.schema());
            m.iter().any(|(k, x)| match (s.properties.get(k), ap) {
                (Some(ps), _) => would_default(ps, x),
                (None, Some(ap)) => null_defaulted(x, ap) || would_default(ap, x),
                (None, None) => false,
            })
        }
        Value::Array(a) => s.items.as_deref().is_some_and(|it| {
            a.iter()
                .any(|x| null_defaulted(x, it) || would_default(it, x))
        }),
        _ => false,
    }
}

fn drop_descriptions(s: &mut Structural) {
    s.description = String::new();
    s.properties.values_mut().for_each(drop_descriptions);
    if let Some(items) = s.items.as_deref_mut() {
        drop_descriptions(items);
    }
    if let Some(apimachinery::crd::types::AdditionalProperties::Schema(ap)) =
        s.additional_properties.as_mut()
    {
        drop_descriptions(ap);
    }
}

impl CustomInfo {
    /// The version's schema as an OpenAPI definition (built on the first
    /// call and kept: the write paths read it on every write).
    pub fn schema(&self) -> Option<apimachinery::schema::TypeRef<'_>> {
        self.compiled.schema().by_name(&self.compiled.definition)
    }

    /// `f` with the version's schema as [`Self::schema`] gives it, without
    /// keeping it if it was not built yet: for readers that visit every
    /// CRD once (OpenAPI documents), so that they do not hold every CRD's
    /// definition for good.
    pub fn with_schema<R>(
        &self,
        f: impl FnOnce(Option<apimachinery::schema::TypeRef<'_>>) -> R,
    ) -> R {
        let c = &self.compiled;
        match c.schema.get() {
            Some(s) => f(s.by_name(&c.definition)),
            None => f(c.build_schema().by_name(&c.definition)),
        }
    }

    /// The version's definitions set and its kind's definition name, for
    /// a reader that visits every CRD once and then lets go (the OpenAPI
    /// documents): the kept set when the write paths built it, else one
    /// built for this reader alone, so that publishing OpenAPI does not
    /// keep every CRD's definition for good.
    pub fn schema_hold(&self) -> (SchemaHold<'_>, &str) {
        let c = &self.compiled;
        let hold = match c.schema.get() {
            Some(s) => SchemaHold::Kept(s),
            None => SchemaHold::Built(c.build_schema()),
        };
        (hold, &c.definition)
    }

    /// Whether the schema may have a `default` (false: it has none). Read
    /// from the schema's text, so that a LIST of a CRD without defaults
    /// does not compile the schema; [`Self::would_default`] compiles it.
    pub fn has_defaults(&self) -> bool {
        self.compiled.maybe_defaults
    }

    /// Whether applying the schema's defaults would change `obj`.
    pub fn would_default(&self, obj: &Value) -> bool {
        self.compiled
            .compiled()
            .is_some_and(|c| c.has_defaults && would_default(c.validator.schema(), obj))
    }

    /// `obj` with the schema's defaults applied.
    pub fn apply_defaults(&self, obj: &mut Value) {
        if let Some(c) = self.compiled.compiled() {
            apimachinery::crd::default(c.validator.schema(), obj);
        }
    }

    /// What kube does to a custom resource on its way in: nulls where the
    /// schema does not allow them and unknown fields pruned, then defaults
    /// applied.
    pub fn prepare(&self, obj: &mut Value) {
        if let Some(c) = self.compiled.compiled() {
            let s = c.validator.schema();
            apimachinery::crd::prune_nulls(s, obj);
            apimachinery::crd::prune(s, obj);
            apimachinery::crd::default(s, obj);
        }
    }

    /// The schema's value validations, then (when those pass) its CEL
    /// rules; `old` is the stored object on update.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
        let Some(c) = self.compiled.compiled() else {
            return Vec::new();
        };
        let v = &c.validator;
        // On update, values that did not change are not held to rules
        // they already broke (kube's ratcheting). The validator converts
        // the schema once, not per write.
        let mut errs = match old {
            Some(old) => v.validate_update(obj, old),
            None => v.validate(obj),
        };
        if c.rules.is_empty() {
            return errs;
        }
        // As kube: type errors block the rules (they would see values of
        // the wrong type); other schema errors do not.
        if errs
            .iter()
            .any(|c| c.reason == apimachinery::status::cause::FIELD_VALUE_TYPE_INVALID)
        {
            errs.push(StatusCause::new(
                apimachinery::status::cause::FIELD_VALUE_INVALID,
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                "<nil>",
            ));
            return errs;
        }
        errs.extend(c.rules.evaluate(v.schema(), obj, old));
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema is kept deflated and read back whole: each version's own
    /// text (no mix-up between versions), far smaller than the text for a
    /// schema of repetitive descriptions, and the forms built from it are
    /// those of the text.
    #[test]
    fn the_schema_text_is_kept_deflated_and_read_back_whole() {
        let props: Map<String, Value> = (0..300)
            .map(|i| {
                let p = json!({"type": "string", "description":
                    format!("Field {i} of the managed resource's forProvider block; see the provider's documentation.")});
                (format!("field{i}"), p)
            })
            .collect();
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": props}}});
        let other = json!({"type": "object", "properties": {"size": {"type": "integer",
            "default": 3}}});
        let shared = Arc::new(Map::new());
        let a = VersionSchema::new("example.com", "v1", "Widget", shared.clone(), Some(&schema));
        let b = VersionSchema::new("example.com", "v2", "Widget", shared.clone(), Some(&other));
        let none = VersionSchema::new("example.com", "v3", "Widget", shared, None);
        let text = schema.to_string();
        assert_eq!(a.openapi(), text);
        assert_eq!(b.openapi(), other.to_string());
        assert!(
            a.deflated.len() * 5 < text.len(),
            "{} of {}",
            a.deflated.len(),
            text.len()
        );
        assert!(!a.maybe_defaults && b.maybe_defaults);
        let preserve: Value = serde_json::from_str(&none.openapi()).unwrap();
        assert_eq!(
            preserve["x-kubernetes-preserve-unknown-fields"],
            json!(true)
        );
        let def = a.schema().definitions()["com.example.v1.Widget"].clone();
        assert_eq!(
            def.pointer("/properties/spec/properties/field299/type"),
            Some(&json!("string"))
        );
        assert!(b.compiled().is_some_and(|c| c.has_defaults));
    }

    fn info(openapi: Value) -> CustomInfo {
        CustomInfo {
            crd: "widgets.example.com".into(),
            storage_version: "v1".into(),
            deprecation: None,
            columns: Vec::new(),
            compiled: VersionSchema::new(
                "example.com",
                "v1",
                "Widget",
                Arc::new(Map::new()),
                Some(&openapi),
            ),
            conversion: None,
            terminating: false,
        }
    }

    fn widget_schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.replicas < 10", "message": "too many"}],
            "properties": {
                "replicas": {"type": "integer", "maximum": 20},
                "color": {"type": "string", "default": "blue"}}}}})
    }

    #[test]
    fn the_schema_is_compiled_on_first_use_and_once() {
        let w = info(widget_schema());
        let c = &w.compiled;
        assert_eq!(c.compiled_at(), None, "compiled before any use");
        assert!(!c.schema_built());
        // What a LIST asks first reads the text only.
        assert!(w.has_defaults());
        assert_eq!(c.compiled_at(), None, "has_defaults compiled the schema");
        // OpenAPI's visit builds the definition for itself alone.
        let name = w.with_schema(|t| t.and_then(|t| t.name().map(str::to_string)));
        assert_eq!(name.as_deref(), Some("com.example.v1.Widget"));
        assert!(!c.schema_built(), "with_schema kept the definition");
        assert_eq!(c.compiled_at(), None);

        let bad = json!({"spec": {"replicas": 15}});
        let errs = w.validate(&bad, None);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].message, "Invalid value: \"object\": too many");
        let at = c.compiled_at().expect("validate compiled the schema");
        assert_ne!(at, 0, "a structural schema compiled to nothing");
        let mut obj = json!({"spec": {"replicas": 1}});
        assert!(w.would_default(&obj));
        w.prepare(&mut obj);
        assert_eq!(obj, json!({"spec": {"replicas": 1, "color": "blue"}}));
        assert_eq!(w.validate(&bad, None).len(), 1);
        assert_eq!(c.compiled_at(), Some(at), "compiled again");

        assert!(w
            .schema()
            .is_some_and(|t| t.path(&["spec", "color"]).is_some()));
        assert!(c.schema_built());
        // From then on with_schema reads the kept one.
        assert!(w.with_schema(|t| t.is_some()));
    }

    #[test]
    fn a_schema_without_defaults_says_so_from_its_text() {
        let w = info(json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
        assert!(!w.has_defaults());
        assert!(!w.would_default(&json!({"spec": {}})));
        // A property named `default` only makes the answer cautious.
        let d = info(json!({"type": "object", "properties": {"default": {"type": "string"}}}));
        assert!(d.has_defaults());
        assert!(!d.would_default(&json!({"default": "x"})));
    }

    #[test]
    fn a_schema_that_is_not_structural_validates_nothing() {
        let w = info(json!({"type": "object", "properties": {"spec": {"$ref": "#/x"}}}));
        assert!(w.validate(&json!({"spec": 1}), None).is_empty());
        let mut obj = json!({"spec": 1, "unknown": null});
        w.prepare(&mut obj);
        assert_eq!(obj, json!({"spec": 1, "unknown": null}));
        assert_eq!(
            w.compiled.compiled_at(),
            Some(0),
            "tried once, nothing kept"
        );
        // Its OpenAPI definition is still served.
        assert!(w.schema().is_some());
    }
}
