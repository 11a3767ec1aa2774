//! The etcd v3 store: `Storage` over etcd-client.
//!
//! Layout: one etcd key per object, the value is the object as compact JSON
//! without `metadata.resourceVersion`; on the way out the resourceVersion is
//! set from the key's mod revision.
//!
//! Every unary request runs under the store's timeout, so an unreachable etcd
//! answers `StorageError::Unavailable` instead of hanging (tonic's balanced
//! channel would otherwise wait for an endpoint to become ready forever).
//! Within that timeout, reads are retried on unavailability and
//! transactions when etcd cannot have received them (`Retry`): the channel
//! keeps dead members in rotation.
//!
//! Revisions reported by writes:
//! - create / update: the revision of the write (the new mod revision);
//! - delete: the object as it was last stored, with `resourceVersion` (and
//!   `Object::revision`) set to the revision of the delete itself, as
//!   kube-apiserver's etcd3 store does and as the `DELETED` watch event carries.
//!
//! Reads: `MostRecent` is a linearizable range at the latest revision;
//! `NotOlderThan(n)` a serializable range, redone linearizably when its
//! revision is below `n` (then `TooLargeResourceVersion` if still below);
//! `Exact(n)` a range at revision `n`. Paginated lists read every page at the
//! first page's revision; with a selector, pages are read from etcd until
//! `limit` matching objects are found, as kube-apiserver does.

use crate::storage::{
    Encoded, EventType, ListOptions, ListResult, Object, Result, Revision, Storage, StorageError,
    WatchEvent, WatchOptions, WatchStream,
};
use crate::transform::Transformers;
use apimachinery::continue_token;
use apimachinery::read::{Freshness, Predicate};
use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType as EtcdEventType,
    GetOptions, GetResponse, KeyValue, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
    WatchOptions as EtcdWatchOptions,
};
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::Instrument;

/// The largest page asked of etcd when a selector makes pages come back
/// short and the page size grows.
const MAX_PAGE: i64 = 10_000;
/// The smallest page asked of etcd when a selector filters the list.
const MIN_FILTERED_PAGE: i64 = 100;
/// Events buffered between the etcd watch task and the consumer.
const WATCH_CHANNEL_CAPACITY: usize = 128;
/// A key no object uses, for header-only reads and probes.
const PROBE_KEY: &[u8] = b"\0";
/// First and longest pause between attempts of a retried etcd request.
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(5);
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(200);
/// Refused connections in a row after which every member counts as down
/// (with one member of three down, all of them refused by chance is about
/// one request in 3^16).
const REFUSALS_MAX: usize = 16;
/// Upper bound on the wait for the compaction point after a compacted error.
const COMPACTION_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Told about every etcd request the store (and the watch cache's
/// reflector) makes, so that metrics and trace fields can be kept outside
/// this crate, which depends on no metrics library.
pub trait EtcdObserver: Send + Sync {
    /// A request starts; `span` is its `etcd` span, whose empty `audit_id`
    /// field the observer may record.
    fn started(&self, span: &tracing::Span) {
        let _ = span;
    }

    /// A request ended after `elapsed`. `operation` is kube-apiserver's name
    /// for it (`get`, `list`, `create`, `update`, `delete`, ...), `key` the
    /// etcd key or prefix it concerned, `ok` whether etcd answered without
    /// an error (a failed precondition is an answer).
    fn finished(&self, operation: &'static str, key: &[u8], elapsed: Duration, ok: bool);
}

/// Times etcd requests and opens a span for each: one per store, shared by
/// its clones and its watch cache. The observer may be set after the store
/// was cloned (it is where the metrics live that the server builds later).
#[derive(Clone, Default)]
pub struct EtcdTelemetry {
    observer: Arc<OnceLock<Arc<dyn EtcdObserver>>>,
}

impl std::fmt::Debug for EtcdTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTelemetry")
            .field("observed", &self.observer.get().is_some())
            .finish()
    }
}

/// A key as span field: lossy UTF-8, written only when the span is recorded.
struct KeyField<'a>(&'a [u8]);

impl std::fmt::Display for KeyField<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.0))
    }
}

/// Whether etcd requests open spans of their own: only when spans are
/// exported (the server sets it with its exporter). Without an exporter a
/// log line written during an etcd request still carries the request's
/// `audit_id` from the enclosing request span, and formatting an `etcd`
/// span's fields for the log layer cost thousands of instructions per etcd
/// request (BENCHMARKS.md, "Instructions per GET: logging and futures").
static SPANS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the `etcd` spans of every store on (an exporter is installed) or
/// off.
pub fn export_spans(on: bool) {
    SPANS.store(on, std::sync::atomic::Ordering::Relaxed);
}

