//! What a CustomResourceDefinition says of one served version
//! ([`CustomInfo`]): the part of a custom resource's registry row
//! (`Resource::custom`) that built-in kinds do not have. Its schema is
//! compiled once per CRD definition ([`VersionSchema`]) and freed with the
//! row; `crate::crd` builds both from a CRD.
//!
//! Model floor, under the registry: imports [`super::cel`] and the webhook
//! client (`crate::webhook`, which imports nothing of this crate), nothing
//! of `crd`, `conversion`, `error` or `object`.

use super::cel;
use crate::webhook::Webhook;
use apimachinery::crd::{SchemaValidator, Structural};
use apimachinery::jsonpath;
use apimachinery::status::StatusCause;
use serde_json::{Map, Value};

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
#[derive(Debug)]
pub struct VersionSchema {
    /// The version's schema as a one-kind definitions set (the CR kind plus
    /// the ObjectMeta family it refers to).
    schema: apimachinery::schema::Schema,
    definition: String,
    /// Its structural form (`None` if it is not structural: only a CRD
    /// stored before validation could have that), defaults pruned.
    /// Boxed: the compiled rules know schema nodes by address, so the
    /// schema must not move once they are compiled.
    structural: Option<Box<SchemaValidator>>,
    /// Its `x-kubernetes-validations`, compiled.
    rules: cel::Rules,
    /// Whether the schema has any `default`.
    has_defaults: bool,
}

impl VersionSchema {
    /// Compiles a version's schema: `definitions` hold its OpenAPI form
    /// under the name `definition`, `openapi` is the CRD's
    /// `openAPIV3Schema` for it.
    /// `shared` are the definitions every version refers to (the ObjectMeta
    /// family), kept once for all.
    pub fn new(
        definition: String,
        definitions: Map<String, Value>,
        shared: std::sync::Arc<Map<String, Value>>,
        openapi: &Value,
    ) -> Self {
        let structural = Structural::from_json(openapi).ok().map(|mut st| {
            apimachinery::crd::prune_defaults(&mut st);
            // Validation never reads descriptions; OpenAPI has them.
            drop_descriptions(&mut st);
            Box::new(SchemaValidator::new(st))
        });
        // Compiled against the boxed schema, whose nodes stay put.
        let rules = structural
            .as_ref()
            .map(|v| cel::Rules::compile(v.schema()))
            .unwrap_or_default();
        let has_defaults = structural
            .as_ref()
            .is_some_and(|v| has_defaults(v.schema()));
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        VersionSchema {
            schema: apimachinery::schema::Schema::with_shared(definitions, Some(shared)),
            definition,
            structural,
            rules,
            has_defaults,
        }
    }
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
    pub fn schema(&self) -> Option<apimachinery::schema::TypeRef<'_>> {
        self.compiled.schema.by_name(&self.compiled.definition)
    }

    /// Whether the schema has any `default` at all.
    pub fn has_defaults(&self) -> bool {
        self.compiled.has_defaults
    }

    /// Whether applying the schema's defaults would change `obj`.
    pub fn would_default(&self, obj: &Value) -> bool {
        self.compiled.has_defaults
            && self
                .compiled
                .structural
                .as_ref()
                .is_some_and(|s| would_default(s.schema(), obj))
    }

    /// `obj` with the schema's defaults applied.
    pub fn apply_defaults(&self, obj: &mut Value) {
        if let Some(s) = &self.compiled.structural {
            apimachinery::crd::default(s.schema(), obj);
        }
    }

    /// What kube does to a custom resource on its way in: nulls where the
    /// schema does not allow them and unknown fields pruned, then defaults
    /// applied.
    pub fn prepare(&self, obj: &mut Value) {
        if let Some(v) = &self.compiled.structural {
            let s = v.schema();
            apimachinery::crd::prune_nulls(s, obj);
            apimachinery::crd::prune(s, obj);
            apimachinery::crd::default(s, obj);
        }
    }

    /// The schema's value validations, then (when those pass) its CEL
    /// rules; `old` is the stored object on update.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
        let Some(v) = &self.compiled.structural else {
            return Vec::new();
        };
        // On update, values that did not change are not held to rules
        // they already broke (kube's ratcheting). The validator converts
        // the schema once, not per write.
        let mut errs = match old {
            Some(old) => v.validate_update(obj, old),
            None => v.validate(obj),
        };
        if self.compiled.rules.is_empty() {
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
        errs.extend(self.compiled.rules.evaluate(v.schema(), obj, old));
        errs
    }
}
