//! In-process tests of the HTTP API against a real etcd: every verb, the
//! bad-input answers kube-apiserver gives (code, reason, message), and that a
//! rejected request leaves storage unchanged.
//!
//! One etcd per test binary (`TestEtcd::shared`); each test has its own key
//! prefix, its own store and its own bootstrapped server state. The
//! compaction test runs on an etcd of its own.

mod common;

#[path = "api/audit.rs"]
mod audit;
#[path = "api/chain.rs"]
mod chain;
#[path = "api/crud.rs"]
mod crud;
#[path = "api/encryption.rs"]
mod encryption;
#[path = "api/hardening.rs"]
mod hardening;
#[path = "api/health.rs"]
mod health;
#[path = "api/input.rs"]
mod input;
#[path = "api/lists.rs"]
mod lists;
#[path = "api/rbac.rs"]
mod rbac;
#[path = "api/watch.rs"]
mod watch;
#[path = "api/writes.rs"]
mod writes;
