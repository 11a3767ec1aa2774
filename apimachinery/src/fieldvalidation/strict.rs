//! Unknown and duplicate fields: which ones, in which order, in kube's words.

use super::{is_yaml_duplicate, Decoded};
use crate::schema::{Shape, TypeRef};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// kube stops collecting strict errors at this many (`saveStrictError`).
const MAX_STRICT_ERRORS: usize = 100;
/// Walks stop descending this deep (values from a decode are at most 128
/// deep; patches can nest further).
const MAX_DEPTH: usize = 512;
/// The header goyaml puts before its list of errors.
const YAML_ERRORS: &str = "yaml: unmarshal errors:\n";

/// The paths of the fields of `value` that the schema does not know, in the
/// order of the value, as kube's strict decoding prints them:
/// `spec.foo`, `spec.template.spec.containers[0].bar`, `metadata.labels`
/// is a map so its keys are all known. Subtrees that keep unknown fields
/// (`x-kubernetes-preserve-unknown-fields`, `RawExtension`, untyped nodes)
/// accept anything; an unknown field's own subtree is not looked into.
pub fn unknown_fields(ty: TypeRef<'_>, value: &Value) -> Vec<String> {
    let mut walker = Walker::new(&[], false, usize::MAX);
    walker.walk(ty, value, 0);
    walker.unknown_paths
}

/// The strict errors of a create or update body of a built-in kind, in the
/// order kube's strict decoder reports them (at most 100):
///
/// * JSON: in document order, `unknown field "spec.foo"` and `duplicate
///   field "metadata.name"` interleaved; a field both unknown and repeated is
///   reported once, as unknown; duplicates inside an unknown field or an
///   untyped subtree are not reported.
/// * YAML: goyaml's duplicate errors first, as one item
///   (`yaml: unmarshal errors:\n  line 5: key "name" already set in map\n
///   ...`), then the unknown fields in sorted order.
///
/// Without a schema only duplicates are reported.
pub fn strict_errors(ty: Option<TypeRef<'_>>, decoded: &Decoded) -> Vec<String> {
    let (yaml, json): (Vec<&String>, Vec<&String>) = decoded
        .duplicates
        .iter()
        .partition(|d| is_yaml_duplicate(d));
    let mut items = Vec::new();
    if !yaml.is_empty() {
        items.push(yaml_item(&yaml));
    }
    let Some(ty) = ty else {
        items.extend(json.iter().map(|p| duplicate_field(p)));
        items.truncate(MAX_STRICT_ERRORS);
        return items;
    };
    let dups: Vec<String> = json.into_iter().cloned().collect();
    let mut walker = Walker::new(&dups, true, MAX_STRICT_ERRORS);
    walker.walk(ty, &decoded.value, 0);
    items.extend(walker.items);
    items.truncate(MAX_STRICT_ERRORS + usize::from(!yaml.is_empty()));
    items
}

/// The strict errors of a body kube decodes into a map first (custom
/// resources, the patched object of a JSON or merge patch): every duplicate
/// (even of an unknown field) first, in document order, then the unknown
/// fields in sorted order.
pub fn strict_errors_unstructured(ty: Option<TypeRef<'_>>, decoded: &Decoded) -> Vec<String> {
    let (yaml, json): (Vec<&String>, Vec<&String>) = decoded
        .duplicates
        .iter()
        .partition(|d| is_yaml_duplicate(d));
    let mut items = Vec::new();
    if !yaml.is_empty() {
        items.push(yaml_item(&yaml));
    }
    items.extend(
        json.iter()
            .take(MAX_STRICT_ERRORS)
            .map(|p| duplicate_field(p)),
    );
    if let Some(ty) = ty {
        let mut walker = Walker::new(&[], false, MAX_STRICT_ERRORS);
        walker.sorted = true;
        walker.walk(ty, &decoded.value, 0);
        items.extend(walker.unknown_paths.iter().map(|p| unknown_field(p)));
    }
    items
}

/// The `Warning` texts for strict errors: one per item, and one per line of
/// a YAML duplicates item (kube's `parseYAMLWarnings`).
pub fn warnings_from(items: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for item in items {
        let rest = item
            .strip_prefix("error converting YAML to JSON: ")
            .unwrap_or(item);
        match rest.strip_prefix(YAML_ERRORS) {
            Some(lines) => out.extend(lines.split('\n').map(|l| l.trim().to_string())),
            None => out.push(item.clone()),
        }
    }
    out
}

fn yaml_item(entries: &[&String]) -> String {
    let mut s = String::from(YAML_ERRORS.trim_end_matches('\n'));
    for e in entries {
        s.push_str("\n  ");
        s.push_str(e);
    }
    s
}

fn unknown_field(path: &str) -> String {
    format!("unknown field {}", super::gofmt::quote(path))
}

fn duplicate_field(path: &str) -> String {
    format!("duplicate field {}", super::gofmt::quote(path))
}

