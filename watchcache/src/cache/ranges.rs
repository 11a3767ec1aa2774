//! Reading the whole prefix at one revision in parallel key ranges (the
//! cache's start-up list, issue 31).
//!
//! etcd 3.4 walks its key index from a range's start to the range's END
//! for every request, even one with a limit (it counts the rest and keeps
//! a revision for each key). Pages of one range over the whole prefix
//! therefore cost O(n²) in the index: about half of etcd's time at
//! 1,000,000 keys. Here the prefix is first cut into ranges of a bounded
//! size (counts at the list's revision, per next byte after a range's
//! common prefix), and each range is paged with its own end, up to
//! [`PARALLEL`] at a time. Every request names the same revision `R`, so
//! the pages, taken in range order, are exactly what one range at `R`
//! returns; a write during the load is at a later revision and is not
//! seen. If `R` is compacted meanwhile, a request fails with
//! `Compacted` and the caller lists again.

use super::reflector::{call, prefix_range_end, MAX_MESSAGE};
use crate::etcd::EtcdTelemetry;
use crate::storage::{Revision, StorageError};
use etcd_client::{Client, GetOptions, KeyValue, KvClient};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};

/// Ranges read at the same time.
pub(crate) const PARALLEL: usize = 4;
/// Count requests of the planner in flight at the same time.
const PLAN_PARALLEL: usize = 8;
/// Levels the planner cuts a range it cannot split evenly.
const PLAN_DEPTH: usize = 6;
/// Ranges at most (more only add requests).
const MAX_RANGES: u64 = 32;
/// Pages a range reader may read ahead of the consumer.
const AHEAD: usize = 2;
/// Split points tried after a common prefix: the bytes of kube's keys
/// (`-`, `.`, `/`, digits, letters). A key with any other byte still falls
/// in one of the ranges between them.
const SPLIT_BYTES: std::ops::RangeInclusive<u8> = b'-'..=b'z';

/// How the prefix is read.
#[derive(Debug, Clone)]
pub struct RangeRead {
    pub timeout: Duration,
    /// Keys per page.
    pub page: i64,
    /// Keys per range the planner aims at; `None` picks from the count
    /// (a sixteenth of it, at least four pages). `Some(0)` reads one range.
    pub range_keys: Option<u64>,
}

/// One key range `[start, end)`.
type Range = (Vec<u8>, Vec<u8>);

/// Reads every key under `prefix` at one revision (the latest when
/// `revision` is 0): the revision read and its pages, in key order.
pub(crate) async fn read_prefix(
    client: &Client,
    telemetry: &EtcdTelemetry,
    prefix: &[u8],
    revision: Revision,
    how: &RangeRead,
) -> Result<(Revision, Pages), StorageError> {
    let kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
    let end = prefix_range_end(prefix);
    let reader = Reader {
        kv,
        telemetry: telemetry.clone(),
        timeout: how.timeout,
        revision,
    };
    // The revision and how many keys there are, from one count.
    let (revision, total) = reader.count_at(prefix, &end, revision).await?;
    let reader = Arc::new(Reader { revision, ..reader });
    let page_size = how.page.max(1);
    let target = match how.range_keys {
        Some(keys) => keys,
        None => (total / 16).max(4 * page_size as u64),
    };
    let ranges = if target == 0 || total <= target {
        vec![(prefix.to_vec(), end)]
    } else {
        let target = target.max(total / MAX_RANGES);
        reader
            .split(prefix.to_vec(), end, total, target, PLAN_DEPTH)
            .await?
    };
    tracing::debug!(
        revision,
        keys = total,
        ranges = ranges.len(),
        "watch cache: reading in ranges"
    );
    // One reader task per range, started in key order as permits free up
    // (so the earliest unfinished range always holds one), each a few
    // pages ahead of the consumer, who takes the ranges in order.
    let range_count = ranges.len();
    let parallel = knob("WATCHCACHE_LIST_PARALLEL").unwrap_or(PARALLEL as u64) as usize;
    let permits = Arc::new(Semaphore::new(parallel.max(1)));
    let (ranges_tx, ranges_rx) = mpsc::channel(parallel.max(1));
    let starter = tokio::spawn(async move {
        for (start, end) in ranges {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let (tx, rx) = mpsc::channel(AHEAD);
            if ranges_tx.send(rx).await.is_err() {
                return;
            }
            let reader = reader.clone();
            tokio::spawn(async move {
                let _permit = permit;
                reader.read_range(start, end, page_size, tx).await;
            });
        }
    });
    Ok((
        revision,
        Pages {
            ranges: ranges_rx,
            current: None,
            starter,
            ranges_read: range_count,
        },
    ))
}

