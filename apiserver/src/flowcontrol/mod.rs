//! API Priority and Fairness (kube's `util/flowcontrol` and its filter).
//!
//! Where it sits: in the filter chain after authentication and
//! impersonation, before authorization (as in kube), so it sees the user a
//! request acts as. Each request is classified by the first matching
//! FlowSchema (by matchingPrecedence, then name) into a priority level and
//! a flow (the schema plus its distinguisher: user or namespace).
//! Exempt levels run at once. Every other level owns seats (its share of
//! `--max-requests-inflight + --max-mutating-requests-inflight`) and, for
//! `Queue` levels, shuffle-sharded queues served by virtual-time fair
//! queuing (`queueset`). A request waits at most a quarter of the request
//! timeout (at most 1 min), then gets 429 with `Retry-After`; a full queue
//! (or, for `Reject` levels, no free seat) gets it at once. A watch holds
//! its seats only until its handler has answered (its initial events
//! sent); other long-running requests (exec, proxy, logs) are not held.
//!
//! The configuration follows the stored FlowSchemas and
//! PriorityLevelConfigurations (`controller`, a watch through the cache on
//! every replica), which also keeps each FlowSchema's `Dangling` condition
//! as kube does. Borrowing: every 10 s each level's current limit is
//! re-derived from its seat demand, between its minimum (nominal minus
//! lendable) and maximum (nominal plus borrowing limit), shares of the
//! server's seats going where the demand is (`rebalance`).
//!
//! Floor: the filters, below the server's state. The filter takes the APF
//! state and the request timeout, the debug dumps the APF state; the
//! configuration controller runs on a context of its own
//! ([`Configuration`]: the backend and the APF state), and the maintenance
//! loop on the same two. Nothing here imports `state`, `server`,
//! `handlers`, `admission` or a specific controller.

pub mod config;
mod debug;
mod metrics;
pub mod queueset;
mod retry;

use crate::backend::Backend;
use crate::controllers::{Context, Controller};
use apimachinery::auth::{RequestInfo, UserInfo};
use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use config::{Config, LevelSpec, SeatLimits};
use queueset::{Arrival, QueueSet, Shape, Ticket};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

pub use config::Classification;
pub use debug::{dump_priority_levels, dump_queues, dump_requests};

pub const FLOW_SCHEMA_UID: &str = "x-kubernetes-pf-flowschema-uid";
pub const PRIORITY_LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";
/// kube's cap on a queued request's wait.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// How often current limits are re-derived from demand (kube: 10 s).
pub const REBALANCE_PERIOD: Duration = Duration::from_secs(10);
/// Objects per seat of a LIST (kube's `ObjectsPerSeat`).
const OBJECTS_PER_SEAT: f64 = 100.0;

/// A queued request, as the queues hold it.
#[derive(Debug)]
pub(crate) struct Waiter {
    wake: oneshot::Sender<Ticket>,
    schema: String,
    distinguisher: String,
    user: String,
    request: Arc<RequestInfo>,
}

/// Demand observed on a level since the last rebalance.
#[derive(Debug, Default, Clone, Copy)]
struct Demand {
    high: usize,
    /// Seat-seconds demanded, and the time they span.
    integral: f64,
    since: Option<Instant>,
    last: usize,
    smoothed: f64,
}

impl Demand {
    fn note(&mut self, now: Instant, seats: usize) {
        if let Some(since) = self.since {
            self.integral += self.last as f64 * now.saturating_duration_since(since).as_secs_f64();
        }
        self.since = Some(now);
        self.last = seats;
        self.high = self.high.max(seats);
    }
}

/// A level's request totals since it was made, as kube's queue set keeps
/// them for `dump_priority_levels`. kube has a timed-out total too but
/// never adds to it: a wait past the limit is counted as rejected and
/// cancelled, as is a queued request whose client went away.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    /// Requests that started executing (exempt ones included).
    dispatched: u64,
    /// Refused at arrival (queue full, no seat) or taken out of the queue.
    rejected: u64,
    /// Taken out of the queue before dispatch (waited too long, or the
    /// client went away).
    cancelled: u64,
}

