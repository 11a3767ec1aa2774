//! The checker: a pure function from a recorded [`History`] to the
//! anomalies in it. etcd's own change log is the truth; every client
//! observation must be explained by it:
//! - every acknowledged write is a change in etcd, at the revision the
//!   server answered, with the write's id; a refused write is not;
//! - no lost updates: an update or delete acknowledged with a precondition
//!   replaced exactly the change it named; a create found the name free;
//! - no write is applied twice, and nothing appears that nobody wrote;
//! - a consistent read returns the state at some revision no older than
//!   anything any client had observed before the read began
//!   (linearizability of reads); a `NotOlderThan` read, at some revision at
//!   least the one asked for;
//! - a list is exactly etcd's state at the list's resourceVersion, so two
//!   replicas answering at one resourceVersion agree; every page of a
//!   paginated list has the first page's resourceVersion;
//! - a watch stream is a gap-free, duplicate-free, ordered prefix of the
//!   changes after the revision it started from, and no event follows a
//!   bookmark with a revision at or below the bookmark's.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::history::{Change, ChangeKind, History, Op, Outcome, Request, Seen};

/// One way the history cannot be explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub what: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Anomaly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.detail)
    }
}

/// What the checker verified, for the run's report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    pub changes: usize,
    pub acknowledged_writes: usize,
    pub refused_writes: usize,
    pub unknown_writes: usize,
    pub reads: usize,
    pub lists: usize,
    pub watch_segments: usize,
    pub watch_events: usize,
}

/// The changes of each name, in revision order.
struct Timeline<'a> {
    by_name: HashMap<&'a str, Vec<&'a Change>>,
    start: i64,
}

impl<'a> Timeline<'a> {
    fn new(h: &'a History) -> Self {
        let mut by_name: HashMap<&str, Vec<&Change>> = HashMap::new();
        for c in &h.changes {
            by_name.entry(c.name.as_str()).or_default().push(c);
        }
        Timeline {
            by_name,
            start: h.start_revision,
        }
    }