type PageResult = Result<Vec<KeyValue>, StorageError>;

/// The pages of a [`read_prefix`], in key order. Dropping it stops the
/// readers.
pub(crate) struct Pages {
    ranges: mpsc::Receiver<mpsc::Receiver<PageResult>>,
    current: Option<mpsc::Receiver<PageResult>>,
    starter: tokio::task::JoinHandle<()>,
    /// How many ranges the prefix was cut into.
    pub(crate) ranges_read: usize,
}

impl Pages {
    /// The next page; `None` after the last.
    pub(crate) async fn next(&mut self) -> Option<PageResult> {
        loop {
            if let Some(current) = &mut self.current {
                if let Some(page) = current.recv().await {
                    return Some(page);
                }
            }
            self.current = Some(self.ranges.recv().await?);
        }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        self.starter.abort();
    }
}

struct Reader {
    kv: KvClient,
    telemetry: EtcdTelemetry,
    timeout: Duration,
    revision: Revision,
}

impl Reader {
    /// How many keys `[start, end)` holds at `revision` (the latest when
    /// 0), and the revision counted.
    async fn count_at(
        &self,
        start: &[u8],
        end: &[u8],
        revision: Revision,
    ) -> Result<(Revision, u64), StorageError> {
        let mut options = GetOptions::new().with_range(end.to_vec()).with_count_only();
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let mut kv = self.kv.clone();
        let get = call(self.timeout, kv.get(start.to_vec(), Some(options)));
        let resp = self.telemetry.time("list", start, get).await?;
        let counted = resp.header().map(|h| h.revision()).unwrap_or(0);
        Ok((
            if revision > 0 { revision } else { counted },
            resp.count().max(0) as u64,
        ))
    }

    async fn count(&self, start: &[u8], end: &[u8]) -> Result<u64, StorageError> {
        Ok(self.count_at(start, end, self.revision).await?.1)
    }

    /// The first key of `[start, end)` at the revision.
    async fn first_key(&self, start: &[u8], end: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let options = GetOptions::new()
            .with_range(end.to_vec())
            .with_revision(self.revision)
            .with_keys_only()
            .with_limit(1);
        let mut kv = self.kv.clone();
        let get = call(self.timeout, kv.get(start.to_vec(), Some(options)));
        let resp = self.telemetry.time("list", start, get).await?;
        Ok(resp.kvs().first().map(|kv| kv.key().to_vec()))
    }

