//! Schema-aware walks over objects: the field set of a value (what
//! structured-merge-diff's `ToFieldSet` returns) and the comparison of two
//! values (its typed `Compare`).
//!
//! How a node is treated follows the schema, as kube's schema conversion does:
//!
//! - structs (`properties`) and maps (`additionalProperties`) are granular
//!   unless `x-kubernetes-map-type: atomic`; keys a struct does not declare
//!   are treated like map keys of an untyped value;
//! - arrays follow `x-kubernetes-list-type`; without it, a field whose patch
//!   strategy includes `merge` is an associative list keyed by its patch merge
//!   key (a set when there is no key), and any other array is atomic;
//! - `RawExtension`-like untyped nodes are atomic, while
//!   `x-kubernetes-preserve-unknown-fields` nodes and values without a schema
//!   are "deduced": every map key is a field, every list is atomic.
//!
//! Values that do not fit their schema (a string where a struct is expected)
//! are treated as leaves instead of failing: kube rejects such objects before
//! managed fields are computed, and a leaf is the most useful answer here.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{values_equal, FieldSet, PathElement};
use crate::schema::{self, Field, ListType, MapType, Shape, TypeRef};

/// How list items are identified.
#[derive(Debug, Clone)]
enum ListKind {
    /// Items are scalars identified by value (`v:`).
    Set,
    /// Items are objects identified by these key fields (`k:`).
    Keys(Vec<String>),
}

/// How a schema node is walked.
#[derive(Debug, Clone)]
enum Ty<'a> {
    /// No schema (or preserve-unknown-fields): maps granular, lists atomic.
    Deduced,
    /// The whole value is one field.
    Leaf,
    /// A granular struct; undeclared keys are deduced.
    Struct(TypeRef<'a>),
    /// A granular map.
    Map(Option<TypeRef<'a>>),
    /// An associative list.
    List(Option<TypeRef<'a>>, ListKind),
}

fn resolve<'a>(ty: Option<TypeRef<'a>>, field: Option<&Field<'a>>) -> Ty<'a> {
    let Some(t) = ty else {
        return Ty::Deduced;
    };
    match t.shape() {
        Shape::Object => {
            if t.map_type() == MapType::Atomic {
                Ty::Leaf
            } else {
                Ty::Struct(t)
            }
        }
        Shape::Map => {
            if t.map_type() == MapType::Atomic {
                Ty::Leaf
            } else {
                Ty::Map(t.values())
            }
        }
        Shape::Array => match list_kind(t, field) {
            Some(kind) => Ty::List(t.items(), kind),
            None => Ty::Leaf,
        },
        Shape::Untyped => {
            if t.raw().get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
                Ty::Deduced
            } else {
                Ty::Leaf
            }
        }
        Shape::String
        | Shape::Integer
        | Shape::Number
        | Shape::Boolean
        | Shape::IntOrString
        | Shape::Quantity => Ty::Leaf,
    }
}

/// The associative kind of an array, or `None` for atomic.
fn list_kind(t: TypeRef<'_>, field: Option<&Field<'_>>) -> Option<ListKind> {
    match t.list_type() {
        Some(ListType::Atomic) => None,
        Some(ListType::Set) => Some(ListKind::Set),
        Some(ListType::Map(keys)) => (!keys.is_empty()).then_some(ListKind::Keys(keys)),
        None => {
            // Without x-kubernetes-list-type, a merge patch strategy makes the
            // list associative, keyed by the merge key.
            let field = field?;
            let merges = field
                .patch_strategy?
                .split(',')
                .any(|s| s.trim() == "merge");
            if !merges {
                return None;
            }
            match field.patch_merge_key {
                Some(key) => Some(ListKind::Keys(vec![key.to_string()])),
                None => Some(ListKind::Set),
            }
        }
    }
}

impl<'a> Ty<'a> {
    /// The type of member `key` of a map-like node, and whether the key is a
    /// declared struct field.
    fn member(&self, key: &str) -> (Ty<'a>, bool) {
        match self {
            Ty::Struct(t) => match t.field(key) {
                Some(f) => (resolve(Some(f.ty), Some(&f)), true),
                None => (Ty::Deduced, false),
            },
            Ty::Map(Some(v)) => (resolve(Some(*v), None), false),
            _ => (Ty::Deduced, false),
        }
    }

    fn item(&self) -> Ty<'a> {
        match self {
            Ty::List(Some(items), _) => resolve(Some(*items), None),
            _ => Ty::Deduced,
        }
    }
}

