//! Label and field selectors, parsed, matched and printed as kube-apiserver
//! does (`k8s.io/apimachinery/pkg/labels` and `pkg/fields`).
//!
//! Parse errors carry the exact message kube-apiserver puts in the 400
//! `BadRequest` Status of a list or watch with a bad `labelSelector` or
//! `fieldSelector`.

mod field;
mod label;

pub use field::{escape_value, unescape_value, FieldRequirement, FieldSelector};
pub use label::{LabelSelector, Operator, Requirement};

/// A selector that does not parse; `Display` is the Status message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);