    /// Cuts `[start, end)` (holding `count` keys) into ranges of about
    /// `target` keys, in key order.
    fn split<'a>(
        self: &'a Arc<Self>,
        start: Vec<u8>,
        end: Vec<u8>,
        count: u64,
        target: u64,
        depth: usize,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Range>, StorageError>> + Send + 'a>> {
        Box::pin(async move {
            if count <= target || depth == 0 {
                return Ok(vec![(start, end)]);
            }
            // Every key of the range starts with `common`.
            let mut common = if end == prefix_range_end(&start) {
                start.clone()
            } else {
                common_prefix(&start, &end).to_vec()
            };
            // A whole subtree: find the prefix every key shares, by a
            // binary search on the first key's prefixes (a count each), so
            // that a deep common prefix does not cost a level per byte.
            if end == prefix_range_end(&start) {
                if let Some(first) = self.first_key(&start, &end).await? {
                    let (mut shared, mut longer) = (common.len(), first.len() + 1);
                    while longer - shared > 1 {
                        let mid = (shared + longer) / 2;
                        let candidate = &first[..mid];
                        if self.count(candidate, &prefix_range_end(candidate)).await? == count {
                            shared = mid;
                        } else {
                            longer = mid;
                        }
                    }
                    if shared > common.len() {
                        common = first[..shared].to_vec();
                    }
                }
            }
            let mut bounds = vec![start.clone()];
            for b in SPLIT_BYTES {
                let mut bound = common.clone();
                bound.push(b);
                if bound > start && bound < end {
                    bounds.push(bound);
                }
            }
            bounds.push(end.clone());
            if bounds.len() <= 2 {
                return Ok(vec![(start, end)]);
            }
            let buckets: Vec<Range> = bounds
                .windows(2)
                .map(|w| (w[0].clone(), w[1].clone()))
                .collect();
            let counts: Vec<u64> = stream::iter(buckets.clone())
                .map(|(s, e)| {
                    let reader = Arc::clone(self);
                    async move { reader.count(&s, &e).await }
                })
                .buffered(PLAN_PARALLEL)
                .try_collect()
                .await?;
            // Everything in one byte's subtree: go down into it without
            // spending a level.
            let full: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
            if let [only] = full[..] {
                let (s, e) = &buckets[only];
                if *e == prefix_range_end(s) && s.len() > common.len() {
                    return self
                        .split(s.clone(), e.clone(), counts[only], target, depth)
                        .await;
                }
            }
            let mut out: Vec<Range> = Vec::new();
            let mut open: Option<(Range, u64)> = None;
            for ((s, e), n) in buckets.into_iter().zip(counts) {
                if n > target {
                    if let Some((r, _)) = open.take() {
                        out.push(r);
                    }
                    out.extend(self.split(s, e, n, target, depth - 1).await?);
                    continue;
                }
                open = match open.take() {
                    Some(((os, _), on)) if on + n <= target => Some(((os, e), on + n)),
                    Some((r, _)) => {
                        out.push(r);
                        Some(((s, e), n))
                    }
                    None => Some(((s, e), n)),
                };
            }
            if let Some((r, _)) = open {
                out.push(r);
            }
            Ok(out)
        })
    }

    /// Pages of `[start, end)` at the revision into `tx`, until the range
    /// ends, a request fails (the error is sent) or the consumer is gone.
    async fn read_range(
        &self,
        mut start: Vec<u8>,
        end: Vec<u8>,
        page: i64,
        tx: mpsc::Sender<Result<Vec<KeyValue>, StorageError>>,
    ) {
        let mut kv = self.kv.clone();
        loop {
            let options = GetOptions::new()
                .with_range(end.clone())
                .with_revision(self.revision)
                .with_limit(page);
            let get = call(self.timeout, kv.get(start.clone(), Some(options)));
            let mut resp = match self.telemetry.time("list", &start, get).await {
                Ok(resp) => resp,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            let more = resp.more();
            let kvs = resp.take_kvs();
            let next = match kvs.last() {
                Some(last) if more => {
                    let mut next = last.key().to_vec();
                    next.push(0);
                    Some(next)
                }
                _ => None,
            };
            if tx.send(Ok(kvs)).await.is_err() {
                return;
            }
            match next {
                Some(next) => start = next,
                None => return,
            }
        }
    }
}

/// A start-up knob for measurements (issue 31): a number from the
/// environment.
pub(crate) fn knob(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn common_prefix<'a>(a: &'a [u8], b: &[u8]) -> &'a [u8] {
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    &a[..n]
}

/// Every key-value under `prefix` at `revision` (0: the latest), read as
/// the cache reads it at start-up: the revision read, how many ranges it
/// was cut into, and the key-values in order (for tests).
#[cfg(feature = "test-util")]
pub async fn read_all(
    client: &Client,
    prefix: &[u8],
    revision: Revision,
    how: &RangeRead,
) -> Result<(Revision, usize, Vec<KeyValue>), StorageError> {
    let (revision, mut pages) =
        read_prefix(client, &EtcdTelemetry::default(), prefix, revision, how).await?;
    let mut all = Vec::new();
    while let Some(page) = pages.next().await {
        all.extend(page?);
    }
    Ok((revision, pages.ranges_read, all))
}