impl EtcdTelemetry {
    /// Sets the observer; `false` when one was set already (it stays).
    pub fn observe_with(&self, observer: Arc<dyn EtcdObserver>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Runs one etcd request `fut` inside an `etcd` span (fields
    /// `operation`, `key`, `audit_id`) and reports it to the observer.
    pub async fn time<T, E>(
        &self,
        operation: &'static str,
        key: &[u8],
        fut: impl Future<Output = std::result::Result<T, E>>,
    ) -> std::result::Result<T, E> {
        let observer = self.observer.get();
        if !SPANS.load(std::sync::atomic::Ordering::Relaxed) {
            let start = Instant::now();
            let result = fut.await;
            if let Some(o) = observer {
                o.finished(operation, key, start.elapsed(), result.is_ok());
            }
            return result;
        }
        let span = tracing::info_span!(
            "etcd",
            otel.kind = "client",
            db.system = "etcd",
            operation,
            key = %KeyField(key),
            audit_id = tracing::field::Empty,
        );
        if let Some(o) = observer {
            o.started(&span);
        }
        let start = Instant::now();
        let result = fut.instrument(span).await;
        if let Some(o) = observer {
            o.finished(operation, key, start.elapsed(), result.is_ok());
        }
        result
    }
}

/// `Storage` over an etcd v3 cluster.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    timeout: Duration,
    telemetry: EtcdTelemetry,
    /// Applied to every value written and read (encryption at rest).
    transformers: Transformers,
    /// Set by [`EtcdStore::with_fail_fast`].
    breaker: Option<Arc<Breaker>>,
}

/// How often a store failing fast asks its etcd whether it answers again.
const BREAKER_PROBE_EVERY: Duration = Duration::from_millis(500);

/// A cluster that stopped answering: requests fail at once (not after the
/// timeout) until a probe in the background gets an answer.
#[derive(Debug, Default)]
struct Breaker {
    down: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Builds a client for `endpoints` (`http://host:port` or `host:port`).
    ///
    /// Connections are made lazily: this fails only for invalid endpoints.
    /// `timeout` bounds connecting and every request (watch creation
    /// included); past it a request answers `StorageError::Unavailable`.
    pub async fn connect(endpoints: &[String], timeout: Duration) -> Result<Self> {
        if endpoints.is_empty() {
            return Err(StorageError::Internal("no etcd endpoints given".into()));
        }
        let options = ConnectOptions::new()
            .with_connect_timeout(timeout)
            // Pings only while streams (watches) are open: etcd answers pings
            // on idle connections with GOAWAY "too many pings".
            .with_keep_alive(Duration::from_secs(10), timeout.max(Duration::from_secs(1)))
            .with_keep_alive_while_idle(false)
            .with_require_leader(true);
        let client =
            match tokio::time::timeout(timeout, Client::connect(endpoints, Some(options))).await {
                Ok(Ok(client)) => client,
                Ok(Err(e)) => return Err(map_error(e)),
                Err(_) => {
                    return Err(StorageError::Unavailable(
                        "timed out connecting to etcd".into(),
                    ))
                }
            };
        Ok(Self {
            client,
            timeout,
            telemetry: EtcdTelemetry::default(),
            transformers: Transformers::none(),
            breaker: None,
        })
    }

    /// This store, failing fast while its cluster does not answer: once a
    /// request ends `Unavailable` (a timeout, or every member refusing),
    /// every request answers `Unavailable` at once, and a probe every
    /// 500 ms (a quorum read, bounded by the timeout) lets them through
    /// again when the cluster answers. For the clusters of
    /// `--etcd-servers-overrides`: a cluster that hangs would otherwise
    /// hold each request of its resources (and the request's seat in the
    /// server's in-flight limits) for the whole timeout. Watches already
    /// open are not affected (they resume on their own).
    pub fn with_fail_fast(mut self) -> Self {
        self.breaker = Some(Arc::default());
        self
    }

    /// `Unavailable` at once while the cluster is known not to answer.
    fn refused_fast(&self) -> Option<StorageError> {
        let breaker = self.breaker.as_ref()?;
        breaker
            .down
            .load(std::sync::atomic::Ordering::Acquire)
            .then(|| {
                StorageError::Unavailable(
                    "etcd did not answer lately; failing fast until it does".into(),
                )
            })
    }