pub(crate) struct Level {
    spec: LevelSpec,
    limits: SeatLimits,
    current: usize,
    /// `None` for an exempt level.
    queues: Option<QueueSet<Waiter>>,
    /// Removed from the configuration, kept until its requests are done.
    quiescing: bool,
    /// Requests running in an exempt level.
    exempt_executing: usize,
    demand: Demand,
    window_start: Instant,
    drops: retry::Drops,
    tally: Tally,
}

impl Level {
    fn new(spec: LevelSpec, limits: SeatLimits, now: Instant) -> Level {
        let current = limits.nominal.saturating_sub(limits.lendable / 2);
        let queues = (!spec.exempt).then(|| QueueSet::new(shape(&spec, current), now));
        Level {
            spec,
            limits,
            current,
            queues,
            quiescing: false,
            exempt_executing: 0,
            demand: Demand::default(),
            window_start: now,
            drops: retry::Drops::default(),
            tally: Tally::default(),
        }
    }

    fn seats_demanded(&self) -> usize {
        match &self.queues {
            Some(q) => {
                q.seats_in_use
                    + q.queues
                        .iter()
                        .flat_map(|q| q.waiting.iter())
                        .map(|w| w.seats)
                        .sum::<usize>()
            }
            None => self.exempt_executing,
        }
    }

    fn note_demand(&mut self, now: Instant) {
        let seats = self.seats_demanded();
        self.demand.note(now, seats);
    }

    fn idle(&self) -> bool {
        self.queues.as_ref().is_none_or(QueueSet::is_idle) && self.exempt_executing == 0
    }
}

fn shape(spec: &LevelSpec, limit: usize) -> Shape {
    let (queues, hand_size, queue_length_limit) = spec.queuing.unwrap_or((0, 0, 0));
    Shape {
        queues,
        hand_size: hand_size.min(queues.max(1)),
        queue_length_limit,
        concurrency_limit: limit.max(1),
    }
}

pub(crate) struct Inner {
    config: Arc<Config>,
    levels: BTreeMap<String, Level>,
}

/// The APF state of one server.
pub struct Apf {
    pub enabled: bool,
    /// The seats of all levels together.
    server_limit: usize,
    inner: Mutex<Inner>,
    /// Stored objects per `resource.group`, for LIST width estimates.
    counts: Mutex<HashMap<String, i64>>,
    metrics: Option<metrics::ApfMetrics>,
}

impl std::fmt::Debug for Apf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Apf")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl Default for Apf {
    fn default() -> Self {
        Apf::new(false, 600, None)
    }
}

