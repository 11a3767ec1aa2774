//! The storage conformance suite: what every `Storage` (the etcd store, the
//! watch cache) must do, as plain async functions over a `Harness`.
//!
//! Each function takes the harness and a key prefix of its own (ending in
//! `/`, see `unique_prefix`), so tests can share one etcd. Functions listed in
//! `COMPACTING` compact the etcd history and need an etcd of their own.
//!
//! `storage_conformance_tests!` turns the whole suite into `#[tokio::test]`s:
//!
//! ```text
//! watchcache::storage_conformance_tests!(
//!     shared: my_harness_on_shared_etcd(),
//!     isolated: my_harness_on_own_etcd(),
//! );
//! ```
//!
//! Failures panic with a message, as assertions do.

use super::TestEtcd;
use crate::etcd::EtcdStore;
use crate::storage::{
    EventType, ListOptions, ListResult, Object, Revision, Storage, StorageError, WatchEvent,
    WatchOptions, WatchStream,
};
use apimachinery::continue_token;
use apimachinery::read::{Freshness, Predicate};
use apimachinery::selector::LabelSelector;
use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a test waits for one watch event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the suite runs against.
#[async_trait]
pub trait Harness: Send + Sync {
    fn storage(&self) -> &dyn Storage;
    /// Compacts the etcd history behind the storage up to `revision` and
    /// returns once the storage reports it (reads older than `revision` fail).
    async fn compact(&self, revision: Revision);
}

/// The etcd store on the shared etcd of the test binary, or on an etcd of its
/// own (for the compacting tests).
pub struct EtcdHarness {
    store: EtcdStore,
    etcd: EtcdRef,
}

enum EtcdRef {
    Shared(&'static TestEtcd),
    Own(TestEtcd),
}

impl EtcdHarness {
    pub async fn shared() -> Self {
        let etcd = TestEtcd::shared().await;
        EtcdHarness {
            store: etcd.store().await,
            etcd: EtcdRef::Shared(etcd),
        }
    }

    pub async fn isolated() -> Self {
        let etcd = match TestEtcd::start().await {
            Ok(etcd) => etcd,
            Err(e) => panic!("{e}"),
        };
        EtcdHarness {
            store: etcd.store().await,
            etcd: EtcdRef::Own(etcd),
        }
    }

    pub fn etcd(&self) -> &TestEtcd {
        match &self.etcd {
            EtcdRef::Shared(etcd) => etcd,
            EtcdRef::Own(etcd) => etcd,
        }
    }

    pub fn store(&self) -> &EtcdStore {
        &self.store
    }
}

#[async_trait]
impl Harness for EtcdHarness {
    fn storage(&self) -> &dyn Storage {
        &self.store
    }

    async fn compact(&self, revision: Revision) {
        if let Err(e) = self.etcd().compact(revision).await {
            panic!("compacting to {revision}: {e}");
        }
    }
}

/// A key prefix no other test uses: `/registry/conformance/<name>-<pid>-<n>/`.
pub fn unique_prefix(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("/registry/conformance/{name}-{}-{n}/", std::process::id())
}

/// The suite functions that need no compaction.
pub const SHARED: &[&str] = &[
    "create_get",
    "update_conflict",
    "delete_precondition",
    "get_not_older_than",
    "list_most_recent",
    "list_exact_revision",
    "paginate",
    "paginate_with_predicate",
    "watch_events",
    "watch_single_key",
    "watch_from_revision",
    "watch_initial_events",
    "watch_initial_events_at_revision",
    "watch_initial_events_not_older_than",
    "watch_predicate_transitions",
];

/// The suite functions that compact the history.
pub const COMPACTING: &[&str] = &[
    "list_exact_compacted",
    "continue_after_compaction",
    "watch_compacted",
];

/// Runs every conformance function as a `#[tokio::test]`: `shared` builds the
/// harness for the non-compacting tests (may share one backend), `isolated`
/// one for the compacting tests (must own its etcd). Both are expressions
/// evaluating to a future of a `Harness`.
#[macro_export]
macro_rules! storage_conformance_tests {
    (shared: $shared:expr, isolated: $isolated:expr $(,)?) => {
        $crate::storage_conformance_tests!(@tests $shared;
            create_get, update_conflict, delete_precondition, get_not_older_than,
            list_most_recent, list_exact_revision, paginate, paginate_with_predicate,
            watch_events, watch_single_key, watch_from_revision, watch_initial_events,
            watch_initial_events_at_revision, watch_initial_events_not_older_than,
            watch_predicate_transitions);
        $crate::storage_conformance_tests!(@tests $isolated;
            list_exact_compacted, continue_after_compaction, watch_compacted);
    };
    (@tests $setup:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let harness = $setup.await;
                let prefix = $crate::testing::conformance::unique_prefix(stringify!($name));
                $crate::testing::conformance::$name(&harness, &prefix).await;
            }
        )*
    };
}

