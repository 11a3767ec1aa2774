//! The storage conformance suite through the routed store
//! (`--etcd-servers-overrides`): the suite's keys go to a watch cache over
//! their own etcd, and the main store behind the router has no etcd at
//! all, so a request routed to it fails.

use watchcache::route::testing::RoutedHarness;

watchcache::storage_conformance_tests!(
    shared: RoutedHarness::shared(),
    isolated: RoutedHarness::isolated(),
);
