//! Behaviour of the watch cache beyond the conformance suite, on a real
//! etcd: freshness across replicas, exact reads from snapshots, bookmarks,
//! slow watchers, a broken etcd watch, compaction past the cache, readiness
//! and shutdown.

use apimachinery::read::{Freshness, Predicate};
use futures_util::StreamExt;
use std::time::Duration;
use watchcache::cache::testing::{cacher, config};
use watchcache::testing::conformance::{label_predicate, object, unique_prefix};
use watchcache::testing::TestEtcd;
use watchcache::{
    CachePhase, Cacher, EventType, ListOptions, ListResult, Revision, Storage, StorageError,
    WatchEvent, WatchOptions, WatchStream,
};

const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

fn list_options(freshness: Freshness, limit: Option<usize>) -> ListOptions {
    ListOptions {
        freshness,
        limit,
        continue_from: None,
        predicate: Predicate::everything(),
    }
}

fn watch_from(after_revision: Revision) -> WatchOptions {
    WatchOptions {
        after_revision,
        initial_events: false,
        ..WatchOptions::default()
    }
}

fn names(result: &ListResult) -> Vec<String> {
    result
        .items
        .iter()
        .map(|o| {
            o.value()["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

async fn next(stream: &mut WatchStream) -> Option<watchcache::storage::Result<WatchEvent>> {
    match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
        Ok(item) => item,
        Err(_) => panic!("no watch item within {EVENT_TIMEOUT:?}"),
    }
}

/// The next non-bookmark event.
async fn next_change(stream: &mut WatchStream) -> WatchEvent {
    loop {
        match next(stream).await {
            Some(Ok(e)) if e.kind == EventType::Bookmark => continue,
            Some(Ok(e)) => return e,
            other => panic!("expected an event: {other:?}"),
        }
    }
}

async fn create(s: &dyn Storage, key: &str, name: &str, data: &str) -> watchcache::Object {
    s.create(key, &object(name, &[], data))
        .await
        .unwrap_or_else(|e| panic!("create {key}: {e:?}"))
}

/// A write through one replica (or straight to etcd) is seen by a
/// consistent list on another replica at once, served from its memory.
#[tokio::test]
async fn consistent_reads_are_fresh_on_every_replica() {
    let etcd = TestEtcd::shared().await;
    let a = cacher(etcd, config()).await;
    let b = cacher(etcd, config()).await;
    let store = etcd.store().await;
    let prefix = unique_prefix("fresh");
    for i in 0..30 {
        let name = format!("item-{i:02}");
        let key = format!("{prefix}{name}");
        let written = if i % 2 == 0 {
            create(&a, &key, &name, "v").await
        } else {
            create(&store, &key, &name, "v").await
        };
        for replica in [&a, &b] {
            let listed = replica
                .list(&prefix, &list_options(Freshness::MostRecent, None))
                .await
                .expect("consistent list");
            assert!(listed.revision >= written.revision);
            assert_eq!(listed.items.len(), i + 1, "the write is listed");
            assert_eq!(listed.items.last(), Some(&written));
            let got = replica
                .get(&key, Freshness::MostRecent)
                .await
                .expect("consistent get");
            assert_eq!(got.as_ref(), Some(&written), "the write is read");
        }
    }
    assert_eq!(b.stats().etcd_reads, 0, "served from memory");
    assert_eq!(a.stats().etcd_reads, 0, "served from memory");
}

/// Concurrent consistent reads share quorum reads of etcd's revision: one
/// read answers every consistent read queued before it was sent, and each
/// still sees every write acknowledged before it began.
#[tokio::test]
async fn concurrent_consistent_reads_share_revision_reads() {
    let etcd = TestEtcd::shared().await;
    let cache = cacher(etcd, config()).await;
    let store = etcd.store().await;
    let prefix = unique_prefix("coalesce");
    let key = format!("{prefix}k");
    let mut last = create(&store, &key, "k", "0").await;
    let before = cache.stats().revision_reads;
    let mut reads = 0u64;
    for round in 1..=5 {
        let reads_of_round: Vec<_> = (0..64)
            .map(|_| {
                let cache = cache.clone();
                let key = key.clone();
                tokio::spawn(async move { cache.get(&key, Freshness::MostRecent).await })
            })
            .collect();
        reads += 64;
        for r in reads_of_round {
            let got = r.await.expect("task").expect("consistent get");
            assert_eq!(got.as_ref(), Some(&last), "every read sees the last write");
        }
        last = store
            .update(&key, &object("k", &[], &round.to_string()), last.revision)
            .await
            .expect("update");
    }
    let sent = cache.stats().revision_reads - before;
    assert!(sent >= 5, "at least one quorum read per round, sent {sent}");
    assert!(
        sent < reads / 4,
        "{reads} consistent reads sent {sent} quorum reads"
    );
    assert_eq!(cache.stats().etcd_reads, 0, "served from memory");
}

/// Lists at exact revisions (and their pages) are rebuilt from checkpoints
/// and equal what etcd answers at those revisions.
#[tokio::test]
async fn exact_reads_equal_etcd_at_every_revision() {
    let etcd = TestEtcd::shared().await;
    let mut settings = config();
    settings.checkpoint_every = 4;
    let cache = cacher(etcd, settings).await;
    let store = etcd.store().await;
    let prefix = unique_prefix("exact");
    let first = cache.revision().await.expect("revision");
    let mut revisions = vec![first];
    for i in 0..24 {
        let key = format!("{prefix}k{}", i % 7);
        let obj = match cache.get(&key, Freshness::MostRecent).await.expect("get") {
            None => create(&cache, &key, &format!("k{}", i % 7), &i.to_string()).await,
            Some(old) if i % 5 == 0 => cache
                .delete(&key, Some(old.revision))
                .await
                .expect("delete"),
            Some(old) => cache
                .update(
                    &key,
                    &object(&format!("k{}", i % 7), &[], &i.to_string()),
                    old.revision,
                )
                .await
                .expect("update"),
        };
        revisions.push(obj.revision);
    }
    // The cache has applied everything written.
    cache
        .list(&prefix, &list_options(Freshness::MostRecent, None))
        .await
        .expect("list");
    let etcd_reads = cache.stats().etcd_reads;
    for revision in revisions {
        for limit in [None, Some(3)] {
            let mut from_cache = Vec::new();
            let mut from_etcd = Vec::new();
            for (storage, out) in [
                (&cache as &dyn Storage, &mut from_cache),
                (&store, &mut from_etcd),
            ] {
                let mut opts = list_options(Freshness::Exact(revision), limit);
                loop {
                    let page = storage.list(&prefix, &opts).await.expect("exact list");
                    assert_eq!(page.revision, revision);
                    out.push((page.items.clone(), page.remaining_item_count));
                    let Some(token) = page.continue_token else {
                        break;
                    };
                    opts.continue_from =
                        Some(apimachinery::continue_token::decode(&token).expect("token"));
                }
            }
            assert_eq!(from_cache, from_etcd, "at {revision} limit {limit:?}");
        }
    }
    assert_eq!(cache.stats().etcd_reads, etcd_reads, "served from memory");
}

/// An idle watcher gets a bookmark about every `bookmark_interval`, also
/// when its selector matches nothing of what changes; revisions never go
/// back.
#[tokio::test]
async fn idle_watchers_get_bookmarks() {
    let etcd = TestEtcd::shared().await;
    let cache = cacher(etcd, config()).await;
    let prefix = unique_prefix("bookmarks");
    let start = cache.revision().await.expect("revision");
    let mut opts = watch_from(start);
    opts.predicate = label_predicate("app=none");
    let mut stream = cache.watch(&prefix, opts).await.expect("watch");
    let mut last = start;
    for i in 0..4 {
        let written = create(&cache, &format!("{prefix}x{i}"), "x", "v").await;
        let started = tokio::time::Instant::now();
        loop {
            match next(&mut stream).await {
                Some(Ok(e)) if e.kind == EventType::Bookmark => {
                    assert!(e.object.revision >= last, "bookmarks never go back");
                    last = e.object.revision;
                    if last >= written.revision {
                        break;
                    }
                }
                other => panic!("only bookmarks expected: {other:?}"),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

/// A watcher that does not read while the window moves past it is ended
/// (a clean end of stream) and counted; a watcher that keeps up is not.
#[tokio::test]
async fn slow_watchers_are_ended_and_counted() {
    let etcd = TestEtcd::start().await.expect("etcd");
    let mut settings = config();
    settings.window_max_events = 10;
    let cache = cacher(&etcd, settings).await;
    let prefix = unique_prefix("slow");
    let start = cache.revision().await.expect("revision");
    let mut slow = cache
        .watch(&prefix, watch_from(start))
        .await
        .expect("watch");
    let mut fast = cache
        .watch(&prefix, watch_from(start))
        .await
        .expect("watch");
    let mut revisions = Vec::new();
    for i in 0..30 {
        let obj = create(&cache, &format!("{prefix}o{i:02}"), "o", "v").await;
        let event = next_change(&mut fast).await;
        assert_eq!(event.object.revision, obj.revision);
        revisions.push(obj.revision);
    }
    assert!(cache.stats().window_events <= 10);
    assert_eq!(next(&mut slow).await.map(|r| r.map(|e| e.kind)), None);
    assert_eq!(cache.terminated_watchers(), 1);
    assert_eq!(cache.stats().watchers, 1);
    drop(fast);
    assert_eq!(cache.stats().watchers, 0);

    // Resuming from a revision the window no longer holds is a 410.
    let mut late = cache
        .watch(&prefix, watch_from(start))
        .await
        .expect("watch");
    assert!(matches!(
        next(&mut late).await,
        Some(Err(StorageError::Compacted { requested, .. })) if requested == start
    ));
}

/// Watchers are indexed by the key or prefix they follow: one that does
/// not read while other keys churn through the whole window is not behind
/// on anything it wants, so it is not ended, and gets its next event; an
/// exact-key watcher likewise.
#[tokio::test]
async fn watchers_of_quiet_prefixes_outlive_churn_elsewhere() {
    let etcd = TestEtcd::start().await.expect("etcd");
    let mut settings = config();
    settings.window_max_events = 10;
    let cache = cacher(&etcd, settings).await;
    let quiet = unique_prefix("quiet");
    let busy = unique_prefix("busy");
    let start = cache.revision().await.expect("revision");
    let mut namespace = cache.watch(&quiet, watch_from(start)).await.expect("watch");
    let key = format!("{quiet}one");
    let mut single = cache.watch(&key, watch_from(start)).await.expect("watch");
    let mut busy_watch = cache.watch(&busy, watch_from(start)).await.expect("watch");
    for i in 0..30 {
        let obj = create(&cache, &format!("{busy}o{i:02}"), "o", "v").await;
        assert_eq!(next_change(&mut busy_watch).await.object, obj);
    }
    assert!(cache.stats().window_events <= 10);
    let one = create(&cache, &key, "one", "v").await;
    assert_eq!(next_change(&mut namespace).await.object, one);
    assert_eq!(next_change(&mut single).await.object, one);
    let two = create(&cache, &format!("{quiet}two"), "two", "v").await;
    assert_eq!(next_change(&mut namespace).await.object, two);
    assert_eq!(cache.terminated_watchers(), 0);
    assert_eq!(cache.stats().watchers, 3);
    drop((namespace, single, busy_watch));
    assert_eq!(cache.stats().watchers, 0);
}

/// A watcher whose selector pins a label is woken only by changes of
/// objects that carry the label before or after: churn of other objects in
/// its namespace does not end it, and an object relabelled away is still
/// sent to it as DELETED.
#[tokio::test]
async fn label_watchers_outlive_churn_of_other_labels() {
    let etcd = TestEtcd::start().await.expect("etcd");
    let mut settings = config();
    settings.window_max_events = 10;
    let cache = cacher(&etcd, settings).await;
    let prefix = unique_prefix("labels");
    let start = cache.revision().await.expect("revision");
    let mut web = cache
        .watch(
            &prefix,
            WatchOptions {
                predicate: label_predicate("app=web"),
                ..watch_from(start)
            },
        )
        .await
        .expect("watch");
    let key = format!("{prefix}w");
    let created = cache
        .create(&key, &object("w", &[("app", "web")], "1"))
        .await
        .expect("create");
    assert_eq!(next_change(&mut web).await.object, created);
    for i in 0..30 {
        let key = format!("{prefix}o{i:02}");
        cache
            .create(&key, &object("o", &[("app", "db")], "v"))
            .await
            .expect("create");
    }
    assert!(cache.stats().window_events <= 10);
    let relabelled = cache
        .update(&key, &object("w", &[("app", "db")], "2"), created.revision)
        .await
        .expect("update");
    let event = next_change(&mut web).await;
    assert_eq!(event.kind, EventType::Deleted);
    assert_eq!(event.object.revision, relabelled.revision);
    assert_eq!(cache.terminated_watchers(), 0);
}

/// While the etcd watch is down, watchers keep their place and consistent
/// reads fall back to etcd; when it comes back the cache resumes from its
/// last revision and nobody misses an event.
#[tokio::test]
async fn a_broken_etcd_watch_is_resumed() {
    let etcd = TestEtcd::shared().await;
    let mut settings = config();
    settings.consistent_read_wait = Duration::from_millis(300);
    let cache = cacher(etcd, settings).await;
    let store = etcd.store().await;
    let prefix = unique_prefix("resume");
    let start = cache.revision().await.expect("revision");
    let mut stream = cache
        .watch(&prefix, watch_from(start))
        .await
        .expect("watch");
    let before = create(&store, &format!("{prefix}a"), "a", "1").await;
    assert_eq!(next_change(&mut stream).await.object, before);

    cache.hold_etcd_watch(true);
    let mut written = Vec::new();
    for name in ["b", "c", "d"] {
        written.push(create(&store, &format!("{prefix}{name}"), name, "1").await);
    }
    let listed = cache
        .list(&prefix, &list_options(Freshness::MostRecent, None))
        .await
        .expect("list");
    assert_eq!(names(&listed), ["a", "b", "c", "d"], "still consistent");
    assert!(cache.stats().consistent_fallbacks >= 1);
    assert_eq!(cache.phase(), CachePhase::Ready);

    cache.hold_etcd_watch(false);
    for obj in &written {
        assert_eq!(&next_change(&mut stream).await.object, obj);
    }
    assert_eq!(cache.terminated_watchers(), 0);
}

/// When etcd compacts past the cache (its watch was down meanwhile), the
/// cache lists again: its watchers end with Compacted (410) and the new
/// state is served.
#[tokio::test]
async fn compaction_past_the_cache_relists() {
    let etcd = TestEtcd::start().await.expect("etcd");
    let cache = cacher(&etcd, config()).await;
    let store = etcd.store().await;
    let prefix = unique_prefix("relist");
    let a = create(&store, &format!("{prefix}a"), "a", "1").await;
    let mut stream = cache
        .watch(&prefix, watch_from(a.revision - 1))
        .await
        .expect("watch");
    assert_eq!(next_change(&mut stream).await.object, a);
    let generation_before = cache.stats().revision;

    cache.hold_etcd_watch(true);
    let b = create(&store, &format!("{prefix}b"), "b", "1").await;
    let a2 = store
        .update(&format!("{prefix}a"), &object("a", &[], "2"), a.revision)
        .await
        .expect("update");
    etcd.compact(a2.revision).await.expect("compact");
    cache.hold_etcd_watch(false);

    loop {
        match next(&mut stream).await {
            Some(Ok(e)) if e.kind == EventType::Bookmark => {
                assert!(e.object.revision < b.revision, "no progress while held")
            }
            Some(Err(StorageError::Compacted { .. })) => break,
            other => panic!("a watcher of the old cache ends with Compacted: {other:?}"),
        }
    }
    assert!(cache.wait_ready(Duration::from_secs(10)).await);
    let listed = cache
        .list(
            &prefix,
            &list_options(Freshness::NotOlderThan(a2.revision), None),
        )
        .await
        .expect("list");
    assert_eq!(listed.items, vec![a2.clone(), b]);
    let stats = cache.stats();
    assert!(stats.revision >= a2.revision && stats.revision > generation_before);
    assert!(stats.compacted >= a2.revision);
    assert!(cache.is_ready());

    // Watching on from the new state works.
    let mut again = cache
        .watch(&prefix, watch_from(a2.revision))
        .await
        .expect("watch");
    let c = create(&store, &format!("{prefix}c"), "c", "1").await;
    assert_eq!(next_change(&mut again).await.object, c);
}

/// Not ready until the first list; continue tokens of the cache are
/// accepted by etcd and the other way round.
#[tokio::test(flavor = "current_thread")]
async fn readiness_and_interchangeable_tokens() {
    let etcd = TestEtcd::shared().await;
    let cache = Cacher::new(etcd.store().await, config());
    assert!(!cache.is_ready(), "not ready before the first list");
    assert_eq!(cache.phase(), CachePhase::Pending);
    assert!(cache.wait_ready(Duration::from_secs(10)).await);
    assert!(cache.is_ready());

    let store = etcd.store().await;
    let prefix = unique_prefix("tokens");
    for name in ["a", "b", "c", "d", "e"] {
        create(&cache, &format!("{prefix}{name}"), name, "1").await;
    }
    let first = cache
        .list(&prefix, &list_options(Freshness::MostRecent, Some(2)))
        .await
        .expect("list");
    let token = first.continue_token.clone().expect("token");
    let mut opts = list_options(Freshness::MostRecent, Some(2));
    opts.continue_from = Some(apimachinery::continue_token::decode(&token).expect("token"));
    let from_etcd = store.list(&prefix, &opts).await.expect("etcd page");
    let from_cache = cache.list(&prefix, &opts).await.expect("cache page");
    assert_eq!(from_etcd.items, from_cache.items);
    assert_eq!(from_etcd.continue_token, from_cache.continue_token);
    assert_eq!(from_etcd.remaining_item_count, Some(1));
    assert_eq!(from_cache.remaining_item_count, Some(1));
}

/// Dropping the cache ends its watchers.
#[tokio::test]
async fn dropping_the_cache_ends_its_watchers() {
    let etcd = TestEtcd::shared().await;
    let cache = cacher(etcd, config()).await;
    let prefix = unique_prefix("drop");
    let start = cache.revision().await.expect("revision");
    let mut stream = cache
        .watch(&prefix, watch_from(start))
        .await
        .expect("watch");
    drop(cache);
    loop {
        match next(&mut stream).await {
            Some(Ok(e)) if e.kind == EventType::Bookmark => continue,
            Some(Err(StorageError::Unavailable(_))) => break,
            other => panic!("the watcher ends: {other:?}"),
        }
    }
    assert!(next(&mut stream).await.is_none());
}

/// Collects the non-bookmark events of `stream` up to `until`.
async fn events_until(stream: &mut WatchStream, until: Revision) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    while events
        .last()
        .is_none_or(|e: &WatchEvent| e.object.revision < until)
    {
        events.push(next_change(stream).await);
    }
    events
}

/// A replica started after some writes reads etcd's recent history into
/// its window: a watch resumed from before it started gets the missed
/// events (as etcd would give them) instead of a 410. Without backfill, or
/// below etcd's compaction, that is a 410.
#[tokio::test]
async fn a_new_replica_serves_recent_history() {
    let etcd = TestEtcd::start().await.expect("etcd");
    let store = etcd.store().await;
    let prefix = unique_prefix("backfill");
    let (a, b) = (format!("{prefix}a"), format!("{prefix}b"));
    let web = |name: &str, data: &str| object(name, &[("app", "web")], data);
    let a1 = store.create(&a, &web("a", "1")).await.expect("create");
    let b1 = store.create(&b, &web("b", "1")).await.expect("create");
    let a2 = store
        .update(&a, &object("a", &[("app", "db")], "2"), a1.revision)
        .await
        .expect("update");
    let a3 = store
        .update(&a, &web("a", "3"), a2.revision)
        .await
        .expect("update");
    store.delete(&b, Some(b1.revision)).await.expect("delete");

    let cache = cacher(&etcd, config()).await;
    // The history is complete once the watch passes the list's revision
    // (a consistent read waits for that).
    let c = store
        .create(&format!("{prefix}c"), &web("c", "1"))
        .await
        .expect("create");
    cache
        .list(&prefix, &list_options(Freshness::MostRecent, None))
        .await
        .expect("list");
    let mut settings = config();
    settings.backfill_revisions = 0;
    let without = cacher(&etcd, settings).await;

    for predicate in [Predicate::everything(), label_predicate("app=web")] {
        let mut opts = watch_from(a1.revision);
        opts.predicate = predicate;
        let mut expected = store
            .watch(&prefix, opts.clone())
            .await
            .expect("etcd watch");
        let mut cached = cache
            .watch(&prefix, opts.clone())
            .await
            .expect("cache watch");
        let want = events_until(&mut expected, c.revision).await;
        assert!(want.len() >= 3, "{want:?}");
        assert_eq!(events_until(&mut cached, c.revision).await, want);

        let mut refused = without.watch(&prefix, opts).await.expect("watch");
        assert!(matches!(
            next(&mut refused).await,
            Some(Err(StorageError::Compacted { .. }))
        ));
    }
    assert!(cache.stats().window_floor < a1.revision);
    assert_eq!(cache.stats().etcd_reads, 0, "served from memory");

    // History below etcd's compaction is not read back.
    etcd.compact(a3.revision).await.expect("compact");
    let after_compaction = cacher(&etcd, config()).await;
    let d = create(&store, &format!("{prefix}d"), "d", "1").await;
    after_compaction
        .list(&prefix, &list_options(Freshness::MostRecent, None))
        .await
        .expect("list");
    let mut refused = after_compaction
        .watch(&prefix, watch_from(a1.revision))
        .await
        .expect("watch");
    assert!(matches!(
        next(&mut refused).await,
        Some(Err(StorageError::Compacted { .. }))
    ));
    let mut from_compaction = after_compaction
        .watch(&prefix, watch_from(a3.revision))
        .await
        .expect("watch");
    let events = events_until(&mut from_compaction, d.revision).await;
    let revisions: Vec<Revision> = events.iter().map(|e| e.object.revision).collect();
    assert_eq!(
        revisions.first(),
        Some(&(a3.revision + 1)),
        "the delete of b"
    );
    assert_eq!(revisions.last(), Some(&d.revision));
}

/// A read that may be stale (`NotOlderThan(0)`, what a read-modify-write
/// starts from) sees this replica's own write before the watch brings it
/// back, and never an own write older than what the cache applied.
#[tokio::test]
async fn own_writes_are_read_before_the_watch_returns_them() {
    let etcd = TestEtcd::shared().await;
    let cache = cacher(etcd, config()).await;
    let prefix = unique_prefix("own");
    let key = format!("{prefix}a");
    let first = cache
        .create(&key, &object("a", &[], "1"))
        .await
        .expect("create");
    let seen = cache
        .get(&key, Freshness::MostRecent)
        .await
        .expect("get")
        .expect("in the cache");
    assert_eq!(seen, first);

    cache.hold_etcd_watch(true);
    let encoded = cache.encode(&key, &object("a", &[], "2")).expect("encode");
    assert!(!encoded.same_as(&first), "a changed value is no no-op");
    let second = cache
        .update_encoded(&key, encoded, first.revision, None)
        .await
        .expect("update");
    let read = cache
        .get(&key, Freshness::NotOlderThan(0))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(read, second, "the own write, not the cache's older copy");
    let again = cache.encode(&key, &object("a", &[], "2")).expect("encode");
    assert!(again.same_as(&second), "the same value again is a no-op");

    cache.hold_etcd_watch(false);
    let consistent = cache
        .get(&key, Freshness::MostRecent)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(consistent, second);
}
