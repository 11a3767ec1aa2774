//! Schema facts about the built-in Kubernetes API types.
//!
//! The facts come from `data/definitions.json`, which `tools/gen_schema.py`
//! derives from the upstream OpenAPI v2 document: the `definitions` map with
//! the documentation stripped and everything else kept (types, formats,
//! `$ref`s, `required`, and the `x-kubernetes-*` extensions that drive
//! strategic merge patch, list/map semantics and GVK lookup).
//!
//! The file is parsed once, on first use, into a [`Schema`]; lookups by
//! group-version-kind go through an index built at load time. A [`TypeRef`] is
//! a cheap, copyable view of one schema node with its `$ref` resolved; it also
//! remembers the property node that referenced it, because in OpenAPI the
//! list/map/patch extensions of a field are written next to the `$ref`, not on
//! the referenced definition.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

/// The stripped OpenAPI definitions of the built-in API, embedded at build time.
static DEFINITIONS_JSON: &str = include_str!("../data/definitions.json");

const REF_PREFIX: &str = "#/definitions/";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
/// Definitions that hold arbitrary JSON although OpenAPI calls them `object`
/// (or gives no type at all).
const UNTYPED_DEFINITIONS: &[&str] = &[
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
];
/// How many `$ref` hops to follow before giving up (guards against cycles).
const MAX_REF_DEPTH: usize = 8;

/// The schema of the built-in API types (Kubernetes 1.35).
///
/// Parsed on first call and shared for the life of the process.
pub fn builtin() -> &'static Schema {
    static BUILTIN: OnceLock<Schema> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        // The embedded file is produced by our generator and checked by the
        // tests below; an unparsable file degrades to an empty schema rather
        // than a panic.
        let definitions =
            serde_json::from_str::<Map<String, Value>>(DEFINITIONS_JSON).unwrap_or_default();
        Schema::new(definitions)
    })
}

/// One entry of the group-version-kind index.
#[derive(Debug, Clone)]
struct GvkEntry {
    group: String,
    version: String,
    definition: String,
}

/// A set of OpenAPI v2 definitions with a group-version-kind index.
#[derive(Debug, Clone)]
pub struct Schema {
    definitions: Map<String, Value>,
    /// Definitions shared with other schemas (a custom resource's
    /// ObjectMeta family), looked up after the schema's own: one copy for
    /// every CRD version instead of one each.
    shared: Option<Arc<Map<String, Value>>>,
    /// kind → every (group, version, definition) that declares it.
    by_kind: HashMap<String, Vec<GvkEntry>>,
}

impl Schema {
    /// Builds a schema from an OpenAPI `definitions` map (name → schema) and
    /// indexes its `x-kubernetes-group-version-kind` extensions.
    pub fn new(definitions: Map<String, Value>) -> Schema {
        Schema::with_shared(definitions, None)
    }

    /// A schema of `definitions` that also resolves names in `shared`
    /// (which are not indexed by kind: shared definitions are the types
    /// kinds refer to, not kinds).
    pub fn with_shared(
        definitions: Map<String, Value>,
        shared: Option<Arc<Map<String, Value>>>,
    ) -> Schema {
        let mut by_kind: HashMap<String, Vec<GvkEntry>> = HashMap::new();
        for (name, def) in &definitions {
            let Some(gvks) = def
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
            else {
                continue;
            };
            for gvk in gvks {
                let field = |k: &str| gvk.get(k).and_then(Value::as_str);
                let (Some(group), Some(version), Some(kind)) =
                    (field("group"), field("version"), field("kind"))
                else {
                    continue;
                };
                let entries = by_kind.entry(kind.to_string()).or_default();
                // The first definition (in name order) wins on duplicates.
                if !entries
                    .iter()
                    .any(|e| e.group == group && e.version == version)
                {
                    entries.push(GvkEntry {
                        group: group.to_string(),
                        version: version.to_string(),
                        definition: name.clone(),
                    });
                }
            }
        }
        Schema {
            definitions,
            shared,
            by_kind,
        }
    }