// ----- helpers -----

/// A ConfigMap-like object named `name` with `labels`.
pub fn object(name: &str, labels: &[(&str, &str)], data: &str) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "data": {"value": data},
    })
}

/// A predicate from a label selector; panics if the selector does not
/// select (an unimplemented selector would make the predicate tests vacuous).
pub fn label_predicate(selector: &str) -> Predicate {
    let label = match LabelSelector::parse(selector) {
        Ok(label) => label,
        Err(e) => panic!("label selector {selector:?}: {e}"),
    };
    let predicate = Predicate {
        label,
        ..Predicate::default()
    };
    assert!(
        !predicate.is_everything(),
        "label selector {selector:?} parsed as empty: selectors not implemented?"
    );
    predicate
}

pub fn list_options(freshness: Freshness, limit: Option<usize>) -> ListOptions {
    ListOptions {
        freshness,
        limit,
        continue_from: None,
        predicate: Predicate::everything(),
    }
}

fn continued(token: &str, limit: Option<usize>, predicate: Predicate) -> ListOptions {
    let from = match continue_token::decode(token) {
        Ok(from) => from,
        Err(e) => panic!("continue token {token:?} does not decode: {e:?}"),
    };
    ListOptions {
        freshness: Freshness::NotOlderThan(0),
        limit,
        continue_from: Some(from),
        predicate,
    }
}

fn name_of(object: &Object) -> String {
    object.value()["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn names(list: &ListResult) -> Vec<String> {
    list.items.iter().map(name_of).collect()
}

fn data_of(object: &Object) -> String {
    object.value()["data"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn rv_of(object: &Object) -> String {
    object.value()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Asserts that `object` is self-consistent: `resourceVersion` == `revision`.
fn assert_versioned(object: &Object) {
    assert_eq!(
        rv_of(object),
        object.revision.to_string(),
        "metadata.resourceVersion must be the object's revision: {:?}",
        object.value()
    );
}

async fn ok<T>(what: &str, result: Result<T, StorageError>) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e:?}"),
    }
}

async fn create(s: &dyn Storage, key: &str, value: &Value) -> Object {
    ok(&format!("create {key}"), s.create(key, value).await).await
}

async fn update(s: &dyn Storage, key: &str, value: &Value, expected: Revision) -> Object {
    ok(
        &format!("update {key}"),
        s.update(key, value, expected).await,
    )
    .await
}

async fn list(s: &dyn Storage, prefix: &str, opts: &ListOptions) -> ListResult {
    ok(
        &format!("list {prefix} {opts:?}"),
        s.list(prefix, opts).await,
    )
    .await
}

async fn watch(s: &dyn Storage, key: &str, opts: WatchOptions) -> WatchStream {
    ok(&format!("watch {key}"), s.watch(key, opts).await).await
}

/// Changes after `after_revision`; with `initial_events`, the state at
/// exactly `after_revision` first (the consistent state when 0).
fn watch_options(after_revision: Revision, initial_events: bool) -> WatchOptions {
    let initial_freshness = match after_revision {
        n if initial_events && n > 0 => Freshness::Exact(n),
        _ => Freshness::MostRecent,
    };
    WatchOptions {
        after_revision,
        initial_events,
        initial_freshness,
        predicate: Predicate::everything(),
    }
}

/// The next event, skipping bookmarks.
async fn next_event(stream: &mut WatchStream) -> WatchEvent {
    loop {
        match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
            Err(_) => panic!("no watch event within {EVENT_TIMEOUT:?}"),
            Ok(None) => panic!("watch ended"),
            Ok(Some(Err(e))) => panic!("watch error: {e:?}"),
            Ok(Some(Ok(event))) if event.kind == EventType::Bookmark => continue,
            Ok(Some(Ok(event))) => return event,
        }
    }
}

/// Asserts the next event is `kind` for `name` at `revision` with `data`.
async fn expect_event(
    stream: &mut WatchStream,
    kind: EventType,
    name: &str,
    revision: Revision,
    data: &str,
) {
    let event = next_event(stream).await;
    assert_eq!(
        (event.kind, name_of(&event.object), event.object.revision),
        (kind, name.to_string(), revision),
        "unexpected event {event:?}"
    );
    assert_eq!(data_of(&event.object), data, "event {event:?}");
    assert_versioned(&event.object);
}

