//! The single writer of the cache: lists the whole prefix at one revision
//! `X`, then follows ONE etcd watch over the prefix, applying each response
//! in order. A broken watch resumes from the last applied revision; a
//! compacted one (etcd dropped history the cache has not applied) makes it
//! list again.
//!
//! History backfill (no relist storm after a restart): the watch after a
//! (re)list starts `backfill_revisions` before `X` (not below etcd's
//! compaction) with previous values, so the changes before `X` fill the
//! event window; once the stream passes `X` the window's floor drops to
//! where the history starts, and the watch is reopened at the applied
//! revision without previous values. A client resuming with a
//! resourceVersion it got from another replica a few minutes ago then gets
//! its missed events instead of a 410.

use super::ranges::RangeRead;
use super::state::{Cached, Change, Incoming, Objects, Phase, Put};
use super::Shared;
use crate::storage::{Object, Revision, StorageError};
use etcd_client::{
    Client, EventType as EtcdEventType, GetOptions, KeyValue, WatchOptions as EtcdWatchOptions,
};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Largest etcd message accepted: a watch catching up sends up to 1000
/// revisions in one response, far above the gRPC default of 4 MiB.
pub(crate) const MAX_MESSAGE: usize = 256 << 20;
/// A key no object uses, for compaction probes.
const PROBE_KEY: &[u8] = b"\0";
/// Listed pages decoded at the same time at start-up.
const DECODING: usize = 2;
/// How often the window's time bound is applied when nothing happens.
const EVICT_TICK: Duration = Duration::from_secs(1);
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why following the watch stopped.
enum End {
    /// etcd compacted the revision the watch asked for.
    Compacted(Revision),
    /// The connection or the stream broke: resume.
    Broken(StorageError),
    /// The history before the list is in the window: reopen the watch
    /// without previous values.
    Backfilled,
}

/// History being read back after a list at `until`.
#[derive(Debug, Clone, Copy)]
struct History {
    /// Every change after this revision is wanted.
    from: Revision,
    /// The list's revision.
    until: Revision,
    /// The last history revision received.
    through: Revision,
}

/// Runs until the task is aborted (the `Cacher` is dropped).
pub(crate) async fn run(shared: Arc<Shared>, client: Client) {
    let mut backoff = MIN_BACKOFF;
    loop {
        let (objects, revision) = match list_all(&shared, &client).await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(error = %e, "watch cache: list failed, retrying");
                sleep_backoff(&mut backoff).await;
                continue;
            }
        };
        tracing::info!(revision, objects = objects.len(), "watch cache: listed");
        shared.install(objects, revision);
        backoff = MIN_BACKOFF;
        let mut history = history_after_list(&shared, revision);
        shared.set_backfilling(history.is_some());
        loop {
            let from = match &history {
                Some(h) => h.through + 1,
                None => shared.read().revision + 1,
            };
            shared.set_backfilling(history.is_some());
            match follow(&shared, &client, from, history.as_mut(), &mut backoff).await {
                End::Backfilled => {
                    shared.set_backfilling(false);
                    if let Some(h) = history.take() {
                        tracing::info!(from = h.from, until = h.until, "watch cache: history read");
                    }
                }
                End::Compacted(compacted) => match history.take() {
                    // etcd refused the start of the history: start later.
                    Some(h) if h.through == h.from && compacted > 0 => {
                        history = (compacted <= h.until).then_some(History {
                            from: compacted - 1,
                            through: compacted - 1,
                            ..h
                        });
                    }
                    // Part of it is gone: do without it (the floor stays
                    // at the list's revision).
                    Some(_) => {}
                    None => {
                        tracing::warn!(
                            from,
                            compacted,
                            "watch cache: etcd compacted past the cache, listing again"
                        );
                        shared.relisting(compacted);
                        break;
                    }
                },
                End::Broken(e) => {
                    tracing::warn!(error = %e, from, "watch cache: etcd watch broke, resuming");
                    sleep_backoff(&mut backoff).await;
                }
            }
        }
    }
}

/// The history to read back after a list at `revision`, if any.
fn history_after_list(shared: &Shared, revision: Revision) -> Option<History> {
    let wanted = shared.config.backfill_revisions;
    if wanted <= 0 {
        return None;
    }
    let compacted = shared.read().compacted;
    let from = revision
        .saturating_sub(wanted)
        .max(compacted.saturating_sub(1))
        .max(0);
    (from < revision).then_some(History {
        from,
        until: revision,
        through: from,
    })
}

async fn sleep_backoff(backoff: &mut Duration) {
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

/// Runs one etcd request under the cache's timeout.
pub(crate) async fn call<T>(
    timeout: Duration,
    fut: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, StorageError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_compacted(&e) => Err(StorageError::Compacted {
            requested: 0,
            compacted: 0,
        }),
        Ok(Err(e)) => Err(StorageError::Unavailable(format!("etcd: {e}"))),
        Err(_) => Err(StorageError::Unavailable(format!(
            "etcd did not answer within {timeout:?}"
        ))),
    }
}