    /// A definition by name: the schema's own, else a shared one.
    fn definition(&self, name: &str) -> Option<(&String, &Value)> {
        self.definitions.get_key_value(name).or_else(|| {
            self.shared
                .as_deref()
                .and_then(|shared| shared.get_key_value(name))
        })
    }

    /// Every definition, the schema's own and then the shared ones it does
    /// not override.
    pub fn all_definitions(&self) -> impl Iterator<Item = (&String, &Value)> + '_ {
        let own = &self.definitions;
        own.iter().chain(
            self.shared
                .as_deref()
                .into_iter()
                .flat_map(|m| m.iter())
                .filter(move |(name, _)| !own.contains_key(*name)),
        )
    }

    /// The type registered for a group-version-kind (`""` is the core group).
    pub fn by_gvk(&self, group: &str, version: &str, kind: &str) -> Option<TypeRef<'_>> {
        self.by_name(self.definition_name_for_gvk(group, version, kind)?)
    }

    /// The definition name (e.g. `io.k8s.api.apps.v1.Deployment`) of a
    /// group-version-kind.
    pub fn definition_name_for_gvk(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_kind
            .get(kind)?
            .iter()
            .find(|e| e.group == group && e.version == version)
            .map(|e| e.definition.as_str())
    }

    /// A definition by its full name, e.g. `io.k8s.api.apps.v1.Deployment`.
    pub fn by_name(&self, definition: &str) -> Option<TypeRef<'_>> {
        let (name, node) = self.definition(definition)?;
        let node = node.as_object()?;
        Some(TypeRef {
            schema: self,
            node,
            site: None,
            name: Some(name.as_str()),
        })
    }

    /// The raw definitions (descriptions stripped), e.g. for serving
    /// OpenAPI: the schema's own, without the shared ones
    /// ([`Schema::all_definitions`] has both).
    pub fn definitions(&self) -> &Map<String, Value> {
        &self.definitions
    }

    /// Every indexed (group, version, kind, definition name), in no
    /// particular order.
    pub fn gvks(&self) -> impl Iterator<Item = (&str, &str, &str, &str)> + '_ {
        self.by_kind.iter().flat_map(|(kind, entries)| {
            entries.iter().map(move |e| {
                (
                    e.group.as_str(),
                    e.version.as_str(),
                    kind.as_str(),
                    e.definition.as_str(),
                )
            })
        })
    }

    /// Resolves a schema node that may be a `$ref` into a [`TypeRef`] that
    /// remembers `site` (the node as written at the use site).
    fn resolve<'a>(&'a self, site: &'a Map<String, Value>) -> Option<TypeRef<'a>> {
        let mut node = site;
        let mut name = None;
        for _ in 0..MAX_REF_DEPTH {
            let Some(reference) = node.get("$ref") else {
                return Some(TypeRef {
                    schema: self,
                    node,
                    site: Some(site),
                    name,
                });
            };
            let target = reference.as_str()?.strip_prefix(REF_PREFIX)?;
            let (key, def) = self.definition(target)?;
            node = def.as_object()?;
            name = Some(key.as_str());
        }
        None
    }
}

/// The broad JSON shape of a schema node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A struct: named properties.
    Object,
    /// A map: `additionalProperties` with one value type.
    Map,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    /// `intstr.IntOrString` (`format: int-or-string`): an integer or a string.
    IntOrString,
    /// `resource.Quantity`: a string on the wire (numbers are accepted too).
    Quantity,
    /// Arbitrary JSON: `RawExtension`, `JSON`, `FieldsV1`, nodes without a
    /// type, or `x-kubernetes-preserve-unknown-fields` objects.
    Untyped,
}