// ----- the suite -----

/// create, get, AlreadyExists, missing keys, current revision.
pub async fn create_get(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let mut value = object("a", &[], "1");
    value["metadata"]["resourceVersion"] = json!("12345");
    let created = create(s, &key, &value).await;
    assert!(created.revision > 0);
    assert_versioned(&created);
    assert_eq!(data_of(&created), "1");

    let got = ok("get", s.get(&key, Freshness::MostRecent).await).await;
    assert_eq!(got.as_ref(), Some(&created));
    let any = ok("get any", s.get(&key, Freshness::NotOlderThan(0)).await).await;
    assert_eq!(any.as_ref(), Some(&created));

    match s.create(&key, &object("a", &[], "2")).await {
        Err(StorageError::AlreadyExists { key: k }) => assert_eq!(k, key),
        other => panic!("second create: {other:?}"),
    }
    let missing = ok(
        "get missing",
        s.get(&format!("{prefix}missing"), Freshness::MostRecent)
            .await,
    )
    .await;
    assert_eq!(missing, None);

    let current = ok("current revision", s.current_revision(prefix).await).await;
    assert!(current >= created.revision);
}

/// update with the current revision succeeds, with a stale one is a Conflict
/// carrying the current revision, on a missing key is NotFound.
pub async fn update_conflict(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let created = create(s, &key, &object("a", &[], "1")).await;
    let updated = update(s, &key, &object("a", &[], "2"), created.revision).await;
    assert!(updated.revision > created.revision);
    assert_versioned(&updated);
    assert_eq!(data_of(&updated), "2");

    match s
        .update(&key, &object("a", &[], "3"), created.revision)
        .await
    {
        Err(StorageError::Conflict { key: k, current }) => {
            assert_eq!(k, key);
            assert_eq!(current, updated.revision);
        }
        other => panic!("stale update: {other:?}"),
    }
    let got = ok("get", s.get(&key, Freshness::MostRecent).await).await;
    assert_eq!(got.as_ref(), Some(&updated));

    match s
        .update(&format!("{prefix}missing"), &object("missing", &[], "1"), 0)
        .await
    {
        Err(StorageError::NotFound { .. }) => {}
        other => panic!("update of a missing key: {other:?}"),
    }
    match s
        .update(
            &format!("{prefix}missing"),
            &object("missing", &[], "1"),
            updated.revision,
        )
        .await
    {
        Err(StorageError::NotFound { .. }) => {}
        other => panic!("update of a missing key: {other:?}"),
    }
}

/// delete with a stale precondition is a Conflict; with the current one it
/// returns the last state at the deletion revision; NotFound afterwards.
pub async fn delete_precondition(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let created = create(s, &key, &object("a", &[], "1")).await;
    let updated = update(s, &key, &object("a", &[], "2"), created.revision).await;

    match s.delete(&key, Some(created.revision)).await {
        Err(StorageError::Conflict { current, .. }) => assert_eq!(current, updated.revision),
        other => panic!("stale delete: {other:?}"),
    }
    let deleted = ok("delete", s.delete(&key, Some(updated.revision)).await).await;
    assert_eq!(data_of(&deleted), "2");
    assert!(deleted.revision > updated.revision);
    assert_versioned(&deleted);
    let current = ok("current revision", s.current_revision(prefix).await).await;
    assert!(current >= deleted.revision);

    assert_eq!(
        ok("get deleted", s.get(&key, Freshness::MostRecent).await).await,
        None
    );
    match s.delete(&key, None).await {
        Err(StorageError::NotFound { .. }) => {}
        other => panic!("delete of a deleted key: {other:?}"),
    }
    match s.delete(&key, Some(updated.revision)).await {
        Err(StorageError::NotFound { .. }) => {}
        other => panic!("conditional delete of a deleted key: {other:?}"),
    }

    let other = format!("{prefix}b");
    let b = create(s, &other, &object("b", &[], "x")).await;
    let gone = ok("unconditional delete", s.delete(&other, None).await).await;
    assert_eq!(name_of(&gone), "b");
    assert!(gone.revision > b.revision);
}