fn is_compacted(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s)
        if s.message().contains("required revision has been compacted"))
}

/// Every key under the prefix at one revision, read in parallel key ranges
/// (see [`super::ranges`]). Pages are decoded on the blocking pool, up to
/// [`DECODING`] at a time, while the next ones are read from etcd: at
/// start-up etcd's ranges and the decoding take about as long each, and
/// one after the other they took both (28.9 s for 1,000,000 objects, 9.4 s
/// of it etcd's).
async fn list_all(
    shared: &Arc<Shared>,
    client: &Client,
) -> Result<(Objects, Revision), StorageError> {
    let config = &shared.config;
    shared.clear_unreadable();
    let how = RangeRead {
        timeout: config.etcd_timeout,
        page: config.list_page_size.max(1),
        range_keys: super::ranges::knob("WATCHCACHE_LIST_RANGE_KEYS"),
    };
    let (revision, mut pages) =
        super::ranges::read_prefix(client, &shared.telemetry, config.prefix.as_bytes(), 0, &how)
            .await?;
    let mut objects = Objects::new();
    let decoders = super::ranges::knob("WATCHCACHE_LIST_DECODING").map_or(DECODING, |n| n as usize);
    let mut decoding: VecDeque<tokio::task::JoinHandle<Page>> = VecDeque::new();
    while let Some(kvs) = pages.next().await {
        let kvs = kvs?;
        if decoding.len() >= decoders.max(1) {
            if let Some(page) = decoding.pop_front() {
                insert_page(&mut objects, page).await?;
            }
        }
        let page_shared = shared.clone();
        decoding.push_back(tokio::task::spawn_blocking(move || {
            decode_page(&page_shared, &kvs)
        }));
    }
    for page in decoding {
        insert_page(&mut objects, page).await?;
    }
    Ok((objects, revision))
}

/// The decoded objects of one listed page, by key.
type Page = Vec<(Arc<str>, Cached)>;

/// The objects of one listed page (values that do not decode are left out
/// and their keys marked, as [`decode`] does).
fn decode_page(shared: &Shared, kvs: &[KeyValue]) -> Page {
    kvs.iter()
        .filter_map(|kv| match decode(shared, kv, kv.mod_revision(), true) {
            Some((key, Some(put))) => Some((
                key,
                Cached {
                    object: put.object,
                    size: put.size,
                },
            )),
            _ => None,
        })
        .collect()
}

async fn insert_page(
    objects: &mut Objects,
    page: tokio::task::JoinHandle<Page>,
) -> Result<(), StorageError> {
    let page = page
        .await
        .map_err(|e| StorageError::Internal(format!("decoding a listed page failed: {e}")))?;
    for (key, cached) in page {
        objects.insert(key, cached);
    }
    Ok(())
}