/// A value as seen through its type.
enum Node<'v> {
    Leaf,
    /// `null` where a granular map or list is expected.
    Null,
    Map(&'v Map<String, Value>),
    List(&'v [Value]),
}

fn classify<'v>(ty: &Ty<'_>, v: &'v Value) -> Node<'v> {
    match (ty, v) {
        (Ty::Leaf, _) => Node::Leaf,
        (Ty::Deduced | Ty::Struct(_) | Ty::Map(_), Value::Object(m)) => Node::Map(m),
        (Ty::Deduced | Ty::Struct(_) | Ty::Map(_) | Ty::List(..), Value::Null) => Node::Null,
        (Ty::List(..), Value::Array(items)) => Node::List(items),
        _ => Node::Leaf,
    }
}

/// The path element of a list item, or `None` when the item cannot be
/// identified (a set item that is not a scalar, a keyed item that is not an
/// object or lacks a key field). kube rejects such objects; here they are
/// skipped.
fn item_element(kind: &ListKind, item: &Value) -> Option<PathElement> {
    match kind {
        ListKind::Set => match item {
            Value::Object(_) | Value::Array(_) | Value::Null => None,
            scalar => Some(PathElement::Value(scalar.clone())),
        },
        ListKind::Keys(keys) => {
            let obj = item.as_object()?;
            let mut fields = Vec::with_capacity(keys.len());
            for k in keys {
                fields.push((k.clone(), obj.get(k)?.clone()));
            }
            Some(PathElement::key(fields))
        }
    }
}

/// List items grouped by path element, in first-seen order.
fn group_items<'v>(kind: &ListKind, items: &'v [Value]) -> Vec<(PathElement, Vec<&'v Value>)> {
    let mut order: Vec<(PathElement, Vec<&'v Value>)> = Vec::new();
    let mut index: BTreeMap<PathElement, usize> = BTreeMap::new();
    for item in items {
        let Some(pe) = item_element(kind, item) else {
            continue;
        };
        match index.get(&pe) {
            Some(&i) => order[i].1.push(item),
            None => {
                index.insert(pe.clone(), order.len());
                order.push((pe, vec![item]));
            }
        }
    }
    order
}

// ---------------------------------------------------------------------------
// ToFieldSet

/// The set of fields a value sets, as structured-merge-diff's `ToFieldSet`
/// computes it (the set an applier owns after applying this value).
///
/// Leaves (scalars, atomic lists, maps and structs) are members; map keys and
/// list items are members too (so they appear with `"."` when they have
/// children), while struct fields that hold granular values are not. With no
/// schema (`None`) every map key is a field and every list is atomic.
pub fn field_set(ty: Option<TypeRef<'_>>, value: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    let mut path = Vec::new();
    to_set(&resolve(ty, None), value, &mut path, &mut out);
    out
}

fn to_set(ty: &Ty<'_>, v: &Value, path: &mut Vec<PathElement>, out: &mut FieldSet) {
    match classify(ty, v) {
        Node::Leaf => out.insert(path),
        Node::Null => {}
        Node::Map(m) => {
            for (key, child) in m {
                let (cty, declared) = ty.member(key);
                path.push(PathElement::Field(key.clone()));
                to_set(&cty, child, path, out);
                if !declared {
                    out.insert(path);
                }
                path.pop();
            }
        }
        Node::List(items) => {
            let Ty::List(_, kind) = ty else {
                out.insert(path);
                return;
            };
            let ity = ty.item();
            for (pe, group) in group_items(kind, items) {
                path.push(pe);
                // Duplicated keys make the items one opaque field.
                if group.len() == 1 {
                    to_set(&ity, group[0], path, out);
                }
                out.insert(path);
                path.pop();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Compare

/// The difference between two values, per field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields only in the new value (including new map keys, list items and
    /// structs, as nodes).
    pub added: FieldSet,
    /// Leaf fields in both values with different values.
    pub modified: FieldSet,
    /// Fields only in the old value.
    pub removed: FieldSet,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// Drops `fields` and everything below them from all three sets.
    pub fn exclude(&self, fields: &FieldSet) -> Comparison {
        Comparison {
            added: self.added.recursive_difference(fields),
            modified: self.modified.recursive_difference(fields),
            removed: self.removed.recursive_difference(fields),
        }
    }
}

/// Compares two values of a type as structured-merge-diff's typed `Compare`
/// does, returning (added or modified, removed).
pub fn compare(ty: Option<TypeRef<'_>>, old: &Value, new: &Value) -> (FieldSet, FieldSet) {
    let c = compare_detailed(ty, old, new);
    (c.added.union(&c.modified), c.removed)
}

/// [`compare`] with added and modified fields kept apart.
pub fn compare_detailed(ty: Option<TypeRef<'_>>, old: &Value, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    cmp(
        &resolve(ty, None),
        Some(old),
        Some(new),
        &mut path,
        &mut out,
    );
    out
}

#[derive(Clone, Copy)]
enum Side {
    Added,
    Removed,
}

fn side_set(out: &mut Comparison, side: Side) -> &mut FieldSet {
    match side {
        Side::Added => &mut out.added,
        Side::Removed => &mut out.removed,
    }
}

fn cmp(
    ty: &Ty<'_>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    let (l, r) = match (lhs, rhs) {
        (None, None) => return,
        (Some(l), None) => return one_side(ty, l, path, out, Side::Removed),
        (None, Some(r)) => return one_side(ty, r, path, out, Side::Added),
        (Some(l), Some(r)) => (l, r),
    };
    match (classify(ty, l), classify(ty, r)) {
        (Node::Leaf, Node::Leaf) | (Node::Null, Node::Null) => {
            if !values_equal(l, r) {
                out.modified.insert(path);
            }
        }
        (Node::Map(lm), Node::Map(rm)) => compare_maps(ty, Some(lm), Some(rm), l, r, path, out),
        (Node::Map(lm), Node::Null) => compare_maps(ty, Some(lm), None, l, r, path, out),
        (Node::Null, Node::Map(rm)) => compare_maps(ty, None, Some(rm), l, r, path, out),
        (Node::List(li), Node::List(ri)) => compare_lists(ty, li, ri, l, r, path, out),
        (Node::List(li), Node::Null) => compare_lists(ty, li, &[], l, r, path, out),
        (Node::Null, Node::List(ri)) => compare_lists(ty, &[], ri, l, r, path, out),
        // The value changed kind: the node is modified, and whatever
        // structure one side had below it is added or removed.
        (ln, rn) => {
            out.modified.insert(path);
            below(ty, ln, path, out, Side::Removed);
            below(ty, rn, path, out, Side::Added);
        }
    }
}

/// Two granular maps (either may be `null`).
fn compare_maps(
    ty: &Ty<'_>,
    lm: Option<&Map<String, Value>>,
    rm: Option<&Map<String, Value>>,
    l: &Value,
    r: &Value,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    let l_empty = lm.is_none_or(Map::is_empty);
    let r_empty = rm.is_none_or(Map::is_empty);
    if l_empty && r_empty {
        // Empty and null maps are leaves, which keeps `{}` vs null visible.
        if !values_equal(l, r) {
            out.modified.insert(path);
        }
        return;
    }
    let empty = Map::new();
    let lm = lm.unwrap_or(&empty);
    let rm = rm.unwrap_or(&empty);
    for (key, lv) in lm {
        let (cty, _) = ty.member(key);
        path.push(PathElement::Field(key.clone()));
        cmp(&cty, Some(lv), rm.get(key), path, out);
        path.pop();
    }
    for (key, rv) in rm {
        if lm.contains_key(key) {
            continue;
        }
        let (cty, _) = ty.member(key);
        path.push(PathElement::Field(key.clone()));
        cmp(&cty, None, Some(rv), path, out);
        path.pop();
    }
}

/// Two associative lists (either may be `null`, given as empty).
fn compare_lists(
    ty: &Ty<'_>,
    li: &[Value],
    ri: &[Value],
    l: &Value,
    r: &Value,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    if li.is_empty() && ri.is_empty() {
        if !values_equal(l, r) {
            out.modified.insert(path);
        }
        return;
    }
    let Ty::List(_, kind) = ty else {
        if !values_equal(l, r) {
            out.modified.insert(path);
        }
        return;
    };
    let ity = ty.item();
    let lg = group_items(kind, li);
    let rg = group_items(kind, ri);
    let rindex: BTreeMap<&PathElement, &Vec<&Value>> = rg.iter().map(|(pe, g)| (pe, g)).collect();
    let lindex: BTreeMap<&PathElement, &Vec<&Value>> = lg.iter().map(|(pe, g)| (pe, g)).collect();
    for (pe, lgroup) in &lg {
        path.push(pe.clone());
        let rgroup = rindex.get(pe);
        match rgroup {
            None => compare_group(&ity, Some(lgroup), None, path, out),
            Some(rgroup) => compare_group(&ity, Some(lgroup), Some(rgroup), path, out),
        }
        path.pop();
    }
    for (pe, rgroup) in &rg {
        if lindex.contains_key(pe) {
            continue;
        }
        path.push(pe.clone());
        compare_group(&ity, None, Some(rgroup), path, out);
        path.pop();
    }
}

/// The items of one key on each side; duplicated keys are compared as one
/// opaque field.
fn compare_group(
    ity: &Ty<'_>,
    l: Option<&Vec<&Value>>,
    r: Option<&Vec<&Value>>,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    let dup = l.is_some_and(|g| g.len() > 1) || r.is_some_and(|g| g.len() > 1);
    if !dup {
        let lv = l.and_then(|g| g.first().copied());
        let rv = r.and_then(|g| g.first().copied());
        cmp(ity, lv, rv, path, out);
        return;
    }
    match (l, r) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(lg), Some(rg)) => {
            let same =
                lg.len() == rg.len() && lg.iter().zip(rg.iter()).all(|(a, b)| values_equal(a, b));
            if !same {
                out.modified.insert(path);
            }
        }
        (None, None) => {}
    }
}