    /// Trips the breaker (and starts its probe) when `result` says the
    /// cluster does not answer.
    fn observe<T>(&self, result: &Result<T>) {
        use std::sync::atomic::Ordering;
        let Some(breaker) = &self.breaker else {
            return;
        };
        if !matches!(result, Err(StorageError::Unavailable(_)))
            || breaker.down.swap(true, Ordering::AcqRel)
        {
            return;
        }
        tracing::warn!("etcd does not answer: failing its requests fast until it does");
        let (breaker, client, timeout) = (Arc::clone(breaker), self.client.clone(), self.timeout);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(BREAKER_PROBE_EVERY).await;
                let mut kv = client.kv_client();
                let options = GetOptions::new().with_count_only();
                let probe = kv.get(PROBE_KEY.to_vec(), Some(options));
                if let Ok(Ok(_)) = tokio::time::timeout(timeout, probe).await {
                    tracing::info!("etcd answers again");
                    breaker.down.store(false, Ordering::Release);
                    return;
                }
            }
        });
    }

    /// This store, transforming values with `transformers` (encryption at
    /// rest) on every write and read.
    pub fn with_transformers(mut self, transformers: Transformers) -> Self {
        self.transformers = transformers;
        self
    }

    /// The value transformers of this store (the watch cache decodes raw
    /// etcd values with them too).
    pub fn transformers(&self) -> &Transformers {
        &self.transformers
    }

    /// The underlying client (for health checks and tests).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Times this store's etcd requests (and its watch cache's): set an
    /// observer here for metrics; every request has a span regardless.
    pub fn telemetry(&self) -> &EtcdTelemetry {
        &self.telemetry
    }

    /// Creates `key` unless it exists (create revision 0).
    async fn put_new(&self, key: &str, value: &Value, opts: Option<PutOptions>) -> Result<Object> {
        let (data, stored) = encode_value(&self.transformers, key, value)?;
        let data = self.transformers.write(key, data)?;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, data, opts)]);
        let resp = self.txn("create", key, txn).await?;
        if !resp.succeeded() {
            return Err(StorageError::AlreadyExists { key: key.into() });
        }
        Ok(Object::at_revision(stored, txn_revision(&resp)?))
    }

    /// Replaces `key` if its mod revision is `expected`.
    async fn put_existing(
        &self,
        key: &str,
        value: &Value,
        expected: Revision,
        opts: Option<PutOptions>,
    ) -> Result<Object> {
        let encoded = self.encode_for(key, value)?;
        self.put_encoded(key, encoded, expected, opts).await
    }

    /// `value` encoded and transformed for `key`.
    fn encode_for(&self, key: &str, value: &Value) -> Result<Encoded> {
        let (data, stored) = encode_value(&self.transformers, key, value)?;
        let data = self.transformers.write(key, data)?;
        Ok(Encoded { data, stored })
    }

    /// Puts already encoded bytes at `key` if its mod revision is `expected`.
    async fn put_encoded(
        &self,
        key: &str,
        encoded: Encoded,
        expected: Revision,
        opts: Option<PutOptions>,
    ) -> Result<Object> {
        let Encoded { data, stored } = encoded;
        let txn = Txn::new()
            .when([
                Compare::create_revision(key, CompareOp::Greater, 0),
                Compare::mod_revision(key, CompareOp::Equal, expected),
            ])
            .and_then([TxnOp::put(key, data, opts)])
            .or_else([TxnOp::get(key, None)]);
        let resp = self.txn("update", key, txn).await?;
        if !resp.succeeded() {
            return Err(match current_of_failed(&resp) {
                Some(current) => StorageError::Conflict {
                    key: key.into(),
                    current,
                },
                None => StorageError::NotFound { key: key.into() },
            });
        }
        Ok(Object::at_revision(stored, txn_revision(&resp)?))
    }

    /// Ok when etcd answers a quorum read in time.
    pub async fn health(&self) -> Result<()> {
        self.revision().await.map(|_| ())
    }

    /// The latest revision of this etcd cluster (a quorum read).
    pub async fn revision(&self) -> Result<Revision> {
        let resp = self
            .range(
                "get",
                PROBE_KEY.to_vec(),
                GetOptions::new().with_count_only(),
            )
            .await?;
        Ok(header_revision(&resp))
    }

    /// Runs one etcd request under the store's timeout.
    async fn call<T>(&self, fut: impl Future<Output = Result<T, etcd_client::Error>>) -> Result<T> {
        if let Some(e) = self.refused_fast() {
            return Err(e);
        }
        let result = match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(map_error(e)),
            Err(_) => Err(StorageError::Unavailable(format!(
                "etcd did not answer within {:?}",
                self.timeout
            ))),
        };
        self.observe(&result);
        result
    }

    /// Runs one etcd request under the store's timeout, sending it again
    /// while it fails in a way `retry` allows. The client balances requests
    /// over every endpoint, including members that are down, so with one
    /// member of three gone about a third of the attempts are refused at
    /// once; the next attempt goes elsewhere, at once. When `REFUSALS_MAX`
    /// attempts in a row are refused, every member is down: the request
    /// fails then rather than at the timeout. Other retried failures (no
    /// leader during an election, a connection broken under a read) pause
    /// with a growing backoff, up to the timeout.
    async fn call_retrying<T, F, Fut>(&self, retry: Retry, mut request: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        if let Some(e) = self.refused_fast() {
            return Err(e);
        }
        let mut last = None;
        let attempts = async {
            let mut pause = RETRY_PAUSE_MIN;
            let mut refusals = 0;
            loop {
                match request().await {
                    Err(e) if retry.allows(&e) => {
                        tracing::debug!(error = %e, "etcd request failed; retrying");
                        if refused(&e) {
                            refusals += 1;
                            if refusals >= REFUSALS_MAX {
                                return Err(e);
                            }
                            last = Some(e);
                            tokio::time::sleep(RETRY_PAUSE_MIN).await;
                        } else {
                            refusals = 0;
                            last = Some(e);
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(RETRY_PAUSE_MAX);
                        }
                    }
                    other => return other,
                }
            }
        };
        let result = match tokio::time::timeout(self.timeout, attempts).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(map_error(e)),
            Err(_) => Err(StorageError::Unavailable(match last {
                Some(e) => format!("etcd did not answer within {:?}: {e}", self.timeout),
                None => format!("etcd did not answer within {:?}", self.timeout),
            })),
        };
        self.observe(&result);
        result
    }

    /// A range is a read: any unavailability is retried. `operation` is
    /// `get` for one key, `list` for a range (kube's names).
    async fn range(
        &self,
        operation: &'static str,
        key: Vec<u8>,
        options: GetOptions,
    ) -> Result<GetResponse> {
        let timed_key = key.clone();
        let request = self.call_retrying(Retry::Unavailable, || {
            let mut kv = self.client.kv_client();
            let (key, options) = (key.clone(), options.clone());
            async move { kv.get(key, Some(options)).await }
        });
        self.telemetry.time(operation, &timed_key, request).await
    }

    /// A transaction may write: retried only when etcd cannot have seen it.
    async fn txn(&self, operation: &'static str, key: &str, txn: Txn) -> Result<TxnResponse> {
        let request = self.call_retrying(Retry::NotReceived, || {
            let mut kv = self.client.kv_client();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        });
        self.telemetry
            .time(operation, key.as_bytes(), request)
            .await
    }

    /// The revision etcd has compacted up to, learned from a watch that starts
    /// at `requested` (which etcd cancels, naming its compaction point).
    /// Best effort: 0 when it cannot be learned quickly.
    async fn compacted_revision(&self, requested: Revision) -> Revision {
        let mut watch = self.client.watch_client();
        let probe = async move {
            let options = EtcdWatchOptions::new().with_start_revision(requested.max(1));
            let mut stream = watch.watch(PROBE_KEY.to_vec(), Some(options)).await.ok()?;
            loop {
                let resp = stream.message().await.ok()??;
                if resp.canceled() {
                    return Some(resp.compact_revision());
                }
                if !resp.created() {
                    return None;
                }
            }
        };
        let wait = self.timeout.min(COMPACTION_PROBE_TIMEOUT);
        tokio::time::timeout(wait, probe)
            .await
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// Fills in the revisions of a `Compacted` or `TooLargeResourceVersion`
    /// error from a read at `requested` (when `map_error` left them zero).
    async fn read_error(&self, err: StorageError, requested: Revision) -> StorageError {
        match err {
            StorageError::Compacted {
                requested: 0,
                compacted: 0,
            } => StorageError::Compacted {
                requested,
                compacted: self.compacted_revision(requested).await,
            },
            StorageError::TooLargeResourceVersion {
                requested: 0,
                current: 0,
            } => StorageError::TooLargeResourceVersion {
                requested,
                current: self.revision().await.unwrap_or(0),
            },
            other => other,
        }
    }

    /// A range whose header revision must be at least `min`: served
    /// serializably when that is fresh enough, linearizably otherwise.
    async fn range_not_older_than(
        &self,
        operation: &'static str,
        key: &[u8],
        options: GetOptions,
        min: Revision,
    ) -> Result<GetResponse> {
        let resp = self
            .range(operation, key.to_vec(), options.clone().with_serializable())
            .await?;
        if header_revision(&resp) >= min {
            return Ok(resp);
        }
        let resp = self.range(operation, key.to_vec(), options).await?;
        let current = header_revision(&resp);
        if current < min {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current,
            });
        }
        Ok(resp)
    }

    /// The initial state of a watch: the matching objects under `key` (a
    /// prefix when it ends in `/`) read with `freshness`, and the revision
    /// read at.
    async fn initial_state(
        &self,
        key: &str,
        freshness: Freshness,
        predicate: &Predicate,
    ) -> Result<(Vec<Object>, Revision)> {
        if key.ends_with('/') {
            let opts = ListOptions {
                freshness,
                limit: None,
                continue_from: None,
                predicate: predicate.clone(),
            };
            let list = self.list(key, &opts).await?;
            return Ok((list.items, list.revision));
        }
        let key = key.as_bytes();
        let resp = match freshness {
            Freshness::MostRecent => self.range("get", key.to_vec(), GetOptions::new()).await?,
            Freshness::NotOlderThan(min) => {
                self.range_not_older_than("get", key, GetOptions::new(), min)
                    .await?
            }
            Freshness::Exact(rev) => {
                let options = GetOptions::new().with_revision(rev);
                match self.range("get", key.to_vec(), options).await {
                    Ok(resp) => resp,
                    Err(e) => return Err(self.read_error(e, rev).await),
                }
            }
        };
        let read_at = match freshness {
            Freshness::Exact(rev) => rev,
            _ => header_revision(&resp),
        };
        let mut items = Vec::new();
        if let Some(kv) = resp.kvs().first() {
            let obj = decode_kv(&self.transformers, kv)?;
            if obj.matches(predicate) {
                items.push(obj);
            }
        }
        Ok((items, read_at))
    }
}