/// get NotOlderThan a revision the store has not reached answers
/// TooLargeResourceVersion.
pub async fn get_not_older_than(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let created = create(s, &key, &object("a", &[], "1")).await;
    let got = ok(
        "get not older than",
        s.get(&key, Freshness::NotOlderThan(created.revision)).await,
    )
    .await;
    assert_eq!(got.as_ref(), Some(&created));

    let requested = created.revision + 1_000_000;
    match s.get(&key, Freshness::NotOlderThan(requested)).await {
        Err(StorageError::TooLargeResourceVersion {
            requested: r,
            current,
        }) => {
            assert_eq!(r, requested);
            assert!(current >= created.revision && current < requested);
        }
        other => panic!("get too new: {other:?}"),
    }
}

/// A list without limit returns every key under the prefix (and none of a
/// sibling prefix), in key order, at a revision not older than the writes.
pub async fn list_most_recent(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let sibling = format!("{}x/", prefix.trim_end_matches('/'));
    create(s, &format!("{sibling}z"), &object("z", &[], "other")).await;
    let mut last = 0;
    for name in ["c", "a", "b"] {
        last = create(s, &format!("{prefix}{name}"), &object(name, &[], name))
            .await
            .revision;
    }
    let result = list(s, prefix, &list_options(Freshness::MostRecent, None)).await;
    assert_eq!(names(&result), ["a", "b", "c"]);
    assert!(result.revision >= last);
    assert_eq!(result.continue_token, None);
    assert_eq!(result.remaining_item_count, None);
    for item in &result.items {
        assert_versioned(item);
    }

    let any = list(s, prefix, &list_options(Freshness::NotOlderThan(0), None)).await;
    assert_eq!(names(&any), ["a", "b", "c"]);
    let not_older = list(
        s,
        prefix,
        &list_options(Freshness::NotOlderThan(last), None),
    )
    .await;
    assert!(not_older.revision >= last);
    assert_eq!(names(&not_older), ["a", "b", "c"]);

    let requested = last + 1_000_000;
    match s
        .list(
            prefix,
            &list_options(Freshness::NotOlderThan(requested), None),
        )
        .await
    {
        Err(StorageError::TooLargeResourceVersion { requested: r, .. }) => {
            assert_eq!(r, requested)
        }
        other => panic!("list too new: {other:?}"),
    }
    let empty = list(
        s,
        &format!("{prefix}nothing/"),
        &list_options(Freshness::MostRecent, None),
    )
    .await;
    assert!(empty.items.is_empty());
    assert!(empty.revision >= last);
}

/// A list at an Exact revision returns the state at that revision, after
/// later creates, updates and deletes.
pub async fn list_exact_revision(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let a = create(s, &format!("{prefix}a"), &object("a", &[], "old")).await;
    let b = create(s, &format!("{prefix}b"), &object("b", &[], "b")).await;
    let at = b.revision;
    create(s, &format!("{prefix}c"), &object("c", &[], "c")).await;
    update(
        s,
        &format!("{prefix}a"),
        &object("a", &[], "new"),
        a.revision,
    )
    .await;
    ok("delete b", s.delete(&format!("{prefix}b"), None).await).await;

    let old = list(s, prefix, &list_options(Freshness::Exact(at), None)).await;
    assert_eq!(old.revision, at);
    assert_eq!(names(&old), ["a", "b"]);
    assert_eq!(data_of(&old.items[0]), "old");
    assert_eq!(old.items[0].revision, a.revision);
    assert_eq!(old.items[1], b);

    let now = list(s, prefix, &list_options(Freshness::MostRecent, None)).await;
    assert_eq!(names(&now), ["a", "c"]);
    assert_eq!(data_of(&now.items[0]), "new");

    let paged = list(s, prefix, &list_options(Freshness::Exact(at), Some(1))).await;
    assert_eq!(paged.revision, at);
    assert_eq!(names(&paged), ["a"]);
    assert_eq!(paged.remaining_item_count, Some(1));
}

/// Exact at a compacted revision answers Compacted.
pub async fn list_exact_compacted(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let a = create(s, &format!("{prefix}a"), &object("a", &[], "1")).await;
    let b = update(s, &format!("{prefix}a"), &object("a", &[], "2"), a.revision).await;
    let c = update(s, &format!("{prefix}a"), &object("a", &[], "3"), b.revision).await;
    h.compact(c.revision).await;
    match s
        .list(prefix, &list_options(Freshness::Exact(a.revision), None))
        .await
    {
        Err(StorageError::Compacted { requested, .. }) => assert_eq!(requested, a.revision),
        other => panic!("list at a compacted revision: {other:?}"),
    }
    match s
        .list(prefix, &list_options(Freshness::Exact(a.revision), Some(1)))
        .await
    {
        Err(StorageError::Compacted { .. }) => {}
        other => panic!("paged list at a compacted revision: {other:?}"),
    }
    let at = list(s, prefix, &list_options(Freshness::Exact(c.revision), None)).await;
    assert_eq!(at.revision, c.revision);
    assert_eq!(data_of(&at.items[0]), "3");
}

