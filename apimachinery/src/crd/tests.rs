//! Tests of the crd module.
