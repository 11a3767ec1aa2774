//! Coalesced reads of etcd's current revision, the ReadIndex idea: one
//! quorum read answers every consistent read that arrived before it was
//! sent.
//!
//! A consistent read needs a revision `X` from a quorum read that started
//! *after* the request arrived (then every write acknowledged before the
//! request is at or below `X`). Waiters queue on a bounded channel; one task
//! takes everyone queued, sends one quorum read, and answers them all with
//! its revision. Whoever arrives while that read is in flight waits for the
//! next one, which is sent as soon as the previous answers. Under load this
//! turns N concurrent quorum reads into about one per etcd round trip; with
//! no load it adds nothing but a channel hop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::etcd::EtcdStore;
use crate::storage::{Revision, StorageError};

type Answer = oneshot::Sender<Result<Revision, StorageError>>;

/// Waiting consistent reads at most (more wait to be queued).
const QUEUE: usize = 4096;

pub(crate) struct ReadIndex {
    queue: mpsc::Sender<Answer>,
    task: JoinHandle<()>,
    reads: Arc<AtomicU64>,
}

impl Drop for ReadIndex {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReadIndex {
    /// Starts the batching task on the current runtime.
    pub(crate) fn start(store: EtcdStore) -> ReadIndex {
        let (queue, rx) = mpsc::channel(QUEUE);
        let reads = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(serve(store, rx, reads.clone()));
        ReadIndex { queue, task, reads }
    }

    /// Quorum reads sent so far.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// etcd's revision, read by a quorum read sent after this call began.
    pub(crate) async fn current_revision(&self) -> Result<Revision, StorageError> {
        let (tx, rx) = oneshot::channel();
        let stopped = || StorageError::Unavailable("the revision reader stopped".into());
        self.queue.send(tx).await.map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }
}

async fn serve(store: EtcdStore, mut rx: mpsc::Receiver<Answer>, reads: Arc<AtomicU64>) {
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        // Everyone already queued arrived before the read below is sent.
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        reads.fetch_add(1, Ordering::Relaxed);
        let revision = store.revision().await;
        for waiter in batch.drain(..) {
            let _ = waiter.send(revision.clone());
        }
    }
}