/// Pages of `limit` items: a continue token on all but the last, the first
/// page's revision throughout (later writes are not seen), an exact
/// remainingItemCount, no token and no count on the last page.
pub async fn paginate(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let mut expected = Vec::new();
    for i in 0..5 {
        let name = format!("item-{i}");
        create(s, &format!("{prefix}{name}"), &object(&name, &[], "v")).await;
        expected.push(name);
    }
    let first = list(s, prefix, &list_options(Freshness::MostRecent, Some(2))).await;
    assert_eq!(names(&first), ["item-0", "item-1"]);
    assert_eq!(first.remaining_item_count, Some(3));
    let revision = first.revision;

    // Writes after the first page are not part of the paginated list.
    create(
        s,
        &format!("{prefix}item-2a"),
        &object("item-2a", &[], "late"),
    )
    .await;
    let item3 = ok(
        "get item-3",
        s.get(&format!("{prefix}item-3"), Freshness::MostRecent)
            .await,
    )
    .await;
    let Some(item3) = item3 else {
        panic!("item-3 exists");
    };
    update(
        s,
        &format!("{prefix}item-3"),
        &object("item-3", &[], "changed"),
        item3.revision,
    )
    .await;

    let mut token = first.continue_token.clone();
    let mut seen = names(&first);
    let mut remaining = vec![Some(1), None];
    let mut pages = 1;
    while let Some(t) = token {
        let page = list(s, prefix, &continued(&t, Some(2), Predicate::everything())).await;
        pages += 1;
        assert_eq!(
            page.revision, revision,
            "every page is at the first revision"
        );
        assert_eq!(page.remaining_item_count, remaining.remove(0));
        for item in &page.items {
            assert_eq!(data_of(item), "v", "pages show the first page's state");
        }
        seen.extend(names(&page));
        token = page.continue_token;
        assert!(pages <= 3, "too many pages");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected);

    // An exact division: the last full page carries no token when nothing is left.
    let all = list(s, prefix, &list_options(Freshness::MostRecent, Some(6))).await;
    assert_eq!(all.items.len(), 6);
    assert_eq!(all.continue_token, None);
    assert_eq!(all.remaining_item_count, None);
    let big = list(s, prefix, &list_options(Freshness::MostRecent, Some(100))).await;
    assert_eq!(big.items.len(), 6);
    assert_eq!(big.continue_token, None);
}

/// With a selector, `limit` counts matching items; pages skip non-matching
/// keys; no remainingItemCount.
pub async fn paginate_with_predicate(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let predicate = label_predicate("app=web");
    let mut matching = Vec::new();
    for i in 0..12 {
        let name = format!("item-{i:02}");
        let app = if i % 3 == 0 { "web" } else { "db" };
        create(
            s,
            &format!("{prefix}{name}"),
            &object(&name, &[("app", app)], "v"),
        )
        .await;
        if app == "web" {
            matching.push(name);
        }
    }
    let mut opts = list_options(Freshness::MostRecent, Some(3));
    opts.predicate = predicate.clone();
    let first = list(s, prefix, &opts).await;
    assert_eq!(names(&first), ["item-00", "item-03", "item-06"]);
    assert_eq!(first.remaining_item_count, None);
    let Some(token) = first.continue_token.clone() else {
        panic!("a filtered list that stopped early has a continue token");
    };
    let second = list(s, prefix, &continued(&token, Some(3), predicate.clone())).await;
    assert_eq!(names(&second), ["item-09"]);
    assert_eq!(second.revision, first.revision);
    assert_eq!(second.continue_token, None);
    assert_eq!(second.remaining_item_count, None);

    let mut small = list_options(Freshness::MostRecent, Some(1));
    small.predicate = predicate.clone();
    let mut seen = Vec::new();
    let mut page = list(s, prefix, &small).await;
    loop {
        assert!(page.items.len() <= 1);
        assert_eq!(page.remaining_item_count, None);
        seen.extend(names(&page));
        let Some(token) = page.continue_token.clone() else {
            break;
        };
        page = list(s, prefix, &continued(&token, Some(1), predicate.clone())).await;
    }
    assert_eq!(seen, matching);

    let mut unlimited = list_options(Freshness::MostRecent, None);
    unlimited.predicate = predicate;
    let all = list(s, prefix, &unlimited).await;
    assert_eq!(names(&all), matching);
    assert_eq!(all.continue_token, None);
}