#[async_trait]
impl Storage for EtcdStore {
    async fn get(&self, key: &str, freshness: Freshness) -> Result<Option<Object>> {
        let resp = match freshness {
            Freshness::MostRecent => {
                self.range("get", key.as_bytes().to_vec(), GetOptions::new())
                    .await?
            }
            Freshness::NotOlderThan(min) => {
                self.range_not_older_than("get", key.as_bytes(), GetOptions::new(), min)
                    .await?
            }
            Freshness::Exact(rev) => {
                match self
                    .range(
                        "get",
                        key.as_bytes().to_vec(),
                        GetOptions::new().with_revision(rev),
                    )
                    .await
                {
                    Ok(resp) => resp,
                    Err(e) => return Err(self.read_error(e, rev).await),
                }
            }
        };
        resp.kvs()
            .first()
            .map(|kv| decode_kv(&self.transformers, kv))
            .transpose()
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        let range_end = prefix_range_end(prefix.as_bytes());
        // Where to start, at which revision (0 = latest) and how fresh the
        // first read must be.
        let (mut start, mut revision, min_revision): (Vec<u8>, Revision, Option<Revision>) =
            match (&opts.continue_from, opts.freshness) {
                (Some(from), _) => {
                    if from.revision == 0 {
                        return Err(StorageError::InvalidContinue(
                            "continue token has no resource version".into(),
                        ));
                    }
                    let key = format!("{prefix}{}", from.start_key).into_bytes();
                    (key, from.revision.max(0), None)
                }
                (None, Freshness::MostRecent) => (prefix.as_bytes().to_vec(), 0, None),
                (None, Freshness::NotOlderThan(min)) => (prefix.as_bytes().to_vec(), 0, Some(min)),
                (None, Freshness::Exact(rev)) => (prefix.as_bytes().to_vec(), rev.max(0), None),
            };
        let requested = revision;
        let limit = opts.limit.filter(|l| *l > 0);
        let everything = opts.predicate.is_everything();
        let mut page: i64 = match limit {
            None => 0,
            Some(l) => {
                let l = i64::try_from(l).unwrap_or(i64::MAX);
                if everything {
                    l
                } else {
                    l.max(MIN_FILTERED_PAGE)
                }
            }
        };

        let mut items = Vec::new();
        let mut last_key: Option<Vec<u8>> = None;
        let mut first = true;
        let (has_more, remaining) = loop {
            let mut options = GetOptions::new()
                .with_range(range_end.clone())
                .with_limit(page);
            if revision > 0 {
                options = options.with_revision(revision);
            }
            let read = match (first, min_revision) {
                (true, Some(min)) => {
                    self.range_not_older_than("list", &start, options, min)
                        .await
                }
                _ => self.range("list", start.clone(), options).await,
            };
            let mut resp = match read {
                Ok(resp) => resp,
                Err(e) => {
                    return Err(match (&opts.continue_from, e) {
                        (Some(from), StorageError::Compacted { .. }) => {
                            StorageError::ContinueExpired {
                                fresh_token: continue_token::encode(&from.start_key, -1),
                            }
                        }
                        (_, e) => self.read_error(e, requested.max(revision)).await,
                    });
                }
            };
            first = false;
            if revision <= 0 {
                revision = header_revision(&resp);
            }
            let mut has_more = resp.more();
            let count = resp.count();
            let kvs = resp.take_kvs();
            if kvs.is_empty() && has_more {
                return Err(StorageError::Internal(
                    "etcd returned no keys but reported more".into(),
                ));
            }
            let mut consumed: i64 = 0;
            for kv in &kvs {
                if limit.is_some_and(|l| items.len() >= l) {
                    has_more = true;
                    break;
                }
                consumed += 1;
                last_key = Some(kv.key().to_vec());
                let obj = decode_kv(&self.transformers, kv)?;
                if everything || obj.matches(&opts.predicate) {
                    items.push(obj);
                }
            }
            let full = limit.is_some_and(|l| items.len() >= l);
            if !has_more || limit.is_none() || full {
                break (has_more, count - consumed);
            }
            // A selector left the page short: read on after the last key,
            // with a larger page.
            if let Some(key) = &last_key {
                start = key.clone();
                start.push(0);
            }
            if page < MAX_PAGE {
                page = (page.saturating_mul(2)).min(MAX_PAGE);
            }
        };

        let mut result = ListResult {
            items,
            revision,
            continue_token: None,
            remaining_item_count: None,
        };
        if has_more {
            if let Some(key) = last_key {
                let relative = key.get(prefix.len()..).unwrap_or_default();
                let mut next =
                    String::from_utf8(relative.to_vec()).map_err(|_| StorageError::Corrupt {
                        key: String::from_utf8_lossy(&key).into_owned(),
                        message: "key is not UTF-8".into(),
                    })?;
                next.push('\0');
                result.continue_token = Some(continue_token::encode(&next, revision));
                if everything {
                    result.remaining_item_count = Some(remaining.max(0));
                }
            }
        }
        Ok(result)
    }