impl Apf {
    pub fn new(enabled: bool, server_limit: usize, registry: Option<&prometheus::Registry>) -> Apf {
        let metrics = registry.and_then(|r| {
            metrics::ApfMetrics::new(r)
                .map_err(|e| tracing::error!(error = %e, "APF metrics disabled"))
                .ok()
        });
        let apf = Apf {
            enabled,
            server_limit: server_limit.max(1),
            inner: Mutex::new(Inner {
                config: Arc::new(Config::default()),
                levels: BTreeMap::new(),
            }),
            counts: Mutex::new(HashMap::new()),
            metrics,
        };
        // Until the stored objects are read, kube's bootstrap set applies.
        let objects = |b: Vec<crate::flowcontrol_bootstrap::Bootstrap>| {
            b.into_iter().map(|b| b.object).collect::<Vec<_>>()
        };
        apf.install(
            &objects(crate::flowcontrol_bootstrap::flow_schemas()),
            &objects(crate::flowcontrol_bootstrap::priority_levels()),
        );
        apf
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a new configuration: levels keep their queued and running
    /// requests; removed levels quiesce until idle.
    pub fn install(&self, schemas: &[Value], levels: &[Value]) {
        let config = Config::build(schemas, levels);
        let now = Instant::now();
        let share_sum = config.share_sum();
        let mut inner = self.lock();
        for spec in config.levels.values() {
            let limits = config::seat_limits(spec, share_sum, self.server_limit);
            match inner.levels.get_mut(&spec.name) {
                Some(level) if level.spec.exempt == spec.exempt => {
                    level.spec = spec.clone();
                    level.limits = limits;
                    level.quiescing = false;
                    level.current = level.current.clamp(limits.min(), limits.max());
                    let current = level.current;
                    let started = level.queues.as_mut().map(|q| {
                        q.reshape(shape(spec, current), now);
                        q.dispatch(now)
                    });
                    wake(started.unwrap_or_default());
                }
                _ => {
                    inner
                        .levels
                        .insert(spec.name.clone(), Level::new(spec.clone(), limits, now));
                }
            }
            if let Some(m) = &self.metrics {
                m.limits(&spec.name, &limits, inner.levels[&spec.name].current);
            }
        }
        for (name, level) in inner.levels.iter_mut() {
            if !config.levels.contains_key(name) {
                level.quiescing = true;
            }
        }
        inner.levels.retain(|_, l| !(l.quiescing && l.idle()));
        inner.config = Arc::new(config);
    }

    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.lock().config)
    }

    /// The schema and level of a request (kube's catch-all when nothing
    /// matches).
    pub fn classify(&self, user: &UserInfo, ri: &RequestInfo) -> Classification {
        let config = self.config();
        let Some(schema) = config.classify(user, ri) else {
            let level = config.levels.get("catch-all");
            return Classification {
                schema: "catch-all".into(),
                schema_uid: String::new(),
                level: "catch-all".into(),
                level_uid: level.map(|l| l.uid.clone()).unwrap_or_default(),
                distinguisher: String::new(),
                exempt: false,
            };
        };
        let level = &config.levels[&schema.level];
        Classification {
            schema: schema.name.clone(),
            schema_uid: schema.uid.clone(),
            level: level.name.clone(),
            level_uid: level.uid.clone(),
            distinguisher: schema.distinguish(user, ri),
            exempt: level.exempt,
        }
    }

    /// Seats a request needs at first (kube's work estimator, counting
    /// objects): one, or for a LIST one per 100 objects it touches, up to
    /// the level's widest.
    fn seats(&self, ri: &RequestInfo, query: Option<&str>, level: &str) -> usize {
        let max = self
            .lock()
            .levels
            .get(level)
            .map_or(1, |l| l.limits.max_seats);
        if ri.verb != "list" {
            return 1;
        }
        if !ri.name.is_empty() {
            return 1;
        }
        let key = if ri.api_group.is_empty() {
            ri.resource.clone()
        } else {
            format!("{}.{}", ri.resource, ri.api_group)
        };
        let Some(stored) = self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied()
        else {
            return 1;
        };
        let param = |k: &str| {
            query.unwrap_or("").split('&').find_map(|kv| {
                let (a, b) = kv.split_once('=')?;
                (a == k).then(|| b.to_string())
            })
        };
        let limit = param("limit")
            .and_then(|l| l.parse::<i64>().ok())
            .filter(|l| *l > 0 && *l < stored)
            .unwrap_or(stored);
        let from_cache =
            param("resourceVersion").is_some_and(|rv| !rv.is_empty()) && param("limit").is_none();
        let selector = param("labelSelector").is_some() || param("fieldSelector").is_some();
        let objects = if from_cache {
            stored
        } else if selector {
            stored + limit
        } else {
            2 * limit
        };
        ((objects as f64 / OBJECTS_PER_SEAT).ceil() as usize).clamp(1, max)
    }

    /// Records stored object counts (`resource.group` → count).
    pub fn set_counts(&self, counts: HashMap<String, i64>) {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) = counts;
    }

    /// Re-derives every level's current limit from the demand since the
    /// last call (kube's `updateBorrowing`): each level gets at least
    /// `max(min, min(nominal, high watermark))`, at most its maximum, and
    /// the server's seats are shared out in proportion to smoothed demand.
    pub fn rebalance(&self) {
        let now = Instant::now();
        let mut inner = self.lock();
        let total: usize = inner.levels.values().map(|l| l.limits.nominal).sum();
        let mut remaining = total as f64;
        let mut items = Vec::new();
        for (name, level) in inner.levels.iter_mut() {
            level.note_demand(now);
            let span = now
                .saturating_duration_since(level.window_start)
                .as_secs_f64();
            let avg = if span > 0.0 {
                level.demand.integral / span
            } else {
                0.0
            };
            let d = &mut level.demand;
            d.smoothed = avg.max(d.smoothed * 0.977);
            let high = d.high;
            d.high = d.last;
            d.integral = 0.0;
            level.window_start = now;
            let l = level.limits;
            if level.spec.exempt {
                remaining -= l.min().max(high) as f64;
                continue;
            }
            let lower = l.min().max(l.nominal.min(high));
            items.push((
                name.clone(),
                lower as f64,
                l.max() as f64,
                (lower as f64).max(level.demand.smoothed),
                l.min() as f64,
            ));
        }
        let min_sum: f64 = items.iter().map(|i| i.4).sum();
        let lower_sum: f64 = items.iter().map(|i| i.1).sum();
        let allocs: Vec<f64> = if remaining <= min_sum {
            items.iter().map(|i| i.4).collect()
        } else if remaining <= lower_sum {
            let frac = (remaining - min_sum) / (lower_sum - min_sum).max(1.0);
            items.iter().map(|i| i.4 + (i.1 - i.4) * frac).collect()
        } else {
            fair_allocation(remaining, &items)
        };
        for ((name, ..), alloc) in items.iter().zip(allocs) {
            let Some(level) = inner.levels.get_mut(name) else {
                continue;
            };
            level.current = (alloc.round() as usize).max(1);
            let (spec, current) = (level.spec.clone(), level.current);
            let started = level.queues.as_mut().map(|q| {
                q.reshape(shape(&spec, current), now);
                q.dispatch(now)
            });
            if let Some(m) = &self.metrics {
                m.current_limit(name, current);
            }
            wake(started.unwrap_or_default());
        }
    }

    /// The levels in effect (and quiescing).
    pub fn level_names(&self) -> Vec<String> {
        self.lock().levels.keys().cloned().collect()
    }
}

