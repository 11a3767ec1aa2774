//! Leader election on a 3-member etcd cluster with one member down: the
//! client spreads requests over every member, so about a third of them are
//! refused; the leader must keep its leadership through that (renewals are
//! retried within the lease), not hand it around.

use apiserver::leader::{ElectionConfig, Leadership};
use e2e::cluster::EtcdCluster;
use std::time::Duration;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread")]
async fn leadership_holds_while_one_etcd_member_is_down() {
    let mut etcd = EtcdCluster::start(3).await;
    let client = etcd_client::Client::connect(etcd.endpoints(), None)
        .await
        .expect("etcd client");
    let leadership = Leadership::spawn(
        client,
        ElectionConfig {
            key: format!("{}/leader", e2e::unique_prefix()),
            identity: "only".into(),
            ttl_seconds: 2,
            retry: Duration::from_millis(100),
            timeout: Duration::from_secs(2),
        },
    );
    let mut leading = leadership.subscribe();
    tokio::time::timeout(Duration::from_secs(20), leading.wait_for(|l| *l))
        .await
        .expect("became leader in time")
        .expect("election running");
    // A follower goes away: the etcd cluster keeps its quorum and leader.
    let etcd_leader = etcd.leader().await;
    let down = (0..etcd.len())
        .find(|i| Some(*i) != etcd_leader)
        .expect("a follower");
    etcd.stop(down);
    // Four lease TTLs, about 24 renewals: every change of the flag is seen.
    let until = Instant::now() + Duration::from_secs(8);
    loop {
        match tokio::time::timeout_at(until, leading.changed()).await {
            Err(_) => break,
            Ok(changed) => {
                changed.expect("election running");
                assert!(
                    *leading.borrow_and_update(),
                    "leadership was lost with one etcd member of three down"
                );
            }
        }
    }
    assert!(leadership.is_leader());
}
