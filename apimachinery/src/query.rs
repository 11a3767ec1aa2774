//! Query parameters, decoded and validated into typed options the way
//! kube-apiserver does it.
//!
//! kube-apiserver handles a request's parameters in three steps, and the
//! status of an error tells which step refused them:
//!
//! 1. decoding (`ParameterCodec`): integers that do not parse are a 400 with
//!    Go's `strconv` message, which does not name the parameter
//!    (`strconv.ParseInt: parsing "abc": invalid syntax`); selectors that do
//!    not parse are a 400 with the selector's message. Booleans never fail:
//!    absent, `0` and `false` (any case) are false, anything else, even an
//!    empty value (`?watch`), is true. A repeated parameter takes its first
//!    value, except `dryRun`, which is a list.
//! 2. validation of the options object: a 422 `Invalid` naming the options
//!    kind (`ListOptions.meta.k8s.io "" is invalid: ...`) with one cause per
//!    problem, all problems reported at once.
//! 3. the storage layer: a bad `resourceVersion` or `continue` is a 400.
//!
//! [`list_params`] does step 1 for list and watch, [`list_plan`] and
//! [`watch_plan`] steps 2 and 3 and translate the options into what storage
//! must serve, following the tables of "Semantics for get and list" and
//! "Semantics for watch" of the API concepts page.

// Fallible functions here answer with the `Status` the client is sent.
#![allow(clippy::result_large_err)]

use crate::continue_token;
use crate::media::BodyFormat;
use crate::read::{ContinueFrom, Freshness};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{cause, GroupKind, Status};
use crate::validation::{forbidden, go_quote, invalid, not_supported, required, too_long};
use crate::StatusCause;
use serde_json::Value;

/// Longest `fieldManager` accepted, in bytes.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

// ---------------------------------------------------------------------------
// The query string.

/// A decoded query string: every `name=value` pair in order, repeated names
/// kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// The first value of `name`; `Some("")` when present without a value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == name)
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Query {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Query {
            pairs: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// Decodes a raw query string (with or without the leading `?`) as Go's
/// `url.ParseQuery`, which kube-apiserver uses: pairs are separated by `&`,
/// `+` is a space, `%XX` an escaped byte. A pair with a bad escape or with a
/// `;` in it is dropped, as Go drops it; nothing else can fail, so this
/// always succeeds today. Invalid UTF-8 is replaced by U+FFFD.
pub fn parse(query: Option<&str>) -> Result<Query, Status> {
    let raw = query.unwrap_or("");
    let raw = raw.strip_prefix('?').unwrap_or(raw);
    let mut pairs = Vec::new();
    for piece in raw.split('&') {
        if piece.is_empty() || piece.contains(';') {
            continue;
        }
        let (key, value) = piece.split_once('=').unwrap_or((piece, ""));
        let (Some(key), Some(value)) = (unescape(key), unescape(value)) else {
            continue;
        };
        pairs.push((key, value));
    }
    Ok(Query { pairs })
}

fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = bytes.get(i + 1).and_then(|b| (*b as char).to_digit(16))?;
                let lo = bytes.get(i + 2).and_then(|b| (*b as char).to_digit(16))?;
                out.push(u8::try_from(hi * 16 + lo).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

// ---------------------------------------------------------------------------
// Go conversions of single parameters.

/// Go's `strconv.ParseBool`.
fn go_parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A boolean parameter as kube's parameter codec reads it.
fn bool_param(q: &Query, name: &str) -> Option<bool> {
    q.get(name)
        .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
}

/// An int64 parameter; a bad value is a 400 with Go's message.
fn int_param(q: &Query, name: &str) -> Result<Option<i64>, Status> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => go_parse_int(v).map(Some).map_err(Status::bad_request),
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`, with Go's error text.
fn go_parse_int(s: &str) -> Result<i64, String> {
    s.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        format!("strconv.ParseInt: parsing {}: {why}", go_quote(s))
    })
}

/// Parses a non-empty `resourceVersion` as kube's storage versioner does
/// (an unsigned decimal); the error is the versioner's field error text.
/// Revisions beyond `i64::MAX` cannot exist in etcd and are clamped, so
/// storage answers them as too large.
fn parse_resource_version(rv: &str) -> Result<i64, String> {
    let parsed = if rv.starts_with('+') {
        Err("invalid syntax")
    } else {
        rv.parse::<u64>().map_err(|e| match e.kind() {
            std::num::IntErrorKind::PosOverflow => "value out of range",
            _ => "invalid syntax",
        })
    };
    match parsed {
        Ok(v) => Ok(i64::try_from(v).unwrap_or(i64::MAX)),
        Err(why) => {
            let q = go_quote(rv);
            Err(format!(
                "resourceVersion: Invalid value: {q}: strconv.ParseUint: parsing {q}: {why}"
            ))
        }
    }
}

/// A 422 for an options object of kind `kind` (`ListOptions`, ...).
fn invalid_options(kind: &str, causes: Vec<StatusCause>) -> Status {
    Status::invalid(
        GroupKind {
            group: "meta.k8s.io",
            kind,
        },
        "",
        causes,
    )
}

// ---------------------------------------------------------------------------
// List and watch.

/// `resourceVersionMatch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RvMatch {
    Exact,
    NotOlderThan,
    /// Any other non-empty value; refused by [`list_plan`] and [`watch_plan`].
    Unknown(String),
}

impl RvMatch {
    fn parse(s: &str) -> Option<RvMatch> {
        match s {
            "" => None,
            "Exact" => Some(RvMatch::Exact),
            "NotOlderThan" => Some(RvMatch::NotOlderThan),
            other => Some(RvMatch::Unknown(other.to_string())),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            RvMatch::Exact => "Exact",
            RvMatch::NotOlderThan => "NotOlderThan",
            RvMatch::Unknown(s) => s,
        }
    }
}

/// The decoded `ListOptions` of a list or watch. Empty `resourceVersion`,
/// `resourceVersionMatch` and `continue` are the same as absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListParams {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<RvMatch>,
    pub limit: Option<i64>,
    pub continue_token: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub timeout_seconds: Option<i64>,
}

/// Decodes the list and watch parameters (step 1: only 400s). Errors come in
/// kube-apiserver's order: `timeoutSeconds`, `limit`, `labelSelector`,
/// `fieldSelector`.
pub fn list_params(q: &Query) -> Result<ListParams, Status> {
    let non_empty = |name: &str| q.get(name).filter(|v| !v.is_empty()).map(str::to_string);
    let timeout_seconds = int_param(q, "timeoutSeconds")?;
    let limit = int_param(q, "limit")?;
    let label_selector = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))
        .map_err(|e| Status::bad_request(e.to_string()))?;
    let field_selector = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))
        .map_err(|e| Status::bad_request(e.to_string()))?;
    Ok(ListParams {
        label_selector,
        field_selector,
        resource_version: non_empty("resourceVersion"),
        resource_version_match: q.get("resourceVersionMatch").and_then(RvMatch::parse),
        limit,
        continue_token: non_empty("continue"),
        watch: bool_param(q, "watch").unwrap_or(false),
        allow_watch_bookmarks: bool_param(q, "allowWatchBookmarks").unwrap_or(false),
        send_initial_events: bool_param(q, "sendInitialEvents"),
        timeout_seconds,
    })
}