struct Walker<'d> {
    /// Duplicated paths (JSON), in the order they were found.
    dups: &'d [String],
    dup_index: HashMap<&'d str, usize>,
    reported: Vec<bool>,
    /// Whether to report duplicates where they occur (typed decoding).
    with_duplicates: bool,
    /// Visit object members in sorted order.
    sorted: bool,
    limit: usize,
    path: String,
    items: Vec<String>,
    seen: HashSet<String>,
    unknown_paths: Vec<String>,
}

impl<'d> Walker<'d> {
    fn new(dups: &'d [String], with_duplicates: bool, limit: usize) -> Self {
        Walker {
            dups,
            dup_index: dups
                .iter()
                .enumerate()
                .map(|(i, d)| (d.as_str(), i))
                .collect(),
            reported: vec![false; dups.len()],
            with_duplicates,
            sorted: false,
            limit,
            path: String::new(),
            items: Vec::new(),
            seen: HashSet::new(),
            unknown_paths: Vec::new(),
        }
    }

    fn full(&self) -> bool {
        self.items.len() >= self.limit || self.unknown_paths.len() >= self.limit
    }

    fn emit(&mut self, item: String) {
        if self.items.len() < self.limit && self.seen.insert(item.clone()) {
            self.items.push(item);
        }
    }

    fn unknown_here(&mut self) {
        if self.unknown_paths.len() < self.limit {
            self.unknown_paths.push(self.path.clone());
        }
        let item = unknown_field(&self.path);
        self.emit(item);
    }

    /// Reports the duplicate at the current path, if any. Duplicates found
    /// earlier under this path belong to the occurrence the repetition
    /// replaced: they were met first, so they come first.
    fn duplicate_here(&mut self) {
        if !self.with_duplicates || self.dups.is_empty() {
            return;
        }
        let Some(&at) = self.dup_index.get(self.path.as_str()) else {
            return;
        };
        if self.reported[at] {
            return;
        }
        for j in 0..at {
            if !self.reported[j] && is_under(&self.dups[j], &self.path) {
                self.reported[j] = true;
                let item = duplicate_field(&self.dups[j]);
                self.emit(item);
            }
        }
        self.reported[at] = true;
        let item = duplicate_field(&self.dups[at]);
        self.emit(item);
    }

    fn push_key(&mut self, key: &str) -> usize {
        let mark = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        mark
    }

    fn members<'v>(&self, obj: &'v serde_json::Map<String, Value>) -> Vec<(&'v String, &'v Value)> {
        let mut members: Vec<_> = obj.iter().collect();
        if self.sorted {
            members.sort_by(|a, b| a.0.cmp(b.0));
        }
        members
    }

    fn walk(&mut self, ty: TypeRef<'_>, value: &Value, depth: usize) {
        if depth > MAX_DEPTH || self.full() {
            return;
        }
        match (ty.shape(), value) {
            (Shape::Object, Value::Object(obj)) => {
                let keeps_unknown = ty.preserves_unknown_fields();
                for (key, child) in self.members(obj) {
                    let mark = self.push_key(key);
                    match ty.field(key) {
                        Some(field) => {
                            self.duplicate_here();
                            self.walk(field.ty, child, depth + 1);
                        }
                        None if keeps_unknown => self.duplicate_here(),
                        None => self.unknown_here(),
                    }
                    self.path.truncate(mark);
                }
            }
            (Shape::Map, Value::Object(obj)) => {
                let values = ty.values();
                for (key, child) in self.members(obj) {
                    let mark = self.push_key(key);
                    self.duplicate_here();
                    if let Some(vt) = values {
                        self.walk(vt, child, depth + 1);
                    }
                    self.path.truncate(mark);
                }
            }
            (Shape::Array, Value::Array(items)) => {
                let Some(it) = ty.items() else {
                    return;
                };
                for (i, child) in items.iter().enumerate() {
                    let mark = self.path.len();
                    let _ = write!(self.path, "[{i}]");
                    self.walk(it, child, depth + 1);
                    self.path.truncate(mark);
                }
            }
            _ => {}
        }
    }
}

/// Whether `path` lies strictly under `parent` (`spec.a` or `spec[0]` under
/// `spec`).
fn is_under(path: &str, parent: &str) -> bool {
    path.strip_prefix(parent)
        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_warnings_are_split_per_line() {
        let items = vec![
            "yaml: unmarshal errors:\n  line 5: key \"name\" already set in map\n  line 12: key \"x\" already set in map".to_string(),
            "unknown field \"spec.foo\"".to_string(),
        ];
        assert_eq!(
            warnings_from(&items),
            vec![
                "line 5: key \"name\" already set in map",
                "line 12: key \"x\" already set in map",
                "unknown field \"spec.foo\"",
            ]
        );
    }

    #[test]
    fn under() {
        assert!(is_under("spec.a", "spec"));
        assert!(is_under("spec[0]", "spec"));
        assert!(!is_under("specx", "spec"));
        assert!(!is_under("spec", "spec"));
    }
}
