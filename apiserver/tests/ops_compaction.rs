//! Coordinated compaction on a real etcd: however many compactors run, one
//! compaction happens per round, and afterwards old resourceVersions answer
//! 410 through the HTTP router.
//!
//! Each test starts an etcd of its own (compaction would break the shared
//! one's other users).

mod common;

use apiserver::compaction::{coordination_key, Compactor, Outcome};
use axum::http::StatusCode;
use common::{configmap, names, Api};
use std::sync::atomic::Ordering;
use std::time::Duration;
use watchcache::testing::TestEtcd;

const TIMEOUT: Duration = Duration::from_secs(10);

async fn own_etcd() -> TestEtcd {
    match TestEtcd::start().await {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    }
}

async fn put(etcd: &TestEtcd, key: &str) -> i64 {
    let mut client = etcd.store().await.client();
    let resp = client.put(key, "{}", None).await.expect("put");
    resp.header().expect("header").revision()
}

#[tokio::test]
async fn one_compaction_per_round_among_two_compactors() {
    let etcd = own_etcd().await;
    let client = etcd.store().await.client();
    let interval = Duration::from_secs(3600);
    let mut a = Compactor::new(client.clone(), interval, TIMEOUT);
    let mut b = Compactor::new(client.clone(), interval, TIMEOUT);

    // Round 1: one records a revision (no compaction on bootstrap).
    let first = [a.round().await.expect("a"), b.round().await.expect("b")];
    assert!(first.contains(&Outcome::Recorded), "{first:?}");
    assert!(first.contains(&Outcome::Lost), "{first:?}");

    let mut last = 0;
    for round in 0..6 {
        let written = put(&etcd, &format!("/registry/configmaps/ns/x{round}")).await;
        // Alternate who goes first.
        let (x, y) = if round % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let outcomes = [x.round().await.expect("x"), y.round().await.expect("y")];
        let compacted: Vec<i64> = outcomes
            .iter()
            .filter_map(|o| match o {
                Outcome::Compacted(r) => Some(*r),
                _ => None,
            })
            .collect();
        assert_eq!(compacted.len(), 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes.contains(&Outcome::Lost),
            "round {round}: {outcomes:?}"
        );
        // The target is the revision recorded one round earlier: older than
        // this round's write, newer than the last target.
        assert!(
            compacted[0] < written,
            "round {round}: {compacted:?} vs {written}"
        );
        assert!(
            compacted[0] > last,
            "round {round}: {compacted:?} after {last}"
        );
        last = compacted[0];
    }
    let total = a.counters().compactions.load(Ordering::Relaxed)
        + b.counters().compactions.load(Ordering::Relaxed);
    assert_eq!(total, 6);

    // The coordination key holds the last recorded revision.
    let mut c = client.clone();
    let got = c.get(coordination_key(), None).await.expect("get");
    let kv = got.kvs().first().expect("the key exists");
    assert_eq!(kv.version(), 7, "one write per round");
}

#[tokio::test]
async fn concurrent_loops_compact_once_per_interval() {
    let etcd = own_etcd().await;
    let client = etcd.store().await.client();
    let interval = Duration::from_millis(300);
    let loops: Vec<_> = (0..3)
        .map(|_| Compactor::new(client.clone(), interval, TIMEOUT))
        .collect();
    let counters: Vec<_> = loops.iter().map(Compactor::counters).collect();
    let tasks: Vec<_> = loops.into_iter().map(|c| tokio::spawn(c.run())).collect();
    for i in 0..20 {
        put(&etcd, &format!("/registry/configmaps/ns/y{i}")).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in &tasks {
        t.abort();
    }
    let compactions: u64 = counters
        .iter()
        .map(|c| c.compactions.load(Ordering::Relaxed))
        .sum();
    let most_rounds = counters
        .iter()
        .map(|c| c.rounds.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    assert!(compactions >= 1, "no compaction in {most_rounds} rounds");
    // Three loops, but at most one compaction per round (the first round
    // compacts nothing).
    assert!(
        compactions < most_rounds,
        "{compactions} compactions in {most_rounds} rounds"
    );
}

#[tokio::test]
async fn old_resource_version_is_gone_after_compaction() {
    let etcd = own_etcd().await;
    let api = Api::on(&etcd, "compact").await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let first = api.create(cms, &configmap("one", &[("a", "1")])).await;
    let old_rv = common::rv(&first);
    api.create(cms, &configmap("two", &[("a", "2")])).await;

    // Before compaction an Exact list at the old revision works.
    let at_old = format!("{cms}?resourceVersion={old_rv}&resourceVersionMatch=Exact");
    let r = api.get(&at_old).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(names(&r.body), vec!["one"]);

    let cache = api.state.cache.clone().expect("a cache");
    let mut compactor = Compactor::new(
        etcd.store().await.client(),
        Duration::from_secs(3600),
        TIMEOUT,
    )
    .with_cache(cache);
    assert_eq!(compactor.round().await.expect("round 1"), Outcome::Recorded);
    api.create(cms, &configmap("three", &[("a", "3")])).await;
    assert!(matches!(
        compactor.round().await.expect("round 2"),
        Outcome::Compacted(_)
    ));

    let r = api.get(&at_old).await;
    assert_eq!(r.code, StatusCode::GONE, "{}", r.body);
    assert_eq!(r.status().1, "Expired", "{}", r.body);

    // The coordination key is kube's, outside the prefix: no list shows it.
    let r = api.get("/api/v1/configmaps").await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(names(&r.body), vec!["one", "three", "two"]);
    let key = coordination_key();
    assert!(!r.text().contains("compact_rev_key"), "{key} listed");
    let mut client = etcd.store().await.client();
    let at_root = client.get(key, None).await.expect("get");
    assert_eq!(at_root.kvs().len(), 1, "{key} is at the root of etcd");
    // Consistent reads still work.
    let r = api.get(cms).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
}