/// What a list must read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPlan {
    /// How fresh the snapshot must be. With a continue token this is the
    /// token's revision (`Exact`), or `MostRecent` for a token that continues
    /// at the latest revision.
    pub freshness: Freshness,
    /// Page size; `None` for no limit (`limit` absent, zero or negative).
    pub limit: Option<usize>,
    /// Where the previous page stopped.
    pub continue_from: Option<ContinueFrom>,
}

/// Validates a list (not a watch) and plans its read, implementing the table
/// of "Semantics for get and list":
///
/// | resourceVersionMatch | paging            | rv unset    | rv="0"       | rv=N            |
/// |----------------------|-------------------|-------------|--------------|-----------------|
/// | unset                | no limit          | MostRecent  | Any (≥0)     | NotOlderThan(N) |
/// | unset                | limit, no continue| MostRecent  | Any (≥0)     | Exact(N)        |
/// | unset                | limit + continue  | token       | token        | 400             |
/// | Exact                | any               | 422         | 422          | Exact(N)        |
/// | NotOlderThan         | any               | 422         | Any (≥0)     | NotOlderThan(N) |
///
/// `Any` is `Freshness::NotOlderThan(0)`. A `limit` applies whatever the
/// freshness (rv="0" included). Errors: 422 `ListOptions` for the
/// combinations the table calls invalid, for `resourceVersionMatch` with
/// `continue`, for an unknown `resourceVersionMatch` and for
/// `sendInitialEvents`; then 400 for a bad continue token, for
/// `resourceVersion` other than `"0"` with `continue`, and for a
/// `resourceVersion` that is not a revision.
pub fn list_plan(p: &ListParams) -> Result<ListPlan, Status> {
    let rv = p.resource_version.as_deref();
    let mut causes = Vec::new();
    if let Some(m) = &p.resource_version_match {
        if rv.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if p.continue_token.is_some() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if let RvMatch::Unknown(v) = m {
            causes.push(not_supported(
                "resourceVersionMatch",
                v,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if *m == RvMatch::Exact && rv == Some("0") {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if p.send_initial_events.is_some() {
        causes.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !causes.is_empty() {
        return Err(invalid_options("ListOptions", causes));
    }

    let limit = p
        .limit
        .filter(|l| *l > 0)
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX));

    if let Some(token) = &p.continue_token {
        let from = continue_token::decode(token).map_err(|e| e.to_status())?;
        if rv.is_some_and(|v| v != "0") {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let freshness = if from.revision > 0 {
            Freshness::Exact(from.revision)
        } else {
            Freshness::MostRecent
        };
        return Ok(ListPlan {
            freshness,
            limit,
            continue_from: Some(from),
        });
    }

    let Some(rv) = rv else {
        return Ok(ListPlan {
            freshness: Freshness::MostRecent,
            limit,
            continue_from: None,
        });
    };
    let revision = parse_resource_version(rv)
        .map_err(|e| Status::bad_request(format!("invalid resource version: {e}")))?;
    let freshness = match &p.resource_version_match {
        Some(RvMatch::NotOlderThan) => Freshness::NotOlderThan(revision),
        Some(RvMatch::Exact) => {
            if revision == 0 {
                return Err(Status::bad_request(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
            Freshness::Exact(revision)
        }
        // Legacy semantics (unknown values were refused above).
        _ => {
            if limit.is_some() && revision > 0 {
                Freshness::Exact(revision)
            } else {
                Freshness::NotOlderThan(revision)
            }
        }
    };
    Ok(ListPlan {
        freshness,
        limit,
        continue_from: None,
    })
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// "Get State and Start at ...": synthetic `ADDED` events for every
    /// object of a snapshot of this freshness (`MostRecent` for rv unset,
    /// `NotOlderThan(0)` for rv="0", `NotOlderThan(N)` with
    /// `sendInitialEvents=true`), then the changes after that snapshot.
    InitialState(Freshness),
    /// No initial state (`sendInitialEvents=false` with rv unset or "0"):
    /// the changes after the current revision, read consistently (rv unset)
    /// or as the server currently knows it (rv="0").
    Now { consistent: bool },
    /// "Start at Exact": the changes after revision N.
    After(i64),
}

/// What a watch must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchPlan {
    pub start: WatchStart,
    /// `allowWatchBookmarks`: `BOOKMARK` events may be sent.
    pub bookmarks: bool,
    /// After the initial state, send a `BOOKMARK` annotated
    /// `k8s.io/initial-events-end: "true"` carrying the revision of the
    /// snapshot: asked with `sendInitialEvents=true` and
    /// `allowWatchBookmarks=true`.
    pub initial_events_end_bookmark: bool,
    /// `timeoutSeconds`: `None` (absent or 0) for the server's default,
    /// `Some(0)` (a negative value) to end at once.
    pub timeout_seconds: Option<u64>,
}

/// Validates a watch and plans it, implementing the watch table of the
/// spec (rv unset: Get State and Start at Most Recent; rv="0": Get State and
/// Start at Any; rv=N: Start at Exact) and the `sendInitialEvents` rules.
///
/// `sendInitialEvents` (either value) requires
/// `resourceVersionMatch=NotOlderThan`, and `resourceVersionMatch` is only
/// allowed with `sendInitialEvents` (422 `ListOptions` otherwise). A
/// `resourceVersion` that is not a revision is a 400. `limit` and `continue`
/// do not apply to a watch.
pub fn watch_plan(p: &ListParams) -> Result<WatchPlan, Status> {
    let mut causes = Vec::new();
    let not_older_than = p.resource_version_match == Some(RvMatch::NotOlderThan);
    if p.send_initial_events.is_some() && !not_older_than {
        causes.push(forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if let Some(m) = &p.resource_version_match {
        if p.send_initial_events.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if *m != RvMatch::NotOlderThan {
            causes.push(not_supported(
                "resourceVersionMatch",
                m.as_str(),
                &["NotOlderThan"],
            ));
        }
        if p.continue_token.is_some() {
            causes.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(invalid_options("ListOptions", causes));
    }

    let revision = match p.resource_version.as_deref() {
        None => None,
        Some(rv) => Some(parse_resource_version(rv).map_err(Status::bad_request)?),
    };
    let start = match (p.send_initial_events, revision) {
        (Some(true) | None, None) => WatchStart::InitialState(Freshness::MostRecent),
        (Some(true) | None, Some(0)) => WatchStart::InitialState(Freshness::NotOlderThan(0)),
        (Some(true), Some(n)) => WatchStart::InitialState(Freshness::NotOlderThan(n)),
        (Some(false), None) => WatchStart::Now { consistent: true },
        (Some(false), Some(0)) => WatchStart::Now { consistent: false },
        (Some(false) | None, Some(n)) => WatchStart::After(n),
    };
    Ok(WatchPlan {
        start,
        bookmarks: p.allow_watch_bookmarks,
        initial_events_end_bookmark: p.send_initial_events == Some(true) && p.allow_watch_bookmarks,
        timeout_seconds: match p.timeout_seconds {
            None | Some(0) => None,
            Some(n) => Some(u64::try_from(n).unwrap_or(0)),
        },
    })
}

/// Freshness of a get of one object: rv unset is the most recent state,
/// rv="0" any state, rv=N any state not older than N. A `resourceVersion`
/// that is not a revision is a 400.
pub fn get_freshness(rv: Option<&str>) -> Result<Freshness, Status> {
    match rv {
        None | Some("") => Ok(Freshness::MostRecent),
        Some(rv) => parse_resource_version(rv)
            .map(Freshness::NotOlderThan)
            .map_err(|e| Status::bad_request(format!("invalid resource version: {e}"))),
    }
}

// ---------------------------------------------------------------------------
// Writes.

/// `fieldValidation`: what to do with unknown or duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FieldValidation {
    Ignore,
    /// kube-apiserver's default: accept, with a `Warning` header per field.
    #[default]
    Warn,
    Strict,
}

/// The verb of a write, which decides the options kind and the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVerb {
    Create,
    Update,
    /// A patch in the given format (apply is `BodyFormat::ApplyYaml`).
    Patch(BodyFormat),
}

/// Validated `CreateOptions`, `UpdateOptions` or `PatchOptions`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteParams {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager`; when `None` the manager is derived from the user
    /// agent, see [`manager_or_user_agent`].
    pub field_manager: Option<String>,
    pub field_validation: FieldValidation,
    /// `force`, only ever `Some` for an apply patch.
    pub force: Option<bool>,
}

/// Decodes and validates the parameters of a create, update or patch; any
/// problem is a 422 `CreateOptions`/`UpdateOptions`/`PatchOptions`:
/// `dryRun` values other than `All`, a `fieldManager` over 128 bytes or with
/// unprintable characters, a `fieldValidation` other than `Ignore`, `Warn`
/// or `Strict` (case-sensitive; absent or empty means `Warn`), `force` on a
/// patch that is not an apply, and a missing `fieldManager` on an apply.
pub fn write_params(q: &Query, verb: WriteVerb) -> Result<WriteParams, Status> {
    let kind = match verb {
        WriteVerb::Create => "CreateOptions",
        WriteVerb::Update => "UpdateOptions",
        WriteVerb::Patch(_) => "PatchOptions",
    };
    let field_manager = q.get("fieldManager").unwrap_or("");
    let force = match verb {
        WriteVerb::Patch(_) => bool_param(q, "force"),
        _ => None,
    };
    let mut causes = Vec::new();
    if let WriteVerb::Patch(format) = verb {
        if format.is_apply() {
            if field_manager.is_empty() {
                causes.push(required("fieldManager", "is required for apply patch"));
            }
        } else if force.is_some() {
            causes.push(forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
    }
    causes.extend(validate_field_manager(field_manager));
    let dry_run = validate_dry_run(q, &mut causes);
    let field_validation = match q.get("fieldValidation").unwrap_or("") {
        "" | "Warn" => FieldValidation::Warn,
        "Ignore" => FieldValidation::Ignore,
        "Strict" => FieldValidation::Strict,
        other => {
            causes.push(not_supported(
                "fieldValidation",
                other,
                &["", "Ignore", "Strict", "Warn"],
            ));
            FieldValidation::Warn
        }
    };
    if !causes.is_empty() {
        return Err(invalid_options(kind, causes));
    }
    Ok(WriteParams {
        dry_run,
        field_manager: (!field_manager.is_empty()).then(|| field_manager.to_string()),
        field_validation,
        force,
    })
}

/// The field manager kube-apiserver records for a write: the `fieldManager`
/// parameter, or else the user agent up to its first `/`, without
/// unprintable characters, cut to 128 bytes.
pub fn manager_or_user_agent(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.unwrap_or("").split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| is_go_print(*c)) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

fn validate_field_manager(manager: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH));
    }
    for (i, c) in manager.char_indices() {
        if !is_go_print(c) {
            causes.push(invalid(
                "fieldManager",
                manager,
                &format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
    causes
}

/// Reads `dryRun` (every value must be `All`), pushing the 422 cause if not.
fn validate_dry_run(q: &Query, causes: &mut Vec<StatusCause>) -> bool {
    let values: Vec<&str> = q.get_all("dryRun").collect();
    validate_dry_run_values(&values, causes)
}

fn validate_dry_run_values<S: AsRef<str>>(values: &[S], causes: &mut Vec<StatusCause>) -> bool {
    if values.iter().any(|v| v.as_ref() != "All") {
        let shown: Vec<String> = values.iter().map(|v| go_quote(v.as_ref())).collect();
        causes.push(StatusCause::new(
            cause::FIELD_VALUE_NOT_SUPPORTED,
            format!(
                "Unsupported value: []string{{{}}}: supported values: \"All\"",
                shown.join(", ")
            ),
            "dryRun",
        ));
    }
    !values.is_empty()
}

/// Go's `unicode.IsPrint`, approximated: no controls, no spaces but U+0020,
/// no format or private-use characters.
fn is_go_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(u32::from(c),
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F
        | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF | 0xF0000..=0x10FFFF)
}

// ---------------------------------------------------------------------------
// Deletes.

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropagationPolicy {
    Orphan,
    Background,
    Foreground,
}

impl PropagationPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Orphan => "Orphan",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
        }
    }
}

/// Validated `DeleteOptions`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeleteParams {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `gracePeriodSeconds`; a negative value is already turned into 1, as
    /// kube-apiserver does.
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<PropagationPolicy>,
    pub preconditions_uid: Option<String>,
    pub preconditions_resource_version: Option<String>,
    /// The deprecated `orphanDependents`; never set together with
    /// `propagation_policy`.
    pub orphan_dependents: Option<bool>,
}

/// Decodes and validates the options of a delete (or deletecollection).
///
/// As in kube-apiserver the options come from the body when there is one
/// (`body` is the decoded `DeleteOptions` of a non-empty body, in any
/// `apiVersion`) and then the query is not read at all; otherwise from the
/// query (`gracePeriodSeconds`, `orphanDependents`, `propagationPolicy`,
/// `dryRun`; preconditions only exist in the body). A value of the wrong type
/// is a 400; `orphanDependents` together with `propagationPolicy`, an unknown
/// `propagationPolicy` and `dryRun` values other than `All` are a 422
/// `DeleteOptions`.
pub fn delete_params(q: &Query, body: Option<&Value>) -> Result<DeleteParams, Status> {
    let raw = match body {
        Some(body) => RawDelete::from_body(body)?,
        None => RawDelete::from_query(q)?,
    };
    let mut causes = Vec::new();
    if raw.orphan_dependents.is_some() {
        if let Some(policy) = &raw.propagation_policy {
            causes.push(invalid(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
    }
    let propagation_policy = match raw.propagation_policy.as_deref() {
        None => None,
        Some("Orphan") => Some(PropagationPolicy::Orphan),
        Some("Background") => Some(PropagationPolicy::Background),
        Some("Foreground") => Some(PropagationPolicy::Foreground),
        Some(other) => {
            causes.push(not_supported(
                "propagationPolicy",
                other,
                &["Foreground", "Background", "Orphan", "nil"],
            ));
            None
        }
    };
    let dry_run = validate_dry_run_values(&raw.dry_run, &mut causes);
    if !causes.is_empty() {
        return Err(invalid_options("DeleteOptions", causes));
    }
    Ok(DeleteParams {
        dry_run,
        grace_period_seconds: raw.grace_period_seconds.map(|g| if g < 0 { 1 } else { g }),
        propagation_policy,
        preconditions_uid: raw.preconditions_uid,
        preconditions_resource_version: raw.preconditions_resource_version,
        orphan_dependents: raw.orphan_dependents,
    })
}

#[derive(Default)]
struct RawDelete {
    dry_run: Vec<String>,
    grace_period_seconds: Option<i64>,
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    preconditions_uid: Option<String>,
    preconditions_resource_version: Option<String>,
}

impl RawDelete {
    fn from_query(q: &Query) -> Result<RawDelete, Status> {
        Ok(RawDelete {
            grace_period_seconds: int_param(q, "gracePeriodSeconds")?,
            orphan_dependents: bool_param(q, "orphanDependents"),
            propagation_policy: q.get("propagationPolicy").map(str::to_string),
            dry_run: q.get_all("dryRun").map(str::to_string).collect(),
            ..RawDelete::default()
        })
    }

    /// Decodes a `DeleteOptions` body as Go's JSON decoder would: unknown
    /// fields and `null`s are ignored, names are case-sensitive, wrong types
    /// are refused.
    fn from_body(body: &Value) -> Result<RawDelete, Status> {
        let mut raw = RawDelete::default();
        let map = match body {
            Value::Null => return Ok(raw),
            Value::Object(map) => map,
            other => {
                return Err(Status::bad_request(format!(
                    "json: cannot unmarshal {} into Go value of type v1.DeleteOptions",
                    go_json_type(other)
                )))
            }
        };
        if let Some(Value::String(kind)) = map.get("kind") {
            if !kind.is_empty() && kind != "DeleteOptions" {
                return Err(Status::bad_request(
                    "decoded object cannot be converted to DeleteOptions",
                ));
            }
        }
        for (key, value) in map {
            if value.is_null() {
                continue;
            }
            match key.as_str() {
                "gracePeriodSeconds" => {
                    raw.grace_period_seconds =
                        Some(value.as_i64().ok_or_else(|| {
                            body_type_error(value, "gracePeriodSeconds", "int64")
                        })?);
                }
                "orphanDependents" => {
                    raw.orphan_dependents = Some(
                        value
                            .as_bool()
                            .ok_or_else(|| body_type_error(value, "orphanDependents", "bool"))?,
                    );
                }
                "propagationPolicy" => {
                    raw.propagation_policy = Some(
                        value
                            .as_str()
                            .ok_or_else(|| {
                                body_type_error(
                                    value,
                                    "propagationPolicy",
                                    "v1.DeletionPropagation",
                                )
                            })?
                            .to_string(),
                    );
                }
                "dryRun" => {
                    let items = value
                        .as_array()
                        .ok_or_else(|| body_type_error(value, "dryRun", "[]string"))?;
                    raw.dry_run = items
                        .iter()
                        .map(|item| match item {
                            Value::String(s) => Ok(s.clone()),
                            Value::Null => Ok(String::new()),
                            other => Err(body_type_error(other, "dryRun", "string")),
                        })
                        .collect::<Result<_, _>>()?;
                }
                "preconditions" => {
                    let pre = value.as_object().ok_or_else(|| {
                        body_type_error(value, "preconditions", "v1.Preconditions")
                    })?;
                    for (k, v) in pre {
                        let slot = match k.as_str() {
                            "uid" => &mut raw.preconditions_uid,
                            "resourceVersion" => &mut raw.preconditions_resource_version,
                            _ => continue,
                        };
                        match v {
                            Value::Null => {}
                            Value::String(s) => *slot = Some(s.clone()),
                            other => {
                                return Err(body_type_error(
                                    other,
                                    &format!("preconditions.{k}"),
                                    "string",
                                ))
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(raw)
    }
}

fn go_json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn body_type_error(value: &Value, field: &str, go_type: &str) -> Status {
    let what = match value {
        Value::Number(n) => format!("number {n}"),
        other => go_json_type(other).to_string(),
    };
    Status::bad_request(format!(
        "json: cannot unmarshal {what} into Go struct field DeleteOptions.{field} of type {go_type}"
    ))
}

// ---------------------------------------------------------------------------
// Response shape.

/// Whether to indent the response, as kube-apiserver decides it from the
/// request: a non-empty `pretty` parameter decides (Go's `ParseBool`: `1`,
/// `t`, `true`, ... are true; anything unparsable is false); otherwise
/// clients whose `User-Agent` starts with `curl`, `Wget` or `Mozilla/5.0`
/// get indented output. The `Accept` parameter `pretty=1` also asks for it
/// (see `media::Negotiated::pretty`).
pub fn pretty(q: &Query, user_agent: Option<&str>) -> bool {
    if let Some(v) = q.get("pretty").filter(|v| !v.is_empty()) {
        return go_parse_bool(v).unwrap_or(false);
    }
    let ua = user_agent.unwrap_or("");
    ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
}

/// `includeObject` of a Table response: what each row's `object` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IncludeObject {
    /// Nothing (`"None"`).
    None,
    /// A `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

/// Reads `includeObject` for a Table response; an unknown value is a 400,
/// worded as kube-apiserver words it.
pub fn table_include_object(q: &Query) -> Result<IncludeObject, Status> {
    match q.get("includeObject").unwrap_or("") {
        "" | "Metadata" => Ok(IncludeObject::Metadata),
        "None" => Ok(IncludeObject::None),
        "Object" => Ok(IncludeObject::Object),
        other => Err(Status::bad_request(format!(
            "Unable to convert to Table as requested: includeObject: Invalid value: {}: must be 'Metadata', 'Object', 'None', or empty",
            go_quote(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn q(s: &str) -> Query {
        parse(Some(s)).unwrap()
    }

    fn lp(s: &str) -> ListParams {
        list_params(&q(s)).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn plan(s: &str) -> Result<ListPlan, Status> {
        list_plan(&lp(s))
    }

    fn wplan(s: &str) -> Result<WatchPlan, Status> {
        watch_plan(&lp(s))
    }

    fn token(rv: i64) -> String {
        continue_token::encode("ns/a\u{0}", rv)
    }

    // -- query string --------------------------------------------------------

    #[test]
    fn parses_like_go() {
        let query = q("?a=1&b=x+y&c=%2F%3d&a=2&flag&empty=&=v&&k=%zz&s=1;t=2&u=%E2%9C%93");
        assert_eq!(query.get("a"), Some("1"));
        assert_eq!(query.get_all("a").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(query.get("b"), Some("x y"));
        assert_eq!(query.get("c"), Some("/="));
        assert_eq!(query.get("flag"), Some(""));
        assert_eq!(query.get("empty"), Some(""));
        assert_eq!(query.get(""), Some("v"));
        assert!(!query.contains("k"), "bad escapes drop the pair");
        assert!(
            !query.contains("s") && !query.contains("t"),
            "semicolons drop the pair"
        );
        assert_eq!(query.get("u"), Some("✓"));
        assert_eq!(query.get("missing"), None);
        assert!(parse(None).unwrap().is_empty());
        assert!(parse(Some("")).unwrap().is_empty());
    }

    #[test]
    fn first_value_wins() {
        let p = lp("limit=5&limit=abc&resourceVersion=7&resourceVersion=9");
        assert_eq!(p.limit, Some(5));
        assert_eq!(p.resource_version.as_deref(), Some("7"));
    }

    // -- list_params -----------------------------------------------------------

    #[test]
    fn booleans_never_fail() {
        for (s, want) in [
            ("watch", true),
            ("watch=", true),
            ("watch=1", true),
            ("watch=true", true),
            ("watch=yes", true),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=FALSE", false),
            ("", false),
        ] {
            assert_eq!(lp(s).watch, want, "{s}");
        }
        assert_eq!(lp("sendInitialEvents").send_initial_events, Some(true));
        assert_eq!(
            lp("sendInitialEvents=false").send_initial_events,
            Some(false)
        );
        assert_eq!(lp("").send_initial_events, None);
        assert!(lp("allowWatchBookmarks=true").allow_watch_bookmarks);
    }

    #[test]
    fn bad_integers_are_400_with_go_text() {
        for (s, msg) in [
            (
                "limit=abc",
                r#"strconv.ParseInt: parsing "abc": invalid syntax"#,
            ),
            ("limit=", r#"strconv.ParseInt: parsing "": invalid syntax"#),
            (
                "limit=1.5",
                r#"strconv.ParseInt: parsing "1.5": invalid syntax"#,
            ),
            (
                "limit=99999999999999999999",
                r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#,
            ),
            (
                "timeoutSeconds=x&limit=y",
                r#"strconv.ParseInt: parsing "x": invalid syntax"#,
            ),
        ] {
            let e = list_params(&q(s)).unwrap_err();
            assert_eq!(
                (e.code, e.reason.as_str(), e.message.as_str()),
                (400, "BadRequest", msg),
                "{s}"
            );
        }
        assert_eq!(lp("limit=-5").limit, Some(-5));
        assert_eq!(lp("limit=%2B5").limit, Some(5));
        assert_eq!(lp("timeoutSeconds=30").timeout_seconds, Some(30));
    }

    #[test]
    fn empty_strings_are_unset() {
        let p = lp("resourceVersion=&resourceVersionMatch=&continue=");
        assert_eq!(p.resource_version, None);
        assert_eq!(p.resource_version_match, None);
        assert_eq!(p.continue_token, None);
        assert_eq!(
            lp("resourceVersionMatch=exact").resource_version_match,
            Some(RvMatch::Unknown("exact".into()))
        );
    }

    #[test]
    fn selectors_are_parsed() {
        let p = lp("labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dx");
        assert!(!p.label_selector.is_empty());
        assert!(!p.field_selector.is_empty());
        assert!(lp("").label_selector.is_empty());
        let e = list_params(&q("fieldSelector=foo")).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            FieldSelector::parse("foo").unwrap_err().to_string()
        );
    }

    // -- list_plan: the spec's table ----------------------------------------------

    #[test]
    fn list_table() {
        use Freshness::*;
        let c = token(42);
        let cases: Vec<(String, Freshness, Option<usize>, bool)> = vec![
            // resourceVersionMatch unset, limit unset
            ("".into(), MostRecent, None, false),
            ("resourceVersion=0".into(), NotOlderThan(0), None, false),
            ("resourceVersion=15".into(), NotOlderThan(15), None, false),
            // resourceVersionMatch unset, limit, continue unset
            ("limit=10".into(), MostRecent, Some(10), false),
            (
                "limit=10&resourceVersion=0".into(),
                NotOlderThan(0),
                Some(10),
                false,
            ),
            (
                "limit=10&resourceVersion=15".into(),
                Exact(15),
                Some(10),
                false,
            ),
            // resourceVersionMatch unset, limit, continue
            (format!("limit=10&continue={c}"), Exact(42), Some(10), true),
            (
                format!("limit=10&continue={c}&resourceVersion=0"),
                Exact(42),
                Some(10),
                true,
            ),
            // Exact
            (
                "resourceVersionMatch=Exact&resourceVersion=15".into(),
                Exact(15),
                None,
                false,
            ),
            (
                "resourceVersionMatch=Exact&resourceVersion=15&limit=3".into(),
                Exact(15),
                Some(3),
                false,
            ),
            // NotOlderThan
            (
                "resourceVersionMatch=NotOlderThan&resourceVersion=0".into(),
                NotOlderThan(0),
                None,
                false,
            ),
            (
                "resourceVersionMatch=NotOlderThan&resourceVersion=15".into(),
                NotOlderThan(15),
                None,
                false,
            ),
            (
                "resourceVersionMatch=NotOlderThan&resourceVersion=0&limit=3".into(),
                NotOlderThan(0),
                Some(3),
                false,
            ),
            (
                "resourceVersionMatch=NotOlderThan&resourceVersion=15&limit=3".into(),
                NotOlderThan(15),
                Some(3),
                false,
            ),
            // limit <= 0 is no limit, and then rv=N is NotOlderThan
            (
                "limit=0&resourceVersion=15".into(),
                NotOlderThan(15),
                None,
                false,
            ),
            (
                "limit=-1&resourceVersion=15".into(),
                NotOlderThan(15),
                None,
                false,
            ),
            // continue without limit still continues
            (format!("continue={c}"), Exact(42), None, true),
        ];
        for (s, freshness, limit, cont) in cases {
            let p = plan(&s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(p.freshness, freshness, "{s}");
            assert_eq!(p.limit, limit, "{s}");
            assert_eq!(p.continue_from.is_some(), cont, "{s}");
        }
        let p = plan(&format!("limit=1&continue={c}")).unwrap();
        assert_eq!(
            p.continue_from,
            Some(ContinueFrom {
                start_key: "ns/a\u{0}".into(),
                revision: 42
            })
        );
    }

    #[test]
    fn continue_at_latest_revision_is_a_consistent_read() {
        let p = plan(&format!("limit=2&continue={}", token(-1))).unwrap();
        assert_eq!(p.freshness, Freshness::MostRecent);
        assert_eq!(p.continue_from.unwrap().revision, -1);
    }

    fn assert_invalid(e: &Status, message: &str, causes: &[(&str, &str, &str)]) {
        assert_eq!(e.code, 422);
        assert_eq!(e.reason, "Invalid");
        assert_eq!(e.message, message);
        let d = e.details.as_ref().unwrap();
        assert_eq!(d.group, "meta.k8s.io");
        let got: Vec<(&str, &str, &str)> = d
            .causes
            .iter()
            .map(|c| (c.reason.as_str(), c.field.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(got, causes);
    }

    #[test]
    fn list_invalid_combinations() {
        let e = plan("resourceVersionMatch=Exact").unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            &[("FieldValueForbidden", "resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")],
        );
        assert_eq!(e.details.as_ref().unwrap().kind, "ListOptions");
        assert_eq!(
            plan("resourceVersionMatch=NotOlderThan&limit=5")
                .unwrap_err()
                .code,
            422
        );

        let e = plan("resourceVersionMatch=Exact&resourceVersion=0").unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            &[("FieldValueForbidden", "resourceVersionMatch", "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")],
        );
        assert_eq!(
            plan("resourceVersionMatch=Exact&resourceVersion=0&limit=4")
                .unwrap_err()
                .code,
            422
        );

        let e = plan("resourceVersionMatch=Latest&resourceVersion=5").unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Latest\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
            &[("FieldValueNotSupported", "resourceVersionMatch", "Unsupported value: \"Latest\": supported values: \"Exact\", \"NotOlderThan\", \"\"")],
        );

        let e = plan(&format!(
            "resourceVersionMatch=NotOlderThan&resourceVersion=5&continue={}",
            token(3)
        ))
        .unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            &[("FieldValueForbidden", "resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when continue is provided")],
        );

        let e = plan("sendInitialEvents=true").unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            &[("FieldValueForbidden", "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")],
        );

        // Every problem at once.
        let e = plan(&format!(
            "resourceVersionMatch=exact&continue={}&sendInitialEvents=false",
            token(3)
        ))
        .unwrap_err();
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided, resourceVersionMatch: Unsupported value: \"exact\": supported values: \"Exact\", \"NotOlderThan\", \"\", sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
        );
        assert_eq!(e.details.unwrap().causes.len(), 4);
    }

    #[test]
    fn list_storage_errors_are_400() {
        let e = plan(&format!("limit=5&continue={}&resourceVersion=15", token(3))).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "specifying resource version is not allowed when using continue"
            )
        );

        let e = plan("limit=5&continue=garbage!").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .starts_with("invalid continue token: continue key is not valid: "),
            "{}",
            e.message
        );
        // The token is checked before the resourceVersion.
        let e = plan("continue=garbage!&resourceVersion=15").unwrap_err();
        assert!(e.message.starts_with("invalid continue token: "));

        for (rv, why) in [
            ("abc", "invalid syntax"),
            ("-1", "invalid syntax"),
            ("+1", "invalid syntax"),
            ("1.0", "invalid syntax"),
            ("99999999999999999999", "value out of range"),
        ] {
            let e = plan(&format!("resourceVersion={}", rv.replace('+', "%2B"))).unwrap_err();
            assert_eq!(e.code, 400, "{rv}");
            assert_eq!(
                e.message,
                format!("invalid resource version: resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": {why}")
            );
        }
        let e = plan("resourceVersionMatch=Exact&resourceVersion=00").unwrap_err();
        assert_eq!(e.code, 400);
        // Beyond int64: clamped, storage will find it too large.
        assert_eq!(
            plan("resourceVersion=18446744073709551615")
                .unwrap()
                .freshness,
            Freshness::NotOlderThan(i64::MAX)
        );
    }

    // -- watch_plan: the spec's table -------------------------------------------------

    #[test]
    fn watch_table() {
        use Freshness::*;
        use WatchStart::*;
        let cases = [
            // legacy: sendInitialEvents unset
            ("watch=1", InitialState(MostRecent)),
            ("watch=1&resourceVersion=0", InitialState(NotOlderThan(0))),
            ("watch=1&resourceVersion=10245", After(10245)),
            // sendInitialEvents=true (requires resourceVersionMatch=NotOlderThan)
            ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", InitialState(MostRecent)),
            ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=", InitialState(MostRecent)),
            ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0", InitialState(NotOlderThan(0))),
            ("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=7", InitialState(NotOlderThan(7))),
            // sendInitialEvents=false
            ("watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan", Now { consistent: true }),
            ("watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=0", Now { consistent: false }),
            ("watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=7", After(7)),
            // limit and continue do not apply to a watch
            ("watch=1&resourceVersion=5&limit=2&continue=zzz", After(5)),
        ];
        for (s, start) in cases {
            let plan = wplan(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(plan.start, start, "{s}");
        }
    }

    #[test]
    fn watch_bookmarks_and_timeout() {
        let p = wplan("watch=1").unwrap();
        assert!(!p.bookmarks && !p.initial_events_end_bookmark);
        assert_eq!(p.timeout_seconds, None);
        let p = wplan("watch=1&allowWatchBookmarks=true&timeoutSeconds=30").unwrap();
        assert!(p.bookmarks && !p.initial_events_end_bookmark);
        assert_eq!(p.timeout_seconds, Some(30));
        let p = wplan("watch=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan").unwrap();
        assert!(p.bookmarks && p.initial_events_end_bookmark);
        let p = wplan("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan").unwrap();
        assert!(!p.initial_events_end_bookmark);
        assert_eq!(
            wplan("watch=1&timeoutSeconds=0").unwrap().timeout_seconds,
            None
        );
        assert_eq!(
            wplan("watch=1&timeoutSeconds=-3").unwrap().timeout_seconds,
            Some(0)
        );
    }

    #[test]
    fn watch_invalid_combinations() {
        let e = wplan("watch=1&sendInitialEvents=true").unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            &[("FieldValueForbidden", "resourceVersionMatch", "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")],
        );
        let e = wplan("watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=5").unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            &[("FieldValueForbidden", "resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")],
        );
        let e =
            wplan("watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5")
                .unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]",
            &[
                ("FieldValueForbidden", "resourceVersionMatch", "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
                ("FieldValueNotSupported", "resourceVersionMatch", "Unsupported value: \"Exact\": supported values: \"NotOlderThan\""),
            ],
        );
        let e =
            wplan("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=abc")
                .unwrap_err();
        assert_invalid(
            &e,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            &[("FieldValueForbidden", "resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when continue is provided")],
        );
        let e = wplan("watch=1&resourceVersion=abc").unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
    }

    // -- get ---------------------------------------------------------------------

    #[test]
    fn get_table() {
        assert_eq!(get_freshness(None).unwrap(), Freshness::MostRecent);
        assert_eq!(get_freshness(Some("")).unwrap(), Freshness::MostRecent);
        assert_eq!(
            get_freshness(Some("0")).unwrap(),
            Freshness::NotOlderThan(0)
        );
        assert_eq!(
            get_freshness(Some("123")).unwrap(),
            Freshness::NotOlderThan(123)
        );
        let e = get_freshness(Some("x")).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "invalid resource version: resourceVersion: Invalid value: \"x\": strconv.ParseUint: parsing \"x\": invalid syntax"
        );
    }

    // -- writes --------------------------------------------------------------------

    #[test]
    fn write_defaults() {
        for verb in [
            WriteVerb::Create,
            WriteVerb::Update,
            WriteVerb::Patch(BodyFormat::MergePatch),
        ] {
            let p = write_params(&q(""), verb).unwrap();
            assert_eq!(p, WriteParams::default());
            assert_eq!(p.field_validation, FieldValidation::Warn);
        }
        let p = write_params(
            &q("dryRun=All&fieldManager=kubectl-edit&fieldValidation=Strict"),
            WriteVerb::Create,
        )
        .unwrap();
        assert!(p.dry_run);
        assert_eq!(p.field_manager.as_deref(), Some("kubectl-edit"));
        assert_eq!(p.field_validation, FieldValidation::Strict);
        assert_eq!(
            write_params(&q("fieldValidation=Ignore"), WriteVerb::Update)
                .unwrap()
                .field_validation,
            FieldValidation::Ignore
        );
        assert_eq!(
            write_params(&q("fieldValidation="), WriteVerb::Update)
                .unwrap()
                .field_validation,
            FieldValidation::Warn
        );
        assert!(
            write_params(&q("dryRun=All&dryRun=All"), WriteVerb::Create)
                .unwrap()
                .dry_run
        );
        // force is a patch option only; elsewhere it is not read.
        assert_eq!(
            write_params(&q("force=true"), WriteVerb::Create)
                .unwrap()
                .force,
            None
        );
    }

    #[test]
    fn write_invalid_values() {
        let e = write_params(&q("dryRun=Yes"), WriteVerb::Create).unwrap_err();
        assert_invalid(
            &e,
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Yes\"}: supported values: \"All\"",
            &[("FieldValueNotSupported", "dryRun", "Unsupported value: []string{\"Yes\"}: supported values: \"All\"")],
        );
        let e = write_params(&q("dryRun&dryRun=All"), WriteVerb::Update).unwrap_err();
        assert_eq!(
            e.message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"\", \"All\"}: supported values: \"All\""
        );
        let e = write_params(&q("dryRun=all"), WriteVerb::Create).unwrap_err();
        assert_eq!(e.code, 422);

        let e = write_params(&q("fieldValidation=strict"), WriteVerb::Create).unwrap_err();
        assert_invalid(
            &e,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
            &[("FieldValueNotSupported", "fieldValidation", "Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"")],
        );

        let long = "m".repeat(129);
        let e = write_params(&q(&format!("fieldManager={long}")), WriteVerb::Create).unwrap_err();
        assert_invalid(
            &e,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes",
            &[("FieldValueTooLong", "fieldManager", "Too long: may not be more than 128 bytes")],
        );
        assert!(write_params(
            &q(&format!("fieldManager={}", "m".repeat(128))),
            WriteVerb::Create
        )
        .is_ok());

        let e = write_params(&q("fieldManager=a%07b%0A"), WriteVerb::Create).unwrap_err();
        assert_eq!(
            e.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: [fieldManager: Invalid value: \"a\\ab\\n\": invalid character U+0007 (at position 1), fieldManager: Invalid value: \"a\\ab\\n\": invalid character U+000A (at position 3)]"
        );
        assert!(write_params(&q("fieldManager=caf%C3%A9+manager"), WriteVerb::Create).is_ok());
    }

    #[test]
    fn patch_force_and_apply() {
        let e =
            write_params(&q("force=true"), WriteVerb::Patch(BodyFormat::MergePatch)).unwrap_err();
        assert_invalid(
            &e,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
            &[("FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply patch")],
        );
        assert_eq!(
            write_params(&q("force=false"), WriteVerb::Patch(BodyFormat::JsonPatch))
                .unwrap_err()
                .code,
            422
        );
        let e = write_params(&q(""), WriteVerb::Patch(BodyFormat::ApplyYaml)).unwrap_err();
        assert_invalid(
            &e,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            &[("FieldValueRequired", "fieldManager", "Required value: is required for apply patch")],
        );
        let p = write_params(
            &q("fieldManager=me&force=true"),
            WriteVerb::Patch(BodyFormat::ApplyYaml),
        )
        .unwrap();
        assert_eq!(p.force, Some(true));
        let p = write_params(
            &q("fieldManager=me"),
            WriteVerb::Patch(BodyFormat::ApplyYaml),
        )
        .unwrap();
        assert_eq!(p.force, None);
    }

    #[test]
    fn manager_from_user_agent() {
        assert_eq!(
            manager_or_user_agent(Some("mine"), Some("kubectl/v1.35")),
            "mine"
        );
        assert_eq!(
            manager_or_user_agent(None, Some("kubectl/v1.35.0 (linux/amd64)")),
            "kubectl"
        );
        assert_eq!(manager_or_user_agent(Some(""), Some("curl/8.0")), "curl");
        assert_eq!(manager_or_user_agent(None, Some("a\u{7}b/1")), "ab");
        assert_eq!(manager_or_user_agent(None, None), "");
        assert_eq!(
            manager_or_user_agent(None, Some(&"x".repeat(300))).len(),
            128
        );
        assert_eq!(
            manager_or_user_agent(None, Some(&"é".repeat(100))).len(),
            128
        );
    }

    // -- deletes ------------------------------------------------------------------------

    #[test]
    fn delete_from_query() {
        let p = delete_params(
            &q("gracePeriodSeconds=30&propagationPolicy=Foreground&dryRun=All"),
            None,
        )
        .unwrap();
        assert_eq!(p.grace_period_seconds, Some(30));
        assert_eq!(p.propagation_policy, Some(PropagationPolicy::Foreground));
        assert!(p.dry_run);
        assert_eq!(
            delete_params(&q(""), None).unwrap(),
            DeleteParams::default()
        );
        assert_eq!(
            delete_params(&q("orphanDependents"), None)
                .unwrap()
                .orphan_dependents,
            Some(true)
        );
        assert_eq!(
            delete_params(&q("gracePeriodSeconds=-5"), None)
                .unwrap()
                .grace_period_seconds,
            Some(1)
        );
        assert_eq!(
            delete_params(&q("gracePeriodSeconds=0"), None)
                .unwrap()
                .grace_period_seconds,
            Some(0)
        );
        let e = delete_params(&q("gracePeriodSeconds=soon"), None).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "strconv.ParseInt: parsing \"soon\": invalid syntax")
        );
    }

    #[test]
    fn delete_body_wins_over_query() {
        let body = json!({
            "kind": "DeleteOptions", "apiVersion": "v1",
            "gracePeriodSeconds": 5,
            "preconditions": {"uid": "u-1", "resourceVersion": "42"},
            "propagationPolicy": "Background",
            "unknown": [1, 2]
        });
        let p = delete_params(
            &q("dryRun=All&gracePeriodSeconds=30&propagationPolicy=Orphan"),
            Some(&body),
        )
        .unwrap();
        assert!(!p.dry_run, "query ignored when a body is sent");
        assert_eq!(p.grace_period_seconds, Some(5));
        assert_eq!(p.propagation_policy, Some(PropagationPolicy::Background));
        assert_eq!(p.preconditions_uid.as_deref(), Some("u-1"));
        assert_eq!(p.preconditions_resource_version.as_deref(), Some("42"));
        let p = delete_params(
            &q("dryRun=bad"),
            Some(&json!({"dryRun": ["All"], "orphanDependents": false})),
        )
        .unwrap();
        assert!(p.dry_run);
        assert_eq!(p.orphan_dependents, Some(false));
        let p = delete_params(&q("dryRun=bad"), Some(&Value::Null)).unwrap();
        assert_eq!(p, DeleteParams::default());
        let p = delete_params(
            &q(""),
            Some(&json!({"gracePeriodSeconds": null, "preconditions": null})),
        )
        .unwrap();
        assert_eq!(p, DeleteParams::default());
    }

    #[test]
    fn delete_invalid() {
        let e = delete_params(
            &q("orphanDependents=true&propagationPolicy=Foreground"),
            None,
        )
        .unwrap_err();
        assert_invalid(
            &e,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set",
            &[("FieldValueInvalid", "propagationPolicy", "Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set")],
        );
        let e = delete_params(&q("propagationPolicy=Cascade"), None).unwrap_err();
        assert_invalid(
            &e,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Cascade\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
            &[("FieldValueNotSupported", "propagationPolicy", "Unsupported value: \"Cascade\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"")],
        );
        let e = delete_params(&q(""), Some(&json!({"dryRun": ["Some"]}))).unwrap_err();
        assert_eq!(
            e.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\""
        );
        let e = delete_params(
            &q(""),
            Some(&json!({"orphanDependents": true, "propagationPolicy": "x"})),
        )
        .unwrap_err();
        assert_eq!(e.details.unwrap().causes.len(), 2);
    }

    #[test]
    fn delete_body_type_errors_are_400() {
        for (body, msg) in [
            (json!({"gracePeriodSeconds": "5"}), "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
            (json!({"gracePeriodSeconds": 1.5}), "json: cannot unmarshal number 1.5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
            (json!({"orphanDependents": "yes"}), "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool"),
            (json!({"dryRun": "All"}), "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string"),
            (json!({"preconditions": {"uid": 5}}), "json: cannot unmarshal number 5 into Go struct field DeleteOptions.preconditions.uid of type string"),
            (json!([1]), "json: cannot unmarshal array into Go value of type v1.DeleteOptions"),
            (json!({"kind": "Pod"}), "decoded object cannot be converted to DeleteOptions"),
        ] {
            let e = delete_params(&q(""), Some(&body)).unwrap_err();
            assert_eq!((e.code, e.message.as_str()), (400, msg), "{body}");
        }
    }

    // -- response shape -----------------------------------------------------------------

    #[test]
    fn pretty_printing() {
        assert!(pretty(&q("pretty=true"), None));
        assert!(pretty(&q("pretty=1"), None));
        assert!(pretty(&q("pretty=T"), None));
        assert!(!pretty(&q("pretty=false"), Some("curl/8.0")));
        assert!(!pretty(&q("pretty=yes"), None));
        assert!(pretty(&q("pretty="), Some("curl/8.0")));
        assert!(pretty(&q(""), Some("curl/8.0")));
        assert!(pretty(&q(""), Some("Wget/1.21")));
        assert!(pretty(&q(""), Some("Mozilla/5.0 (X11)")));
        assert!(!pretty(&q(""), Some("kubectl/v1.35.0")));
        assert!(!pretty(&q(""), None));
    }

    #[test]
    fn table_options() {
        assert_eq!(
            table_include_object(&q("")).unwrap(),
            IncludeObject::Metadata
        );
        assert_eq!(
            table_include_object(&q("includeObject=Object")).unwrap(),
            IncludeObject::Object
        );
        assert_eq!(
            table_include_object(&q("includeObject=None")).unwrap(),
            IncludeObject::None
        );
        let e = table_include_object(&q("includeObject=all")).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Unable to convert to Table as requested: includeObject: Invalid value: \"all\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in any::<String>()) {
            let query = parse(Some(&s)).unwrap();
            if let Ok(p) = list_params(&query) {
                let _ = list_plan(&p);
                let _ = watch_plan(&p);
            }
            let _ = write_params(&query, WriteVerb::Patch(BodyFormat::ApplyYaml));
            let _ = delete_params(&query, None);
            let _ = pretty(&query, Some(&s));
            let _ = get_freshness(Some(&s));
        }

        #[test]
        fn parameters_never_panic(
            rv in prop_oneof![Just(String::new()), Just("0".to_string()), "[0-9]{1,22}", any::<String>()],
            rv_match in prop_oneof![Just(""), Just("Exact"), Just("NotOlderThan"), Just("x")],
            limit in prop_oneof![Just(String::new()), "-?[0-9]{1,20}"],
            cont in prop_oneof![Just(String::new()), Just(token(5)), Just(token(-1)), "[A-Za-z0-9_-]{0,30}"],
            sie in prop_oneof![Just(""), Just("&sendInitialEvents=true"), Just("&sendInitialEvents=false")],
        ) {
            let mut query: Query = [
                ("resourceVersion", rv.as_str()),
                ("resourceVersionMatch", rv_match),
                ("continue", cont.as_str()),
            ]
            .into_iter()
            .collect();
            if !limit.is_empty() {
                query.pairs.push(("limit".into(), limit.clone()));
            }
            if !sie.is_empty() {
                query.pairs.push(("sendInitialEvents".into(), sie.ends_with("true").to_string()));
            }
            if let Ok(p) = list_params(&query) {
                if let Ok(plan) = list_plan(&p) {
                    // Exact never on revision 0, limits always positive.
                    prop_assert!(plan.freshness != Freshness::Exact(0));
                    prop_assert!(plan.limit != Some(0));
                }
                let _ = watch_plan(&p);
            }
        }

        #[test]
        fn delete_body_never_panics(body in arb_json()) {
            let _ = delete_params(&Query::default(), Some(&body));
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>().prop_map(|f| json!(f)),
            prop_oneof![
                Just("All".to_string()),
                Just("Orphan".to_string()),
                any::<String>()
            ]
            .prop_map(Value::String),
        ];
        let keys = prop_oneof![
            Just("gracePeriodSeconds".to_string()),
            Just("orphanDependents".to_string()),
            Just("propagationPolicy".to_string()),
            Just("dryRun".to_string()),
            Just("preconditions".to_string()),
            Just("uid".to_string()),
            Just("resourceVersion".to_string()),
            Just("kind".to_string()),
            "[a-z]{1,4}",
        ];
        leaf.prop_recursive(3, 24, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }
}
