//! Schema-driven operations on whole objects that server-side apply needs
//! besides field sets: merging an applied configuration into a live object,
//! removing the fields of a set from an object, filling in defaulted keys of
//! associative lists, and checking an applied configuration against its
//! schema.
//!
//! A node is treated the way [`super::field_set`] treats it (see the
//! `typed` module): structs and maps are granular unless declared atomic,
//! arrays follow `x-kubernetes-list-type` (or a `merge` patch strategy), and
//! anything without a schema is "deduced" (every map key a field, every list
//! atomic). The resolution is repeated here because the walkers differ; the
//! rules must stay the same.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, Path, PathElement};
use crate::schema::{Field, ListType, MapType, Shape, TypeRef};

/// Key fields of associative lists that the API defaults when they are
/// omitted, as `(item definition, key field, default)`. The schema facts do
/// not carry OpenAPI defaults, and kube fills these in before it identifies
/// list items (`ports: [{containerPort: 80}]` is the item
/// `k:{"containerPort":80,"protocol":"TCP"}`).
const DEFAULTED_KEYS: &[(&str, &str, &str)] = &[
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// How list items are identified.
#[derive(Debug, Clone)]
pub(crate) enum Items {
    /// Scalars identified by value.
    Set,
    /// Objects identified by these key fields, each with its default.
    Keys(Vec<(String, Option<Value>)>),
}

/// How a schema node is walked.
#[derive(Debug, Clone)]
pub(crate) enum Node<'a> {
    /// No schema (or preserve-unknown-fields): maps granular, lists atomic.
    Deduced,
    /// Replaced as a whole.
    Leaf,
    /// A granular struct; undeclared keys are deduced.
    Struct(TypeRef<'a>),
    /// A granular map.
    Map(Option<TypeRef<'a>>),
    /// An associative list.
    List(Option<TypeRef<'a>>, Items),
}

pub(crate) fn resolve<'a>(ty: Option<TypeRef<'a>>, field: Option<&Field<'a>>) -> Node<'a> {
    let Some(t) = ty else {
        return Node::Deduced;
    };
    match t.shape() {
        Shape::Object if t.map_type() == MapType::Atomic => Node::Leaf,
        Shape::Object => Node::Struct(t),
        Shape::Map if t.map_type() == MapType::Atomic => Node::Leaf,
        Shape::Map => Node::Map(t.values()),
        Shape::Array => match items_of(t, field) {
            Some(items) => Node::List(t.items(), items),
            None => Node::Leaf,
        },
        Shape::Untyped
            if t.raw().get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) =>
        {
            Node::Deduced
        }
        _ => Node::Leaf,
    }
}

fn items_of(t: TypeRef<'_>, field: Option<&Field<'_>>) -> Option<Items> {
    let keys = match t.list_type() {
        Some(ListType::Atomic) => return None,
        Some(ListType::Set) => return Some(Items::Set),
        Some(ListType::Map(keys)) if keys.is_empty() => return None,
        Some(ListType::Map(keys)) => keys,
        None => {
            let field = field?;
            let merges = field
                .patch_strategy?
                .split(',')
                .any(|s| s.trim() == "merge");
            if !merges {
                return None;
            }
            match field.patch_merge_key {
                Some(key) => vec![key.to_string()],
                None => return Some(Items::Set),
            }
        }
    };
    let item_name = t.items().and_then(|i| i.name()).unwrap_or("");
    let with_defaults = keys
        .into_iter()
        .map(|k| {
            let default = DEFAULTED_KEYS
                .iter()
                .find(|(ty, key, _)| *ty == item_name && *key == k)
                .map(|(_, _, d)| Value::String((*d).to_string()));
            (k, default)
        })
        .collect();
    Some(Items::Keys(with_defaults))
}

impl<'a> Node<'a> {
    /// The node of member `key` of a map-like node, and whether it is a
    /// declared struct field.
    pub(crate) fn member(&self, key: &str) -> (Node<'a>, bool) {
        match self {
            Node::Struct(t) => match t.field(key) {
                Some(f) => (resolve(Some(f.ty), Some(&f)), true),
                None => (Node::Deduced, false),
            },
            Node::Map(Some(v)) => (resolve(Some(*v), None), false),
            _ => (Node::Deduced, false),
        }
    }

    pub(crate) fn item(&self) -> Node<'a> {
        match self {
            Node::List(Some(items), _) => resolve(Some(*items), None),
            _ => Node::Deduced,
        }
    }

    fn is_map_like(&self) -> bool {
        matches!(self, Node::Deduced | Node::Struct(_) | Node::Map(_))
    }
}

/// The path element of a list item, with defaulted keys filled in; `None`
/// when the item cannot be identified.
pub(crate) fn item_element(items: &Items, item: &Value) -> Option<PathElement> {
    match items {
        Items::Set => match item {
            Value::Object(_) | Value::Array(_) | Value::Null => None,
            scalar => Some(PathElement::Value(scalar.clone())),
        },
        Items::Keys(keys) => {
            let obj = item.as_object()?;
            let mut fields = Vec::with_capacity(keys.len());
            for (k, default) in keys {
                let v = obj.get(k).or(default.as_ref())?;
                fields.push((k.clone(), v.clone()));
            }
            Some(PathElement::key(fields))
        }
    }
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

// ---------------------------------------------------------------------------
// Merge

/// Merges `rhs` (an applied configuration) into `lhs` (the live object) as
/// structured-merge-diff does: values of the configuration win; granular
/// maps and structs merge key by key; associative lists merge item by item
/// (keeping the configuration's order for the items it names, with items
/// only in the live list kept before the next shared item); atomic values
/// are replaced whole. A `null` where a granular map or list has content
/// keeps the content.
pub fn merge(ty: Option<TypeRef<'_>>, lhs: &Value, rhs: &Value) -> Value {
    merge_node(&resolve(ty, None), Some(lhs), Some(rhs)).unwrap_or(Value::Null)
}

fn merge_node(node: &Node<'_>, lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    let (l, r) = match (lhs, rhs) {
        (None, None) => return None,
        (Some(l), None) => return Some(l.clone()),
        (None, Some(r)) => return Some(r.clone()),
        (Some(l), Some(r)) => (l, r),
    };
    // Both empty (or null): a leaf, which keeps `{}` apart from `null`.
    if is_empty_container(Some(l)) && is_empty_container(Some(r)) {
        return Some(r.clone());
    }
    match node {
        n if n.is_map_like() => match (l, r) {
            (Value::Object(lm), Value::Object(rm)) => Some(merge_maps(n, lm, rm)),
            (Value::Object(_), Value::Null) => Some(l.clone()),
            _ => Some(r.clone()),
        },
        Node::List(_, items) => match (l, r) {
            (Value::Array(li), Value::Array(ri)) => {
                Some(Value::Array(merge_lists(node, items, li, ri)))
            }
            (Value::Array(_), Value::Null) => Some(l.clone()),
            _ => Some(r.clone()),
        },
        _ => Some(r.clone()),
    }
}

fn merge_maps(node: &Node<'_>, lm: &Map<String, Value>, rm: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for (k, lv) in lm {
        let (child, _) = node.member(k);
        if let Some(v) = merge_node(&child, Some(lv), rm.get(k)) {
            out.insert(k.clone(), v);
        }
    }
    for (k, rv) in rm {
        if lm.contains_key(k) {
            continue;
        }
        let (child, _) = node.member(k);
        if let Some(v) = merge_node(&child, None, Some(rv)) {
            out.insert(k.clone(), v);
        }
    }
    Value::Object(out)
}

