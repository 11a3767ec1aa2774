//! Label and field selectors (owned by the selectors work; stub API).
mod field;
mod label;
pub use field::{FieldRequirement, FieldSelector};
pub use label::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);