    fn changes(&self, name: &str) -> &[&'a Change] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The change of `name` at `revision`, and the one before it.
    fn at(&self, name: &str, revision: i64) -> Option<(Option<&'a Change>, &'a Change)> {
        let cs = self.changes(name);
        let i = cs.iter().position(|c| c.revision == revision)?;
        Some((i.checked_sub(1).map(|p| cs[p]), cs[i]))
    }

    /// The latest revision at which `name` was in the state `seen` (`None`:
    /// absent), if it ever was; `i64::MAX` when it still is.
    fn last_valid(&self, name: &str, seen: Option<&Seen>) -> Option<i64> {
        let cs = self.changes(name);
        let next_after = |i: usize| cs.get(i + 1).map_or(i64::MAX, |n| n.revision - 1);
        match seen {
            Some(s) => {
                let i = cs.iter().position(|c| c.revision == s.revision)?;
                (cs[i].kind != ChangeKind::Deleted).then(|| next_after(i))
            }
            None => {
                // Absent before its first change, and after each delete.
                let mut last = cs.first().map_or(Some(i64::MAX), |c| Some(c.revision - 1));
                for (i, c) in cs.iter().enumerate() {
                    if c.kind == ChangeKind::Deleted {
                        last = Some(next_after(i));
                    }
                }
                last.filter(|&r| r >= self.start)
            }
        }
    }

    /// The objects present at `revision`, by name.
    fn state(&self, revision: i64) -> BTreeMap<&'a str, &'a Change> {
        let mut out = BTreeMap::new();
        for (name, cs) in &self.by_name {
            if let Some(c) = cs.iter().rev().find(|c| c.revision <= revision) {
                if c.kind != ChangeKind::Deleted {
                    out.insert(*name, *c);
                }
            }
        }
        out
    }
}

/// The revision an operation showed its client to exist, if any.
fn observed(op: &Op, t: &Timeline<'_>) -> Option<i64> {
    match (&op.request, &op.outcome) {
        (Request::Delete { name, precondition }, Outcome::Written { .. }) => {
            // The delete's own revision, from etcd: what the server answers
            // with is checked separately.
            let cs = t.changes(name);
            let i = cs.iter().position(|c| c.revision == *precondition)?;
            cs.get(i + 1).map(|c| c.revision)
        }
        (_, Outcome::Written { revision }) => Some(*revision),
        (_, Outcome::Found(s)) => Some(s.revision),
        (_, Outcome::Listed { revision, .. }) => Some(*revision),
        _ => None,
    }
}

/// Checks `h`; an empty list of anomalies means the history is explained.
pub fn check(h: &History) -> (Checked, Vec<Anomaly>) {
    let t = Timeline::new(h);
    let mut out = Vec::new();
    let mut stats = Checked {
        changes: h.changes.len(),
        ..Checked::default()
    };
    let mut anomaly = |what: &'static str, detail: String| out.push(Anomaly { what, detail });

    check_changes(h, &mut anomaly);
    for op in &h.ops {
        check_write(op, &t, &mut stats, &mut anomaly);
    }

    // Lower bounds of reads: the newest revision any operation that ended
    // before the read began had observed.
    let mut ends: Vec<(u64, i64)> = h
        .ops
        .iter()
        .filter_map(|op| observed(op, &t).map(|r| (op.end, r)))
        .collect();
    ends.sort_unstable();
    let mut prefix_max = Vec::with_capacity(ends.len());
    let mut m = i64::MIN;
    for &(_, r) in &ends {
        m = m.max(r);
        prefix_max.push(m);
    }
    let known_before = |start: u64| {
        let n = ends.partition_point(|&(end, _)| end < start);
        n.checked_sub(1).map_or(h.start_revision, |i| prefix_max[i])
    };
    for op in &h.ops {
        check_read(op, &t, known_before(op.start), &mut stats, &mut anomaly);
    }
    for seg in &h.segments {
        stats.watch_segments += 1;
        stats.watch_events += seg.events.len();
        check_segment(seg, h, &mut anomaly);
    }
    (stats, out)
}

/// Write ids are unique, and every one etcd holds was sent by a client, to
/// that name.
fn check_changes(h: &History, anomaly: &mut impl FnMut(&'static str, String)) {
    let mut sent: HashMap<&str, &str> = HashMap::new();
    for op in &h.ops {
        match &op.request {
            Request::Create { name, wid } | Request::Update { name, wid, .. } => {
                sent.insert(wid, name);
            }
            _ => {}
        }
    }
    let mut applied = HashSet::new();
    for c in &h.changes {
        let Some(wid) = &c.wid else { continue };
        if !applied.insert(wid) {
            anomaly(
                "write applied twice",
                format!("{wid} again at {}", c.revision),
            );
        }
        match sent.get(wid.as_str()) {
            None => anomaly("change nobody wrote", format!("{c:?}")),
            Some(name) if *name != c.name => anomaly(
                "write landed on another object",
                format!("{c:?}, sent to {name}"),
            ),
            Some(_) => {}
        }
    }
}

fn check_write(
    op: &Op,
    t: &Timeline<'_>,
    stats: &mut Checked,
    anomaly: &mut impl FnMut(&'static str, String),
) {
    let (name, wid) = match &op.request {
        Request::Create { name, wid } | Request::Update { name, wid, .. } => (name, Some(wid)),
        Request::Delete { name, .. } => (name, None),
        _ => return,
    };
    match &op.outcome {
        Outcome::Written { .. } => stats.acknowledged_writes += 1,
        Outcome::Refused { .. } => stats.refused_writes += 1,
        _ => stats.unknown_writes += 1,
    }
    let in_etcd = |w: &str| {
        t.changes(name)
            .iter()
            .find(|c| c.wid.as_deref() == Some(w))
            .copied()
    };
    match (&op.request, &op.outcome) {
        (_, Outcome::Refused { code }) => {
            if let Some(c) = wid.and_then(|w| in_etcd(w)) {
                anomaly(
                    "refused write was applied",
                    format!("{code}: {op:?} is {c:?}"),
                );
            }
        }
        (Request::Create { .. } | Request::Update { .. }, Outcome::Written { revision }) => {
            let Some((before, c)) = t.at(name, *revision) else {
                anomaly(
                    "acknowledged write lost",
                    format!("no change at {revision}: {op:?}"),
                );
                return;
            };
            if c.wid.as_ref() != wid || c.kind == ChangeKind::Deleted {
                anomaly("acknowledged write lost", format!("{op:?}, etcd has {c:?}"));
                return;
            }
            match (&op.request, before) {
                (Request::Create { .. }, Some(b)) if b.kind != ChangeKind::Deleted => anomaly(
                    "create over an existing object",
                    format!("{op:?} after {b:?}"),
                ),
                (Request::Update { precondition, .. }, b)
                    if b.is_none_or(|b| {
                        b.revision != *precondition || b.kind == ChangeKind::Deleted
                    }) =>
                {
                    anomaly("lost update", format!("{op:?} replaced {b:?}"))
                }
                _ => {}
            }
        }
        (Request::Delete { precondition, .. }, Outcome::Written { revision }) => {
            let cs = t.changes(name);
            let next = cs
                .iter()
                .position(|c| c.revision == *precondition)
                .and_then(|i| cs.get(i + 1));
            match next {
                Some(c) if c.kind == ChangeKind::Deleted => {
                    if *revision != c.revision && *revision != *precondition {
                        anomaly(
                            "delete answered with a foreign revision",
                            format!("{op:?}, deleted at {}", c.revision),
                        );
                    }
                }
                other => anomaly(
                    "acknowledged delete lost",
                    format!("{op:?}; the change after the precondition is {other:?}"),
                ),
            }
        }
        _ => {}
    }
}

fn check_read(
    op: &Op,
    t: &Timeline<'_>,
    known: i64,
    stats: &mut Checked,
    anomaly: &mut impl FnMut(&'static str, String),
) {
    match (&op.request, &op.outcome) {
        (
            Request::Get {
                name,
                not_older_than,
            },
            outcome @ (Outcome::Found(_) | Outcome::NotFound),
        ) => {
            stats.reads += 1;
            let seen = match outcome {
                Outcome::Found(s) => Some(s),
                _ => None,
            };
            if let Some(s) = seen {
                match t.at(name, s.revision) {
                    Some((_, c)) if c.wid == s.wid && c.kind != ChangeKind::Deleted => {}
                    other => {
                        anomaly(
                            "read of a state etcd never had",
                            format!("{op:?}, etcd: {other:?}"),
                        );
                        return;
                    }
                }
            }
            let bound = not_older_than.unwrap_or(known);
            match t.last_valid(name, seen) {
                Some(last) if last >= bound => {}
                last => anomaly(
                    if not_older_than.is_some() {
                        "NotOlderThan read too old"
                    } else {
                        "stale read"
                    },
                    format!("{op:?}: valid until {last:?}, must be valid at {bound} or later"),
                ),
            }
        }
        (
            Request::List { not_older_than, .. },
            Outcome::Listed {
                revision,
                items,
                pages,
            },
        ) => {
            stats.lists += 1;
            if pages.iter().any(|p| p != revision) {
                anomaly(
                    "pages of one list at different revisions",
                    format!("{pages:?}: {op:?}"),
                );
            }
            let bound = not_older_than.unwrap_or(known);
            if *revision < bound {
                anomaly(
                    if not_older_than.is_some() {
                        "NotOlderThan list too old"
                    } else {
                        "stale list"
                    },
                    format!("list at {revision}, must be at {bound} or later: {op:?}"),
                );
            }
            let want: Vec<(&str, i64, Option<&str>)> = t
                .state(*revision)
                .into_iter()
                .map(|(n, c)| (n, c.revision, c.wid.as_deref()))
                .collect();
            let mut got: Vec<(&str, i64, Option<&str>)> = items
                .iter()
                .map(|s| (s.name.as_str(), s.revision, s.wid.as_deref()))
                .collect();
            got.sort_unstable();
            if got != want {
                anomaly(
                    "list differs from etcd at its revision",
                    format!(
                        "at {revision} replica {} listed {got:?}, etcd had {want:?}",
                        op.replica
                    ),
                );
            }
        }
        _ => {}
    }
}

fn check_segment(
    seg: &super::history::Segment,
    h: &History,
    anomaly: &mut impl FnMut(&'static str, String),
) {
    if seg.from < h.start_revision {
        anomaly(
            "watch started before the recorded history",
            format!("{seg:?}"),
        );
        return;
    }
    let start = h.changes.partition_point(|c| c.revision <= seg.from);
    let expected = &h.changes[start..];
    for (i, e) in seg.events.iter().enumerate() {
        let Some(want) = expected.get(i) else {
            anomaly(
                "watch event etcd never had",
                format!(
                    "watcher {} (replica {}, from {}) event {i}: {e:?}",
                    seg.watcher, seg.replica, seg.from
                ),
            );
            return;
        };
        let same = e.event_type == want.kind.event_type()
            && e.object.name == want.name
            && e.object.revision == want.revision
            && (want.kind == ChangeKind::Deleted || e.object.wid == want.wid);
        if !same {
            anomaly(
                "watch stream is not etcd's history",
                format!(
                    "watcher {} (replica {}, from {}) event {i}: got {e:?}, etcd has {want:?}",
                    seg.watcher, seg.replica, seg.from
                ),
            );
            return;
        }
    }
    let mut last_bookmark = i64::MIN;
    for &(after, rev) in &seg.bookmarks {
        if rev < last_bookmark {
            anomaly(
                "bookmarks went back",
                format!("{rev} after {last_bookmark}: {seg:?}"),
            );
        }
        last_bookmark = rev;
        let before = after.checked_sub(1).map(|i| seg.events[i].object.revision);
        let next = seg.events.get(after).map(|e| e.object.revision);
        if before.is_some_and(|b| rev < b) || next.is_some_and(|n| n <= rev) {
            anomaly(
                "bookmark out of order with events",
                format!(
                    "bookmark {rev} between {before:?} and {next:?} (watcher {})",
                    seg.watcher
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::history::{Segment, WatchEvent};
    use super::*;

    fn change(revision: i64, name: &str, kind: ChangeKind, wid: Option<&str>) -> Change {
        Change {
            revision,
            name: name.into(),
            kind,
            wid: wid.map(Into::into),
        }
    }

    fn seen(name: &str, revision: i64, wid: &str) -> Seen {
        Seen {
            name: name.into(),
            revision,
            wid: Some(wid.into()),
        }
    }

    fn op(request: Request, outcome: Outcome, start: u64, end: u64) -> Op {
        Op {
            client: 0,
            replica: 0,
            request,
            outcome,
            code: 200,
            reason: None,
            start,
            end,
        }
    }

    /// a: created at 11 (w1), updated at 12 (w2), deleted at 14;
    /// b: created at 13 (w3).
    fn base() -> History {
        History {
            start_revision: 10,
            changes: vec![
                change(11, "a", ChangeKind::Added, Some("w1")),
                change(12, "a", ChangeKind::Modified, Some("w2")),
                change(13, "b", ChangeKind::Added, Some("w3")),
                change(14, "a", ChangeKind::Deleted, None),
            ],
            ops: vec![
                op(
                    Request::Create {
                        name: "a".into(),
                        wid: "w1".into(),
                    },
                    Outcome::Written { revision: 11 },
                    0,
                    10,
                ),
                op(
                    Request::Update {
                        name: "a".into(),
                        precondition: 11,
                        wid: "w2".into(),
                    },
                    Outcome::Written { revision: 12 },
                    20,
                    30,
                ),
                op(
                    Request::Create {
                        name: "b".into(),
                        wid: "w3".into(),
                    },
                    Outcome::Written { revision: 13 },
                    40,
                    50,
                ),
                op(
                    Request::Delete {
                        name: "a".into(),
                        precondition: 12,
                    },
                    Outcome::Written { revision: 14 },
                    60,
                    70,
                ),
            ],
            segments: vec![],
        }
    }

    fn anomalies(h: &History) -> Vec<&'static str> {
        check(h).1.into_iter().map(|a| a.what).collect()
    }

    #[test]
    fn a_sound_history_passes() {
        let mut h = base();
        h.ops.push(op(
            Request::Get {
                name: "a".into(),
                not_older_than: None,
            },
            Outcome::Found(seen("a", 12, "w2")),
            35,
            36,
        ));
        h.ops.push(op(
            Request::List {
                not_older_than: Some(13),
                paged: true,
            },
            Outcome::Listed {
                revision: 13,
                items: vec![seen("b", 13, "w3"), seen("a", 12, "w2")],
                pages: vec![13, 13],
            },
            51,
            52,
        ));
        h.ops.push(op(
            Request::Get {
                name: "a".into(),
                not_older_than: None,
            },
            Outcome::NotFound,
            80,
            81,
        ));
        h.segments.push(Segment {
            watcher: 0,
            replica: 1,
            from: 11,
            events: vec![
                WatchEvent {
                    event_type: "MODIFIED".into(),
                    object: seen("a", 12, "w2"),
                },
                WatchEvent {
                    event_type: "ADDED".into(),
                    object: seen("b", 13, "w3"),
                },
            ],
            bookmarks: vec![(2, 13)],
            expired: false,
        });
        let (stats, found) = check(&h);
        assert_eq!(found, vec![]);
        assert_eq!(stats.acknowledged_writes, 4);
        assert_eq!((stats.reads, stats.lists, stats.watch_events), (2, 1, 2));
    }

    #[test]
    fn a_lost_acknowledged_write_is_found() {
        let mut h = base();
        h.ops[2].outcome = Outcome::Written { revision: 15 };
        assert_eq!(anomalies(&h), vec!["acknowledged write lost"]);
    }

    #[test]
    fn a_lost_update_is_found() {
        // Two updates both acknowledged as replacing revision 11.
        let h = History {
            start_revision: 10,
            changes: vec![
                change(11, "a", ChangeKind::Added, Some("w1")),
                change(12, "a", ChangeKind::Modified, Some("w2")),
                change(13, "a", ChangeKind::Modified, Some("w4")),
            ],
            ops: vec![
                op(
                    Request::Create {
                        name: "a".into(),
                        wid: "w1".into(),
                    },
                    Outcome::Written { revision: 11 },
                    0,
                    10,
                ),
                op(
                    Request::Update {
                        name: "a".into(),
                        precondition: 11,
                        wid: "w2".into(),
                    },
                    Outcome::Written { revision: 12 },
                    20,
                    30,
                ),
                op(
                    Request::Update {
                        name: "a".into(),
                        precondition: 11,
                        wid: "w4".into(),
                    },
                    Outcome::Written { revision: 13 },
                    20,
                    31,
                ),
            ],
            segments: vec![],
        };
        assert_eq!(anomalies(&h), vec!["lost update"]);
    }

    #[test]
    fn a_refused_write_that_was_applied_is_found() {
        let mut h = base();
        h.ops[2].outcome = Outcome::Refused { code: 409 };
        assert_eq!(anomalies(&h), vec!["refused write was applied"]);
    }

    #[test]
    fn a_stale_read_is_found() {
        let mut h = base();
        // Begins after the update to 12 was acknowledged, returns 11.
        h.ops.push(op(
            Request::Get {
                name: "a".into(),
                not_older_than: None,
            },
            Outcome::Found(seen("a", 11, "w1")),
            31,
            32,
        ));
        assert_eq!(anomalies(&h), vec!["stale read"]);
        // Concurrent with the update: either answer is linearizable.
        h.ops.last_mut().unwrap().start = 25;
        assert_eq!(anomalies(&h), Vec::<&str>::new());
        // NotOlderThan 12 must not return 11, whenever it ran.
        h.ops.last_mut().unwrap().request = Request::Get {
            name: "a".into(),
            not_older_than: Some(12),
        };
        assert_eq!(anomalies(&h), vec!["NotOlderThan read too old"]);
    }

    #[test]
    fn a_list_that_disagrees_with_etcd_is_found() {
        let mut h = base();
        h.ops.push(op(
            Request::List {
                not_older_than: None,
                paged: false,
            },
            Outcome::Listed {
                revision: 13,
                items: vec![seen("b", 13, "w3")],
                pages: vec![13],
            },
            51,
            52,
        ));
        assert_eq!(
            anomalies(&h),
            vec!["list differs from etcd at its revision"]
        );
        h.ops.last_mut().unwrap().outcome = Outcome::Listed {
            revision: 12,
            items: vec![seen("a", 12, "w2")],
            pages: vec![12],
        };
        assert_eq!(anomalies(&h), vec!["stale list"]);
    }

    #[test]
    fn gaps_duplicates_and_reordering_in_watches_are_found() {
        let ev = |t: &str, n: &str, r: i64, w: &str| WatchEvent {
            event_type: t.into(),
            object: seen(n, r, w),
        };
        let seg = |events| Segment {
            watcher: 0,
            replica: 0,
            from: 10,
            events,
            bookmarks: vec![],
            expired: false,
        };
        for events in [
            vec![ev("ADDED", "a", 11, "w1"), ev("ADDED", "b", 13, "w3")],
            vec![ev("ADDED", "a", 11, "w1"), ev("ADDED", "a", 11, "w1")],
            vec![ev("MODIFIED", "a", 12, "w2"), ev("ADDED", "a", 11, "w1")],
        ] {
            let mut h = base();
            h.segments.push(seg(events));
            assert_eq!(anomalies(&h), vec!["watch stream is not etcd's history"]);
        }
        let mut h = base();
        let mut s = seg(vec![
            ev("ADDED", "a", 11, "w1"),
            ev("MODIFIED", "a", 12, "w2"),
        ]);
        s.bookmarks = vec![(1, 12)];
        h.segments.push(s);
        assert_eq!(anomalies(&h), vec!["bookmark out of order with events"]);
    }

    #[test]
    fn a_write_applied_twice_is_found() {
        let mut h = base();
        h.changes
            .push(change(15, "b", ChangeKind::Modified, Some("w3")));
        assert_eq!(anomalies(&h), vec!["write applied twice"]);
    }
}