/// kube's fair allocation: the fraction `f` for which the sum over levels
/// of `clamp(f * target, lower, upper)` equals what is there to share.
fn fair_allocation(total: f64, items: &[(String, f64, f64, f64, f64)]) -> Vec<f64> {
    let at = |f: f64| -> f64 { items.iter().map(|i| (f * i.3).clamp(i.1, i.2)).sum() };
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while at(hi) < total && hi < 1e9 {
        hi *= 2.0;
    }
    for _ in 0..64 {
        let mid = (lo + hi) / 2.0;
        if at(mid) < total {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    items.iter().map(|i| (hi * i.3).clamp(i.1, i.2)).collect()
}

/// Hands started requests their tickets (a request whose client left has
/// dropped its receiver: its seats come back through `Running`'s drop,
/// which never ran, so they are released here).
fn wake(started: Vec<(Waiter, Ticket)>) {
    for (w, ticket) in started {
        let _ = w.wake.send(ticket);
    }
}

/// kube's long-running check for what APF does not hold: exec, attach,
/// port-forward, proxy and log streams (watches are handled apart).
fn long_running_not_watch(ri: &RequestInfo) -> bool {
    ri.verb == "proxy"
        || matches!(
            ri.subresource.as_str(),
            "exec" | "attach" | "portforward" | "proxy" | "log"
        )
}

/// A running request's seats, released on drop (also when the handler
/// panics or the client goes away).
struct Running<'a> {
    apf: &'a Apf,
    level: String,
    ticket: Option<Ticket>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let now = Instant::now();
        let mut inner = self.apf.lock();
        let Some(level) = inner.levels.get_mut(&self.level) else {
            return;
        };
        let started = level
            .queues
            .as_mut()
            .map(|q| q.finish(now, ticket))
            .unwrap_or_default();
        level.note_demand(now);
        let gone = level.quiescing && level.idle();
        if gone {
            inner.levels.remove(&self.level);
        }
        drop(inner);
        settle(self.apf, &self.level, started);
    }
}