/// Follows the etcd watch from `from` until it breaks (or, reading
/// `history`, until the history is complete).
async fn follow(
    shared: &Shared,
    client: &Client,
    from: Revision,
    mut history: Option<&mut History>,
    backoff: &mut Duration,
) -> End {
    let config = &shared.config;
    let mut hold = shared.hold.subscribe();
    if hold.wait_for(|held| !*held).await.map(|_| ()).is_err() {
        return End::Broken(StorageError::Unavailable("the watch cache stopped".into()));
    }
    let mut watch_client = client.watch_client().max_decoding_message_size(MAX_MESSAGE);
    let mut options = EtcdWatchOptions::new()
        .with_prefix()
        .with_start_revision(from);
    if history.is_some() {
        options = options.with_prev_key();
    }
    let open = call(
        config.etcd_timeout,
        watch_client.watch(config.prefix.as_bytes(), Some(options)),
    );
    let watch_key = config.prefix.as_bytes();
    let mut stream = match shared.telemetry.time("watch", watch_key, open).await {
        Ok(stream) => stream,
        Err(e) => return End::Broken(e),
    };
    if history.is_some() {
        // The history is complete once the stream passes the list's
        // revision; on a quiet prefix nothing else would take it there, and
        // watches could not start in the history until the next change. A
        // progress mark inside the prefix (under no resource) is that
        // change, at once.
        let mut kv = client.kv_client();
        let key = format!("{}.progress", config.prefix);
        let put = call(config.etcd_timeout, kv.put(key.as_bytes(), "0", None));
        if let Err(e) = shared.telemetry.time("update", key.as_bytes(), put).await {
            tracing::debug!(error = %e, "watch cache: progress mark after the list failed");
        }
    }
    // The last state of each key the history has delivered so far, so that
    // a later change's previous value is that same object, not a copy.
    let mut seen: HashMap<Arc<str>, Cached> = HashMap::new();
    let mut evict = tokio::time::interval(EVICT_TICK);
    evict.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probe = tokio::time::interval(config.compaction_check_interval);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let message = tokio::select! {
            biased;
            _ = held(&mut hold) => {
                return End::Broken(StorageError::Unavailable("etcd watch held".into()));
            }
            _ = evict.tick() => {
                shared.evict();
                continue;
            }
            _ = probe.tick() => {
                if let Err(e) = check_compaction(shared, client).await {
                    tracing::debug!(error = %e, "watch cache: compaction probe failed");
                }
                continue;
            }
            m = stream.message() => m,
        };
        let resp = match message {
            Ok(Some(resp)) => resp,
            Ok(None) => {
                return End::Broken(StorageError::Unavailable(
                    "etcd closed the watch stream".into(),
                ))
            }
            Err(e) if is_compacted(&e) => return End::Compacted(0),
            Err(e) => return End::Broken(StorageError::Unavailable(format!("etcd watch: {e}"))),
        };
        if resp.canceled() {
            if resp.compact_revision() > 0 {
                return End::Compacted(resp.compact_revision());
            }
            return End::Broken(StorageError::Unavailable(format!(
                "etcd canceled the watch: {}",
                resp.cancel_reason()
            )));
        }
        *backoff = MIN_BACKOFF;
        if resp.events().is_empty() {
            continue;
        }
        let mut live = resp.events();
        if let Some(h) = history.as_deref_mut() {
            let split =
                live.partition_point(|e| e.kv().is_some_and(|kv| kv.mod_revision() <= h.until));
            let (past, rest) = live.split_at(split);
            if let Some(last) = past.last().and_then(|e| e.kv()) {
                h.through = last.mod_revision();
            }
            // The history's objects are mostly the listed ones (or each
            // other's previous states): share those instead of decoding a
            // second copy of every object.
            let listed = shared.read().objects.clone();
            let changes = past
                .iter()
                .filter_map(|event| history_change(shared, event, &listed, &mut seen))
                .collect();
            shared.backfill(changes);
            if rest.is_empty() {
                continue;
            }
            shared.backfilled(h.from);
            live = rest;
        }
        let batch: Vec<Incoming> = live
            .iter()
            .filter_map(|event| {
                let kv = event.kv()?;
                let revision = kv.mod_revision();
                match event.event_type() {
                    EtcdEventType::Put => {
                        let (key, put) = own_write(shared, kv, revision)
                            .or_else(|| decode(shared, kv, revision, true))?;
                        Some(Incoming { key, revision, put })
                    }
                    EtcdEventType::Delete => {
                        let key = key_of(kv)?;
                        shared.set_unreadable(&key, false);
                        Some(Incoming {
                            key,
                            revision,
                            put: None,
                        })
                    }
                }
            })
            .collect();
        shared.apply(batch);
        if history.is_some() {
            return End::Backfilled;
        }
    }
}

/// A change of etcd's history (read with previous values). A value at a
/// revision the cache already holds (the listed object, or the state an
/// earlier history change of the key produced) is shared, not decoded again.
fn history_change(
    shared: &Shared,
    event: &etcd_client::Event,
    listed: &Objects,
    seen: &mut HashMap<Arc<str>, Cached>,
) -> Option<Change> {
    let kv = event.kv()?;
    let revision = kv.mod_revision();
    let key = key_of(kv)?;
    let known = |key: &str, revision: Revision| {
        seen.get(key)
            .or_else(|| listed.get(key))
            .filter(|c| c.object.revision == revision)
            .cloned()
    };
    let put = match event.event_type() {
        EtcdEventType::Put => match known(&key, revision) {
            Some(c) => Some(Put {
                object: c.object,
                size: c.size,
                created: kv.create_revision() == revision,
            }),
            None => decode(shared, kv, revision, false)?.1,
        },
        EtcdEventType::Delete => None,
    };
    let prev = event.prev_kv().and_then(|p| {
        known(&key, p.mod_revision()).or_else(|| {
            decode(shared, p, p.mod_revision(), false)
                .and_then(|(_, put)| put)
                .map(|p| Cached {
                    object: p.object,
                    size: p.size,
                })
        })
    });
    match &put {
        Some(p) => {
            seen.insert(
                key.clone(),
                Cached {
                    object: p.object.clone(),
                    size: p.size,
                },
            );
        }
        None => {
            seen.remove(&key);
        }
    }
    if put.is_none() && prev.is_none() {
        return None;
    }
    Some(Change::from_history(
        revision,
        key,
        put,
        prev,
        tokio::time::Instant::now(),
    ))
}

