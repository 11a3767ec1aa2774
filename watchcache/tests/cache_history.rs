//! Randomized history: concurrent writers create, update and delete objects
//! across namespaces while many watchers with different selectors and
//! starting revisions (some restarting mid-way from their last
//! resourceVersion, alternating between two replicas, one of which starts
//! mid-way) follow the caches. Every watcher's events must equal the
//! etcd history filtered for it (read from etcd itself: a watch from before
//! the first write with previous values), in order, without gap or
//! duplicate.

use apimachinery::read::{Freshness, Predicate};
use etcd_client::{EventType as EtcdEventType, WatchOptions as EtcdWatchOptions};
use futures_util::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use watchcache::cache::testing as cache_testing;
use watchcache::testing::conformance::{label_predicate, object, unique_prefix};
use watchcache::testing::TestEtcd;
use watchcache::{Cacher, EventType, ListOptions, Revision, Storage, WatchEvent, WatchOptions};

const NAMESPACES: &[&str] = &["ns-0", "ns-1", "ns-2"];
const WRITERS: u64 = 4;
const OPS_PER_WRITER: usize = 120;
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// One change as etcd recorded it.
#[derive(Debug, Clone)]
struct Recorded {
    revision: Revision,
    key: String,
    created: bool,
    value: Option<Value>,
    prev: Option<Value>,
}

/// What a watcher saw (or must see), comparable.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    kind: EventType,
    name: String,
    namespace: String,
    revision: Revision,
    data: Value,
}

fn seen(event: &WatchEvent) -> Seen {
    let v = event.object.value();
    Seen {
        kind: event.kind,
        name: v["metadata"]["name"].as_str().unwrap_or("").into(),
        namespace: v["metadata"]["namespace"].as_str().unwrap_or("").into(),
        revision: event.object.revision,
        data: v["data"].clone(),
    }
}

fn seen_value(kind: EventType, value: &Value, revision: Revision) -> Seen {
    Seen {
        kind,
        name: value["metadata"]["name"].as_str().unwrap_or("").into(),
        namespace: value["metadata"]["namespace"].as_str().unwrap_or("").into(),
        revision,
        data: value["data"].clone(),
    }
}

/// A watcher of the test.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    key: String,
    selector: Option<&'static str>,
    /// Start after this revision; `None` = initial events from a consistent
    /// snapshot.
    after: Option<Revision>,
    /// Watch again from the last resourceVersion every this many events.
    restart_every: Option<usize>,
}

impl Spec {
    fn predicate(&self) -> Predicate {
        self.selector
            .map(label_predicate)
            .unwrap_or_else(Predicate::everything)
    }

    fn covers(&self, key: &str) -> bool {
        if self.key.ends_with('/') {
            key.starts_with(&self.key)
        } else {
            key == self.key
        }
    }
}

/// The events `spec` must see of `history` after `after`, with the spec's
/// transitions (written independently of the cache).
fn expected(spec: &Spec, history: &[Recorded], after: Revision) -> Vec<Seen> {
    let predicate = spec.predicate();
    let mut out = Vec::new();
    for change in history {
        if change.revision <= after || !spec.covers(&change.key) {
            continue;
        }
        let now = change.value.as_ref().is_some_and(|v| predicate.matches(v));
        let before = change.prev.as_ref().is_some_and(|v| predicate.matches(v));
        let kind = match (&change.value, change.created, before, now) {
            (Some(_), true, _, true) => Some(EventType::Added),
            (Some(_), false, true, true) => Some(EventType::Modified),
            (Some(_), false, false, true) => Some(EventType::Added),
            (_, _, true, false) => Some(EventType::Deleted),
            _ => None,
        };
        match kind {
            Some(EventType::Deleted) => {
                if let Some(prev) = &change.prev {
                    out.push(seen_value(EventType::Deleted, prev, change.revision));
                }
            }
            Some(kind) => {
                if let Some(value) = &change.value {
                    out.push(seen_value(kind, value, change.revision));
                }
            }
            None => {}
        }
    }
    out
}

