//! Kubernetes protobuf encoding (planned).
