//! One priority level's queues: shuffle sharding picks a flow's queue,
//! fair queuing by virtual time picks which queue's head runs next, and
//! seats bound what runs at once (kube's `fairqueuing/queueset`). Pure and
//! synchronous: the caller passes the time, holds the lock, and wakes the
//! requests this hands back.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long one seat of work is assumed to take when a request starts;
/// corrected by its real duration when it ends (kube uses the same 3 ms).
const ESTIMATED_SERVICE: f64 = 0.003;

/// FNV-1a (64 bit) of a flow's identity: its FlowSchema and distinguisher.
pub fn flow_hash(schema: &str, distinguisher: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in schema.bytes().chain([0]).chain(distinguisher.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Deals `hand` distinct cards out of `deck`, the hash as the entropy: the
/// i-th draw takes `hash mod (deck - i)` among the cards still in the deck.
pub fn deal(deck: usize, hand: usize, mut hash: u64) -> Vec<usize> {
    let hand = hand.clamp(1, deck.max(1));
    let mut dealt: Vec<usize> = Vec::with_capacity(hand);
    let mut sorted: Vec<usize> = Vec::with_capacity(hand);
    for i in 0..hand {
        let left = (deck - i).max(1) as u64;
        let mut card = (hash % left) as usize;
        hash /= left;
        // The card-th remaining card: step over those already dealt.
        for &taken in &sorted {
            if card >= taken {
                card += 1;
            }
        }
        let at = sorted.partition_point(|&t| t < card);
        sorted.insert(at, card);
        dealt.push(card);
    }
    dealt
}

/// A level's queue shape and concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `0`: no queues, excess is rejected (`limitResponse.type: Reject`).
    pub queues: usize,
    pub hand_size: usize,
    pub queue_length_limit: usize,
    /// Seats that may be occupied at once.
    pub concurrency_limit: usize,
}

/// A request waiting in a queue, with the caller's payload.
#[derive(Debug)]
pub struct Waiting<T> {
    pub id: u64,
    pub seats: usize,
    pub arrived: Instant,
    pub payload: T,
}

#[derive(Debug, Default)]
pub struct Queue<T> {
    pub waiting: VecDeque<Waiting<T>>,
    /// Virtual time at which this queue's head may be dispatched.
    pub next_dispatch_r: f64,
    pub executing: usize,
    pub seats_in_use: usize,
}

impl<T> Queue<T> {
    fn new() -> Self {
        Queue {
            waiting: VecDeque::new(),
            next_dispatch_r: 0.0,
            executing: 0,
            seats_in_use: 0,
        }
    }

    fn waiting_seats(&self) -> usize {
        self.waiting.iter().map(|w| w.seats).sum()
    }

    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.executing == 0
    }
}

/// A running request's claim on seats; handed back to `finish`.
#[derive(Debug)]
pub struct Ticket {
    queue: Option<usize>,
    pub seats: usize,
    started: Instant,
}

/// What became of an arriving request.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Queued (or, if there is room, already among the dispatched).
    Queued(u64),
    /// Refused at once: `queue-full` or `concurrency-limit` (kube's
    /// `reason` label).
    Rejected(&'static str),
}

/// One priority level's queues and seats.
#[derive(Debug)]
pub struct QueueSet<T> {
    shape: Shape,
    pub queues: Vec<Queue<T>>,
    pub seats_in_use: usize,
    pub executing: usize,
    /// Virtual time: seat-seconds granted to each active queue so far.
    pub virtual_time: f64,
    updated: Instant,
    next_id: u64,
}