/// `x-kubernetes-list-type` (with `x-kubernetes-list-map-keys` for maps).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// `x-kubernetes-map-type`; granular unless declared atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapType {
    Granular,
    Atomic,
}

/// A schema node with its `$ref` resolved.
///
/// Extensions are looked up on the use site (the property or `items` node)
/// first and on the referenced definition second, which is how OpenAPI
/// carries field-level facts such as list types and patch strategies.
#[derive(Clone, Copy)]
pub struct TypeRef<'a> {
    schema: &'a Schema,
    /// The resolved node (the definition for a `$ref`).
    node: &'a Map<String, Value>,
    /// The node as written where it is used; `None` for a top-level definition.
    site: Option<&'a Map<String, Value>>,
    /// The definition name, when the node is a named definition.
    name: Option<&'a str>,
}

impl fmt::Debug for TypeRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeRef")
            .field("name", &self.name)
            .field("shape", &self.shape())
            .finish()
    }
}

/// A property of an object type.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    pub name: &'a str,
    pub ty: TypeRef<'a>,
    /// `x-kubernetes-patch-strategy`, e.g. `merge`, `retainKeys`,
    /// `merge,retainKeys` or `replace`.
    pub patch_strategy: Option<&'a str>,
    /// `x-kubernetes-patch-merge-key`, e.g. `name`.
    pub patch_merge_key: Option<&'a str>,
}

