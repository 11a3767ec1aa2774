//! Leader election through etcd, for work that must run on exactly one
//! replica (compaction today, controllers later).
//!
//! The leader is whoever created the election key, attached to its own etcd
//! lease. It keeps the lease alive; when it dies or loses etcd, the lease
//! expires after its TTL, etcd deletes the key, and another replica creates
//! it. Each renewal also checks that the key still carries our lease, so a
//! replica never believes it leads after its key is gone.
//!
//! States: `Campaigning` (no lease or the key is someone else's; retries
//! every `retry`) → `Leading` (renewing every TTL/3) → back to
//! `Campaigning` when a renewal fails or the key is no longer ours.

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running election; dropping it stops campaigning (the lease then
/// expires), `resign` gives leadership up at once.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    task: JoinHandle<()>,
    resign: watch::Sender<bool>,
}

#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// The election key (inside the server's prefix, under no resource).
    pub key: String,
    /// What the key holds: this replica's identity.
    pub identity: String,
    /// Lease TTL in seconds: how long leadership outlives a dead leader.
    pub ttl_seconds: i64,
    /// Pause between campaigns while someone else leads.
    pub retry: Duration,
    /// Bound on each etcd request.
    pub timeout: Duration,
}

impl Leadership {
    pub fn spawn(client: Client, config: ElectionConfig) -> Leadership {
        let (tx, rx) = watch::channel(false);
        let (resign_tx, resign_rx) = watch::channel(false);
        let task = tokio::spawn(campaign(client, config, tx, resign_rx));
        Leadership {
            leading: rx,
            task,
            resign: resign_tx,
        }
    }

    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Follows leadership changes.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Gives leadership up now (revokes the lease) and stops campaigning.
    pub async fn resign(mut self) {
        let _ = self.resign.send(true);
        let _ = (&mut self.task).await;
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The election key under `prefix` (e.g. `/registry/leader`).
pub fn election_key(prefix: &str) -> String {
    format!("{}/leader", prefix.trim_end_matches('/'))
}

async fn timed<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Option<T> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "leader election: etcd request failed");
            None
        }
        Err(_) => None,
    }
}

async fn campaign(
    client: Client,
    cfg: ElectionConfig,
    leading: watch::Sender<bool>,
    mut resign: watch::Receiver<bool>,
) {
    let mut lease_client = client.lease_client();
    let mut kv = client.kv_client();
    loop {
        if *resign.borrow() {
            break;
        }
        let Some(grant) = timed(cfg.timeout, lease_client.grant(cfg.ttl_seconds, None)).await
        else {
            pause(&mut resign, cfg.retry).await;
            continue;
        };
        let lease = grant.id();
        // JSON, like every value under the prefix the watch cache reads.
        let value = serde_json::to_string(&cfg.identity).unwrap_or_default();
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                cfg.key.as_str(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![TxnOp::put(
                cfg.key.as_str(),
                value,
                Some(PutOptions::new().with_lease(lease)),
            )]);
        let won = timed(cfg.timeout, kv.txn(txn))
            .await
            .is_some_and(|r| r.succeeded());
        if !won {
            let _ = timed(cfg.timeout, lease_client.revoke(lease)).await;
            pause(&mut resign, cfg.retry).await;
            continue;
        }
        tracing::info!(identity = %cfg.identity, "leader election: leading");
        let _ = leading.send(true);
        lead(&client, &cfg, lease, &mut resign).await;
        let _ = leading.send(false);
        tracing::info!(identity = %cfg.identity, "leader election: no longer leading");
        let _ = timed(cfg.timeout, lease_client.revoke(lease)).await;
    }
    let _ = leading.send(false);
}

/// Renews the lease until renewals have failed for two thirds of its TTL,
/// the key is no longer ours, or the replica resigns. A failed renewal is
/// tried again at once and then every `RETRY`: etcd-client spreads requests
/// over every member, so with one member of three down a third of them are
/// refused, and leadership must not move for that. Until two thirds of the
/// TTL have passed since the last renewal etcd answered, the lease cannot
/// have expired, so this replica is still the only leader.
async fn lead(
    client: &Client,
    cfg: &ElectionConfig,
    lease: i64,
    resign: &mut watch::Receiver<bool>,
) {
    const RETRY: Duration = Duration::from_millis(200);
    let mut lease_client = client.lease_client();
    let mut kv = client.kv_client();
    let ttl = Duration::from_secs(cfg.ttl_seconds.max(1) as u64);
    let every = ttl / 3;
    let mut renewed_at = tokio::time::Instant::now();
    let mut wait = every;
    loop {
        if pause(resign, wait).await {
            return;
        }
        let renewed = match timed(cfg.timeout, lease_client.keep_alive(lease)).await {
            Some((mut keeper, mut stream)) => {
                if keeper.keep_alive().await.is_err() {
                    None
                } else {
                    match tokio::time::timeout(cfg.timeout, stream.message()).await {
                        // A TTL of 0: the lease is gone.
                        Ok(Ok(Some(r))) => Some(r.ttl() > 0),
                        _ => None,
                    }
                }
            }
            None => None,
        };
        let ours = match renewed {
            Some(false) => return,
            Some(true) => timed(cfg.timeout, kv.get(cfg.key.as_str(), None))
                .await
                .map(|r| r.kvs().first().is_some_and(|k| k.lease() == lease)),
            None => None,
        };
        match ours {
            Some(true) => {
                renewed_at = tokio::time::Instant::now();
                wait = every;
            }
            Some(false) => return,
            None if renewed_at.elapsed() < ttl * 2 / 3 => {
                tracing::debug!("leader election: renewal failed; trying again");
                wait = RETRY;
            }
            None => return,
        }
    }
}

/// Sleeps `d`; true when the replica resigned meanwhile.
async fn pause(resign: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *resign.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *resign.borrow(),
        r = resign.changed() => r.is_err() || *resign.borrow(),
    }
}
