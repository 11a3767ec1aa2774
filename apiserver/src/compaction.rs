//! Periodic etcd compaction, coordinated through etcd so that one compaction
//! happens per interval however many replicas run.
//!
//! The scheme is kube-apiserver's (`pkg/storage/etcd3/compact.go`): every
//! replica keeps `(version, revision)`: the version of the coordination key
//! it last saw and the etcd revision it saw then. Each interval it tries a
//! transaction "if the key's version is still `version`, write `revision`
//! into it". Exactly one replica's transaction succeeds per interval (the
//! write bumps the version, so every other compare fails); that winner
//! compacts etcd to `revision`, the revision recorded one interval earlier,
//! so every resourceVersion younger than one interval stays readable. A
//! loser adopts the key's current version and carries on.
//!
//! The key is kube's own: `compact_rev_key` at the root of etcd, outside
//! every `--etcd-prefix` (compaction is per etcd, not per prefix), so a
//! fleet mixing kube-apiserver and this server still compacts once per
//! interval, and servers under different prefixes of one etcd do too.
//! After its own compaction a replica asks its cache to re-check
//! compaction at once; other replicas' caches learn of it within their
//! periodic check (`compaction_check_interval`, 30 s by default) or as soon
//! as an etcd read fails as compacted.

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use watchcache::etcd::EtcdTelemetry;
use watchcache::Cacher;

/// The coordination key's name under the etcd prefix (kube's name).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// Why one compaction round failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("etcd request failed: {0}")]
    Etcd(#[source] etcd_client::Error),
    #[error("etcd request timed out after {0:?}")]
    Timeout(Duration),
    #[error("etcd answered the compaction transaction without {0}")]
    Malformed(&'static str),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// This replica won the round and compacted etcd to this revision.
    Compacted(i64),
    /// This replica won the first round: it recorded a revision to compact
    /// next time and compacted nothing (kube does not compact on bootstrap).
    Recorded,
    /// Another replica won this round (or one before it); nothing done.
    Lost,
}

/// Counters of a compactor, shared with whoever wants to read them.
#[derive(Debug, Default)]
pub struct Counters {
    /// Rounds tried (won or lost or failed).
    pub rounds: AtomicU64,
    /// Compactions this replica performed.
    pub compactions: AtomicU64,
    /// Rounds that failed (etcd unreachable, ...).
    pub failures: AtomicU64,
}

/// One replica's compactor.
pub struct Compactor {
    client: Client,
    key: String,
    interval: Duration,
    timeout: Duration,
    cache: Option<Cacher>,
    /// When set, rounds run only while this replica leads; the
    /// compare-and-swap keeps a round single even across a hand-over.
    leader: Option<tokio::sync::watch::Receiver<bool>>,
    /// The coordination key's version this replica last saw.
    version: i64,
    /// The etcd revision this replica saw at its last round.
    revision: i64,
    counters: Arc<Counters>,
    /// Times the rounds' etcd requests (metrics, spans).
    telemetry: EtcdTelemetry,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("key", &self.key)
            .field("interval", &self.interval)
            .field("version", &self.version)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

/// The coordination key: kube's, at the root of etcd (kube's compactor
/// uses an etcd client without the storage prefix).
pub fn coordination_key() -> &'static str {
    COMPACT_REV_KEY
}

impl Compactor {
    /// A compactor of etcd; `timeout` bounds each etcd request.
    pub fn new(client: Client, interval: Duration, timeout: Duration) -> Self {
        Compactor {
            client,
            key: coordination_key().to_string(),
            interval,
            timeout,
            cache: None,
            leader: None,
            version: 0,
            revision: 0,
            counters: Arc::default(),
            telemetry: EtcdTelemetry::default(),
        }
    }

    /// Reports the rounds' etcd requests (`update` of the coordination key,
    /// `compact`) as the store's requests are.
    pub fn with_telemetry(mut self, telemetry: EtcdTelemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Runs rounds only while `leading` says this replica is the leader.
    pub fn with_leader(mut self, leading: tokio::sync::watch::Receiver<bool>) -> Self {
        self.leader = Some(leading);
        self
    }

    /// Tells `cache` at once about compactions this replica performs.
    pub fn with_cache(mut self, cache: Cacher) -> Self {
        self.cache = Some(cache);
        self
    }

    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// Runs a round every interval, forever (spawn it; abort to stop).
    pub async fn run(mut self) {
        loop {
            tokio::time::sleep(self.interval).await;
            if self.leader.as_ref().is_some_and(|l| !*l.borrow()) {
                continue;
            }
            match self.round().await {
                Ok(Outcome::Compacted(rev)) => {
                    tracing::info!(revision = rev, "compacted etcd")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "etcd compaction round failed"),
            }
        }
    }

    /// One round: the compare-and-swap, and the compaction when won.
    pub async fn round(&mut self) -> Result<Outcome> {
        self.counters.rounds.fetch_add(1, Ordering::Relaxed);
        let result = self.try_round().await;
        if result.is_err() {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    async fn try_round(&mut self) -> Result<Outcome> {
        let txn = Txn::new()
            .when([Compare::version(
                self.key.as_str(),
                CompareOp::Equal,
                self.version,
            )])
            .and_then([TxnOp::put(
                self.key.as_str(),
                self.revision.to_string(),
                None,
            )])
            .or_else([TxnOp::get(self.key.as_str(), None)]);
        let mut client = self.client.clone();
        let key = self.key.clone();
        let txn = self.bounded(client.txn(txn));
        let resp = self.telemetry.time("update", key.as_bytes(), txn).await?;
        let current = resp
            .header()
            .map(|h| h.revision())
            .ok_or(Error::Malformed("a header"))?;
        if !resp.succeeded() {
            let version = resp
                .op_responses()
                .into_iter()
                .find_map(|op| match op {
                    TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.version()),
                    _ => None,
                })
                .unwrap_or(0);
            self.version = version;
            self.revision = current;
            return Ok(Outcome::Lost);
        }
        let to = self.revision;
        self.version += 1;
        self.revision = current;
        if to == 0 {
            return Ok(Outcome::Recorded);
        }
        let mut client = self.client.clone();
        let compact = self.bounded(client.compact(to, None));
        self.telemetry
            .time("compact", key.as_bytes(), compact)
            .await?;
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        if let Some(cache) = &self.cache {
            if let Err(e) = cache.check_compaction().await {
                tracing::debug!(error = %e, "watch cache: compaction check failed");
            }
        }
        Ok(Outcome::Compacted(to))
    }

    async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r.map_err(Error::Etcd),
            Err(_) => Err(Error::Timeout(self.timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_kubes_outside_every_prefix() {
        assert_eq!(coordination_key(), "compact_rev_key");
        assert!(!coordination_key().starts_with('/'));
    }
}