    async fn create(&self, key: &str, value: &Value) -> Result<Object> {
        self.put_new(key, value, None).await
    }

    async fn create_with_lease(&self, key: &str, value: &Value, lease: i64) -> Result<Object> {
        self.put_new(key, value, Some(PutOptions::new().with_lease(lease)))
            .await
    }

    async fn update(&self, key: &str, value: &Value, expected: Revision) -> Result<Object> {
        self.put_existing(key, value, expected, None).await
    }

    async fn update_with_lease(
        &self,
        key: &str,
        value: &Value,
        expected: Revision,
        lease: i64,
    ) -> Result<Object> {
        self.put_existing(
            key,
            value,
            expected,
            Some(PutOptions::new().with_lease(lease)),
        )
        .await
    }

    async fn grant_lease(&self, _key: &str, ttl_seconds: i64) -> Result<i64> {
        let mut client = self.client.clone();
        let resp = self
            .call(async move { client.lease_grant(ttl_seconds, None).await })
            .await?;
        Ok(resp.id())
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Object> {
        let delete = TxnOp::delete(key, Some(DeleteOptions::new().with_prev_key()));
        let txn = match expected {
            Some(rev) => Txn::new()
                .when([Compare::mod_revision(key, CompareOp::Equal, rev)])
                .and_then([delete])
                .or_else([TxnOp::get(key, None)]),
            None => Txn::new().and_then([delete]),
        };
        let resp = self.txn("delete", key, txn).await?;
        if !resp.succeeded() {
            return Err(match current_of_failed(&resp) {
                Some(current) => StorageError::Conflict {
                    key: key.into(),
                    current,
                },
                None => StorageError::NotFound { key: key.into() },
            });
        }
        let prev = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(mut d) => d.take_prev_kvs().into_iter().next(),
            _ => None,
        });
        let Some(prev) = prev else {
            return Err(StorageError::NotFound { key: key.into() });
        };
        let deleted_at = txn_revision(&resp)?;
        let value = decode_value(&self.transformers, &prev)?;
        Ok(Object::at_revision(value, deleted_at))
    }

    /// `initial_events` decides whether `Added` events for the state come
    /// first, read as a list with `initial_freshness` (quorum for
    /// `MostRecent`; for `NotOlderThan(n)` a serializable read, redone with
    /// quorum when older than `n`; at the revision for `Exact`). Without
    /// them, changes after `after_revision` (or after the current revision
    /// when it is 0) are sent. After the initial state comes one `Bookmark`
    /// at the snapshot revision.
    ///
    /// A compacted start revision is reported as a stream whose only item is
    /// `Err(Compacted)`, as is a compaction that overtakes the watch later;
    /// a `NotOlderThan(n)` that etcd has not reached, as a stream whose only
    /// item is `Err(TooLargeResourceVersion)` (etcd does not wait for `n`);
    /// a lost etcd connection ends the stream with `Err(Unavailable)`.
    async fn watch(&self, key_or_prefix: &str, opts: WatchOptions) -> Result<WatchStream> {
        let is_prefix = key_or_prefix.ends_with('/');
        // The revision the consumer already has; events start after it.
        let (initial, start) = if opts.initial_events {
            match self
                .initial_state(key_or_prefix, opts.initial_freshness, &opts.predicate)
                .await
            {
                Ok(state) => state,
                Err(
                    e @ (StorageError::Compacted { .. }
                    | StorageError::TooLargeResourceVersion { .. }),
                ) => return Ok(error_stream(e)),
                Err(e) => return Err(e),
            }
        } else if opts.after_revision > 0 {
            (Vec::new(), opts.after_revision)
        } else {
            (Vec::new(), self.revision().await?)
        };

        let mut options = EtcdWatchOptions::new()
            .with_start_revision(start.saturating_add(1))
            .with_prev_key();
        if is_prefix {
            options = options.with_prefix();
        }
        let mut watch_client = self.client.watch_client();
        // etcd confirms the creation first; a compacted start revision is
        // reported by a cancellation right after, handled by the task.
        let create = async {
            let mut stream = self
                .call(watch_client.watch(key_or_prefix, Some(options)))
                .await?;
            let first = self.call(stream.message()).await?;
            Ok::<_, StorageError>((stream, first))
        };
        let (mut stream, first) = self
            .telemetry
            .time("watch", key_or_prefix.as_bytes(), create)
            .await?;
        match first {
            Some(resp) if resp.canceled() => {
                if resp.compact_revision() > 0 {
                    return Ok(error_stream(StorageError::Compacted {
                        requested: start,
                        compacted: resp.compact_revision(),
                    }));
                }
                return Err(StorageError::Internal(format!(
                    "etcd refused the watch: {}",
                    resp.cancel_reason()
                )));
            }
            Some(_) => {}
            None => {
                return Err(StorageError::Unavailable(
                    "etcd closed the watch stream".into(),
                ))
            }
        }

        let (tx, rx) = mpsc::channel(WATCH_CHANNEL_CAPACITY);
        let opts_initial_events = opts.initial_events;
        let predicate = opts.predicate;
        let transformers = self.transformers.clone();
        tokio::spawn(async move {
            let sent_initial = opts_initial_events;
            for object in initial {
                let event = WatchEvent {
                    kind: EventType::Added,
                    object,
                };
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
            }
            if sent_initial {
                // Marks the end of the initial state: the revision the
                // snapshot was read at. The HTTP layer turns it into the
                // `k8s.io/initial-events-end` bookmark when asked for.
                let mark = WatchEvent {
                    kind: EventType::Bookmark,
                    object: Object::bookmark(start),
                };
                if tx.send(Ok(mark)).await.is_err() {
                    return;
                }
            }
            let mut last = start;
            loop {
                let message = tokio::select! {
                    _ = tx.closed() => return,
                    m = stream.message() => m,
                };
                let resp = match message {
                    Ok(Some(resp)) => resp,
                    Ok(None) => {
                        let _ = tx
                            .send(Err(StorageError::Unavailable(
                                "etcd closed the watch stream".into(),
                            )))
                            .await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(map_error(e))).await;
                        return;
                    }
                };
                if resp.canceled() {
                    let err = if resp.compact_revision() > 0 {
                        StorageError::Compacted {
                            requested: last,
                            compacted: resp.compact_revision(),
                        }
                    } else {
                        StorageError::Unavailable(format!(
                            "etcd canceled the watch: {}",
                            resp.cancel_reason()
                        ))
                    };
                    let _ = tx.send(Err(err)).await;
                    return;
                }
                for event in resp.events() {
                    match convert_event(&transformers, event, &predicate) {
                        Ok(Some(converted)) => {
                            last = converted.object.revision;
                            if tx.send(Ok(converted)).await.is_err() {
                                return;
                            }
                        }
                        Ok(None) => {
                            if let Some(kv) = event.kv() {
                                last = kv.mod_revision();
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    }
                }
            }
        });
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }

    async fn current_revision(&self, _key_or_prefix: &str) -> Result<Revision> {
        self.revision().await
    }

    fn encode(&self, key: &str, value: &Value) -> Result<Encoded> {
        self.encode_for(key, value)
    }

    async fn update_encoded(
        &self,
        key: &str,
        value: Encoded,
        expected: Revision,
        lease: Option<i64>,
    ) -> Result<Object> {
        let opts = lease.map(|l| PutOptions::new().with_lease(l));
        self.put_encoded(key, value, expected, opts).await
    }

    async fn is_stale(&self, key: &str) -> Result<bool> {
        if self.transformers.for_key(key).is_none() {
            return Ok(false);
        }
        let resp = self
            .range("get", key.as_bytes().to_vec(), GetOptions::new())
            .await?;
        Ok(resp
            .kvs()
            .first()
            .is_some_and(|kv| self.transformers.is_stale(key, kv.value())))
    }
}