/// Runs one watcher until it has seen `final_revision` (through an event or
/// a bookmark). Returns what it saw, and for an initial-events watcher the
/// revision of its snapshot.
async fn run_watcher(
    replicas: Vec<Cacher>,
    spec: Spec,
    mut final_revision: tokio::sync::watch::Receiver<Revision>,
) -> (Vec<Seen>, Option<Revision>, usize) {
    let mut opts = WatchOptions {
        after_revision: spec.after.unwrap_or(0),
        initial_events: spec.after.is_none(),
        initial_freshness: Freshness::MostRecent,
        predicate: spec.predicate(),
    };
    let mut replica = 0;
    let mut stream = replicas[0]
        .watch(&spec.key, opts.clone())
        .await
        .expect("watch");
    let mut events = Vec::new();
    let mut snapshot_revision = None;
    let mut initial_done = spec.after.is_some();
    let mut last = spec.after.unwrap_or(0);
    let mut since_restart = 0;
    let mut restarts = 0;
    loop {
        let done = *final_revision.borrow_and_update();
        if done > 0 && last >= done && initial_done {
            return (events, snapshot_revision, restarts);
        }
        let item = tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await;
        let event = match item {
            Ok(Some(Ok(event))) => event,
            other => panic!("{}: watch ended at {last}: {other:?}", spec.name),
        };
        last = last.max(event.object.revision);
        if event.kind == EventType::Bookmark {
            if !initial_done {
                initial_done = true;
                snapshot_revision = Some(event.object.revision);
            }
            continue;
        }
        events.push(seen(&event));
        since_restart += 1;
        if initial_done && spec.restart_every.is_some_and(|n| since_restart >= n) {
            // Resume from the last resourceVersion, as a client would.
            opts.after_revision = last;
            opts.initial_events = false;
            // On the next replica, as after a reconnection through a load
            // balancer.
            replica = (replica + 1) % replicas.len();
            stream = replicas[replica]
                .watch(&spec.key, opts.clone())
                .await
                .unwrap_or_else(|e| panic!("{}: re-watch from {last}: {e:?}", spec.name));
            since_restart = 0;
            restarts += 1;
        }
    }
}

/// One writer: random creates, updates and deletes of its own names.
async fn write(cacher: Cacher, prefix: String, writer: u64) -> Vec<Revision> {
    let mut rng = StdRng::seed_from_u64(0x5eed + writer);
    let mut revisions = Vec::new();
    let mut version: BTreeMap<String, Revision> = BTreeMap::new();
    for op in 0..OPS_PER_WRITER {
        let ns = NAMESPACES[rng.random_range(0..NAMESPACES.len())];
        let name = format!("w{writer}-{}", rng.random_range(0..5));
        let key = format!("{prefix}{ns}/{name}");
        let app = if rng.random_bool(0.5) { "web" } else { "db" };
        let mut value = object(&name, &[("app", app)], &format!("{writer}-{op}"));
        value["metadata"]["namespace"] = Value::String(ns.into());
        let current = version.get(&key).copied();
        let deleting = current.is_some() && rng.random_bool(0.3);
        let result = match current {
            None => cacher.create(&key, &value).await,
            Some(rev) if deleting => cacher.delete(&key, Some(rev)).await,
            Some(rev) => cacher.update(&key, &value, rev).await,
        };
        let obj = result.unwrap_or_else(|e| panic!("writer {writer} op {op}: {e:?}"));
        if deleting {
            version.remove(&key);
        } else {
            version.insert(key, obj.revision);
        }
        revisions.push(obj.revision);
    }
    revisions
}

