//! Coalesced reads of etcd's current revision, the ReadIndex idea: one
//! quorum read answers every consistent read that arrived before it was
//! sent.
//!
//! A consistent read needs a revision `X` from a quorum read that started
//! *after* the request arrived (then every write acknowledged before the
//! request is at or below `X`). Waiters queue on a bounded channel; one task
//! takes everyone queued, sends one quorum read for all of them, and answers
//! them with its revision. Up to [`IN_FLIGHT`] such reads are outstanding at
//! once: whoever arrives while they all are waits for the first to answer,
//! and then goes out with everyone else who arrived meanwhile. With one read
//! in flight a request waits on average one and a half round trips (the
//! rest of the read in flight, then its own); with a few staggered ones,
//! little more than one. Under load this still turns N concurrent quorum
//! reads into a few per etcd round trip; with no load it adds nothing but a
//! channel hop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::etcd::EtcdStore;
use crate::storage::{Revision, Storage, StorageError};

type Answer = oneshot::Sender<Result<Revision, StorageError>>;

/// Waiting consistent reads at most (more wait to be queued).
const QUEUE: usize = 4096;
/// Quorum reads outstanding at most.
const IN_FLIGHT: usize = 4;

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
    use futures_util::stream::{FuturesUnordered, StreamExt};
    // Waiters that arrived after every outstanding read was sent.
    let mut queued: Vec<Answer> = Vec::new();
    let mut in_flight = FuturesUnordered::new();
    let mut open = true;
    let store = Arc::new(store);
    loop {
        // Everyone already queued arrived before the read below is sent.
        while let Ok(more) = rx.try_recv() {
            queued.push(more);
        }
        if !queued.is_empty() && in_flight.len() < IN_FLIGHT {
            let batch = std::mem::take(&mut queued);
            let store = store.clone();
            reads.fetch_add(1, Ordering::Relaxed);
            in_flight.push(async move { (store.current_revision().await, batch) });
            continue;
        }
        if !open && in_flight.is_empty() {
            return;
        }
        tokio::select! {
            waiter = rx.recv(), if open && in_flight.len() < IN_FLIGHT => match waiter {
                Some(w) => queued.push(w),
                None => open = false,
            },
            Some((revision, batch)) = in_flight.next(), if !in_flight.is_empty() => {
                for waiter in batch {
                    let _ = waiter.send(revision.clone());
                }
            }
        }
    }
}