/// A value present on one side only: every field in it, and the node itself.
fn one_side(ty: &Ty<'_>, v: &Value, path: &mut Vec<PathElement>, out: &mut Comparison, side: Side) {
    let node = classify(ty, v);
    let has_structure = match &node {
        Node::Map(m) => !m.is_empty(),
        Node::List(items) => !items.is_empty(),
        Node::Leaf | Node::Null => false,
    };
    if has_structure {
        below(ty, node, path, out, side);
    }
    side_set(out, side).insert(path);
}

/// Every field below a node present on one side only (not the node itself).
fn below(
    ty: &Ty<'_>,
    node: Node<'_>,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
    side: Side,
) {
    match node {
        Node::Leaf | Node::Null => {}
        Node::Map(m) => {
            for (key, child) in m {
                let (cty, _) = ty.member(key);
                path.push(PathElement::Field(key.clone()));
                one_side(&cty, child, path, out, side);
                path.pop();
            }
        }
        Node::List(items) => {
            let Ty::List(_, kind) = ty else {
                return;
            };
            let ity = ty.item();
            for (pe, group) in group_items(kind, items) {
                path.push(pe);
                if group.len() == 1 {
                    one_side(&ity, group[0], path, out, side);
                } else {
                    side_set(out, side).insert(path);
                }
                path.pop();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The empty object of a type

/// Optional fields of built-in types that Go declares as values (not
/// pointers), so an empty object of the type already has them: structs as
/// `{}`, `metav1.Time` as `null`. Fields named `metadata`, `spec` and
/// `status` are struct values everywhere and are not listed.
const VALUE_FIELDS: &[(&str, &str)] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "creationTimestamp",
    ),
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy"),
    ("io.k8s.api.apps.v1.DaemonSetSpec", "updateStrategy"),
    ("io.k8s.api.apps.v1.StatefulSetSpec", "updateStrategy"),
    ("io.k8s.api.apps.v1.ReplicaSetSpec", "template"),
    ("io.k8s.api.core.v1.PodTemplate", "template"),
    ("io.k8s.api.core.v1.Container", "resources"),
    ("io.k8s.api.core.v1.EphemeralContainer", "resources"),
    ("io.k8s.api.core.v1.PersistentVolumeClaimSpec", "resources"),
    ("io.k8s.api.core.v1.ServiceStatus", "loadBalancer"),
    ("io.k8s.api.networking.v1.IngressStatus", "loadBalancer"),
    ("io.k8s.api.networking.v1.IngressServiceBackend", "port"),
    ("io.k8s.api.networking.v1.NetworkPolicySpec", "podSelector"),
    ("io.k8s.api.core.v1.NodeStatus", "daemonEndpoints"),
    ("io.k8s.api.core.v1.NodeDaemonEndpoints", "kubeletEndpoint"),
    ("io.k8s.api.core.v1.NodeStatus", "nodeInfo"),
    ("io.k8s.api.core.v1.Event", "involvedObject"),
    ("io.k8s.api.core.v1.Event", "source"),
    ("io.k8s.api.core.v1.Event", "firstTimestamp"),
    ("io.k8s.api.core.v1.Event", "lastTimestamp"),
    ("io.k8s.api.core.v1.Event", "eventTime"),
    ("io.k8s.api.events.v1.Event", "eventTime"),
    ("io.k8s.api.events.v1.Event", "regarding"),
    ("io.k8s.api.events.v1.Event", "deprecatedSource"),
    ("io.k8s.api.events.v1.Event", "deprecatedFirstTimestamp"),
    ("io.k8s.api.events.v1.Event", "deprecatedLastTimestamp"),
    ("io.k8s.api.authentication.v1.TokenReviewStatus", "user"),
];

/// How deep the empty-object builder follows nested value structs.
const MAX_EMPTY_DEPTH: usize = 12;

/// The object kube compares a created object with: the Go zero value of the
/// type as structured-merge-diff sees it.
///
/// For built-in types that is not `{}`: struct fields declared as values
/// (`metadata`, `spec`, `status`, `spec.template`, ...) are present as empty
/// objects, and required (non-`omitempty`) fields are present as their zero
/// value (`null` for lists and maps). This matters for the `"."` entries of
/// created objects: `spec.template.spec.containers` is `null` in the empty
/// Deployment, so the created Deployment's containers list gets no `"."`,
/// while `spec.strategy.rollingUpdate` (a pointer) does.
///
/// Whether an optional struct field is a value or a pointer is not in the
/// OpenAPI schema; a built-in table lists the common value fields. Types from
/// other schemas (custom resources) start from `{}`, as kube's unstructured
/// objects do.
pub fn empty_object(ty: Option<TypeRef<'_>>) -> Value {
    match ty {
        Some(t) if std::ptr::eq(t.schema(), schema::builtin()) => match t.name() {
            // Built from the schema once per type: walking the schema costs
            // several times what cloning the result does, on every create.
            Some(name) => {
                static BUILT: std::sync::OnceLock<
                    std::sync::RwLock<std::collections::HashMap<String, Value>>,
                > = std::sync::OnceLock::new();
                let built = BUILT.get_or_init(Default::default);
                if let Some(v) = built.read().unwrap_or_else(|e| e.into_inner()).get(name) {
                    return v.clone();
                }
                let v = empty_struct(t, 0).unwrap_or_else(|| Value::Object(Map::new()));
                built
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.to_string(), v.clone());
                v
            }
            None => empty_struct(t, 0).unwrap_or_else(|| Value::Object(Map::new())),
        },
        _ => Value::Object(Map::new()),
    }
}

fn empty_struct(t: TypeRef<'_>, depth: usize) -> Option<Value> {
    if depth > MAX_EMPTY_DEPTH || t.shape() != Shape::Object {
        return None;
    }
    let parent = t.name().unwrap_or("");
    let mut out = Map::new();
    for f in t.fields() {
        let required = t.is_required(f.name);
        let value_field = (matches!(f.name, "metadata" | "spec" | "status")
            && f.ty.shape() == Shape::Object)
            || VALUE_FIELDS.contains(&(parent, f.name));
        let zero = match f.ty.shape() {
            Shape::Object if required || value_field => empty_struct(f.ty, depth + 1),
            _ if !required && !value_field => None,
            Shape::String => match f.ty.format() {
                Some("date-time") | Some("date-time-micro") => Some(Value::Null),
                _ => Some(Value::String(String::new())),
            },
            Shape::Integer | Shape::Number | Shape::IntOrString => Some(Value::from(0)),
            Shape::Boolean => Some(Value::Bool(false)),
            Shape::Quantity => Some(Value::String("0".to_string())),
            Shape::Object | Shape::Map | Shape::Array | Shape::Untyped => Some(Value::Null),
        };
        if let Some(z) = zero {
            out.insert(f.name.to_string(), z);
        }
    }
    Some(Value::Object(out))
}
