//! The storage conformance suite against the watch cache, on a real etcd:
//! the same test functions as for the etcd store (`conformance.rs`).

use watchcache::cache::testing::CacheHarness;

watchcache::storage_conformance_tests!(
    shared: CacheHarness::shared(),
    isolated: CacheHarness::isolated(),
);
