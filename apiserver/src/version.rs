//! The Kubernetes version this server reports (`/version`, OpenAPI's
//! `info`) and implements (Pod Security's `latest`).

/// Kubernetes version this server reports and implements.
pub const KUBE_MAJOR: &str = "1";
pub const KUBE_MINOR: &str = "35";
