//! Strategic merge patch, as kube-apiserver applies it
//! (`k8s.io/apimachinery/pkg/util/strategicpatch`, server side:
//! `StrategicMergeMapPatch` with parallel lists merged and unmatched nulls
//! ignored).
//!
//! Semantics, per field, from the schema's `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key`:
//!
//! - maps merge recursively; `null` deletes a key; strategy `replace` on a
//!   map field replaces it wholesale;
//! - lists with strategy `merge` and a merge key merge element-wise by key,
//!   lists of primitives with `merge` are merged as sets; every other list is
//!   replaced by the patch;
//! - directives: `$patch: replace|delete` in maps and in elements of merging
//!   lists, `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`
//!   and `$retainKeys` (which is what clears the fields of `retainKeys`
//!   fields such as Deployment `spec.strategy` or Pod volumes: the strategy
//!   itself only tells clients to send the directive).
//!
//! Element order follows kube: `$setElementOrder` first, then the order of
//! the patch, then the order of the live list (items new to the list end up
//! before the remaining server-only items).
//!
//! Content that lands in the object without being merged (a field the object
//! does not have yet, a replaced list or map) is cleaned the way decoding
//! into kube's typed objects cleans it: `null` members and directive keys are
//! dropped, and so are elements carrying `$patch` where the field is new.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{gofmt, json_type_word, PatchError};
use crate::schema::{Shape, TypeRef};

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

const LIST_TYPE: &str = "[]interface {}";
const MAP_TYPE: &str = "map[string]interface {}";

// Messages of k8s.io/apimachinery/pkg/util/mergepatch.
const ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST: &str =
    "invalid patch format of setElementOrder list";
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";

type JsonMap = Map<String, Value>;
type Result<T> = std::result::Result<T, PatchError>;

/// Applies a strategic merge patch to `original`.
///
/// `ty` is the schema of the object (e.g. `schema::builtin().by_gvk(..)`).
/// Without one (custom resources, unknown kinds) no field has a patch
/// strategy, so lists are replaced and maps merged, directives still apply;
/// kube-apiserver refuses strategic merge patches for custom resources with
/// 415, which is the caller's decision.
///
/// The patch must be a JSON object (`null` is an empty patch); anything else
/// is the 400 kube-apiserver answers when it cannot decode the body.
pub fn apply_strategic_merge_patch(
    original: &Value,
    patch: &Value,
    ty: Option<TypeRef<'_>>,
) -> Result<Value> {
    check_patch(patch)?;
    apply_strategic_merge_patch_owned(original.clone(), patch.clone(), ty)
}

/// [`apply_strategic_merge_patch`] on owned values, saving the copies.
pub fn apply_strategic_merge_patch_owned(
    original: Value,
    patch: Value,
    ty: Option<TypeRef<'_>>,
) -> Result<Value> {
    check_patch(&patch)?;
    let Value::Object(patch) = patch else {
        // `null`: an empty patch.
        return Ok(original);
    };
    let original = match original {
        Value::Object(m) => m,
        _ => JsonMap::new(),
    };
    merge_map(original, patch, ty).map(Value::Object)
}

fn check_patch(patch: &Value) -> Result<()> {
    match patch {
        Value::Null | Value::Object(_) => Ok(()),
        other => Err(PatchError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_type_word(other)
        ))),
    }
}

// ---------------------------------------------------------------------------
// Errors

fn bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    PatchError::internal(format!(
        "expected a {expected}, but received a {}",
        gofmt::type_name(actual)
    ))
}

fn no_merge_key(map: &JsonMap, key: &str) -> PatchError {
    PatchError::internal(format!(
        "map: {} does not contain declared merge key: {key}",
        gofmt::v_map(map)
    ))
}

fn bad_patch_type(directive: &Value, map: &JsonMap) -> PatchError {
    PatchError::internal(format!(
        "unknown patch type: {} in map: {}",
        gofmt::s(directive),
        gofmt::v_map(map)
    ))
}

fn not_identical(lists: &[&[Value]]) -> PatchError {
    let rendered: Vec<String> = lists.iter().map(|l| gofmt::v_list(l)).collect();
    PatchError::internal(format!(
        "list element types are not identical: [{}]",
        rendered.join(" ")
    ))
}

// ---------------------------------------------------------------------------
// Schema lookups

/// The patch metadata of one field.
#[derive(Clone, Copy, Default)]
struct FieldMeta<'a> {
    ty: Option<TypeRef<'a>>,
    /// The strategy without `retainKeys`: `""`, `merge` or `replace`.
    strategy: &'a str,
    merge_key: &'a str,
}

/// Looks up the metadata of `key` in `ty`. Fields the schema does not know
/// have no strategy (kube errors on them, but they cannot occur in typed
/// objects there).
fn lookup<'a>(ty: Option<TypeRef<'a>>, key: &str) -> Result<FieldMeta<'a>> {
    let Some(ty) = ty else {
        return Ok(FieldMeta::default());
    };
    if let Some(field) = ty.field(key) {
        let strategy = split_strategy(field.patch_strategy.unwrap_or(""))?;
        return Ok(FieldMeta {
            ty: Some(field.ty),
            strategy,
            merge_key: field.patch_merge_key.unwrap_or(""),
        });
    }
    if ty.shape() == Shape::Map {
        return Ok(FieldMeta {
            ty: ty.values(),
            ..FieldMeta::default()
        });
    }
    Ok(FieldMeta::default())
}

/// Separates `retainKeys` from the other strategy of a field (at most one
/// of each).
fn split_strategy(strategies: &str) -> Result<&str> {
    let parts: Vec<&str> = if strategies.is_empty() {
        Vec::new()
    } else {
        strategies.split(',').collect()
    };
    match parts.as_slice() {
        [] => Ok(""),
        [one] if *one == RETAIN_KEYS_STRATEGY => Ok(""),
        [one] => Ok(one),
        [a, b] if *a == RETAIN_KEYS_STRATEGY => Ok(b),
        [a, b] if *b == RETAIN_KEYS_STRATEGY => Ok(a),
        _ => Err(PatchError::internal(format!(
            "unexpected patch strategy: [{}]",
            parts.join(" ")
        ))),
    }
}