/// A stream that yields `err` and ends.
fn error_stream(err: StorageError) -> WatchStream {
    Box::pin(futures_util::stream::iter([Err(err)]))
}

/// Translates one etcd event into what a watcher with `predicate` sees:
/// an object that stops matching is `Deleted`, one that starts matching is
/// `Added` (kube-apiserver's transitions). `None` when the watcher sees
/// nothing.
fn convert_event(
    transformers: &Transformers,
    event: &etcd_client::Event,
    predicate: &Predicate,
) -> Result<Option<WatchEvent>> {
    let Some(kv) = event.kv() else {
        return Err(StorageError::Internal("etcd event without a key".into()));
    };
    let revision = kv.mod_revision();
    match event.event_type() {
        EtcdEventType::Put => {
            let current = decode_kv(transformers, kv)?;
            let created = kv.create_revision() == revision;
            if predicate.is_everything() {
                let kind = if created {
                    EventType::Added
                } else {
                    EventType::Modified
                };
                return Ok(Some(WatchEvent {
                    kind,
                    object: current,
                }));
            }
            let now = current.matches(predicate);
            if created {
                return Ok(now.then_some(WatchEvent {
                    kind: EventType::Added,
                    object: current,
                }));
            }
            let previous = event
                .prev_kv()
                .map(|p| decode_value(transformers, p))
                .transpose()?;
            let before = previous.as_ref().is_some_and(|p| predicate.matches(p));
            Ok(match (before, now, previous) {
                (true, true, _) => Some(WatchEvent {
                    kind: EventType::Modified,
                    object: current,
                }),
                (false, true, _) => Some(WatchEvent {
                    kind: EventType::Added,
                    object: current,
                }),
                (true, false, Some(previous)) => Some(WatchEvent {
                    kind: EventType::Deleted,
                    object: Object::at_revision(previous, revision),
                }),
                _ => None,
            })
        }
        EtcdEventType::Delete => {
            let Some(prev) = event.prev_kv() else {
                return Err(StorageError::Internal(format!(
                    "etcd delete event for {} without the previous value",
                    String::from_utf8_lossy(kv.key())
                )));
            };
            let previous = decode_value(transformers, prev)?;
            if !predicate.matches(&previous) {
                return Ok(None);
            }
            Ok(Some(WatchEvent {
                kind: EventType::Deleted,
                object: Object::at_revision(previous, revision),
            }))
        }
    }
}