/// Wakes started requests; one whose waiter is gone gives its seats back.
fn settle(apf: &Apf, level: &str, started: Vec<(Waiter, Ticket)>) {
    let mut returned = Vec::new();
    for (w, ticket) in started {
        if let Err(ticket) = w.wake.send(ticket) {
            returned.push(ticket);
        }
    }
    for ticket in returned {
        drop(Running {
            apf,
            level: level.to_string(),
            ticket: Some(ticket),
        });
    }
}

/// A request running in an exempt level: counted as its demand (which
/// the other levels' shares come out of).
struct Exempt<'a> {
    apf: &'a Apf,
    level: String,
}

impl<'a> Exempt<'a> {
    fn enter(apf: &'a Apf, level: &str) -> Exempt<'a> {
        let now = Instant::now();
        if let Some(l) = apf.lock().levels.get_mut(level) {
            l.exempt_executing += 1;
            l.tally.dispatched += 1;
            l.note_demand(now);
        }
        Exempt {
            apf,
            level: level.to_string(),
        }
    }
}

impl Drop for Exempt<'_> {
    fn drop(&mut self) {
        let now = Instant::now();
        if let Some(l) = self.apf.lock().levels.get_mut(&self.level) {
            l.exempt_executing = l.exempt_executing.saturating_sub(1);
            l.note_demand(now);
        }
    }
}

/// A queued request; takes itself out of its queue if dropped while
/// waiting, and gives back the seats of a dispatch nobody took.
struct Queued<'a> {
    apf: &'a Apf,
    class: &'a Classification,
    arrived: Instant,
    id: u64,
    rx: Option<oneshot::Receiver<Ticket>>,
    /// Taken out of its queue by [`Queued::leave`] before dispatch.
    ejected: bool,
}

impl Queued<'_> {
    /// Out of the queue; `Some` with the ticket if it was dispatched first.
    fn leave(&mut self) -> Option<Ticket> {
        let mut rx = self.rx.take()?;
        let waiting = {
            let mut inner = self.apf.lock();
            inner.levels.get_mut(&self.class.level).and_then(|l| {
                let w = l.queues.as_mut()?.cancel(Instant::now(), self.id)?;
                // kube's ejection from the queue: rejected and cancelled.
                l.tally.rejected += 1;
                l.tally.cancelled += 1;
                Some(w)
            })
        };
        if waiting.is_some() {
            self.ejected = true;
            return None;
        }
        // Dispatched: the ticket is sent, or its send will now fail (and
        // the sender give the seats back).
        rx.close();
        rx.try_recv().ok()
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        // Still waiting: the client went away (the request's future was
        // dropped). The wait that ran out takes itself out before this.
        let waiting = self.rx.is_some();
        match self.leave() {
            Some(ticket) => drop(Running {
                apf: self.apf,
                level: self.class.level.clone(),
                ticket: Some(ticket),
            }),
            // kube's queueset counts the ejection in the metrics too:
            // rejected with reason "cancelled", and a wait that did not
            // execute.
            None if waiting && self.ejected => {
                if let Some(m) = &self.apf.metrics {
                    m.rejected(self.class, "cancelled");
                    m.waited(self.class, false, self.arrived.elapsed());
                }
            }
            None => {}
        }
    }
}

