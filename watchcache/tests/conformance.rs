//! The storage conformance suite against the etcd store, on a real etcd: one
//! shared etcd for the test binary (unique key prefixes per test) and one etcd
//! of their own for the tests that compact.

use watchcache::testing::conformance::EtcdHarness;

watchcache::storage_conformance_tests!(
    shared: EtcdHarness::shared(),
    isolated: EtcdHarness::isolated(),
);
