//! The server's own control loops (kube-controller-manager's, for a control
//! plane without nodes), on one shape:
//!
//! - **Leader-gated.** A controller runs only on the elected replica; when
//!   this replica loses the lease, its run (watches, queue, workers) is
//!   dropped, and when it wins again it starts over.
//! - **Fed by the store's watch.** Each [`Source`] is a watch on one
//!   collection through `state.store` (the watch cache when it is on), with
//!   initial events: opening it is the full resync, served from the cache
//!   rather than a LIST of etcd per controller. An event's object maps to a
//!   queue key (`key_of`), usually a namespace name.
//! - **Level-triggered.** A key says only "look here"; `reconcile` reads the
//!   current state and converges it, so a resync, a restart or a change of
//!   leader mid-work simply redoes what is left.
//! - **A bounded, deduplicated work queue** ([`queue::WorkQueue`]) with
//!   per-key exponential back-off on failure and `requeue after` for work
//!   that waits on others (finalizers), and kube's `workqueue_depth`,
//!   `workqueue_adds_total`, `workqueue_retries_total` metrics (label
//!   `name`).
//!
//! The controllers: [`namespace`] (namespace deletion),
//! [`serviceaccount`] (the `default` ServiceAccount and the
//! `kube-root-ca.crt` ConfigMap of every namespace), [`resourcequota`]
//! (ResourceQuotas' `status`: hard from the spec, used recounted), [`repair_ip`] and
//! [`repair_ports`] (leaked and lost ClusterIPs and NodePorts; these two
//! also resync every `--allocation-repair-interval`, since a leak makes no
//! event), and [`kubernetes_endpoints`] (the `default/kubernetes`
//! Endpoints and EndpointSlice from the replicas' leases), which alone is
//! not leader-gated: every replica renews its own lease and writes the
//! list, as kube's lease reconciler does (its module says why). The
//! [`garbagecollector`] follows every collection the registry serves, as it
//! changes, through a [`Feed`] of its own that keeps its owner/dependent
//! graph and fills the same kind of queue. [`events`] records kube's events
//! for them.

pub mod events;
pub mod garbagecollector;
pub mod kubernetes_endpoints;
pub mod namespace;
pub mod queue;
pub mod repair_ip;
pub mod repair_ports;
pub mod resourcequota;
pub mod serviceaccount;

use crate::backend::Backend;
use apimachinery::read::Freshness;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use queue::{Backoff, WorkQueue};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use watchcache::{EventType, ListOptions, Object, StorageError, WatchOptions};

/// What a clean-up did to one listed object.
pub enum Removed {
    /// Deleted from storage: the object as it was.
    Gone(Object),
    /// It has finalizers: now marked deleting (or it already was), for
    /// their owners to finish.
    Finalizing,
}

/// Deletes one listed object the way a clean-up does (a namespace's
/// content, a CRD's custom resources): at once when it has no finalizers,
/// else by setting its deletionTimestamp once, as a DELETE would. Both are
/// preconditioned on the listed revision, so a change meanwhile is a
/// `Conflict` for the next round to see.
pub async fn remove(state: &Backend, key: &str, item: &Object) -> Result<Removed, StorageError> {
    let v = item.value();
    if crate::object::finalizers(v).is_empty() {
        return state
            .store
            .delete(key, Some(item.revision))
            .await
            .map(Removed::Gone);
    }
    if !crate::object::is_deleting(v) {
        let mut marked = v.clone();
        let m = crate::object::meta_mut(&mut marked);
        m.insert(
            "deletionTimestamp".into(),
            Value::String(crate::object::now()),
        );
        m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
        m.remove("resourceVersion");
        state.store.update(key, &marked, item.revision).await?;
    }
    Ok(Removed::Finalizing)
}

/// One collection a controller follows.
pub struct Source {
    /// The store key prefix of the collection (`state.collection_prefix`).
    pub prefix: String,
    /// The queue key an object of the collection stands for (`None`: not
    /// of interest).
    pub key_of: fn(&Value) -> Option<String>,
}

/// What a successful reconcile asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Converged (until the next event).
    Done,
    /// Look again after this long (waiting on someone else's work, which
    /// the controller's sources do not follow).
    After(Duration),
}