/// A continue token whose revision was compacted answers ContinueExpired
/// with a fresh token that continues from the same key at the latest state.
pub async fn continue_after_compaction(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let mut revisions = Vec::new();
    for name in ["a", "b", "c", "d"] {
        revisions.push(
            create(s, &format!("{prefix}{name}"), &object(name, &[], "1"))
                .await
                .revision,
        );
    }
    let first = list(s, prefix, &list_options(Freshness::MostRecent, Some(2))).await;
    assert_eq!(names(&first), ["a", "b"]);
    let Some(token) = first.continue_token.clone() else {
        panic!("first page has a continue token");
    };
    let c = update(
        s,
        &format!("{prefix}c"),
        &object("c", &[], "2"),
        revisions[2],
    )
    .await;
    create(s, &format!("{prefix}e"), &object("e", &[], "1")).await;
    let latest = ok("current revision", s.current_revision(prefix).await).await;
    h.compact(latest).await;

    let fresh = match s
        .list(prefix, &continued(&token, Some(2), Predicate::everything()))
        .await
    {
        Err(StorageError::ContinueExpired { fresh_token }) => fresh_token,
        other => panic!("continue after compaction: {other:?}"),
    };
    let from = match continue_token::decode(&fresh) {
        Ok(from) => from,
        Err(e) => panic!("fresh token: {e:?}"),
    };
    assert_eq!(from.revision, -1, "the fresh token reads the latest state");

    let next = list(
        s,
        prefix,
        &continued(&fresh, Some(2), Predicate::everything()),
    )
    .await;
    assert_eq!(names(&next), ["c", "d"]);
    assert!(next.revision >= latest);
    assert_eq!(next.items[0], c);
    assert_eq!(next.remaining_item_count, Some(1));
    let Some(token) = next.continue_token else {
        panic!("more items follow");
    };
    let last = list(
        s,
        prefix,
        &continued(&token, Some(2), Predicate::everything()),
    )
    .await;
    assert_eq!(names(&last), ["e"]);
    assert_eq!(last.revision, next.revision);
    assert_eq!(last.continue_token, None);
}

/// Added, Modified, Deleted in order with the revisions of the writes; the
/// Deleted event carries the last state at the deletion revision.
pub async fn watch_events(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let start = ok("current revision", s.current_revision(prefix).await).await;
    let mut stream = watch(s, prefix, watch_options(start, false)).await;
    let key = format!("{prefix}a");
    let a1 = create(s, &key, &object("a", &[], "1")).await;
    let a2 = update(s, &key, &object("a", &[], "2"), a1.revision).await;
    let b = create(s, &format!("{prefix}b"), &object("b", &[], "b")).await;
    let gone = ok("delete", s.delete(&key, Some(a2.revision)).await).await;
    // Not under the prefix.
    create(
        s,
        &format!("{}x/a", prefix.trim_end_matches('/')),
        &object("other", &[], "x"),
    )
    .await;
    let last = create(s, &format!("{prefix}z"), &object("z", &[], "z")).await;

    expect_event(&mut stream, EventType::Added, "a", a1.revision, "1").await;
    expect_event(&mut stream, EventType::Modified, "a", a2.revision, "2").await;
    expect_event(&mut stream, EventType::Added, "b", b.revision, "b").await;
    expect_event(&mut stream, EventType::Deleted, "a", gone.revision, "2").await;
    expect_event(&mut stream, EventType::Added, "z", last.revision, "z").await;

    // Starting at the current revision (0) without initial events sees only
    // later changes.
    let mut from_now = watch(s, prefix, watch_options(0, false)).await;
    let c = create(s, &format!("{prefix}c"), &object("c", &[], "c")).await;
    expect_event(&mut from_now, EventType::Added, "c", c.revision, "c").await;
}

/// A watch on one key (no trailing `/`) sees that key only.
pub async fn watch_single_key(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let start = ok("current revision", s.current_revision(prefix).await).await;
    let mut stream = watch(s, &key, watch_options(start, false)).await;
    create(s, &format!("{prefix}ab"), &object("ab", &[], "x")).await;
    create(s, &format!("{prefix}a/b"), &object("a/b", &[], "x")).await;
    let a = create(s, &key, &object("a", &[], "1")).await;
    expect_event(&mut stream, EventType::Added, "a", a.revision, "1").await;

    let mut initial = watch(s, &key, watch_options(0, true)).await;
    expect_event(&mut initial, EventType::Added, "a", a.revision, "1").await;
    let a2 = update(s, &key, &object("a", &[], "2"), a.revision).await;
    expect_event(&mut initial, EventType::Modified, "a", a2.revision, "2").await;
}