// ---------------------------------------------------------------------------
// Value kinds (the Go types JSON decodes into)

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Int,
    Float,
    String,
    List,
    Map,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_i64() => Kind::Int,
        Value::Number(_) => Kind::Float,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::List,
        Value::Object(_) => Kind::Map,
    }
}

/// The common kind of the elements of some lists; lists of lists and mixed
/// lists are refused.
fn slice_element_kind(lists: &[&[Value]]) -> Result<Kind> {
    let mut prev = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let kind = kind_of(v);
        match prev {
            None if kind == Kind::List => {
                return Err(PatchError::unprocessable(ERR_NO_LIST_OF_LISTS))
            }
            None => prev = Some(kind),
            Some(p) if p != kind => return Err(not_identical(lists)),
            Some(_) => {}
        }
    }
    prev.ok_or_else(|| PatchError::internal("no elements in any of the given slices"))
}

// ---------------------------------------------------------------------------
// Cleaning content that is stored without being merged

fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE_MARKER
        || key == RETAIN_KEYS_DIRECTIVE
        || key.starts_with(SET_ELEMENT_ORDER_PREFIX)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
}

/// A patch value for a field the object does not have: nulls discarded,
/// maps carrying `$patch` dropped (kube's `removeDirectives`), other
/// directive keys removed. `None` means the value is dropped.
fn clean_new(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.get(DIRECTIVE_MARKER).is_some_and(|d| !d.is_null()) {
                return None;
            }
            Some(Value::Object(
                m.into_iter()
                    .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
                    .filter_map(|(k, v)| clean_new(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(a) => Some(Value::Array(clean_new_list(a))),
        other => Some(other),
    }
}

fn clean_new_list(list: Vec<Value>) -> Vec<Value> {
    list.into_iter().filter_map(clean_new).collect()
}

/// A patch value that replaces a field wholesale: nulls and directive keys
/// are dropped, as decoding it into a typed object would.
fn clean_raw(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(clean_raw_map(m)),
        Value::Array(a) => Value::Array(clean_raw_list(a)),
        other => other,
    }
}

fn clean_raw_map(m: JsonMap) -> JsonMap {
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .map(|(k, v)| (k, clean_raw(v)))
        .collect()
}

fn clean_raw_list(list: Vec<Value>) -> Vec<Value> {
    list.into_iter().map(clean_raw).collect()
}

// ---------------------------------------------------------------------------
// Maps

fn merge_map(
    mut original: JsonMap,
    mut patch: JsonMap,
    ty: Option<TypeRef<'_>>,
) -> Result<JsonMap> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
        let directive = directive.clone();
        return handle_directive_in_merge_map(&directive, patch);
    }
    apply_retain_keys_directive(&mut original, &mut patch)?;
    merge_set_element_order_lists(&mut original, &mut patch, ty)?;

    for (key, patch_v) in patch {
        let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            (
                extract_key(&key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?.to_string(),
                true,
            )
        } else {
            (key, false)
        };

        if patch_v.is_null() {
            original.shift_remove(&key);
            continue;
        }

        let Some(slot) = original.get_mut(&key) else {
            if !is_delete_list {
                if let Some(v) = clean_new(patch_v) {
                    original.insert(key, v);
                }
            }
            continue;
        };
        let current = std::mem::take(slot);
        match merge_value(current, patch_v, &key, ty, is_delete_list)? {
            Some(v) => {
                if let Some(slot) = original.get_mut(&key) {
                    *slot = v;
                }
            }
            None => {
                original.shift_remove(&key);
            }
        }
    }
    Ok(original)
}

/// Merges one member present in both the object and the patch. `None`
/// removes the member.
fn merge_value(
    current: Value,
    patch_v: Value,
    key: &str,
    ty: Option<TypeRef<'_>>,
    is_delete_list: bool,
) -> Result<Option<Value>> {
    if kind_of(&current) != kind_of(&patch_v) {
        if is_delete_list {
            return Ok(Some(current));
        }
        return Ok(clean_new(patch_v));
    }
    match (current, patch_v) {
        (Value::Object(om), Value::Object(pm)) => {
            let meta = lookup(ty, key)?;
            if meta.strategy == REPLACE_DIRECTIVE {
                Ok(Some(Value::Object(clean_raw_map(pm))))
            } else {
                Ok(Some(Value::Object(merge_map(om, pm, meta.ty)?)))
            }
        }
        (Value::Array(oa), Value::Array(pa)) => {
            let meta = lookup(ty, key)?;
            Ok(Some(Value::Array(merge_slice_handler(
                oa,
                pa,
                meta,
                is_delete_list,
            )?)))
        }
        (_, primitive) => Ok(Some(primitive)),
    }
}

/// A map whose patch carries `$patch`.
fn handle_directive_in_merge_map(directive: &Value, mut patch: JsonMap) -> Result<JsonMap> {
    match directive.as_str() {
        Some(REPLACE_DIRECTIVE) => {
            patch.shift_remove(DIRECTIVE_MARKER);
            Ok(clean_raw_map(patch))
        }
        Some(DELETE_DIRECTIVE) => Ok(JsonMap::new()),
        _ => Err(bad_patch_type(directive, &patch)),
    }
}

/// The field name after `prefix/`.
fn extract_key<'k>(key: &'k str, prefix: &str) -> Result<&'k str> {
    match key.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest),
        _ => Err(match prefix {
            DELETE_FROM_PRIMITIVE_LIST_PREFIX => {
                PatchError::bad_request(ERR_BAD_PATCH_FORMAT_FOR_PRIMITIVE_LIST)
            }
            SET_ELEMENT_ORDER_PREFIX => {
                PatchError::bad_request(ERR_BAD_PATCH_FORMAT_FOR_SET_ELEMENT_ORDER_LIST)
            }
            _ => PatchError::internal(format!("fail to find unknown prefix {prefix:?} in {key}")),
        }),
    }
}