/// What a controller works with: the backend its sources watch and its
/// queue reports to, and whatever else its reconcile reads. Each floor
/// gives its controllers the narrowest context it has (admission's follow
/// the store only; the namespace controller gets the server's state).
pub trait Context: Send + Sync + 'static {
    fn backend(&self) -> &Backend;
}

impl Context for Backend {
    fn backend(&self) -> &Backend {
        self
    }
}

pub type Reconcile<C> =
    Arc<dyn Fn(Arc<C>, String) -> BoxFuture<'static, Result<Next, String>> + Send + Sync>;

/// A controller's own way of filling its queue, for one term as leader:
/// gets the term's queue and runs until the term ends (the garbage
/// collector follows every collection the registry serves, as it changes,
/// and keeps its graph).
pub type Feed<C> = Arc<dyn Fn(Arc<C>, Arc<WorkQueue>) -> BoxFuture<'static, ()> + Send + Sync>;

/// A controller: its name (the metrics' label), what it follows, and what
/// it does with one key.
pub struct Controller<C> {
    pub name: &'static str,
    pub sources: Vec<Source>,
    /// Fills the queue besides (or instead of) `sources`.
    pub feed: Option<Feed<C>>,
    pub reconcile: Reconcile<C>,
    pub workers: usize,
    pub capacity: usize,
    pub backoff: Backoff,
    /// Re-open the sources this often (a full resync, as an informer's
    /// resync period): for loops that must also notice what no event
    /// announces, such as a leak left by a crash. `None`: only on start
    /// and after a broken watch.
    pub resync: Option<Duration>,
}

/// Runs `c` whenever this replica leads.
pub fn start<C: Context>(
    state: Arc<C>,
    leader: Option<watch::Receiver<bool>>,
    c: Controller<C>,
) -> tokio::task::AbortHandle {
    tokio::spawn(run(state, leader, Arc::new(c))).abort_handle()
}

async fn run<C: Context>(
    state: Arc<C>,
    leader: Option<watch::Receiver<bool>>,
    c: Arc<Controller<C>>,
) {
    // Without an election this replica always leads (the sender lives as
    // long as the loop).
    let (_always, always) = watch::channel(true);
    let mut leader = leader.unwrap_or(always);
    loop {
        if leader.wait_for(|l| *l).await.is_err() {
            // The election is gone (shutdown): do nothing more.
            return;
        }
        tracing::info!(controller = c.name, "leading: controller starts");
        tokio::select! {
            () = lead(&state, &c) => {}
            r = leader.wait_for(|l| !*l) => {
                if r.is_err() {
                    return;
                }
                tracing::info!(controller = c.name, "no longer leading: controller stops");
            }
        }
    }
}

/// One term as leader: the sources feed a fresh queue, the workers drain
/// it. Never ends by itself.
async fn lead<C: Context>(state: &Arc<C>, c: &Arc<Controller<C>>) {
    let metrics = state.backend().metrics.as_ref().map(|m| m.queue(c.name));
    let queue = Arc::new(WorkQueue::new(c.capacity, c.backoff, metrics));
    let own = c
        .feed
        .as_ref()
        .map(|f| f(Arc::clone(state), Arc::clone(&queue)));
    let feeds = futures_util::future::join(
        futures_util::future::join_all(
            c.sources
                .iter()
                .map(|s| feed(state.backend(), c.name, s, c.resync, Arc::clone(&queue))),
        ),
        async move {
            match own {
                Some(f) => f.await,
                None => std::future::pending().await,
            }
        },
    );
    let workers = futures_util::future::join_all(
        (0..c.workers.max(1)).map(|_| work(state, c, Arc::clone(&queue))),
    );
    futures_util::future::join(feeds, workers).await;
}