fn set_headers(response: &mut Response, c: &Classification) {
    for (name, value) in [
        (FLOW_SCHEMA_UID, &c.schema_uid),
        (PRIORITY_LEVEL_UID, &c.level_uid),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            response.headers_mut().insert(name, v);
        }
    }
}

/// The APF filter (see the module doc). A request waits in its queue at
/// most a quarter of `request_timeout` (at most 1 min).
pub async fn filter(
    apf: &Apf,
    request_timeout: Duration,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    if !apf.enabled {
        return next.run(req).await;
    }
    let Some(crate::auth::Identity(user)) =
        req.extensions().get::<crate::auth::Identity>().cloned()
    else {
        return next.run(req).await;
    };
    let ri = match &*crate::auth::resolve(&mut req) {
        Ok(ri) => Arc::clone(ri),
        // Authorization answers the bad path.
        Err(_) => return next.run(req).await,
    };
    let c = apf.classify(&user, &ri);
    let watch = ri.verb == "watch";
    if c.exempt || long_running_not_watch(&ri) {
        let guard = apf.metrics.as_ref().map(|m| m.executing(&c));
        let exempt = c.exempt.then(|| Exempt::enter(apf, &c.level));
        let mut response = next.run(req).await;
        drop((guard, exempt));
        if let Some(m) = &apf.metrics {
            m.dispatched(&c);
        }
        set_headers(&mut response, &c);
        return response;
    }
    let seats = apf.seats(&ri, req.uri().query(), &c.level);
    let gone = req.extensions().get::<crate::limits::ClientGone>().cloned();
    let arrived = Instant::now();
    let (tx, rx) = oneshot::channel();
    let waiter = Waiter {
        wake: tx,
        schema: c.schema.clone(),
        distinguisher: c.distinguisher.clone(),
        user: user.username.clone(),
        request: Arc::clone(&ri),
    };
    let hash = queueset::flow_hash(&c.schema, &c.distinguisher);
    let arrival = {
        let mut inner = apf.lock();
        let level = inner.levels.get_mut(&c.level).and_then(|l| {
            let (arrival, started) = l.queues.as_mut()?.arrive(arrived, hash, seats, waiter);
            if matches!(arrival, Arrival::Rejected(_)) {
                l.tally.rejected += 1;
            }
            l.note_demand(arrived);
            Some((arrival, started))
        });
        drop(inner);
        level.map(|(arrival, started)| {
            settle(apf, &c.level, started);
            arrival
        })
    };
    let id = match arrival {
        Some(Arrival::Queued(id)) => id,
        Some(Arrival::Rejected(reason)) => return reject(apf, &c, reason, arrived),
        // The level vanished between classification and queuing.
        None => return reject(apf, &c, "concurrency-limit", arrived),
    };
    let mut queued = Queued {
        apf,
        class: &c,
        arrived,
        id,
        rx: Some(rx),
        ejected: false,
    };
    let wait_limit = (request_timeout / 4).min(MAX_WAIT);
    let waiting = apf.metrics.as_ref().map(|m| m.inqueue(&c));
    let client_gone = async {
        match gone {
            Some(gone) => gone.wait().await,
            None => std::future::pending().await,
        }
    };
    // `Err` names why the wait ended without a dispatch.
    let woken = match queued.rx.as_mut() {
        Some(rx) => tokio::select! {
            woken = tokio::time::timeout(wait_limit, rx) => {
                woken.ok().and_then(Result::ok).ok_or("time-out")
            }
            () = client_gone => Err("cancelled"),
        },
        None => Err("time-out"),
    };
    drop(waiting);
    let ticket = match woken {
        Ok(ticket) => {
            queued.rx = None;
            ticket
        }
        // The wait is over: out of the queue, unless dispatched meanwhile.
        // A client that went away is what kube's queue set counts as
        // "cancelled".
        Err(reason) => match queued.leave() {
            Some(ticket) => ticket,
            None => return reject(apf, &c, reason, arrived),
        },
    };
    let waited = arrived.elapsed();
    // Counted where it starts, as kube's `OnRequestDispatched` does.
    if let Some(l) = apf.lock().levels.get_mut(&c.level) {
        l.tally.dispatched += 1;
    }
    let running = Running {
        apf,
        level: c.level.clone(),
        ticket: Some(ticket),
    };
    let started = Instant::now();
    let guard = apf.metrics.as_ref().map(|m| {
        m.waited(&c, true, waited);
        m.dispatched(&c);
        m.executing(&c)
    });
    let mut response = next.run(req).await;
    // A watch's seats are held only while it initializes: its handler has
    // answered, the stream goes on outside APF.
    drop(running);
    drop(guard);
    if let Some(m) = &apf.metrics {
        m.executed(
            &c,
            if watch { "watch" } else { "regular" },
            started.elapsed(),
        );
    }
    set_headers(&mut response, &c);
    response
}

