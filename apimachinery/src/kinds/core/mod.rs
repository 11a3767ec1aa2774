//! The core (legacy, `v1`) group.

pub mod componentstatus;
pub mod configmap;
pub mod container;
pub mod endpoints;
pub mod event;
pub mod limit_ranger;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod pod_parts;
pub mod podprint;
pub mod podspec_defaults;
pub mod podspec_validation;
pub mod quantity;
pub mod quota;
pub mod quota_usage;
pub mod replicationcontroller;
pub mod service;
pub mod serviceaccount;
pub mod volume;
pub mod workload;
