//! The chaos suite (tests/src/chaos): random operations against two
//! replicas on a 3-member etcd while faults are injected, then a check of
//! the recorded history against etcd's own. CI runs a short schedule;
//! `CHAOS_SECONDS=600 CHAOS_SEED=<n> cargo test -p e2e --test chaos --
//! --nocapture` runs a long one (README, "Reliability"). The second test
//! is the override-cluster outage scenario (tests/src/chaos/outage.rs).

use std::time::Duration;

use e2e::chaos::outage::{self, Outage, OutageConfig};
use e2e::chaos::{run, Config};

/// The two scenarios take turns: the outage scenario compares latencies
/// across its own windows, which the other's faults would skew.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_anomaly_under_faults() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let cfg = Config {
        seed: env("CHAOS_SEED", 1),
        duration: Duration::from_secs(env("CHAOS_SECONDS", 40)),
        replicas: env("CHAOS_REPLICAS", 2),
        clients: env("CHAOS_CLIENTS", 4),
        watchers: env("CHAOS_WATCHERS", 2),
        keys: env("CHAOS_KEYS", 6),
        faults: true,
    };
    let report = run(cfg).await;
    eprintln!("{report}");
    assert!(
        report.anomalies.is_empty(),
        "reproduce with CHAOS_SEED={}:\n{report}",
        report.seed
    );
    // The run must have exercised what it claims to check.
    assert!(report.checked.acknowledged_writes > 20, "{report}");
    assert!(
        report.checked.reads > 20 && report.checked.lists > 5,
        "{report}"
    );
    assert!(report.checked.watch_events > 10, "{report}");
    assert!(report.faults.values().sum::<usize>() > 3, "{report}");
}

/// Issue #32: ConfigMaps, Events and Leases on three etcd clusters
/// (`--etcd-servers-overrides`), two replicas, clients writing all three;
/// the events cluster goes down for the middle third of each of two 20 s
/// cycles, killed in the first and hung (SIGSTOP) in the second
/// (tests/src/chaos/outage.rs says what is checked). `CHAOS_SECONDS=600
/// CHAOS_OUTAGES=20 cargo test -p e2e --test chaos events_cluster --
/// --nocapture` runs a long one; `CHAOS_OUTAGE=kill|pause|both`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_cluster_outage_spares_the_other_clusters() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let cfg = OutageConfig {
        seed: env("CHAOS_SEED", 1),
        duration: Duration::from_secs(env("CHAOS_SECONDS", 40)),
        replicas: env("CHAOS_REPLICAS", 2),
        clients: env("CHAOS_CLIENTS", 2),
        keys: env("CHAOS_KEYS", 6),
        members: env("CHAOS_MEMBERS", 1),
        outages: env("CHAOS_OUTAGES", 2),
        outage: env("CHAOS_OUTAGE", Outage::Both),
    };
    let report = outage::run(cfg).await;
    eprintln!("{report}");
    assert!(
        report.passed(),
        "reproduce with CHAOS_SEED={}:\n{report}",
        report.seed
    );
    // The run must have exercised what it claims to check.
    for c in &report.clusters {
        assert!(c.checked.acknowledged_writes > 10, "{report}");
        assert!(c.checked.watch_events > 5, "{report}");
    }
    assert!(report.verdict.refused_events > 3, "{report}");
}