fn reject(apf: &Apf, c: &Classification, reason: &str, arrived: Instant) -> Response {
    if let Some(m) = &apf.metrics {
        m.rejected(c, reason);
        m.waited(c, false, arrived.elapsed());
    }
    // kube's Retry-After for this level, grown by sustained drops.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
    let retry_after = apf.lock().levels.get_mut(&c.level).map_or(1, |l| {
        l.drops.record(now);
        l.drops.retry_after()
    });
    let status = apimachinery::Status::too_many_requests(
        crate::limits::TOO_MANY_REQUESTS,
        u32::try_from(retry_after).unwrap_or(1),
    );
    let mut response = crate::error::status_response(&status);
    set_headers(&mut response, c);
    response
}

/// What the configuration controller works with: the backend it watches
/// and writes the FlowSchemas' status through, and the APF state it
/// installs the configuration in.
pub struct Configuration {
    pub backend: Arc<Backend>,
    pub apf: Arc<Apf>,
}

impl Context for Configuration {
    fn backend(&self) -> &Backend {
        &self.backend
    }
}

/// The loop that follows the stored configuration (every replica) and
/// keeps the FlowSchemas' `Dangling` condition: one key for both
/// collections, whose reconcile lists them and installs what it finds
/// (`None` when the flowcontrol resources are not served).
pub fn controller(ctx: &Configuration) -> Option<Controller<Configuration>> {
    crate::controllers::config_controller(
        ctx,
        "api_priority_and_fairness",
        crate::flowcontrol_bootstrap::GROUP,
        ["flowschemas", "prioritylevelconfigurations"],
        install,
    )
}

/// Installs the listed configuration and writes the `Dangling` conditions
/// that changed.
fn install(ctx: &Arc<Configuration>, schemas: &[Value], levels: &[Value]) {
    ctx.apf.install(schemas, levels);
    let names: std::collections::HashSet<&str> = levels
        .iter()
        .filter_map(|l| l.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    let updates: Vec<Value> = schemas
        .iter()
        .filter_map(|fs| dangling_update(fs, &names))
        .collect();
    if !updates.is_empty() {
        let backend = Arc::clone(&ctx.backend);
        tokio::spawn(async move { write_statuses(&backend, updates).await });
    }
}

/// The schema with its `Dangling` condition brought up to date, when it
/// is not (kube's message, reason and status).
fn dangling_update(fs: &Value, levels: &std::collections::HashSet<&str>) -> Option<Value> {
    let level = fs
        .pointer("/spec/priorityLevelConfiguration/name")
        .and_then(Value::as_str)?;
    let dangling = !levels.contains(level);
    let (status, reason, message) = if dangling {
        (
            "True",
            "NotFound",
            format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"),
        )
    } else {
        (
            "False",
            "Found",
            format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"),
        )
    };
    let conditions = fs
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let current = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Dangling"));
    let same = current.is_some_and(|c| {
        c.get("status").and_then(Value::as_str) == Some(status)
            && c.get("reason").and_then(Value::as_str) == Some(reason)
            && c.get("message").and_then(Value::as_str) == Some(message.as_str())
    });
    if same {
        return None;
    }
    let mut fs = fs.clone();
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c.get("type").and_then(Value::as_str) != Some("Dangling"))
        .collect();
    conditions.push(serde_json::json!({
        "type": "Dangling",
        "status": status,
        "lastTransitionTime": crate::object::now(),
        "reason": reason,
        "message": message,
    }));
    fs["status"] = serde_json::json!({ "conditions": conditions });
    Some(fs)
}