/// Items of one list side: identified items in order (first occurrence of
/// each key), and for every position whether it was identified.
struct Indexed<'v> {
    order: Vec<PathElement>,
    by_key: BTreeMap<PathElement, &'v Value>,
}

fn index_items<'v>(
    items: &Items,
    list: &'v [Value],
) -> (Indexed<'v>, Vec<(Option<PathElement>, &'v Value)>) {
    let mut idx = Indexed {
        order: Vec::new(),
        by_key: BTreeMap::new(),
    };
    let mut all = Vec::with_capacity(list.len());
    for v in list {
        let pe = item_element(items, v);
        if let Some(pe) = &pe {
            if !idx.by_key.contains_key(pe) {
                idx.by_key.insert(pe.clone(), v);
                idx.order.push(pe.clone());
            }
        }
        all.push((pe, v));
    }
    (idx, all)
}

fn merge_lists(node: &Node<'_>, items: &Items, li: &[Value], ri: &[Value]) -> Vec<Value> {
    let item_node = node.item();
    let (rhs, _) = index_items(items, ri);
    let (lhs, lhs_all) = index_items(items, li);
    // The live side as it is walked: identified items once, in order, and
    // unidentifiable items where they stand (they can only be kept).
    enum LItem<'v> {
        Keyed(PathElement),
        Opaque(&'v Value),
    }
    let mut seen = BTreeSet::new();
    let mut lseq: Vec<LItem<'_>> = Vec::with_capacity(lhs_all.len());
    for (pe, v) in &lhs_all {
        match pe {
            Some(pe) if seen.insert(pe.clone()) => lseq.push(LItem::Keyed(pe.clone())),
            Some(pe) if !rhs.by_key.contains_key(pe) => lseq.push(LItem::Opaque(v)),
            Some(_) => {}
            None => lseq.push(LItem::Opaque(v)),
        }
    }
    let mut shared = rhs
        .order
        .iter()
        .filter(|pe| lhs.by_key.contains_key(*pe))
        .cloned()
        .collect::<Vec<_>>()
        .into_iter();
    let mut next_shared = shared.next();
    let mut out = Vec::with_capacity(li.len().max(ri.len()));
    let merged = |pe: &PathElement| {
        merge_node(
            &item_node,
            lhs.by_key.get(pe).copied(),
            rhs.by_key.get(pe).copied(),
        )
    };
    let (mut l, mut r) = (0, 0);
    while l < lseq.len() || r < rhs.order.len() {
        if l < lseq.len() {
            match &lseq[l] {
                LItem::Opaque(v) => {
                    out.push((*v).clone());
                    l += 1;
                    continue;
                }
                LItem::Keyed(pe) if !rhs.by_key.contains_key(pe) => {
                    out.extend(merged(pe));
                    l += 1;
                    continue;
                }
                LItem::Keyed(pe) => {
                    if r < rhs.order.len() && *pe == rhs.order[r] {
                        out.extend(merged(pe));
                        l += 1;
                        r += 1;
                        next_shared = shared.next();
                        continue;
                    }
                    if next_shared.as_ref() != Some(pe) {
                        // A shared item the configuration places later.
                        l += 1;
                        continue;
                    }
                }
            }
        }
        if r < rhs.order.len() {
            let pe = &rhs.order[r];
            out.extend(merged(pe));
            r += 1;
            if next_shared.as_ref() == Some(pe) {
                next_shared = shared.next();
            }
        } else {
            // Only live items that the configuration names are left, and
            // they were all emitted in the configuration's order.
            l += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Removal

/// `value` without the fields of `set`: map keys, struct fields and list
/// items that are members of the set go (with everything below them), and
/// containers emptied by the removal go too (kube leaves them `null`, which
/// its typed objects then omit). Atomic values are never entered.
pub fn remove_fields(ty: Option<TypeRef<'_>>, value: &Value, set: &FieldSet) -> Value {
    remove_node(&resolve(ty, None), value, set).unwrap_or_else(|| Value::Object(Map::new()))
}

/// `None` when the value was emptied by the removal.
fn remove_node(node: &Node<'_>, value: &Value, set: &FieldSet) -> Option<Value> {
    if set.is_empty() {
        return Some(value.clone());
    }
    match (node, value) {
        (n, Value::Object(m)) if n.is_map_like() => {
            if m.is_empty() {
                return Some(value.clone());
            }
            let mut out = Map::new();
            for (k, v) in m {
                let pe = PathElement::Field(k.clone());
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                let below = set.with_prefix(&pe);
                if below.is_empty() {
                    out.insert(k.clone(), v.clone());
                    continue;
                }
                let (child, _) = n.member(k);
                if let Some(kept) = remove_node(&child, v, &below) {
                    out.insert(k.clone(), kept);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (Node::List(_, items), Value::Array(list)) => {
            if list.is_empty() {
                return Some(value.clone());
            }
            let item_node = node.item();
            let mut out = Vec::with_capacity(list.len());
            for v in list {
                let Some(pe) = item_element(items, v) else {
                    out.push(v.clone());
                    continue;
                };
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                let below = set.with_prefix(&pe);
                if below.is_empty() {
                    out.push(v.clone());
                } else if let Some(kept) = remove_node(&item_node, v, &below) {
                    out.push(kept);
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => Some(value.clone()),
    }
}

// ---------------------------------------------------------------------------
// Defaulted keys

/// Fills in the omitted key fields that the API defaults (the `protocol` of
/// container and service ports) and returns the paths of the fields added,
/// so that they can be left out of the applier's field set: kube identifies
/// such an item by the defaulted key without counting the key as applied.
pub fn fill_defaulted_keys(ty: Option<TypeRef<'_>>, value: &mut Value) -> FieldSet {
    let mut added = FieldSet::new();
    let mut path = Vec::new();
    fill_node(&resolve(ty, None), value, &mut path, &mut added);
    added
}

fn fill_node(node: &Node<'_>, value: &mut Value, path: &mut Path, added: &mut FieldSet) {
    match (node, value) {
        (n, Value::Object(m)) if n.is_map_like() => {
            for (k, v) in m.iter_mut() {
                let (child, _) = n.member(k);
                path.push(PathElement::Field(k.clone()));
                fill_node(&child, v, path, added);
                path.pop();
            }
        }
        (Node::List(_, items), Value::Array(list)) => {
            let item_node = node.item();
            for v in list.iter_mut() {
                if let (Items::Keys(keys), Value::Object(m)) = (items, &mut *v) {
                    let mut filled = Vec::new();
                    for (k, default) in keys {
                        if let (false, Some(d)) = (m.contains_key(k), default) {
                            m.insert(k.clone(), d.clone());
                            filled.push(k.clone());
                        }
                    }
                    if let Some(pe) = item_element(items, &*v) {
                        for k in filled {
                            path.push(pe.clone());
                            path.push(PathElement::Field(k));
                            added.insert(path);
                            path.pop();
                            path.pop();
                        }
                    }
                }
                if let Some(pe) = item_element(items, v) {
                    path.push(pe);
                    fill_node(&item_node, v, path, added);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

/// The field set of `value` ([`super::field_set`]) with items of
/// associative lists identified by their defaulted keys when they omit them,
/// the defaulted key fields themselves not being members.
pub(crate) fn keyed_field_set(ty: Option<TypeRef<'_>>, value: &Value) -> FieldSet {
    let mut filled = value.clone();
    let added = fill_defaulted_keys(ty, &mut filled);
    super::typed::field_set(ty, &filled).difference(&added)
}

// ---------------------------------------------------------------------------
// Schema errors of an applied configuration

/// What kube's conversion of an applied configuration to its typed form
/// rejects, as structured-merge-diff words it: fields a struct does not
/// declare (`.spec.foo: field not declared in schema`), items of an
/// associative list without a key field, and duplicated items.
pub fn schema_errors(ty: Option<TypeRef<'_>>, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut path = Vec::new();
    check_node(&resolve(ty, None), value, &mut path, &mut errors);
    errors
}

fn check_node(node: &Node<'_>, value: &Value, path: &mut Path, errors: &mut Vec<String>) {
    match (node, value) {
        (n, Value::Object(m)) if n.is_map_like() => {
            for (k, v) in m {
                let (child, declared) = n.member(k);
                path.push(PathElement::Field(k.clone()));
                if let Node::Struct(t) = n {
                    if !declared && !t.preserves_unknown_fields() {
                        errors.push(format!(
                            "{}: field not declared in schema",
                            super::apply::display_path(path)
                        ));
                        path.pop();
                        continue;
                    }
                }
                check_node(&child, v, path, errors);
                path.pop();
            }
        }
        (Node::List(_, items), Value::Array(list)) => {
            let item_node = node.item();
            let mut seen = BTreeSet::new();
            for (i, v) in list.iter().enumerate() {
                let at = super::apply::display_path(path);
                let Some(pe) = item_element(items, v) else {
                    let why = match (items, v) {
                        (Items::Keys(keys), Value::Object(m)) => {
                            let missing = keys
                                .iter()
                                .find(|(k, d)| d.is_none() && !m.contains_key(k))
                                .map(|(k, _)| k.as_str())
                                .unwrap_or("");
                            format!(
                                "associative list with keys has an element that omits key field {}",
                                crate::validation::go_quote(missing)
                            )
                        }
                        (Items::Keys(_), _) => {
                            "associative list with keys may only contain maps".to_string()
                        }
                        (Items::Set, _) => {
                            "associative list without keys has an element that's a map type"
                                .to_string()
                        }
                    };
                    errors.push(format!("{at}: element {i}: {why}"));
                    continue;
                };
                if !seen.insert(pe.clone()) {
                    errors.push(format!(
                        "{at}: duplicate entries for key {}",
                        super::apply::display_element(&pe)
                    ));
                    continue;
                }
                path.push(pe);
                check_node(&item_node, v, path, errors);
                path.pop();
            }
        }
        _ => {}
    }
}
