//! The core (legacy, `v1`) group.

pub mod configmap;
pub mod endpoints;
pub mod event;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod quota;
pub mod replicationcontroller;
pub mod service;
pub mod serviceaccount;
pub mod volume;
