//! The etcd v3 store (in progress).
