//! Leader election through etcd: among replicas campaigning on one key,
//! exactly one leads; leadership moves when the leader resigns or dies.

use apiserver::leader::{election_key, ElectionConfig, Leadership};
use std::time::{Duration, Instant};
use watchcache::testing::TestEtcd;

const DEADLINE: Duration = Duration::from_secs(20);

fn config(key: &str, identity: &str) -> ElectionConfig {
    ElectionConfig {
        key: key.to_string(),
        identity: identity.to_string(),
        ttl_seconds: 2,
        retry: Duration::from_millis(100),
        timeout: Duration::from_secs(5),
    }
}

/// Waits until exactly one of `replicas` leads; returns its index.
async fn one_leader(replicas: &[&Leadership]) -> usize {
    let start = Instant::now();
    loop {
        let leading: Vec<usize> = replicas
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_leader())
            .map(|(i, _)| i)
            .collect();
        assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
        if leading.len() == 1 {
            return leading[0];
        }
        assert!(start.elapsed() < DEADLINE, "nobody became leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn leadership_moves_when_the_leader_resigns_or_dies() {
    let etcd = TestEtcd::shared().await;
    let client = etcd.store().await.client();
    let key = election_key(&format!("/leader-test-{}", std::process::id()));

    let mut replicas: Vec<Option<Leadership>> = (0..3)
        .map(|i| {
            Some(Leadership::spawn(
                client.clone(),
                config(&key, &format!("r{i}")),
            ))
        })
        .collect();
    let alive = |rs: &Vec<Option<Leadership>>| -> Vec<usize> {
        rs.iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().map(|_| i))
            .collect()
    };

    // Exactly one of three leads, and keeps leading across renewals.
    let first = {
        let refs: Vec<&Leadership> = replicas.iter().flatten().collect();
        one_leader(&refs).await
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    {
        let refs: Vec<&Leadership> = replicas.iter().flatten().collect();
        assert_eq!(
            one_leader(&refs).await,
            first,
            "leadership moved without cause"
        );
    }

    // The leader resigns: another takes over (no need to wait for a TTL).
    let resigned = replicas[first].take().expect("leader");
    resigned.resign().await;
    let ids = alive(&replicas);
    let second = {
        let refs: Vec<&Leadership> = replicas.iter().flatten().collect();
        ids[one_leader(&refs).await]
    };
    assert_ne!(second, first);

    // The new leader dies without resigning (its task is aborted): its
    // lease expires and the last replica takes over.
    drop(replicas[second].take());
    let ids = alive(&replicas);
    assert_eq!(ids.len(), 1);
    let refs: Vec<&Leadership> = replicas.iter().flatten().collect();
    assert_eq!(ids[one_leader(&refs).await], ids[0]);

    // The key names the leader.
    let mut kv = client.kv_client();
    let got = kv.get(key.as_str(), None).await.expect("get");
    let value = got
        .kvs()
        .first()
        .map(|k| k.value().to_vec())
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_slice::<String>(&value).ok(),
        Some(format!("r{}", ids[0]))
    );
}