/// The history of `prefix` after `after` up to `until`, from etcd itself.
async fn etcd_history(
    etcd: &TestEtcd,
    prefix: &str,
    after: Revision,
    until: Revision,
) -> Vec<Recorded> {
    let store = etcd.store().await;
    let mut client = store.client();
    let options = EtcdWatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(after + 1);
    let mut stream = client
        .watch(prefix, Some(options))
        .await
        .expect("etcd watch");
    let mut history = Vec::new();
    let mut last = after;
    while last < until {
        let resp = tokio::time::timeout(EVENT_TIMEOUT, stream.message())
            .await
            .expect("etcd history in time")
            .expect("etcd watch message")
            .expect("etcd watch open");
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let decode = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).ok();
            last = kv.mod_revision();
            history.push(Recorded {
                revision: kv.mod_revision(),
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                created: event.event_type() == EtcdEventType::Put
                    && kv.create_revision() == kv.mod_revision(),
                value: (event.event_type() == EtcdEventType::Put)
                    .then(|| decode(kv.value()))
                    .flatten(),
                prev: event.prev_kv().and_then(|p| decode(p.value())),
            });
        }
    }
    history
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_see_exactly_the_etcd_history() {
    let etcd = TestEtcd::shared().await;
    let cacher = cache_testing::cacher(etcd, cache_testing::config()).await;
    let prefix = unique_prefix("history");
    let start = cacher.revision().await.expect("current revision");
    let (final_tx, final_rx) = tokio::sync::watch::channel(0);

    let mut specs = Vec::new();
    let selectors = [None, Some("app=web"), Some("app!=web")];
    for (i, selector) in selectors.iter().enumerate() {
        specs.push(Spec {
            name: format!("all-{i}"),
            key: prefix.clone(),
            selector: *selector,
            after: Some(start),
            restart_every: None,
        });
        specs.push(Spec {
            name: format!("all-restarting-{i}"),
            key: prefix.clone(),
            selector: *selector,
            after: Some(start),
            restart_every: Some(7 + i),
        });
        for ns in NAMESPACES {
            specs.push(Spec {
                name: format!("{ns}-{i}"),
                key: format!("{prefix}{ns}/"),
                selector: *selector,
                after: Some(start),
                restart_every: (i == 1).then_some(5),
            });
        }
    }
    specs.push(Spec {
        name: "one-object".into(),
        key: format!("{prefix}ns-1/w0-1"),
        selector: None,
        after: Some(start),
        restart_every: Some(2),
    });
    let mut handles = Vec::new();
    for spec in specs.clone() {
        let task = run_watcher(vec![cacher.clone()], spec.clone(), final_rx.clone());
        handles.push((spec, tokio::spawn(task)));
    }

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write(cacher.clone(), prefix.clone(), w)))
        .collect();
    // A second replica starting mid-way reads the recent history back, so
    // watchers resume on it from revisions older than its start.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = cache_testing::cacher(etcd, cache_testing::config()).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while second.stats().window_floor > start {
        assert!(
            tokio::time::Instant::now() < deadline,
            "history read back: {:?}",
            second.stats()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let both = vec![second.clone(), cacher.clone()];
    // Watchers joining mid-way: from the start, from a revision reached by
    // then, and with initial events from a consistent snapshot.
    let middle = cacher.revision().await.expect("current revision");
    for (i, selector) in selectors.iter().enumerate() {
        let starts = [
            (Some(start), Some(4)),
            (Some(middle), None),
            (Some(middle), Some(3)),
            (None, None),
            (None, Some(6)),
        ];
        for (after, restart) in starts {
            let spec = Spec {
                name: format!("late-{i}-{after:?}-{restart:?}"),
                key: prefix.clone(),
                selector: *selector,
                after,
                restart_every: restart,
            };
            let task = run_watcher(both.clone(), spec.clone(), final_rx.clone());
            handles.push((spec, tokio::spawn(task)));
        }
    }
    let mut written = 0;
    for writer in writers {
        written += writer.await.expect("writer").len();
    }
    assert_eq!(written, WRITERS as usize * OPS_PER_WRITER);
    let end = cacher.revision().await.expect("current revision");
    final_tx.send_replace(end);

    let history = etcd_history(etcd, &prefix, start, end).await;
    assert_eq!(history.len(), written, "etcd recorded every write");
    let mut total = 0;
    let mut restarts = 0;
    for (spec, handle) in handles {
        let (events, snapshot, restarted) = handle.await.expect("watcher");
        restarts += restarted;
        let want = match (spec.after, snapshot) {
            (Some(after), _) => expected(&spec, &history, after),
            (None, Some(at)) => {
                // The snapshot: etcd's state at that revision, as Added.
                let opts = ListOptions {
                    freshness: apimachinery::read::Freshness::Exact(at),
                    limit: None,
                    continue_from: None,
                    predicate: spec.predicate(),
                };
                let state = cacher.store().list(&spec.key, &opts).await.expect("list");
                let mut want: Vec<Seen> = state
                    .items
                    .iter()
                    .map(|o| seen_value(EventType::Added, o.value(), o.revision))
                    .collect();
                want.extend(expected(&spec, &history, at));
                want
            }
            (None, None) => panic!("{}: no end of initial events", spec.name),
        };
        assert_eq!(events.len(), want.len(), "{}: event count", spec.name);
        for (i, (got, want)) in events.iter().zip(&want).enumerate() {
            assert_eq!(got, want, "{}: event {i}", spec.name);
        }
        total += events.len();
    }
    assert!(restarts > 10, "watchers restarted ({restarts})");
    assert!(total > written, "watchers saw {total} events");
    assert_eq!(cacher.terminated_watchers(), 0);
    for replica in [&cacher, &second] {
        let stats = replica.stats();
        assert_eq!(stats.etcd_reads, 0, "served from memory: {stats:?}");
        assert_eq!(stats.terminated_watchers, 0, "{stats:?}");
    }
}