/// The value to store (without `metadata.resourceVersion`), encoded as
/// `transformers` say for `key`, and the object a read of it gives back.
fn encode_value(transformers: &Transformers, key: &str, value: &Value) -> Result<(Vec<u8>, Value)> {
    let mut stored = value.clone();
    if let Some(Value::Object(meta)) = stored.get_mut("metadata") {
        meta.shift_remove("resourceVersion");
    }
    // Stored in the order kube-apiserver writes the object in, once per
    // write: every read, list and watch event then serves these bytes (and
    // the cache the value decoded from them) without reordering.
    k8s_proto::order_object(&mut stored);
    transformers.encode(key, stored)
}

/// The stored value of `kv` (through its transformer), without a
/// resourceVersion.
///
/// Not reordered: everything this server stores is already in kube's
/// order (`encode_value`), and so are custom resources kube-apiserver
/// itself wrote (sorted JSON) and protobuf values (decoded in field
/// order). Only values written by versions of this
/// server before the order was kept come back in their client's order,
/// until their next write; reordering every read for them would tax every
/// LIST from etcd and every cache fill for a one-off migration.
fn decode_value(transformers: &Transformers, kv: &KeyValue) -> Result<Value> {
    transformers.decode(kv.key(), kv.value())
}

/// The object stored in `kv`, at its mod revision.
fn decode_kv(transformers: &Transformers, kv: &KeyValue) -> Result<Object> {
    Ok(Object::at_revision(
        decode_value(transformers, kv)?,
        kv.mod_revision(),
    ))
}

fn header_revision(resp: &GetResponse) -> Revision {
    resp.header().map(|h| h.revision()).unwrap_or(0)
}

fn txn_revision(resp: &TxnResponse) -> Result<Revision> {
    resp.header()
        .map(|h| h.revision())
        .ok_or_else(|| StorageError::Internal("etcd transaction response without header".into()))
}

/// The mod revision of the key read by the else branch of a failed txn.
fn current_of_failed(resp: &TxnResponse) -> Option<Revision> {
    resp.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.mod_revision()),
        _ => None,
    })
}

/// The end of the key range holding every key that starts with `prefix`.
fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the key space.
    vec![0]
}

/// Which failed requests `EtcdStore::call_retrying` sends again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Any failure that maps to `Unavailable` (safe for reads only).
    Unavailable,
    /// Only failures that prove etcd did not process the request: no
    /// connection could be made, or the member refused it for want of a
    /// leader before handling it (etcd checks `require_leader` first). A
    /// write whose answer was lost on a broken connection may have been
    /// applied and is never sent twice.
    NotReceived,
}

impl Retry {
    fn allows(self, err: &etcd_client::Error) -> bool {
        match self {
            Retry::Unavailable => matches!(map_error_ref(err), Some(StorageError::Unavailable(_))),
            Retry::NotReceived => {
                refused(err)
                    || matches!(err, etcd_client::Error::GRpcStatus(s)
                        if s.code() == tonic::Code::Unavailable
                            && s.message().contains("no leader"))
            }
        }
    }
}

