//! The chaos suite (tests/src/chaos): random operations against two
//! replicas on a 3-member etcd while faults are injected, then a check of
//! the recorded history against etcd's own. CI runs a short schedule;
//! `CHAOS_SECONDS=600 CHAOS_SEED=<n> cargo test -p e2e --test chaos --
//! --nocapture` runs a long one (README, "Reliability").

use std::time::Duration;

use e2e::chaos::{run, Config};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_anomaly_under_faults() {
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
