//! What a chaos run records: etcd's own history of the keys under test, and
//! every operation and watch stream the clients saw, with their outcomes.
//! Plain data, so the checker is a pure function of it.

/// A change etcd committed to one of the objects under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub revision: i64,
    /// The object's name.
    pub name: String,
    pub kind: ChangeKind,
    /// The write id carried in the stored value (`None` for deletes, or a
    /// value without one).
    pub wid: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    /// The watch event type a client must see for it.
    pub fn event_type(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// An object as a read returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub name: String,
    /// Its `metadata.resourceVersion`: the revision of its last change.
    pub revision: i64,
    pub wid: Option<String>,
}

/// What an operation asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// POST of a new object carrying `wid`.
    Create { name: String, wid: String },
    /// PUT with `metadata.resourceVersion = precondition`, carrying `wid`.
    Update {
        name: String,
        precondition: i64,
        wid: String,
    },
    /// DELETE with `preconditions.resourceVersion`.
    Delete { name: String, precondition: i64 },
    /// GET; `not_older_than` is the `resourceVersion` parameter (`None`:
    /// a consistent read).
    Get {
        name: String,
        not_older_than: Option<i64>,
    },
    /// LIST of the namespace (every page when `paged`); `not_older_than` as
    /// for `Get`, with `resourceVersionMatch=NotOlderThan`.
    List {
        not_older_than: Option<i64>,
        paged: bool,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A write the server acknowledged, at this revision (for a delete: the
    /// revision in the returned object, the deleted state).
    Written { revision: i64 },
    /// A read of one object.
    Found(Seen),
    /// 404 on a read.
    NotFound,
    /// A list: its resourceVersion, its items (of every page), and the
    /// resourceVersion each page reported.
    Listed {
        revision: i64,
        items: Vec<Seen>,
        pages: Vec<i64>,
    },
    /// A definite refusal (4xx other than 429): nothing was written.
    Refused { code: u16 },
    /// No answer, a timeout, 429 or 5xx: a write may or may not have
    /// happened.
    Unknown,
}

/// One operation: a request, its outcome, and when it ran (nanoseconds on
/// the run's monotonic clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub client: usize,
    /// The replica asked.
    pub replica: usize,
    pub request: Request,
    pub outcome: Outcome,
    /// The HTTP status of the (last) answer; 0 when none came in time.
    pub code: u16,
    /// The `reason` of the Status an error answer carried.
    pub reason: Option<String>,
    pub start: u64,
    pub end: u64,
}

impl Op {
    /// A create, update or delete.
    pub fn is_write(&self) -> bool {
        matches!(
            self.request,
            Request::Create { .. } | Request::Update { .. } | Request::Delete { .. }
        )
    }

    /// How long it took, in nanoseconds.
    pub fn latency(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// One event of a watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    pub event_type: String,
    pub object: Seen,
}

/// One watch stream, from the revision it started after until it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub watcher: usize,
    pub replica: usize,
    /// The `resourceVersion` it was opened with.
    pub from: i64,
    pub events: Vec<WatchEvent>,
    /// Bookmarks: how many events had arrived before each, and its
    /// revision.
    pub bookmarks: Vec<(usize, i64)>,
    /// It ended with 410 Gone (its start was compacted, or it fell behind).
    pub expired: bool,
}

/// Everything a run recorded.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// etcd's changes to the objects under test, in revision order, from
    /// the start of the run.
    pub changes: Vec<Change>,
    /// The revision etcd was at when the run started (nothing before is in
    /// `changes`).
    pub start_revision: i64,
    pub ops: Vec<Op>,
    pub segments: Vec<Segment>,
}