/// `$retainKeys`: clears the members of `original` it does not list; every
/// member the patch sets must be listed.
fn apply_retain_keys_directive(original: &mut JsonMap, patch: &mut JsonMap) -> Result<()> {
    let Some(list) = patch.shift_remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(list) = list else {
        return Err(PatchError::bad_request(
            ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS,
        ));
    };
    let retained: HashSet<&str> = list.iter().filter_map(Value::as_str).collect();
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !retained.contains(k.as_str()) {
            return Err(PatchError::bad_request(
                ERR_BAD_PATCH_FORMAT_FOR_RETAIN_KEYS,
            ));
        }
    }
    original.retain(|k, _| retained.contains(k.as_str()));
    Ok(())
}

// ---------------------------------------------------------------------------
// $setElementOrder

fn merge_set_element_order_lists(
    original: &mut JsonMap,
    patch: &mut JsonMap,
    ty: Option<TypeRef<'_>>,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.shift_remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type(LIST_TYPE, &order));
        };
        let field = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?.to_string();

        // Both lists are taken out: the field of the object is rewritten
        // below and the one of the patch is consumed here (and removed).
        let original_list = take_list(original, &field)?;
        let patch_list = take_list(patch, &field)?;

        let meta = lookup(ty, &field)?;
        let merge_key = meta.merge_key;
        validate_patch_with_set_order_list(
            patch_list.as_deref().unwrap_or(&[]),
            &order,
            merge_key,
        )?;
        if original_list.is_none() && patch_list.is_none() {
            continue;
        }

        let no_items = Vec::new();
        let kind = slice_element_kind(&[
            original_list.as_ref().unwrap_or(&no_items),
            patch_list.as_ref().unwrap_or(&no_items),
        ])?;
        if !merge_key.is_empty() {
            for (i, v) in order.iter().enumerate() {
                let Value::Object(m) = v else {
                    return Err(PatchError::internal(format!(
                        "value for key {i} is not a map"
                    )));
                };
                if kind == Kind::Map && !m.contains_key(merge_key) {
                    return Err(no_merge_key(m, merge_key));
                }
            }
        }
        if kind == Kind::Map {
            check_merge_keys(original_list.as_ref().unwrap_or(&no_items), merge_key)?;
        }
        let order_positions = Positions::of(&order, merge_key, kind);
        let server_positions =
            Positions::of(original_list.as_ref().unwrap_or(&no_items), merge_key, kind);

        let merged = match (original_list, patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => clean_new_list(p),
            (Some(o), Some(p)) => merge_slice_handler(o, p, meta, false)?,
            (None, None) => continue,
        };

        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives(merged, &order_positions)
        } else {
            partition_maps(merged, &order_positions, merge_key)?
        };
        let both = normalize_element_order(
            patch_items,
            server_only,
            &order_positions,
            &server_positions,
            merge_key,
            kind,
        )?;
        patch.shift_remove(&field);
        original.insert(field, Value::Array(both));
    }
    Ok(())
}

/// Removes a list member from a map; it must be a list if present.
fn take_list(map: &mut JsonMap, field: &str) -> Result<Option<Vec<Value>>> {
    match map.get_mut(field) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(std::mem::take(a))),
        Some(other) => Err(bad_arg_type(LIST_TYPE, other)),
    }
}

/// The patch list (minus deletions and directives) must be a subsequence of
/// the `$setElementOrder` list.
fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    order: &[Value],
    merge_key: &str,
) -> Result<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let mut non_delete: Vec<&Value> = Vec::with_capacity(patch_list.len());
    if merge_key.is_empty() {
        non_delete.extend(patch_list);
    } else {
        for v in patch_list {
            let Value::Object(m) = v else {
                return Err(bad_arg_type(MAP_TYPE, v));
            };
            if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
                non_delete.push(v);
            }
        }
    }

    let (mut pi, mut oi) = (0, 0);
    while pi < non_delete.len() && oi < order.len() {
        let item = non_delete[pi];
        if item
            .as_object()
            .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
        {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(item, &order[oi], merge_key)? {
            pi += 1;
        }
        oi += 1;
    }
    if pi < non_delete.len() && oi >= order.len() {
        return Err(PatchError::internal(format!(
            "the order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER_PREFIX} list:\n{}",
            gofmt::v_list(patch_list),
            gofmt::v_list(order)
        )));
    }
    Ok(())
}

fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let Value::Object(l) = left else {
        return Err(bad_arg_type(MAP_TYPE, left));
    };
    let Value::Object(r) = right else {
        return Err(bad_arg_type(MAP_TYPE, right));
    };
    let lv = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
    let rv = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
    Ok(lv == rv)
}

