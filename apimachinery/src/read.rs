//! What a read asks of storage, after the query parameters have been validated
//! (see `query`). Shared by the etcd store and the watch cache so that one pure
//! function decides the semantics and both implementations obey the same table
//! of the spec ("Semantics for get and list").

use crate::selector::{FieldSelector, LabelSelector};
use crate::shared::{Shared, Str};
use serde_json::Value;

/// How fresh the data of a get or list must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// `resourceVersion` unset: a consistent (quorum) read of the latest state.
    MostRecent,
    /// `resourceVersion="0"` (= `NotOlderThan(0)`, "Any") or `N` with
    /// `resourceVersionMatch=NotOlderThan` (or unset on get/list without limit):
    /// any state at least as new as `N`.
    NotOlderThan(i64),
    /// `resourceVersionMatch=Exact`: the state exactly at revision `N`.
    Exact(i64),
}

/// Where a paginated list continues: the next key (relative to the list's key
/// prefix) and the revision of the first page. A revision of -1 means "latest"
/// (kube-apiserver's inconsistent continuation after a 410).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueFrom {
    pub start_key: String,
    pub revision: i64,
}

/// A field that a field selector may name for a kind, and where its value lives
/// in the object (a JSON pointer), with the value used when it is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldAttr {
    pub name: Str,
    pub pointer: Str,
    pub default: Str,
}

impl FieldAttr {
    /// A built-in kind's field.
    pub const fn of(name: &'static str, pointer: &'static str, default: &'static str) -> FieldAttr {
        FieldAttr {
            name: Shared::Static(name),
            pointer: Shared::Static(pointer),
            default: Shared::Static(default),
        }
    }
}

/// Fields every kind supports.
pub const COMMON_FIELD_ATTRS: &[FieldAttr] = &[
    FieldAttr::of("metadata.name", "/metadata/name", ""),
    FieldAttr::of("metadata.namespace", "/metadata/namespace", ""),
];

/// Label and field selectors with the kind's field attributes, applied by
/// storage so that `limit` counts matching objects, as kube-apiserver does.
#[derive(Debug, Clone, Default)]
pub struct Predicate {
    pub label: LabelSelector,
    pub field: FieldSelector,
    pub attrs: Shared<[FieldAttr]>,
}

impl Predicate {
    /// Matches everything.
    pub fn everything() -> Self {
        Predicate::default()
    }

    pub fn is_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// The value of a selectable field of `obj`, as a field selector sees it.
    pub fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        let attr = COMMON_FIELD_ATTRS
            .iter()
            .chain(self.attrs.iter())
            .find(|a| a.name == field)?;
        Some(match obj.pointer(&attr.pointer) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => attr.default.to_string(),
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if self.is_everything() {
            return true;
        }
        let empty = serde_json::Map::new();
        let labels = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        self.label.matches(labels) && self.field.matches(|f| self.field_value(obj, f))
    }
}