/// A watch from an older revision replays the history after it, then goes
/// on with new changes.
pub async fn watch_from_revision(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let a1 = create(s, &key, &object("a", &[], "1")).await;
    let a2 = update(s, &key, &object("a", &[], "2"), a1.revision).await;
    let b = create(s, &format!("{prefix}b"), &object("b", &[], "b")).await;
    let gone = ok("delete", s.delete(&format!("{prefix}b"), None).await).await;

    let mut stream = watch(s, prefix, watch_options(a1.revision, false)).await;
    expect_event(&mut stream, EventType::Modified, "a", a2.revision, "2").await;
    expect_event(&mut stream, EventType::Added, "b", b.revision, "b").await;
    expect_event(&mut stream, EventType::Deleted, "b", gone.revision, "b").await;
    let a3 = update(s, &key, &object("a", &[], "3"), a2.revision).await;
    expect_event(&mut stream, EventType::Modified, "a", a3.revision, "3").await;
}

/// initial_events from 0: Added for every existing object (key order, own
/// revisions), then the changes.
pub async fn watch_initial_events(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let b = create(s, &format!("{prefix}b"), &object("b", &[], "b")).await;
    let a = create(s, &format!("{prefix}a"), &object("a", &[], "a")).await;
    let mut stream = watch(s, prefix, watch_options(0, true)).await;
    expect_event(&mut stream, EventType::Added, "a", a.revision, "a").await;
    expect_event(&mut stream, EventType::Added, "b", b.revision, "b").await;
    let c = create(s, &format!("{prefix}c"), &object("c", &[], "c")).await;
    expect_event(&mut stream, EventType::Added, "c", c.revision, "c").await;
    let b2 = update(
        s,
        &format!("{prefix}b"),
        &object("b", &[], "b2"),
        b.revision,
    )
    .await;
    expect_event(&mut stream, EventType::Modified, "b", b2.revision, "b2").await;

    // With a predicate, only matching objects are sent initially.
    let web = create(
        s,
        &format!("{prefix}web"),
        &object("web", &[("app", "web")], "w"),
    )
    .await;
    let mut opts = watch_options(0, true);
    opts.predicate = label_predicate("app=web");
    let mut filtered = watch(s, prefix, opts).await;
    expect_event(&mut filtered, EventType::Added, "web", web.revision, "w").await;
    let web2 = create(
        s,
        &format!("{prefix}web2"),
        &object("web2", &[("app", "web")], "w2"),
    )
    .await;
    expect_event(&mut filtered, EventType::Added, "web2", web2.revision, "w2").await;
}

/// initial_events at a revision: the state at that revision as Added, then
/// every change after it.
pub async fn watch_initial_events_at_revision(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let a1 = create(s, &format!("{prefix}a"), &object("a", &[], "1")).await;
    let b = create(s, &format!("{prefix}b"), &object("b", &[], "b")).await;
    let at = b.revision;
    let a2 = update(
        s,
        &format!("{prefix}a"),
        &object("a", &[], "2"),
        a1.revision,
    )
    .await;
    let c = create(s, &format!("{prefix}c"), &object("c", &[], "c")).await;

    let mut stream = watch(s, prefix, watch_options(at, true)).await;
    expect_event(&mut stream, EventType::Added, "a", a1.revision, "1").await;
    expect_event(&mut stream, EventType::Added, "b", b.revision, "b").await;
    expect_event(&mut stream, EventType::Modified, "a", a2.revision, "2").await;
    expect_event(&mut stream, EventType::Added, "c", c.revision, "c").await;
}