/// Every element must be a map holding the merge key.
fn check_merge_keys(list: &[Value], merge_key: &str) -> Result<()> {
    for v in list {
        let Value::Object(m) = v else {
            return Err(bad_arg_type(MAP_TYPE, v));
        };
        if !m.contains_key(merge_key) {
            return Err(no_merge_key(m, merge_key));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Lists

fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: FieldMeta<'_>,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    // Deletion lists delete whatever the strategy of the field.
    if meta.strategy == MERGE_DIRECTIVE || is_delete_list {
        merge_slice(original, patch, meta, is_delete_list)
    } else {
        Ok(clean_raw_list(patch))
    }
}

fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    meta: FieldMeta<'_>,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = slice_element_kind(&[&original, &patch])?;

    if kind != Kind::Map {
        if is_delete_list {
            return Ok(delete_from_slice(original, &patch));
        }
        let patch_positions = Positions::of(&patch, "", kind);
        let server_positions = Positions::of(&original, "", kind);
        let keep: Vec<bool> = {
            let mut seen = HashSet::with_capacity(original.len() + patch.len());
            original
                .iter()
                .chain(patch.iter())
                .map(|v| seen.insert(Identity(v)))
                .collect()
        };
        let merged: Vec<Value> = original
            .into_iter()
            .chain(patch)
            .zip(keep)
            .filter_map(|(v, keep)| keep.then_some(v))
            .collect();
        let (patch_items, server_only) = partition_primitives(merged, &patch_positions);
        return normalize_element_order(
            patch_items,
            server_only,
            &patch_positions,
            &server_positions,
            "",
            kind,
        );
    }

    let merge_key = meta.merge_key;
    if merge_key.is_empty() {
        let name = meta.ty.and_then(|t| t.name()).unwrap_or("list");
        return Err(PatchError::internal(format!(
            "cannot merge lists without merge key for {name}"
        )));
    }
    let (original, patch) = merge_slice_with_special_elements(original, patch, merge_key)?;
    check_merge_keys(&patch, merge_key)?;
    check_merge_keys(&original, merge_key)?;
    let patch_positions = Positions::of(&patch, merge_key, kind);
    let server_positions = Positions::of(&original, merge_key, kind);
    let elem = meta.ty.and_then(|t| t.items());
    let merged = merge_slice_without_special_elements(original, patch, merge_key, elem)?;
    let (patch_items, server_only) = partition_maps(merged, &patch_positions, merge_key)?;
    normalize_element_order(
        patch_items,
        server_only,
        &patch_positions,
        &server_positions,
        merge_key,
        kind,
    )
}

/// Applies `$patch: delete` and `$patch: replace` elements; returns the
/// updated original and the remaining patch elements.
fn merge_slice_with_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        let Some(directive) = v.get(DIRECTIVE_MARKER) else {
            plain.push(v);
            continue;
        };
        let Value::Object(m) = &v else {
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(target) = m.get(merge_key) else {
                    return Err(no_merge_key(m, merge_key));
                };
                original.retain(|e| e.get(merge_key) != Some(target));
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => {
                return Err(PatchError::internal(
                    "merging lists cannot yet be specified in the patch",
                ))
            }
            _ => return Err(bad_patch_type(directive, m)),
        }
    }
    if replace {
        return Ok((clean_raw_list(plain), Vec::new()));
    }
    Ok((original, plain))
}

/// Merges each patch element into the element with the same merge key, or
/// appends it.
fn merge_slice_without_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
    elem: Option<TypeRef<'_>>,
) -> Result<Vec<Value>> {
    for v in patch {
        let Value::Object(pm) = v else {
            return Err(bad_arg_type(MAP_TYPE, &v));
        };
        let Some(target) = pm.get(merge_key) else {
            return Err(no_merge_key(&pm, merge_key));
        };
        let found = original
            .iter()
            .position(|e| e.get(merge_key) == Some(target));
        match found {
            Some(i) => {
                let current = match std::mem::take(&mut original[i]) {
                    Value::Object(m) => m,
                    _ => JsonMap::new(),
                };
                original[i] = Value::Object(merge_map(current, pm, elem)?);
            }
            None => {
                if let Some(v) = clean_new(Value::Object(pm)) {
                    original.push(v);
                }
            }
        }
    }
    Ok(original)
}

fn delete_from_slice(current: Vec<Value>, to_delete: &[Value]) -> Vec<Value> {
    let doomed: HashSet<Identity<'_>> = to_delete
        .iter()
        .map(|v| identity(v, "", Kind::Null))
        .collect();
    current
        .into_iter()
        .filter(|v| !doomed.contains(&identity(v, "", Kind::Null)))
        .collect()
}

// ---------------------------------------------------------------------------
// Ordering

/// A hashable view of a JSON value, equal exactly when the values are
/// (integers and floats stay distinct, as in Go).
#[derive(Clone, Copy)]
struct Identity<'v>(&'v Value);

impl PartialEq for Identity<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Identity<'_> {}

impl std::hash::Hash for Identity<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        hash_value(self.0, state);
    }
}

fn hash_value<H: std::hash::Hasher>(v: &Value, state: &mut H) {
    use std::hash::Hash;
    match v {
        Value::Null => 0u8.hash(state),
        Value::Bool(b) => (1u8, b).hash(state),
        Value::Number(n) => {
            2u8.hash(state);
            if let Some(i) = n.as_i64() {
                (0u8, i).hash(state);
            } else if let Some(u) = n.as_u64() {
                (1u8, u).hash(state);
            } else {
                // Equal floats must hash alike: fold -0.0 into 0.0.
                let f = n.as_f64().unwrap_or(0.0);
                let bits = if f == 0.0 { 0 } else { f.to_bits() };
                (2u8, bits).hash(state);
            }
        }
        Value::String(s) => (3u8, s).hash(state),
        Value::Array(a) => {
            (4u8, a.len()).hash(state);
            a.iter().for_each(|v| hash_value(v, state));
        }
        // Map equality ignores member order; hash only the size.
        Value::Object(m) => (5u8, m.len()).hash(state),
    }
}

/// The identity of a list element: the element itself for primitives, the
/// merge key value for maps.
fn identity<'v>(v: &'v Value, merge_key: &str, kind: Kind) -> Identity<'v> {
    const NULL: &Value = &Value::Null;
    if kind == Kind::Map {
        Identity(v.get(merge_key).unwrap_or(NULL))
    } else {
        Identity(v)
    }
}

fn hash_of(id: Identity<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
}

/// The first position of each identity in a list, kept apart from the list
/// so that the list itself can be consumed.
struct Positions {
    /// Identity hash → indexes into `keys`.
    buckets: HashMap<u64, Vec<usize>>,
    /// (identity, first position), in order of first appearance.
    keys: Vec<(Value, usize)>,
    merge_key: String,
    kind: Kind,
}

impl Positions {
    fn of(list: &[Value], merge_key: &str, kind: Kind) -> Positions {
        let mut positions = Positions {
            buckets: HashMap::with_capacity(list.len()),
            keys: Vec::with_capacity(list.len()),
            merge_key: merge_key.to_string(),
            kind,
        };
        for (i, v) in list.iter().enumerate() {
            let id = identity(v, merge_key, kind);
            if positions.find(id).is_none() {
                let slot = positions.keys.len();
                positions.keys.push((id.0.clone(), i));
                positions.buckets.entry(hash_of(id)).or_default().push(slot);
            }
        }
        positions
    }