/// No connection to the chosen member could be made: the request never
/// left this process.
fn refused(err: &etcd_client::Error) -> bool {
    matches!(err, etcd_client::Error::GRpcStatus(s)
        if s.code() == tonic::Code::Unavailable && s.message().contains("connect error"))
}

/// The storage error of a client error that can be retried, without
/// consuming it.
fn map_error_ref(err: &etcd_client::Error) -> Option<StorageError> {
    match err {
        etcd_client::Error::GRpcStatus(s) => Some(map_error(etcd_client::Error::GRpcStatus(
            tonic::Status::new(s.code(), s.message()),
        ))),
        etcd_client::Error::TransportError(_)
        | etcd_client::Error::IoError(_)
        | etcd_client::Error::WatchError(_) => Some(StorageError::Unavailable(String::new())),
        _ => None,
    }
}

/// Maps a client error to a storage error. `Compacted` and
/// `TooLargeResourceVersion` come back with zero revisions for the caller to
/// fill in.
fn map_error(err: etcd_client::Error) -> StorageError {
    match err {
        etcd_client::Error::GRpcStatus(status) => {
            let message = status.message();
            if message.contains("required revision has been compacted") {
                return StorageError::Compacted {
                    requested: 0,
                    compacted: 0,
                };
            }
            if message.contains("required revision is a future revision") {
                return StorageError::TooLargeResourceVersion {
                    requested: 0,
                    current: 0,
                };
            }
            // A connection lost mid-stream surfaces as an h2 error in a
            // status of code Unknown or Internal.
            let broken_connection = message.contains("h2 protocol error")
                || message.contains("transport error")
                || message.contains("connection");
            if broken_connection {
                return StorageError::Unavailable(format!("etcd: {message}"));
            }
            match status.code() {
                tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Cancelled
                | tonic::Code::ResourceExhausted
                | tonic::Code::Aborted => StorageError::Unavailable(format!("etcd: {message}")),
                _ => StorageError::Internal(format!("etcd: {message}")),
            }
        }
        etcd_client::Error::TransportError(e) => StorageError::Unavailable(format!("etcd: {e}")),
        etcd_client::Error::IoError(e) => StorageError::Unavailable(format!("etcd: {e}")),
        etcd_client::Error::WatchError(e) => StorageError::Unavailable(format!("etcd watch: {e}")),
        other => StorageError::Internal(format!("etcd: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_end_of_prefix() {
        assert_eq!(
            prefix_range_end(b"/registry/pods/"),
            b"/registry/pods0".to_vec()
        );
        assert_eq!(prefix_range_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_range_end(b"\xff\xff"), vec![0]);
    }

    #[test]
    fn resource_version_is_not_stored() {
        let value = serde_json::json!({
            "kind": "Pod",
            "metadata": {"name": "a", "resourceVersion": "7", "uid": "u"},
        });
        let (data, stored) =
            encode_value(&Transformers::none(), "/r/pods/a", &value).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&data),
            r#"{"kind":"Pod","metadata":{"name":"a","uid":"u"}}"#
        );
        let object = Object::at_revision(stored, 9);
        assert_eq!(object.revision, 9);
        assert_eq!(object.value()["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn writes_are_retried_only_when_etcd_never_saw_them() {
        let err = |s: tonic::Status| etcd_client::Error::GRpcStatus(s);
        let refused = err(tonic::Status::unavailable("tcp connect error"));
        let no_leader = err(tonic::Status::unavailable("etcdserver: no leader"));
        let broken = err(tonic::Status::unknown(
            "h2 protocol error: error reading a body from connection",
        ));
        let timed_out = err(tonic::Status::unavailable("etcdserver: request timed out"));
        let compacted = err(tonic::Status::out_of_range(
            "etcdserver: mvcc: required revision has been compacted",
        ));
        for e in [&refused, &no_leader] {
            assert!(Retry::NotReceived.allows(e), "{e}");
            assert!(Retry::Unavailable.allows(e), "{e}");
        }
        for e in [&broken, &timed_out] {
            assert!(!Retry::NotReceived.allows(e), "{e}");
            assert!(Retry::Unavailable.allows(e), "{e}");
        }
        assert!(!Retry::NotReceived.allows(&compacted));
        assert!(!Retry::Unavailable.allows(&compacted));
    }

    #[test]
    fn compaction_errors_are_recognised() {
        let status =
            tonic::Status::out_of_range("etcdserver: mvcc: required revision has been compacted");
        assert!(matches!(
            map_error(etcd_client::Error::GRpcStatus(status)),
            StorageError::Compacted { .. }
        ));
        let status =
            tonic::Status::out_of_range("etcdserver: mvcc: required revision is a future revision");
        assert!(matches!(
            map_error(etcd_client::Error::GRpcStatus(status)),
            StorageError::TooLargeResourceVersion { .. }
        ));
        let status =
            tonic::Status::unknown("h2 protocol error: error reading a body from connection");
        assert!(matches!(
            map_error(etcd_client::Error::GRpcStatus(status)),
            StorageError::Unavailable(_)
        ));
        let status = tonic::Status::unavailable("etcdserver: no leader");
        assert!(matches!(
            map_error(etcd_client::Error::GRpcStatus(status)),
            StorageError::Unavailable(_)
        ));
    }
}