impl<'a> TypeRef<'a> {
    /// The definition name, e.g. `io.k8s.api.core.v1.Container`; `None` for
    /// inline nodes (plain strings, arrays, maps).
    pub fn name(&self) -> Option<&'a str> {
        self.name
    }

    /// The schema this node belongs to.
    pub fn schema(&self) -> &'a Schema {
        self.schema
    }

    /// The resolved schema node as JSON.
    pub fn raw(&self) -> &'a Map<String, Value> {
        self.node
    }

    /// An extension (or any keyword) from the use site, else from the node.
    fn ext(&self, key: &str) -> Option<&'a Value> {
        self.site
            .and_then(|s| s.get(key))
            .or_else(|| self.node.get(key))
    }

    fn type_keyword(&self) -> Option<&'a str> {
        self.node.get("type").and_then(Value::as_str)
    }

    pub fn shape(&self) -> Shape {
        if let Some(name) = self.name {
            if UNTYPED_DEFINITIONS.contains(&name) {
                return Shape::Untyped;
            }
            if name == QUANTITY {
                return Shape::Quantity;
            }
            if name == INT_OR_STRING {
                return Shape::IntOrString;
            }
        }
        if self.format() == Some("int-or-string")
            || self.ext("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        {
            return Shape::IntOrString;
        }
        match self.type_keyword() {
            Some("object") => {
                if self.node.contains_key("properties") {
                    Shape::Object
                } else if self
                    .node
                    .get("additionalProperties")
                    .is_some_and(|a| a.is_object() || a == &Value::Bool(true))
                {
                    Shape::Map
                } else if self.has_preserve_unknown_fields() {
                    Shape::Untyped
                } else {
                    // An empty struct.
                    Shape::Object
                }
            }
            Some("array") => Shape::Array,
            Some("string") => Shape::String,
            Some("integer") => Shape::Integer,
            Some("number") => Shape::Number,
            Some("boolean") => Shape::Boolean,
            Some(_) => Shape::Untyped,
            None => {
                if self.node.contains_key("properties") {
                    Shape::Object
                } else if self.node.contains_key("items") {
                    Shape::Array
                } else {
                    Shape::Untyped
                }
            }
        }
    }

    fn properties(&self) -> Option<&'a Map<String, Value>> {
        self.node.get("properties").and_then(Value::as_object)
    }

    /// A property of an object type, with its patch metadata.
    pub fn field(&self, name: &str) -> Option<Field<'a>> {
        let (key, prop) = self.properties()?.get_key_value(name)?;
        self.make_field(key, prop)
    }

    fn make_field(&self, key: &'a str, prop: &'a Value) -> Option<Field<'a>> {
        let prop = prop.as_object()?;
        let ty = self.schema.resolve(prop)?;
        let text = |k: &str| prop.get(k).and_then(Value::as_str);
        Some(Field {
            name: key,
            ty,
            patch_strategy: text("x-kubernetes-patch-strategy"),
            patch_merge_key: text("x-kubernetes-patch-merge-key"),
        })
    }

    /// Every property of an object type, in schema order.
    pub fn fields(&self) -> impl Iterator<Item = Field<'a>> + 'a {
        let this = *self;
        self.properties()
            .into_iter()
            .flat_map(|props| props.iter())
            .filter_map(move |(k, v)| this.make_field(k, v))
    }

    /// The type of a member: a property of an object, or the value type of a
    /// map.
    pub fn child(&self, name: &str) -> Option<TypeRef<'a>> {
        match self.field(name) {
            Some(f) => Some(f.ty),
            None if self.shape() == Shape::Map => self.values(),
            None => None,
        }
    }

    /// Walks a path of member names from this type. Arrays are stepped
    /// through transparently, so `["spec", "containers", "ports"]` names the
    /// `ports` array of a container.
    pub fn path(&self, segments: &[&str]) -> Option<TypeRef<'a>> {
        let mut cur = *self;
        for seg in segments {
            if cur.shape() == Shape::Array {
                cur = cur.items()?;
            }
            cur = cur.child(seg)?;
        }
        Some(cur)
    }

    /// The names listed in `required`.
    pub fn required(&self) -> Vec<&'a str> {
        self.required_values()
            .iter()
            .filter_map(Value::as_str)
            .collect()
    }

    /// Whether `name` is listed in `required` (no allocation).
    pub fn is_required(&self, name: &str) -> bool {
        self.required_values()
            .iter()
            .any(|v| v.as_str() == Some(name))
    }

    /// The JSON Go writes for this struct's zero value, as far as the
    /// schema tells: `{}` with each required scalar (a field without
    /// `omitempty`) at its zero (`0`, `false`, `""`). Fields the schema
    /// marks optional but Go writes anyway (a few counters without
    /// `omitempty`, nested non-pointer structs) are not known here and stay
    /// out. `None` for a node that is not a struct.
    pub fn zero_struct(&self) -> Option<Value> {
        if self.shape() != Shape::Object {
            return None;
        }
        let mut out = Map::new();
        for name in self.required() {
            let zero = match self.child(name).map(|t| t.shape()) {
                Some(Shape::Integer | Shape::Number) => Value::from(0),
                Some(Shape::Boolean) => Value::Bool(false),
                Some(Shape::String) => Value::String(String::new()),
                _ => continue,
            };
            out.insert(name.to_string(), zero);
        }
        Some(Value::Object(out))
    }

    fn required_values(&self) -> &'a [Value] {
        self.node
            .get("required")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The element type of an array.
    pub fn items(&self) -> Option<TypeRef<'a>> {
        let items = self.node.get("items")?.as_object()?;
        self.schema.resolve(items)
    }

    /// The value type of a map (`additionalProperties`).
    pub fn values(&self) -> Option<TypeRef<'a>> {
        let values = self.node.get("additionalProperties")?.as_object()?;
        self.schema.resolve(values)
    }

    /// The list semantics declared for an array, if any. `None` means the
    /// schema says nothing, which Kubernetes treats as atomic.
    pub fn list_type(&self) -> Option<ListType> {
        match self.ext("x-kubernetes-list-type")?.as_str()? {
            "atomic" => Some(ListType::Atomic),
            "set" => Some(ListType::Set),
            "map" => {
                let keys = self
                    .ext("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                Some(ListType::Map(keys))
            }
            _ => None,
        }
    }

    /// The map semantics of an object or map: atomic only when declared so
    /// (at the field, else on the definition).
    pub fn map_type(&self) -> MapType {
        match self.ext("x-kubernetes-map-type").and_then(Value::as_str) {
            Some("atomic") => MapType::Atomic,
            _ => MapType::Granular,
        }
    }

    /// The OpenAPI `format`, e.g. `int32`, `date-time`, `int-or-string`.
    pub fn format(&self) -> Option<&'a str> {
        self.node
            .get("format")
            .or_else(|| self.site.and_then(|s| s.get("format")))
            .and_then(Value::as_str)
    }

    fn has_preserve_unknown_fields(&self) -> bool {
        self.ext("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
    }

    /// Whether fields not named by the schema are kept: declared with
    /// `x-kubernetes-preserve-unknown-fields`, or an untyped node.
    pub fn preserves_unknown_fields(&self) -> bool {
        self.has_preserve_unknown_fields() || self.shape() == Shape::Untyped
    }

    /// The group-version-kinds declared on this definition.
    pub fn group_version_kinds(&self) -> Vec<(&'a str, &'a str, &'a str)> {
        self.node
            .get("x-kubernetes-group-version-kind")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|g| {
                        let f = |k: &str| g.get(k).and_then(Value::as_str);
                        Some((f("group")?, f("version")?, f("kind")?))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> TypeRef<'static> {
        builtin()
            .by_gvk("apps", "v1", "Deployment")
            .expect("Deployment is built in")
    }

    #[test]
    fn zero_structs_follow_required_fields() {
        let status = |g, v, k| {
            builtin()
                .by_gvk(g, v, k)
                .and_then(|t| t.child("status"))
                .and_then(|t| t.zero_struct())
        };
        assert_eq!(
            status("apps", "v1", "Deployment"),
            Some(serde_json::json!({}))
        );
        assert_eq!(
            status("apps", "v1", "ReplicaSet"),
            Some(serde_json::json!({"replicas": 0}))
        );
        assert_eq!(
            status("apps", "v1", "DaemonSet"),
            Some(
                serde_json::json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                "desiredNumberScheduled": 0, "numberReady": 0})
            )
        );
        assert_eq!(
            status("storage.k8s.io", "v1", "VolumeAttachment"),
            Some(serde_json::json!({"attached": false}))
        );
        // Not a struct: no zero struct.
        let name = deployment().path(&["metadata", "name"]).unwrap();
        assert_eq!(name.zero_struct(), None);
    }

    #[test]
    fn embedded_definitions_parse() {
        let s = builtin();
        assert_eq!(s.definitions().len(), 771);
        assert!(s.gvks().count() > 300);
        // Documentation is stripped, but a property called `description` is not.
        let json = serde_json::to_string(s.definitions()).unwrap();
        assert!(!json.contains("Standard object's metadata"));
        let pc = s.by_name("io.k8s.api.scheduling.v1.PriorityClass").unwrap();
        assert!(pc.field("description").is_some());
    }

    #[test]
    fn every_reference_resolves() {
        fn walk(s: &Schema, v: &Value, bad: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                        if s.resolve(m).is_none() {
                            bad.push(r.to_string());
                        }
                    }
                    m.values().for_each(|v| walk(s, v, bad));
                }
                Value::Array(a) => a.iter().for_each(|v| walk(s, v, bad)),
                _ => {}
            }
        }
        let s = builtin();
        let mut bad = Vec::new();
        for def in s.definitions().values() {
            walk(s, def, &mut bad);
        }
        assert!(bad.is_empty(), "dangling refs: {bad:?}");
    }

    #[test]
    fn gvk_lookup() {
        let s = builtin();
        assert_eq!(
            s.definition_name_for_gvk("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
        assert_eq!(
            s.definition_name_for_gvk("", "v1", "Pod"),
            Some("io.k8s.api.core.v1.Pod")
        );
        assert_eq!(deployment().name(), Some("io.k8s.api.apps.v1.Deployment"));
        assert_eq!(deployment().shape(), Shape::Object);
        assert!(deployment()
            .group_version_kinds()
            .contains(&("apps", "v1", "Deployment")));
        // DeleteOptions is registered in many groups.
        assert_eq!(
            s.definition_name_for_gvk("batch", "v1", "DeleteOptions"),
            Some("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions")
        );
    }

    #[test]
    fn unknown_gvk_is_none() {
        let s = builtin();
        assert!(s.by_gvk("apps", "v1", "Nope").is_none());
        assert!(s.by_gvk("nope.example.com", "v1", "Deployment").is_none());
        assert!(s.by_gvk("apps", "v2", "Deployment").is_none());
        assert!(s.by_gvk("", "v1", "Deployment").is_none());
        assert!(s.by_name("io.k8s.api.apps.v1.Nope").is_none());
    }

    #[test]
    fn containers_are_a_map_list_merged_by_name() {
        let spec = deployment()
            .path(&["spec", "template", "spec"])
            .expect("pod spec");
        assert_eq!(spec.name(), Some("io.k8s.api.core.v1.PodSpec"));
        let containers = spec.field("containers").unwrap();
        assert_eq!(containers.name, "containers");
        assert_eq!(containers.ty.shape(), Shape::Array);
        assert_eq!(
            containers.ty.list_type(),
            Some(ListType::Map(vec!["name".into()]))
        );
        assert_eq!(containers.patch_strategy, Some("merge"));
        assert_eq!(containers.patch_merge_key, Some("name"));
        let container = containers.ty.items().unwrap();
        assert_eq!(container.name(), Some("io.k8s.api.core.v1.Container"));
        assert!(container.is_required("name"));
        assert_eq!(container.required(), vec!["name"]);
    }

    #[test]
    fn ports_are_keyed_by_port_and_protocol() {
        let ports = deployment()
            .path(&["spec", "template", "spec", "containers"])
            .and_then(|c| c.items())
            .and_then(|c| c.field("ports"))
            .unwrap();
        assert_eq!(
            ports.ty.list_type(),
            Some(ListType::Map(vec![
                "containerPort".into(),
                "protocol".into()
            ]))
        );
        assert_eq!(ports.patch_merge_key, Some("containerPort"));
        // Arrays are stepped through by `path`.
        let same = deployment()
            .path(&["spec", "template", "spec", "containers", "ports"])
            .unwrap();
        assert_eq!(same.list_type(), ports.ty.list_type());
        let port = same.items().unwrap().field("containerPort").unwrap();
        assert_eq!(port.ty.shape(), Shape::Integer);
        assert_eq!(port.ty.format(), Some("int32"));
    }

    #[test]
    fn tolerations_are_atomic_and_volumes_retain_keys() {
        let spec = deployment().path(&["spec", "template", "spec"]).unwrap();
        let tolerations = spec.field("tolerations").unwrap();
        assert_eq!(tolerations.ty.list_type(), Some(ListType::Atomic));
        assert_eq!(tolerations.patch_strategy, None);
        let volumes = spec.field("volumes").unwrap();
        assert_eq!(volumes.patch_strategy, Some("merge,retainKeys"));
        let strategy = deployment()
            .path(&["spec"])
            .and_then(|s| s.field("strategy"))
            .unwrap();
        assert_eq!(strategy.patch_strategy, Some("retainKeys"));
        assert_eq!(
            strategy.ty.name(),
            Some("io.k8s.api.apps.v1.DeploymentStrategy")
        );
    }

    #[test]
    fn labels_are_a_map_of_strings() {
        let labels = deployment().path(&["metadata", "labels"]).unwrap();
        assert_eq!(labels.shape(), Shape::Map);
        assert_eq!(labels.values().unwrap().shape(), Shape::String);
        assert_eq!(labels.map_type(), MapType::Granular);
        assert_eq!(labels.child("anything").unwrap().shape(), Shape::String);
        let finalizers = deployment().path(&["metadata", "finalizers"]).unwrap();
        assert_eq!(finalizers.list_type(), Some(ListType::Set));
        assert_eq!(finalizers.items().unwrap().shape(), Shape::String);
    }

    #[test]
    fn special_shapes() {
        let s = builtin();
        let svc = s.by_gvk("", "v1", "Service").unwrap();
        let target = svc.path(&["spec", "ports", "targetPort"]).unwrap();
        assert_eq!(target.shape(), Shape::IntOrString);
        assert_eq!(target.format(), Some("int-or-string"));
        let limits = s
            .by_name("io.k8s.api.core.v1.ResourceRequirements")
            .and_then(|r| r.child("limits"))
            .unwrap();
        assert_eq!(limits.shape(), Shape::Map);
        assert_eq!(limits.values().unwrap().shape(), Shape::Quantity);
        let created = svc.path(&["metadata", "creationTimestamp"]).unwrap();
        assert_eq!(created.shape(), Shape::String);
        assert_eq!(created.format(), Some("date-time"));
        let raw = s
            .by_gvk("apps", "v1", "ControllerRevision")
            .and_then(|c| c.child("data"))
            .unwrap();
        assert_eq!(raw.shape(), Shape::Untyped);
        assert!(raw.preserves_unknown_fields());
        assert!(!svc.preserves_unknown_fields());
        let json = s
            .by_name("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON")
            .unwrap();
        assert_eq!(json.shape(), Shape::Untyped);
        let empty = s
            .by_name(
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceSubresourceStatus",
            )
            .unwrap();
        assert_eq!(empty.shape(), Shape::Object);
        assert_eq!(empty.fields().count(), 0);
    }

    #[test]
    fn map_type_prefers_the_field() {
        let s = builtin();
        let reference = s.by_name("io.k8s.api.core.v1.ObjectReference").unwrap();
        assert_eq!(reference.map_type(), MapType::Atomic);
        // PersistentVolumeSpec.claimRef overrides it with granular.
        let claim_ref = s
            .by_name("io.k8s.api.core.v1.PersistentVolumeSpec")
            .and_then(|p| p.child("claimRef"))
            .unwrap();
        assert_eq!(claim_ref.name(), Some("io.k8s.api.core.v1.ObjectReference"));
        assert_eq!(claim_ref.map_type(), MapType::Granular);
        let selector = s
            .by_name("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")
            .unwrap();
        assert_eq!(selector.map_type(), MapType::Atomic);
    }

    #[test]
    fn fields_iterate_in_schema_order() {
        let names: Vec<&str> = deployment().fields().map(|f| f.name).collect();
        assert_eq!(names, ["apiVersion", "kind", "metadata", "spec", "status"]);
    }

    #[test]
    fn custom_schema() {
        let defs = serde_json::json!({
            "a.B": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "x.io", "version": "v1", "kind": "B"}],
                "properties": {
                    "items": {"type": "array", "items": {"$ref": "#/definitions/a.C"}},
                    "loose": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "dangling": {"$ref": "#/definitions/a.Missing"}
                }
            },
            "a.C": {"type": "object", "properties": {"n": {"type": "number"}}},
            "a.Loop": {"$ref": "#/definitions/a.Loop"}
        });
        let Value::Object(defs) = defs else {
            unreachable!()
        };
        let s = Schema::new(defs);
        let b = s.by_gvk("x.io", "v1", "B").unwrap();
        assert_eq!(b.path(&["items", "n"]).unwrap().shape(), Shape::Number);
        assert_eq!(b.child("loose").unwrap().shape(), Shape::Untyped);
        assert!(b.field("dangling").is_none());
        assert_eq!(b.fields().count(), 2);
        let looped = s.by_name("a.Loop").unwrap();
        assert_eq!(looped.shape(), Shape::Untyped);
    }
}