    fn find(&self, id: Identity<'_>) -> Option<usize> {
        self.buckets
            .get(&hash_of(id))?
            .iter()
            .filter_map(|&slot| self.keys.get(slot))
            .find(|(key, _)| key == id.0)
            .map(|&(_, position)| position)
    }

    /// The position of the element's identity in the list.
    fn get(&self, v: &Value) -> Option<usize> {
        self.find(identity(v, &self.merge_key, self.kind))
    }
}

/// Splits primitives into those present in `by` and the others.
fn partition_primitives(items: Vec<Value>, by: &Positions) -> (Vec<Value>, Vec<Value>) {
    items.into_iter().partition(|v| by.get(v).is_some())
}

/// Splits maps into those whose merge key appears in `by` and the others.
fn partition_maps(
    items: Vec<Value>,
    by: &Positions,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut patch = Vec::with_capacity(items.len());
    let mut server_only = Vec::with_capacity(items.len());
    for v in items {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type(MAP_TYPE, &v));
        };
        let Some(target) = m.get(merge_key) else {
            return Err(no_merge_key(m, merge_key));
        };
        if by.find(Identity(target)).is_some() {
            patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((patch, server_only))
}

/// Orders patch items by the patch (or `$setElementOrder`) order and
/// server-only items by the live order, then interleaves them.
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &Positions,
    server_order: &Positions,
    merge_key: &str,
    kind: Kind,
) -> Result<Vec<Value>> {
    let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    Ok(merge_sorted_slice(server_only, patch_items, server_order))
}

fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &Positions,
    merge_key: &str,
    kind: Kind,
) -> Result<Vec<Value>> {
    let mut to_sort = to_sort;
    let mut to_delete = Vec::new();
    if kind == Kind::Map {
        check_merge_keys(&to_sort, merge_key)?;
        let (keep, delete): (Vec<Value>, Vec<Value>) = to_sort.into_iter().partition(|v| {
            v.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE)
        });
        to_sort = keep;
        to_delete = delete;
    }
    let mut keyed: Vec<(Option<usize>, Value)> =
        to_sort.into_iter().map(|v| (order.get(&v), v)).collect();
    stable_sort_by_position(&mut keyed);
    let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    out.extend(to_delete);
    Ok(out)
}