async fn write_statuses(backend: &Backend, updates: Vec<Value>) {
    let Some(res) =
        backend
            .registry
            .lookup(crate::flowcontrol_bootstrap::GROUP, "v1", "flowschemas")
    else {
        return;
    };
    for fs in updates {
        let Some(name) = fs.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let Some(rv) = fs
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse().ok())
        else {
            continue;
        };
        let key = backend.key(&res, None, name);
        // A conflict means a newer version, whose event runs this again.
        if let Err(e) = backend.store.update(&key, &fs, rv).await {
            tracing::debug!(flowschema = name, error = %e, "Dangling condition not written");
        }
    }
}

/// Keeps the current limits following demand and the stored object
/// counts fresh (for LIST estimates), as long as the server runs.
pub fn spawn_maintenance(apf: Arc<Apf>, backend: Arc<Backend>) -> tokio::task::AbortHandle {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REBALANCE_PERIOD);
        let mut rounds: u64 = 0;
        loop {
            tick.tick().await;
            apf.rebalance();
            // Object counts every minute, as kube's tracker refreshes them.
            if rounds % 6 == 0 {
                if let Some(counts) = backend.stored_counts().await {
                    apf.set_counts(counts);
                }
            }
            rounds += 1;
        }
    })
    .abort_handle()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_levels_and_rebalance() {
        let apf = Apf::new(true, 600, None);
        let names = apf.level_names();
        assert!(names.contains(&"workload-low".to_string()));
        assert!(names.contains(&"exempt".to_string()));
        // Idle: every level falls to its minimum but shares what is left.
        apf.rebalance();
        let inner = apf.lock();
        let low = &inner.levels["workload-low"];
        assert!(low.current >= low.limits.min() && low.current <= low.limits.max());
        let sum: usize = inner
            .levels
            .values()
            .filter(|l| !l.spec.exempt)
            .map(|l| l.current)
            .sum();
        let nominal: usize = inner.levels.values().map(|l| l.limits.nominal).sum();
        assert!(
            sum.abs_diff(nominal) <= inner.levels.len(),
            "{sum} vs {nominal}"
        );
    }

    #[test]
    fn fair_allocation_respects_bounds() {
        let items = vec![
            ("a".to_string(), 10.0, 20.0, 30.0, 5.0),
            ("b".to_string(), 5.0, 100.0, 5.0, 5.0),
        ];
        let a = fair_allocation(40.0, &items);
        assert!((a.iter().sum::<f64>() - 40.0).abs() < 0.01, "{a:?}");
        assert!(a[0] <= 20.0 && a[1] >= 5.0);
    }

    #[test]
    fn dangling_condition() {
        let fs = serde_json::json!({
            "metadata": {"name": "x"},
            "spec": {"priorityLevelConfiguration": {"name": "nope"}},
        });
        let levels = std::collections::HashSet::from(["global-default"]);
        let updated = dangling_update(&fs, &levels).expect("an update");
        let c = &updated["status"]["conditions"][0];
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("True"), Some("NotFound"))
        );
        assert!(dangling_update(&updated, &levels).is_none());
    }
}
