//! networking.k8s.io/v1: Ingresses, IngressClasses and NetworkPolicies.

mod ingress;
mod network_policy;

pub use ingress::{INGRESS, INGRESS_CLASS};
pub use network_policy::NETWORK_POLICY;