/// Follows one source forever: every object seen (the initial snapshot,
/// then each change) queues its key. A broken watch is re-opened, which
/// resyncs.
async fn feed(
    state: &Backend,
    name: &str,
    source: &Source,
    resync: Option<Duration>,
    queue: Arc<WorkQueue>,
) {
    let mut delay = Duration::from_millis(100);
    loop {
        let opts = WatchOptions {
            initial_events: true,
            ..WatchOptions::default()
        };
        match state.store.watch(&source.prefix, opts).await {
            Ok(mut stream) => {
                let until = resync.map(|d| tokio::time::Instant::now() + d);
                loop {
                    let next = match until {
                        Some(at) => match tokio::time::timeout_at(at, stream.next()).await {
                            Ok(next) => next,
                            // Time for a resync: the same as a fresh
                            // start, at once.
                            Err(_) => {
                                delay = Duration::ZERO;
                                break;
                            }
                        },
                        None => stream.next().await,
                    };
                    let Some(ev) = next else { break };
                    match ev {
                        Ok(ev) if ev.kind == EventType::Bookmark => {}
                        Ok(ev) => {
                            delay = Duration::from_millis(100);
                            if let Some(key) = (source.key_of)(ev.object.value()) {
                                queue.add(&key).await;
                            }
                        }
                        Err(e) => {
                            tracing::warn!(controller = name, error = %e, "watch failed; resyncing");
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(controller = name, error = %e, "cannot watch; retrying");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
    }
}

async fn work<C: Context>(state: &Arc<C>, c: &Arc<Controller<C>>, queue: Arc<WorkQueue>) {
    loop {
        let key = queue.get().await;
        // A panic in one reconcile is a failure of that key, not the end
        // of the controller.
        let run = std::panic::AssertUnwindSafe((c.reconcile)(Arc::clone(state), key.clone()));
        let result = run
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err("reconcile panicked".into()));
        match result {
            Ok(Next::Done) => queue.forget(&key),
            Ok(Next::After(d)) => {
                queue.forget(&key);
                queue.add_after(&key, d);
            }
            Err(e) => {
                tracing::warn!(controller = c.name, key = %key, error = %e, "reconcile failed; retrying");
                queue.add_rate_limited(&key);
            }
        }
        queue.done(&key);
    }
}

/// A controller that keeps a replica's compiled configuration (admission,
/// flow control): it follows two `v1` collections of `group` in the
/// backend of `ctx` (the context it runs on) and, on any change, lists
/// both and hands them to `install` with that context. Every replica runs
/// it (not leader-gated: each one enforces). The lists are consistent
/// reads: the event that woke it may come from a watch ahead of the cache
/// (served by etcd while the cache fills).
pub fn config_controller<C: Context>(
    ctx: &C,
    name: &'static str,
    group: &str,
    plurals: [&str; 2],
    install: impl Fn(&Arc<C>, &[Value], &[Value]) + Send + Sync + 'static,
) -> Option<Controller<C>> {
    let backend = ctx.backend();
    let mut prefixes = Vec::with_capacity(2);
    for plural in plurals {
        let res = backend.registry.lookup(group, "v1", plural)?;
        prefixes.push(backend.collection_prefix(&res, None));
    }
    let install = Arc::new(install);
    let sources = prefixes
        .iter()
        .map(|prefix| Source {
            prefix: prefix.clone(),
            key_of: |_| Some("configuration".into()),
        })
        .collect();
    let prefixes = Arc::new(prefixes);
    Some(Controller {
        name,
        feed: None,
        sources,
        reconcile: Arc::new(move |ctx: Arc<C>, _| {
            let prefixes = Arc::clone(&prefixes);
            let install = Arc::clone(&install);
            async move {
                let opts = ListOptions {
                    freshness: Freshness::MostRecent,
                    limit: None,
                    continue_from: None,
                    predicate: Default::default(),
                };
                let mut lists = Vec::with_capacity(2);
                for prefix in prefixes.iter() {
                    let listed = ctx
                        .backend()
                        .store
                        .list(prefix, &opts)
                        .await
                        .map_err(|e| e.to_string())?;
                    lists.push(
                        listed
                            .items
                            .iter()
                            .map(|o| o.value().clone())
                            .collect::<Vec<Value>>(),
                    );
                }
                install(&ctx, &lists[0], &lists[1]);
                Ok(Next::Done)
            }
            .boxed()
        }),
        workers: 1,
        capacity: 4,
        backoff: Backoff::default(),
        resync: None,
    })
}

/// The name of an object.
pub fn name_key(v: &Value) -> Option<String> {
    crate::object::name(v).map(str::to_string)
}