/// initial_events not older than `n` (a streaming list): the state at `n`
/// or later as Added, then a Bookmark at the snapshot's revision (never
/// below `n`, nor below this client's own writes for `n = 0`), then the
/// changes after it. A revision the store does not reach is a stream whose
/// only item is `TooLargeResourceVersion`.
pub async fn watch_initial_events_not_older_than(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let a = create(s, &format!("{prefix}a"), &object("a", &[], "a")).await;
    let b = create(s, &format!("{prefix}b"), &object("b", &[], "b")).await;
    // The objects created by earlier rounds: (name, revision).
    let mut earlier: Vec<(String, Revision)> = Vec::new();
    for (i, n) in [0, a.revision, b.revision].into_iter().enumerate() {
        let opts = WatchOptions {
            initial_events: true,
            initial_freshness: Freshness::NotOlderThan(n),
            ..WatchOptions::default()
        };
        let mut stream = watch(s, prefix, opts).await;
        expect_event(&mut stream, EventType::Added, "a", a.revision, "a").await;
        expect_event(&mut stream, EventType::Added, "b", b.revision, "b").await;
        for (name, revision) in &earlier {
            expect_event(&mut stream, EventType::Added, name, *revision, "c").await;
        }
        match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
            Ok(Some(Ok(event))) if event.kind == EventType::Bookmark => assert!(
                event.object.revision >= b.revision,
                "the initial state of NotOlderThan({n}) ends at {}, before {}",
                event.object.revision,
                b.revision
            ),
            other => panic!("after the initial state of NotOlderThan({n}): {other:?}"),
        }
        let name = format!("c{i}");
        let c = create(s, &format!("{prefix}{name}"), &object(&name, &[], "c")).await;
        expect_event(&mut stream, EventType::Added, &name, c.revision, "c").await;
        earlier.push((name, c.revision));
    }

    let current = ok("current revision", s.current_revision(prefix).await).await;
    let far = current + 1_000_000;
    let opts = WatchOptions {
        initial_events: true,
        initial_freshness: Freshness::NotOlderThan(far),
        ..WatchOptions::default()
    };
    let mut stream = watch(s, prefix, opts).await;
    match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
        Ok(Some(Err(StorageError::TooLargeResourceVersion {
            requested,
            current: now,
        }))) => {
            assert_eq!(requested, far);
            assert!(now >= current && now < far, "current {now}");
        }
        other => panic!("a streaming list not older than {far}: {other:?}"),
    }
}

/// With a selector: an object that stops matching is Deleted (old state, at
/// the revision of the change), one that starts matching is Added,
/// non-matching changes are not sent.
pub async fn watch_predicate_transitions(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let start = ok("current revision", s.current_revision(prefix).await).await;
    let mut opts = watch_options(start, false);
    opts.predicate = label_predicate("app=web");
    let mut stream = watch(s, prefix, opts).await;

    let x = format!("{prefix}x");
    let y = format!("{prefix}y");
    let x1 = create(s, &x, &object("x", &[("app", "db")], "x1")).await;
    let y1 = create(s, &y, &object("y", &[("app", "web")], "y1")).await;
    let y2 = update(s, &y, &object("y", &[("app", "db")], "y2"), y1.revision).await;
    let x2 = update(s, &x, &object("x", &[("app", "web")], "x2"), x1.revision).await;
    let x3 = update(s, &x, &object("x", &[("app", "web")], "x3"), x2.revision).await;
    let y3 = update(s, &y, &object("y", &[("app", "db")], "y3"), y2.revision).await;
    ok("delete y", s.delete(&y, Some(y3.revision)).await).await;
    let gone = ok("delete x", s.delete(&x, Some(x3.revision)).await).await;

    expect_event(&mut stream, EventType::Added, "y", y1.revision, "y1").await;
    expect_event(&mut stream, EventType::Deleted, "y", y2.revision, "y1").await;
    expect_event(&mut stream, EventType::Added, "x", x2.revision, "x2").await;
    expect_event(&mut stream, EventType::Modified, "x", x3.revision, "x3").await;
    expect_event(&mut stream, EventType::Deleted, "x", gone.revision, "x3").await;
}

/// A watch from a compacted revision yields a Compacted error.
pub async fn watch_compacted(h: &dyn Harness, prefix: &str) {
    let s = h.storage();
    let key = format!("{prefix}a");
    let a1 = create(s, &key, &object("a", &[], "1")).await;
    let a2 = update(s, &key, &object("a", &[], "2"), a1.revision).await;
    let a3 = update(s, &key, &object("a", &[], "3"), a2.revision).await;
    h.compact(a3.revision).await;

    for initial_events in [false, true] {
        let mut stream = match s
            .watch(prefix, watch_options(a1.revision, initial_events))
            .await
        {
            Ok(stream) => stream,
            Err(StorageError::Compacted { .. }) => continue,
            Err(e) => panic!("watch from a compacted revision: {e:?}"),
        };
        match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
            Ok(Some(Err(StorageError::Compacted { requested, .. }))) => {
                assert_eq!(requested, a1.revision)
            }
            other => panic!("first item of a watch from a compacted revision: {other:?}"),
        }
    }

    // The compaction revision itself is still watchable.
    let mut stream = watch(s, prefix, watch_options(a3.revision, false)).await;
    let a4 = update(s, &key, &object("a", &[], "4"), a3.revision).await;
    expect_event(&mut stream, EventType::Modified, "a", a4.revision, "4").await;
}