/// Go's `sort.SliceStable` with kube's comparator: `a < b` when both have a
/// position and `a`'s is smaller, and always "less" when either has none.
fn stable_sort_by_position(items: &mut [(Option<usize>, Value)]) {
    if items.iter().all(|(p, _)| p.is_some()) {
        // A consistent order: any stable sort gives Go's result.
        items.sort_by_key(|(p, _)| *p);
        return;
    }
    if items.len() <= 20 {
        // Go sorts slices this short with a plain insertion sort.
        for i in 1..items.len() {
            let mut j = i;
            while j > 0 && position_less(items[j].0, items[j - 1].0) {
                items.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        // Elements without a position do not occur in well-formed patches;
        // keep the cost bounded and the result deterministic.
        items.sort_by_key(|(p, _)| p.unwrap_or(usize::MAX));
    }
}

fn position_less(a: Option<usize>, b: Option<usize>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x < y,
        _ => true,
    }
}

/// Interleaves server-only items (`left`) with patch items (`right`): a
/// server-only item goes first only when both are in the live list and it
/// comes earlier there.
fn merge_sorted_slice(left: Vec<Value>, right: Vec<Value>, server_order: &Positions) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (server_order.get(l), server_order.get(r)),
                (Some(a), Some(b)) if a < b
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::tests::arb_json;
    use crate::schema::builtin;
    use proptest::prelude::*;
    use serde_json::json;

    fn pod() -> Option<TypeRef<'static>> {
        builtin().by_gvk("", "v1", "Pod")
    }

    fn deployment() -> Option<TypeRef<'static>> {
        builtin().by_gvk("apps", "v1", "Deployment")
    }

    fn pod_with(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    struct Case {
        name: &'static str,
        ty: Option<TypeRef<'static>>,
        original: Value,
        patch: Value,
        expected: Value,
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "containers merge by name",
                ty: pod(),
                original: pod_with(json!({"containers": [
                    {"name": "a", "image": "a:1"},
                    {"name": "b", "image": "b:1"}
                ]})),
                patch: json!({"spec": {"containers": [
                    {"name": "b", "image": "b:2"},
                    {"name": "c", "image": "c:1"}
                ]}}),
                expected: pod_with(json!({"containers": [
                    {"name": "a", "image": "a:1"},
                    {"name": "b", "image": "b:2"},
                    {"name": "c", "image": "c:1"}
                ]})),
            },
            Case {
                name: "a new element goes before server-only elements",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
                patch: json!({"spec": {"containers": [{"name": "c"}]}}),
                expected: pod_with(
                    json!({"containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}),
                ),
            },
            Case {
                name: "patch order wins over live order",
                ty: pod(),
                original: pod_with(json!({"containers": [
                    {"name": "a"}, {"name": "b", "image": "b"}, {"name": "c"}
                ]})),
                patch: json!({"spec": {"containers": [
                    {"name": "c", "image": "c"}, {"name": "a", "image": "a"}
                ]}}),
                expected: pod_with(json!({"containers": [
                    {"name": "b", "image": "b"}, {"name": "c", "image": "c"}, {"name": "a", "image": "a"}
                ]})),
            },
            Case {
                name: "env merges by name inside a container",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a", "env": [
                    {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
                ]}]})),
                patch: json!({"spec": {"containers": [{"name": "a", "env": [
                    {"name": "B", "value": "3"}
                ]}]}}),
                expected: pod_with(json!({"containers": [{"name": "a", "env": [
                    {"name": "A", "value": "1"}, {"name": "B", "value": "3"}
                ]}]})),
            },
            Case {
                name: "ports merge by containerPort",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a", "ports": [
                    {"containerPort": 80, "protocol": "TCP"}
                ]}]})),
                patch: json!({"spec": {"containers": [{"name": "a", "ports": [
                    {"containerPort": 80, "name": "http"},
                    {"containerPort": 443}
                ]}]}}),
                expected: pod_with(json!({"containers": [{"name": "a", "ports": [
                    {"containerPort": 80, "protocol": "TCP", "name": "http"},
                    {"containerPort": 443}
                ]}]})),
            },
            Case {
                name: "volumes: $retainKeys clears the other volume source",
                ty: pod(),
                original: pod_with(json!({"volumes": [
                    {"name": "v", "emptyDir": {}},
                    {"name": "w", "emptyDir": {}}
                ]})),
                patch: json!({"spec": {"volumes": [
                    {"name": "v", "$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}}
                ]}}),
                expected: pod_with(json!({"volumes": [
                    {"name": "v", "configMap": {"name": "cm"}},
                    {"name": "w", "emptyDir": {}}
                ]})),
            },
            Case {
                name: "deployment strategy: $retainKeys drops rollingUpdate",
                ty: deployment(),
                original: json!({"spec": {"replicas": 1, "strategy": {
                    "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}
                }}}),
                patch: json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                expected: json!({"spec": {"replicas": 1, "strategy": {"type": "Recreate"}}}),
            },
            Case {
                name: "deployment strategy without $retainKeys merges",
                ty: deployment(),
                original: json!({"spec": {"strategy": {
                    "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}
                }}}),
                patch: json!({"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 0}}}}),
                expected: json!({"spec": {"strategy": {
                    "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}
                }}}),
            },
            Case {
                name: "$patch: delete removes one container",
                ty: pod(),
                original: pod_with(
                    json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}),
                ),
                patch: json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
                expected: pod_with(json!({"containers": [{"name": "b"}]})),
            },
            Case {
                name: "$patch: replace replaces a list",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
                patch: json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": null}]}}),
                expected: pod_with(json!({"containers": [{"name": "c"}]})),
            },
            Case {
                name: "$patch: replace alone empties a list",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a"}]})),
                patch: json!({"spec": {"containers": [{"$patch": "replace"}]}}),
                expected: pod_with(json!({"containers": []})),
            },
            Case {
                name: "$patch: replace replaces a map",
                ty: pod(),
                original: json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                patch: json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
                expected: json!({"metadata": {"labels": {"c": "3"}}}),
            },
            Case {
                name: "$patch: delete empties a map",
                ty: pod(),
                original: json!({"metadata": {"labels": {"a": "1"}, "name": "x"}}),
                patch: json!({"metadata": {"labels": {"$patch": "delete"}}}),
                expected: json!({"metadata": {"labels": {}, "name": "x"}}),
            },
            Case {
                name: "$deleteFromPrimitiveList on finalizers",
                ty: pod(),
                original: json!({"metadata": {"finalizers": ["a", "b", "c", "b"]}}),
                patch: json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zz"]}}),
                expected: json!({"metadata": {"finalizers": ["a", "c"]}}),
            },
            Case {
                name: "$deleteFromPrimitiveList on a missing list adds nothing",
                ty: pod(),
                original: json!({"metadata": {"name": "x"}}),
                patch: json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
                expected: json!({"metadata": {"name": "x"}}),
            },
            Case {
                name: "$deleteFromPrimitiveList works on a replace list too",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a", "args": ["x", "y", "z"]}]})),
                patch: json!({"spec": {"containers": [{"name": "a", "$deleteFromPrimitiveList/args": ["y"]}]}}),
                expected: pod_with(json!({"containers": [{"name": "a", "args": ["x", "z"]}]})),
            },
            Case {
                name: "$setElementOrder orders a merged list",
                ty: pod(),
                original: pod_with(
                    json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
                ),
                patch: json!({"spec": {
                    "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
                    "containers": [{"name": "a", "image": "x"}]
                }}),
                expected: pod_with(json!({"containers": [
                    {"name": "c"}, {"name": "a", "image": "x"}, {"name": "b"}
                ]})),
            },
            Case {
                name: "$setElementOrder with additions",
                ty: pod(),
                original: pod_with(
                    json!({"containers": [{"name": "1"}, {"name": "2", "image": "2"}]}),
                ),
                patch: json!({"spec": {
                    "$setElementOrder/containers": [{"name": "4"}, {"name": "1"}, {"name": "2"}, {"name": "3"}],
                    "containers": [{"name": "4", "image": "4"}, {"name": "3", "image": "3"}]
                }}),
                expected: pod_with(json!({"containers": [
                    {"name": "4", "image": "4"}, {"name": "1"}, {"name": "2", "image": "2"}, {"name": "3", "image": "3"}
                ]})),
            },
            Case {
                name: "$setElementOrder alone reorders primitives",
                ty: pod(),
                original: json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
                patch: json!({"metadata": {"$setElementOrder/finalizers": ["c", "x", "a"]}}),
                expected: json!({"metadata": {"finalizers": ["b", "c", "a"]}}),
            },
            Case {
                name: "$setElementOrder with deletions of primitives",
                ty: pod(),
                original: json!({"metadata": {"finalizers": ["a", "b", "c", "d"]}}),
                patch: json!({"metadata": {
                    "$setElementOrder/finalizers": ["a", "b", "e"],
                    "$deleteFromPrimitiveList/finalizers": ["c"],
                    "finalizers": ["e"]
                }}),
                expected: json!({"metadata": {"finalizers": ["a", "b", "e", "d"]}}),
            },
            Case {
                name: "null deletes map keys and fields",
                ty: deployment(),
                original: json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 3, "paused": true}}),
                patch: json!({"metadata": {"labels": {"a": null, "zz": null}}, "spec": {"replicas": null}}),
                expected: json!({"metadata": {"labels": {"b": "2"}}, "spec": {"paused": true}}),
            },
            Case {
                name: "primitive list without strategy is replaced",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a", "args": ["1", "2"]}]})),
                patch: json!({"spec": {"containers": [{"name": "a", "args": ["3"]}]}}),
                expected: pod_with(json!({"containers": [{"name": "a", "args": ["3"]}]})),
            },
            Case {
                name: "primitive list with merge strategy is a set union",
                ty: pod(),
                original: json!({"metadata": {"finalizers": ["a", "b"]}}),
                patch: json!({"metadata": {"finalizers": ["b", "c"]}}),
                expected: json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
            },
            Case {
                name: "primitive set keeps patch order",
                ty: pod(),
                original: json!({"metadata": {"finalizers": ["1", "2", "3"]}}),
                patch: json!({"metadata": {"finalizers": ["3", "1"]}}),
                expected: json!({"metadata": {"finalizers": ["2", "3", "1"]}}),
            },
            Case {
                name: "atomic list of objects is replaced",
                ty: pod(),
                original: pod_with(json!({"tolerations": [{"key": "a"}, {"key": "b"}]})),
                patch: json!({"spec": {"tolerations": [{"key": "c"}]}}),
                expected: pod_with(json!({"tolerations": [{"key": "c"}]})),
            },
            Case {
                name: "replace strategy on a map field",
                ty: builtin().by_gvk("policy", "v1", "PodDisruptionBudget"),
                original: json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}}),
                patch: json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}}),
                expected: json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}}),
            },
            Case {
                name: "new fields are cleaned of nulls and directives",
                ty: pod(),
                original: json!({"metadata": {"name": "x"}}),
                patch: json!({"spec": {
                    "nodeName": null,
                    "containers": [
                        {"name": "a", "image": null, "$setElementOrder/env": [{"name": "E"}], "env": [{"name": "E"}]},
                        {"name": "gone", "$patch": "delete"}
                    ]
                }}),
                expected: json!({"metadata": {"name": "x"}, "spec": {
                    "containers": [{"name": "a", "env": [{"name": "E"}]}]
                }}),
            },
            Case {
                name: "type changes replace the value",
                ty: None,
                original: json!({"a": {"b": 1}, "c": [1], "d": "x"}),
                patch: json!({"a": "s", "c": {"k": null, "v": 1}, "d": 2}),
                expected: json!({"a": "s", "c": {"v": 1}, "d": 2}),
            },
            Case {
                name: "no schema: maps merge and lists are replaced",
                ty: None,
                original: json!({"spec": {"list": [{"name": "a"}], "map": {"a": 1}}, "keep": true}),
                patch: json!({"spec": {"list": [{"name": "b"}], "map": {"b": 2}}}),
                expected: json!({"spec": {"list": [{"name": "b"}], "map": {"a": 1, "b": 2}}, "keep": true}),
            },
            Case {
                name: "unknown kind keeps directives working",
                ty: builtin().by_gvk("example.com", "v1", "Widget"),
                original: json!({"spec": {"a": 1, "b": 2}}),
                patch: json!({"spec": {"$patch": "replace", "c": 3}}),
                expected: json!({"spec": {"c": 3}}),
            },
            Case {
                name: "empty merging lists stay empty",
                ty: pod(),
                original: json!({"metadata": {"finalizers": []}}),
                patch: json!({"metadata": {"finalizers": []}}),
                expected: json!({"metadata": {"finalizers": []}}),
            },
            Case {
                name: "deletion list on a null field leaves it alone",
                ty: pod(),
                original: json!({"metadata": {"finalizers": null}}),
                patch: json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                expected: json!({"metadata": {"finalizers": null}}),
            },
            Case {
                name: "$setElementOrder may name elements the list lacks",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "1"}, {"name": "3"}]})),
                patch: json!({"spec": {
                    "$setElementOrder/containers": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
                    "containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}]
                }}),
                expected: pod_with(json!({"containers": [
                    {"name": "3", "image": "3"}, {"name": "1", "image": "1"}
                ]})),
            },
            Case {
                name: "a list the object lacks is taken from the patch, ordered",
                ty: pod(),
                original: json!({"metadata": {"name": "x"}}),
                patch: json!({"metadata": {
                    "$setElementOrder/finalizers": ["b", "a"],
                    "finalizers": ["b", "a"]
                }}),
                expected: json!({"metadata": {"name": "x", "finalizers": ["b", "a"]}}),
            },
            Case {
                name: "$setElementOrder on a replaced list",
                ty: pod(),
                original: pod_with(json!({"containers": [{"name": "a", "args": ["x"]}]})),
                patch: json!({"spec": {"containers": [{
                    "name": "a",
                    "$setElementOrder/args": ["b", "a"],
                    "args": ["b", "a"]
                }]}}),
                expected: pod_with(json!({"containers": [{"name": "a", "args": ["b", "a"]}]})),
            },
            Case {
                name: "integers and floats are different set members",
                ty: None,
                original: json!({"metadata": {"finalizers": [1]}}),
                patch: json!({"metadata": {"finalizers": [1.5]}}),
                expected: json!({"metadata": {"finalizers": [1.5]}}),
            },
            Case {
                name: "null patch is a no-op",
                ty: pod(),
                original: json!({"a": 1}),
                patch: Value::Null,
                expected: json!({"a": 1}),
            },
        ]
    }

    #[test]
    fn table() {
        for case in cases() {
            let got = apply_strategic_merge_patch(&case.original, &case.patch, case.ty)
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert_eq!(got, case.expected, "{}", case.name);
        }
    }

    struct ErrCase {
        name: &'static str,
        original: Value,
        patch: Value,
        code: u16,
        message: &'static str,
    }

    #[test]
    fn errors_match_kube() {
        let containers = pod_with(json!({"containers": [{"name": "a", "image": "x"}]}));
        let cases = vec![
            ErrCase {
                name: "missing merge key",
                original: containers.clone(),
                patch: json!({"spec": {"containers": [{"image": "nginx"}]}}),
                code: 500,
                message: "map: map[image:nginx] does not contain declared merge key: name",
            },
            ErrCase {
                name: "delete without merge key",
                original: containers.clone(),
                patch: json!({"spec": {"containers": [{"$patch": "delete"}]}}),
                code: 500,
                message: "map: map[$patch:delete] does not contain declared merge key: name",
            },
            ErrCase {
                name: "unknown $patch in a map",
                original: json!({"metadata": {"labels": {"a": "b"}}}),
                patch: json!({"metadata": {"labels": {"$patch": "merge"}}}),
                code: 500,
                message: "unknown patch type: merge in map: map[$patch:merge]",
            },
            ErrCase {
                name: "unknown $patch in a list element",
                original: containers.clone(),
                patch: json!({"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}}),
                code: 500,
                message: "unknown patch type: bogus in map: map[$patch:bogus name:a]",
            },
            ErrCase {
                name: "$patch: merge in a list",
                original: containers.clone(),
                patch: json!({"spec": {"containers": [{"$patch": "merge"}]}}),
                code: 500,
                message: "merging lists cannot yet be specified in the patch",
            },
            ErrCase {
                name: "malformed $deleteFromPrimitiveList",
                original: json!({}),
                patch: json!({"$deleteFromPrimitiveList": ["a"]}),
                code: 400,
                message: "invalid patch format of primitive list",
            },
            ErrCase {
                name: "malformed $setElementOrder",
                original: json!({}),
                patch: json!({"$setElementOrderX/finalizers": ["a"]}),
                code: 400,
                message: "invalid patch format of setElementOrder list",
            },
            ErrCase {
                name: "$setElementOrder is not a list",
                original: json!({}),
                patch: json!({"$setElementOrder/finalizers": {"a": 1}}),
                code: 500,
                message: "expected a []interface {}, but received a map[string]interface {}",
            },
            ErrCase {
                name: "$setElementOrder does not match the patch",
                original: json!({"metadata": {"finalizers": ["a", "b"]}}),
                patch: json!({"metadata": {"$setElementOrder/finalizers": ["a", "b"], "finalizers": ["b", "a"]}}),
                code: 500,
                message:
                    "the order in patch list:\n[b a]\n doesn't match $setElementOrder list:\n[a b]",
            },
            ErrCase {
                name: "$retainKeys is not a list",
                original: json!({"spec": {"strategy": {"type": "Recreate"}}}),
                patch: json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
                code: 400,
                message: "invalid patch format of retainKeys",
            },
            ErrCase {
                name: "$retainKeys misses a patched field",
                original: json!({"spec": {"strategy": {"type": "Recreate"}}}),
                patch: json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
                code: 400,
                message: "invalid patch format of retainKeys",
            },
            ErrCase {
                name: "lists of lists",
                original: json!({"metadata": {"finalizers": [["a"]]}}),
                patch: json!({"metadata": {"finalizers": [["b"]]}}),
                code: 422,
                message: "the server rejected our request due to an error in our request",
            },
            ErrCase {
                name: "mixed element types",
                original: json!({"metadata": {"finalizers": ["a"]}}),
                patch: json!({"metadata": {"finalizers": [1]}}),
                code: 500,
                message: "list element types are not identical: [[a] [1]]",
            },
            ErrCase {
                name: "patch is an array",
                original: json!({}),
                patch: json!([1]),
                code: 400,
                message:
                    "json: cannot unmarshal array into Go value of type map[string]interface {}",
            },
            ErrCase {
                name: "patch is a string",
                original: json!({}),
                patch: json!("x"),
                code: 400,
                message:
                    "json: cannot unmarshal string into Go value of type map[string]interface {}",
            },
        ];
        for case in cases {
            let ty = if case.name.starts_with("$retainKeys") {
                deployment()
            } else {
                pod()
            };
            let err =
                apply_strategic_merge_patch(&case.original, &case.patch, ty).expect_err(case.name);
            assert_eq!(err.code(), case.code, "{}: {err}", case.name);
            assert_eq!(err.message, case.message, "{}", case.name);
        }
    }

    #[test]
    fn internal_errors_become_reasonless_500s() {
        let err = apply_strategic_merge_patch(
            &pod_with(json!({"containers": [{"name": "a"}]})),
            &json!({"spec": {"containers": [{"image": "nginx"}]}}),
            pod(),
        )
        .unwrap_err();
        let status = err.to_status();
        assert_eq!(status.code, 500);
        assert_eq!(status.reason, "");
        assert!(status
            .message
            .contains("does not contain declared merge key"));
    }

    #[test]
    fn original_is_not_modified_and_merge_is_repeatable() {
        let original = pod_with(json!({"containers": [{"name": "a", "image": "1"}]}));
        let patch = json!({"spec": {"containers": [{"name": "a", "image": "2"}]}});
        let once = apply_strategic_merge_patch(&original, &patch, pod()).unwrap();
        let twice = apply_strategic_merge_patch(&once, &patch, pod()).unwrap();
        assert_eq!(once, twice);
        assert_eq!(original["spec"]["containers"][0]["image"], "1");
        let owned = apply_strategic_merge_patch_owned(original.clone(), patch, pod()).unwrap();
        assert_eq!(owned, once);
        assert_eq!(
            apply_strategic_merge_patch_owned(original.clone(), Value::Null, pod()).unwrap(),
            original
        );
    }

    proptest! {
        #[test]
        fn never_panics(original in arb_json(), patch in arb_json()) {
            let _ = apply_strategic_merge_patch(&original, &patch, None);
            let _ = apply_strategic_merge_patch(&original, &patch, pod());
            let _ = apply_strategic_merge_patch(&original, &patch, deployment());
        }

        #[test]
        fn never_panics_on_pod_shaped_input(
            containers in prop::collection::vec(arb_json(), 0..4),
            patch_containers in prop::collection::vec(arb_json(), 0..4),
            order in prop::collection::vec(arb_json(), 0..4),
            finalizers in arb_json(),
        ) {
            let original = json!({
                "metadata": {"finalizers": finalizers.clone()},
                "spec": {"containers": containers}
            });
            let patch = json!({
                "metadata": {"$setElementOrder/finalizers": order.clone(), "$deleteFromPrimitiveList/finalizers": finalizers},
                "spec": {"$setElementOrder/containers": order, "containers": patch_containers}
            });
            let _ = apply_strategic_merge_patch(&original, &patch, pod());
        }

        #[test]
        fn empty_patch_is_identity(original in arb_json()) {
            if original.is_object() {
                for ty in [None, pod(), deployment()] {
                    let got = apply_strategic_merge_patch(&original, &json!({}), ty).unwrap();
                    prop_assert_eq!(&got, &original);
                }
            }
        }
    }
}