/// Resolves when the watch is held (see `Cacher::hold_etcd_watch`); never
/// once the cache is gone.
async fn held(hold: &mut tokio::sync::watch::Receiver<bool>) {
    if hold.wait_for(|held| *held).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn key_of(kv: &KeyValue) -> Option<Arc<str>> {
    match std::str::from_utf8(kv.key()) {
        Ok(key) => Some(Arc::from(key)),
        Err(_) => {
            tracing::warn!(key = ?kv.key(), "watch cache: skipping a key that is not UTF-8");
            None
        }
    }
}

/// The key and object of `kv` at `revision` when this replica wrote it:
/// the object its write stored, not a second decode of the same bytes.
fn own_write(
    shared: &Shared,
    kv: &KeyValue,
    revision: Revision,
) -> Option<(Arc<str>, Option<Put>)> {
    let key = std::str::from_utf8(kv.key()).ok()?;
    // Compact, as every cached object: the tree the write made is the
    // handler's, not the cache's.
    let object = shared.take_written(key, revision)?.compacted();
    let key: Arc<str> = Arc::from(key);
    // What this replica wrote it could read: the key is readable now.
    shared.set_unreadable(&key, false);
    Some((
        key,
        Some(Put {
            object,
            size: kv.value().len() + kv.key().len(),
            created: kv.create_revision() == revision,
        }),
    ))
}

/// The key and object of `kv` at `revision`, its value read through the
/// store's transformer (decrypted). A value that does not decode or decrypt
/// is cached as absent (the etcd store reports it as `Corrupt` or
/// `Transform`). With `current` (the key's current value, not history),
/// a value the transformers cannot read marks the key unreadable: reads
/// covering it go to etcd, which reports the error.
fn decode(
    shared: &Shared,
    kv: &KeyValue,
    revision: Revision,
    current: bool,
) -> Option<(Arc<str>, Option<Put>)> {
    let key = key_of(kv)?;
    let data = match shared.transformers.read(kv.key(), kv.value()) {
        Ok(data) => {
            if current {
                shared.set_unreadable(&key, false);
            }
            data
        }
        Err(e) => {
            tracing::error!(%key, error = %e, "watch cache: stored value cannot be read");
            if current {
                shared.set_unreadable(&key, true);
            }
            return Some((key, None));
        }
    };
    match crate::transform::decode_plain(kv.key(), &data) {
        // The cache keeps the stored bytes (and what selectors read), not
        // the tree: it is decoded again on demand.
        Ok(value) => Some((
            key.clone(),
            Some(Put {
                object: Object::compact(key, &data, &value, revision),
                size: kv.value().len() + kv.key().len(),
                created: kv.create_revision() == revision,
            }),
        )),
        Err(e) => {
            tracing::warn!(%key, error = %e, "watch cache: stored value does not decode");
            Some((key, None))
        }
    }
}

/// Learns whether etcd compacted history the cache still serves: a
/// count-only read at the oldest retained revision; when that is compacted,
/// a watch from it, which etcd cancels naming its compaction revision.
pub(crate) async fn check_compaction(
    shared: &Shared,
    client: &Client,
) -> Result<Revision, StorageError> {
    let (oldest, known) = {
        let state = shared.read();
        if state.phase != Phase::Ready {
            return Ok(state.compacted);
        }
        let window = &state.window;
        let oldest = window
            .exact_floor()
            .map_or(window.floor(), |e| e.min(window.floor()));
        (oldest, state.compacted)
    };
    // Revision 1 is the oldest there is (a range at 0 reads the latest).
    let oldest = oldest.max(1);
    if oldest < known {
        return Ok(known);
    }
    let timeout = shared.config.etcd_timeout;
    let mut kv = client.kv_client();
    let options = GetOptions::new().with_revision(oldest).with_count_only();
    let get = call(timeout, kv.get(PROBE_KEY.to_vec(), Some(options)));
    match shared.telemetry.time("get", PROBE_KEY, get).await {
        Ok(_) => return Ok(known),
        Err(StorageError::Compacted { .. }) => {}
        Err(e) => return Err(e),
    }
    let mut watch_client = client.watch_client();
    let options = EtcdWatchOptions::new().with_start_revision(oldest);
    let probe = async {
        let mut stream = watch_client
            .watch(PROBE_KEY.to_vec(), Some(options))
            .await?;
        loop {
            match stream.message().await? {
                Some(resp) if resp.canceled() => return Ok(resp.compact_revision()),
                Some(resp) if resp.created() => continue,
                _ => return Ok(0),
            }
        }
    };
    // Past `oldest` for sure; exactly where is what the probe tells.
    let compacted = match call(timeout, probe).await {
        Ok(revision) if revision > oldest => revision,
        _ => oldest + 1,
    };
    Ok(shared.note_compacted(compacted))
}

/// The end of the key range holding every key that starts with `prefix`.
pub(crate) fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}