impl<T> QueueSet<T> {
    pub fn new(shape: Shape, now: Instant) -> Self {
        let mut qs = QueueSet {
            shape,
            queues: Vec::new(),
            seats_in_use: 0,
            executing: 0,
            virtual_time: 0.0,
            updated: now,
            next_id: 0,
        };
        qs.reshape(shape, now);
        qs
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    fn limit(&self) -> usize {
        self.shape.concurrency_limit.max(1)
    }

    pub fn waiting(&self) -> usize {
        self.queues.iter().map(|q| q.waiting.len()).sum()
    }

    pub fn is_idle(&self) -> bool {
        self.executing == 0 && self.waiting() == 0
    }

    /// Takes a new shape. Queues beyond a smaller count are kept while
    /// they still hold requests (new ones never go there) and dropped
    /// once empty.
    pub fn reshape(&mut self, shape: Shape, now: Instant) {
        self.advance(now);
        self.shape = shape;
        while self.queues.len() < shape.queues {
            let mut q = Queue::new();
            q.next_dispatch_r = self.virtual_time;
            self.queues.push(q);
        }
        self.trim();
    }

    fn trim(&mut self) {
        while self.queues.len() > self.shape.queues
            && self.queues.last().is_some_and(Queue::is_idle)
        {
            self.queues.pop();
        }
    }

    /// Moves virtual time on: it grows at the rate of the seats the busy
    /// queues could use (at most the limit), shared among those queues.
    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.updated).as_secs_f64();
        self.updated = now;
        let active = self.queues.iter().filter(|q| !q.is_idle()).count();
        if active == 0 || dt == 0.0 {
            return;
        }
        let demand: usize = self
            .queues
            .iter()
            .map(|q| q.seats_in_use + q.waiting_seats())
            .sum();
        self.virtual_time += dt * demand.min(self.limit()) as f64 / active as f64;
    }

    /// A request of `seats` for the flow hashing to `hash` arrives. Besides
    /// the outcome, returns the requests that may start now (possibly this
    /// one).
    pub fn arrive(
        &mut self,
        now: Instant,
        hash: u64,
        seats: usize,
        payload: T,
    ) -> (Arrival, Vec<(T, Ticket)>) {
        self.advance(now);
        let seats = seats.clamp(1, self.limit());
        if self.shape.queues == 0 {
            if self.seats_in_use + seats > self.limit() {
                return (Arrival::Rejected("concurrency-limit"), Vec::new());
            }
            self.seats_in_use += seats;
            self.executing += 1;
            let ticket = Ticket {
                queue: None,
                seats,
                started: now,
            };
            return (Arrival::Queued(0), vec![(payload, ticket)]);
        }
        let hand = deal(self.shape.queues, self.shape.hand_size, hash);
        let Some(index) = hand
            .into_iter()
            .min_by_key(|&i| self.queues[i].waiting_seats() + self.queues[i].seats_in_use)
        else {
            return (Arrival::Rejected("queue-full"), Vec::new());
        };
        let vt = self.virtual_time;
        let q = &mut self.queues[index];
        if q.waiting.len() >= self.shape.queue_length_limit {
            return (Arrival::Rejected("queue-full"), Vec::new());
        }
        if q.is_idle() {
            q.next_dispatch_r = q.next_dispatch_r.max(vt);
        }
        self.next_id += 1;
        let id = self.next_id;
        q.waiting.push_back(Waiting {
            id,
            seats,
            arrived: now,
            payload,
        });
        (Arrival::Queued(id), self.dispatch(now))
    }

    /// Starts waiting requests while their seats fit, always the head of
    /// the queue furthest behind in virtual time.
    pub fn dispatch(&mut self, now: Instant) -> Vec<(T, Ticket)> {
        self.advance(now);
        let mut started = Vec::new();
        loop {
            let next = self
                .queues
                .iter()
                .enumerate()
                .filter(|(_, q)| !q.waiting.is_empty())
                .min_by(|(_, a), (_, b)| a.next_dispatch_r.total_cmp(&b.next_dispatch_r))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            let seats = self.queues[i].waiting.front().map_or(1, |w| w.seats);
            if self.seats_in_use + seats > self.limit() {
                break;
            }
            let q = &mut self.queues[i];
            let Some(w) = q.waiting.pop_front() else {
                break;
            };
            q.executing += 1;
            q.seats_in_use += seats;
            q.next_dispatch_r += seats as f64 * ESTIMATED_SERVICE;
            self.executing += 1;
            self.seats_in_use += seats;
            started.push((
                w.payload,
                Ticket {
                    queue: Some(i),
                    seats,
                    started: now,
                },
            ));
        }
        started
    }

    /// A request ends; returns the requests its seats let start.
    pub fn finish(&mut self, now: Instant, ticket: Ticket) -> Vec<(T, Ticket)> {
        self.advance(now);
        self.seats_in_use = self.seats_in_use.saturating_sub(ticket.seats);
        self.executing = self.executing.saturating_sub(1);
        if let Some(q) = ticket.queue.and_then(|i| self.queues.get_mut(i)) {
            q.executing = q.executing.saturating_sub(1);
            q.seats_in_use = q.seats_in_use.saturating_sub(ticket.seats);
            // Replace the estimate with what the request really took.
            let took = now.saturating_duration_since(ticket.started).as_secs_f64();
            q.next_dispatch_r += (took - ESTIMATED_SERVICE) * ticket.seats as f64;
        }
        let started = self.dispatch(now);
        self.trim();
        started
    }

    /// Takes a request out of its queue (its wait timed out, or its client
    /// left); `None` when it is no longer waiting (it was dispatched).
    pub fn cancel(&mut self, now: Instant, id: u64) -> Option<T> {
        self.advance(now);
        let found = self.queues.iter_mut().find_map(|q| {
            let at = q.waiting.iter().position(|w| w.id == id)?;
            q.waiting.remove(at)
        });
        self.trim();
        found.map(|w| w.payload)
    }

    /// The oldest wait among queued requests (for tests and dumps).
    pub fn longest_wait(&self, now: Instant) -> Duration {
        self.queues
            .iter()
            .filter_map(|q| q.waiting.front())
            .map(|w| now.saturating_duration_since(w.arrived))
            .max()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shape(queues: usize, hand: usize, len: usize, limit: usize) -> Shape {
        Shape {
            queues,
            hand_size: hand,
            queue_length_limit: len,
            concurrency_limit: limit,
        }
    }

    proptest! {
        #[test]
        fn hands_are_distinct_cards_of_the_deck(deck in 1usize..200, hand in 1usize..16, hash: u64) {
            let cards = deal(deck, hand, hash);
            prop_assert_eq!(cards.len(), hand.min(deck));
            let mut sorted = cards.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), cards.len());
            prop_assert!(cards.iter().all(|&c| c < deck));
            prop_assert_eq!(deal(deck, hand, hash), cards);
        }
    }

    #[test]
    fn hands_spread_over_the_deck() {
        // Every queue of 64 is in some flow's hand of 6 out of 1000 flows.
        let mut hit = [false; 64];
        for f in 0..1000 {
            for c in deal(64, 6, flow_hash("fs", &format!("user-{f}"))) {
                hit[c] = true;
            }
        }
        assert!(hit.iter().all(|h| *h));
        assert_ne!(flow_hash("a", "bc"), flow_hash("ab", "c"));
    }

    #[test]
    fn runs_within_the_limit_and_queues_the_rest() {
        let t = Instant::now();
        let mut qs = QueueSet::new(shape(4, 2, 2, 2), t);
        let (a, run) = qs.arrive(t, 1, 1, "a");
        assert!(matches!(a, Arrival::Queued(_)));
        assert_eq!(run.len(), 1);
        let (_, run_b) = qs.arrive(t, 1, 1, "b");
        assert_eq!(run_b.len(), 1);
        let (c, none) = qs.arrive(t, 1, 1, "c");
        assert!(none.is_empty());
        assert_eq!((qs.executing, qs.seats_in_use, qs.waiting()), (2, 2, 1));
        // A flow's hand of two queues holds at most 2 each: 4 waiting, then full.
        qs.arrive(t, 1, 1, "d");
        qs.arrive(t, 1, 1, "e");
        qs.arrive(t, 1, 1, "f");
        assert_eq!(qs.arrive(t, 1, 1, "g").0, Arrival::Rejected("queue-full"));
        // Cancelling a waiting request takes it out; a finished one lets the next run.
        let Arrival::Queued(c_id) = c else { panic!() };
        assert_eq!(qs.cancel(t, c_id), Some("c"));
        assert_eq!(qs.cancel(t, c_id), None);
        let (_, ticket) = run.into_iter().next().unwrap();
        let next = qs.finish(t + Duration::from_millis(10), ticket);
        assert_eq!(next.len(), 1);
        assert_eq!(qs.executing, 2);
    }

    #[test]
    fn reject_levels_have_no_queues() {
        let t = Instant::now();
        let mut qs = QueueSet::new(shape(0, 0, 0, 1), t);
        assert_eq!(qs.arrive(t, 0, 1, ()).1.len(), 1);
        assert_eq!(
            qs.arrive(t, 0, 1, ()).0,
            Arrival::Rejected("concurrency-limit")
        );
    }

    #[test]
    fn wide_requests_take_their_seats() {
        let t = Instant::now();
        let mut qs = QueueSet::new(shape(8, 1, 10, 4), t);
        // 10 seats are capped at the limit (4): alone, it runs.
        let (_, run) = qs.arrive(t, 7, 10, "wide");
        assert_eq!(run[0].1.seats, 4);
        let (_, none) = qs.arrive(t, 9, 1, "narrow");
        assert!(none.is_empty());
        let (_, ticket) = run.into_iter().next().unwrap();
        assert_eq!(qs.finish(t, ticket).len(), 1);
    }

    #[test]
    fn fair_between_a_heavy_and_a_light_flow() {
        // One seat; a heavy flow queues 20 requests, then a light flow
        // queues 2. Fair queuing runs the light flow's requests long
        // before the heavy flow's backlog is through.
        let t0 = Instant::now();
        let mut qs = QueueSet::new(shape(16, 1, 100, 1), t0);
        let heavy = (0..1000u64)
            .map(|f| flow_hash("fs", &format!("h{f}")))
            .find(|h| deal(16, 1, *h)[0] == 0)
            .unwrap();
        let light = (0..1000u64)
            .map(|f| flow_hash("fs", &format!("l{f}")))
            .find(|h| deal(16, 1, *h)[0] == 1)
            .unwrap();
        let mut running: Vec<(&str, Ticket)> = Vec::new();
        for _ in 0..20 {
            running.extend(qs.arrive(t0, heavy, 1, "heavy").1);
        }
        for _ in 0..2 {
            running.extend(qs.arrive(t0, light, 1, "light").1);
        }
        let mut order = Vec::new();
        let mut now = t0;
        while let Some((who, ticket)) = running.pop() {
            order.push(who);
            now += Duration::from_millis(10);
            running.extend(qs.finish(now, ticket));
        }
        assert_eq!(order.len(), 22);
        let last_light = order.iter().rposition(|w| *w == "light").unwrap();
        assert!(last_light <= 4, "light flow served late: {order:?}");
    }
}
