//! Patches (in progress)
