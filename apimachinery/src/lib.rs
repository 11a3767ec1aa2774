//! Kubernetes API machinery with no I/O.
//!
//! Everything here is pure: no tokio, hyper or etcd. That keeps the parsers
//! (selectors, continue tokens, media types, patches) easy to unit-test,
//! property-test and fuzz, and lets the storage layer and the HTTP layer share
//! one definition of each concept.

pub mod auth;
pub mod cbor;
pub mod continue_token;
pub mod crd;
pub mod duration;
pub mod fieldvalidation;
pub mod jsonpath;
pub mod kinds;
pub mod managedfields;
pub mod media;
pub mod patch;
pub mod podsecurity;
pub mod query;
pub mod rbac;
pub mod read;
pub mod request;
pub mod schema;
pub mod selector;
pub mod shared;
pub mod status;
pub mod validation;
pub mod version;

pub use status::{Status, StatusCause};
