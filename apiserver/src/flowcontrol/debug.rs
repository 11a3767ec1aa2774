//! `/debug/api_priority_and_fairness/dump_*`: kube's comma-and-tab
//! separated dumps of the levels, their queues, and the queued requests,
//! columns aligned as Go's tabwriter aligns them. Each handler reads the
//! APF state alone (the router hands it over).

use super::{Apf, Inner, Level};
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Instant;

/// Joins rows of cells as kube does (`",\t"` between cells), then pads
/// every cell but a row's last to its column's width (at least 8, one
/// space of padding).
fn table(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            let w = (cell.chars().count() + 2).max(8);
            if widths.len() <= i {
                widths.push(w);
            } else {
                widths[i] = widths[i].max(w);
            }
        }
    }
    let mut out = String::new();
    for row in rows {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let padded = format!("{cell},");
                out.push_str(&format!("{padded:<w$}", w = widths[i]));
            }
        }
        out.push('\n');
    }
    out
}

fn text(body: String) -> Response {
    let mut r = body.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn headers(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn with_levels<T>(apf: &Apf, f: impl FnOnce(&Inner) -> T) -> T {
    f(&apf.lock())
}

/// `GET /debug/api_priority_and_fairness/dump_priority_levels`: kube's ten
/// columns, levels by name. An exempt level has no queues (none active,
/// nothing waiting) and counts what it runs, as kube's exempt queue set.
pub async fn dump_priority_levels(State(apf): State<Arc<Apf>>) -> Response {
    let mut rows = vec![headers(&[
        "PriorityLevelName",
        "ActiveQueues",
        "IsIdle",
        "IsQuiescing",
        "WaitingRequests",
        "ExecutingRequests",
        "DispatchedRequests",
        "RejectedRequests",
        "TimedoutRequests",
        "CancelledRequests",
    ])];
    with_levels(&apf, |inner| {
        for (name, level) in &inner.levels {
            let (active, waiting, executing) = match &level.queues {
                Some(q) => (
                    q.queues.iter().filter(|q| !q.waiting.is_empty()).count(),
                    q.waiting(),
                    q.executing,
                ),
                None => (0, 0, level.exempt_executing),
            };
            let t = &level.tally;
            rows.push(vec![
                name.clone(),
                active.to_string(),
                level.idle().to_string(),
                level.quiescing.to_string(),
                waiting.to_string(),
                executing.to_string(),
                t.dispatched.to_string(),
                t.rejected.to_string(),
                // kube keeps this column but never counts into it.
                "0".to_string(),
                t.cancelled.to_string(),
            ]);
        }
    });
    text(table(&rows))
}

/// `GET /debug/api_priority_and_fairness/dump_queues` (an exempt level
/// has no queues, so no rows).
pub async fn dump_queues(State(apf): State<Arc<Apf>>) -> Response {
    let mut rows = vec![headers(&[
        "PriorityLevelName",
        "Index",
        "PendingRequests",
        "ExecutingRequests",
        "SeatsInUse",
        "NextDispatchR",
        "InitialSeatsSum",
        "MaxSeatsSum",
        "TotalWorkSum",
    ])];
    with_levels(&apf, |inner| {
        for (name, level) in &inner.levels {
            let Some(qs) = &level.queues else {
                continue;
            };
            for (i, q) in qs.queues.iter().enumerate() {
                let seats: usize = q.waiting.iter().map(|w| w.seats).sum();
                rows.push(vec![
                    name.clone(),
                    i.to_string(),
                    q.waiting.len().to_string(),
                    q.executing.to_string(),
                    q.seats_in_use.to_string(),
                    format!("{:.8}ss", q.next_dispatch_r),
                    seats.to_string(),
                    seats.to_string(),
                    format!("{:.8}ss", seats as f64 * 0.003),
                ]);
            }
        }
    });
    text(table(&rows))
}

/// `GET /debug/api_priority_and_fairness/dump_requests`
/// (`?includeRequestDetails=1` adds who and what).
pub async fn dump_requests(
    State(apf): State<Arc<Apf>>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let details = query.unwrap_or_default().split('&').any(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        k == "includeRequestDetails" && !v.is_empty()
    });
    let mut head = headers(&[
        "PriorityLevelName",
        "FlowSchemaName",
        "QueueIndex",
        "RequestIndexInQueue",
        "FlowDistingsher",
        "ArriveTime",
        "InitialSeats",
        "FinalSeats",
        "AdditionalLatency",
    ]);
    if details {
        head.extend(headers(&[
            "UserName",
            "Verb",
            "APIPath",
            "Namespace",
            "Name",
            "APIVersion",
            "Resource",
            "SubResource",
        ]));
    }
    let mut rows = vec![head];
    let now = Instant::now();
    let wall = chrono::Utc::now();
    with_levels(&apf, |inner| {
        for (name, level) in &inner.levels {
            rows.extend(request_rows(name, level, details, now, wall));
        }
    });
    text(table(&rows))
}

fn request_rows(
    name: &str,
    level: &Level,
    details: bool,
    now: Instant,
    wall: chrono::DateTime<chrono::Utc>,
) -> Vec<Vec<String>> {
    let Some(qs) = &level.queues else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for (qi, q) in qs.queues.iter().enumerate() {
        for (ri, w) in q.waiting.iter().enumerate() {
            let ago = chrono::Duration::from_std(now.saturating_duration_since(w.arrived))
                .unwrap_or_default();
            let mut row = vec![
                name.to_string(),
                w.payload.schema.clone(),
                qi.to_string(),
                ri.to_string(),
                w.payload.distinguisher.clone(),
                (wall - ago).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
                w.seats.to_string(),
                "0".into(),
                "0s".into(),
            ];
            if details {
                let r = &w.payload.request;
                let gv = if r.api_group.is_empty() {
                    r.api_version.clone()
                } else {
                    format!("{}/{}", r.api_group, r.api_version)
                };
                row.extend([
                    w.payload.user.clone(),
                    r.verb.clone(),
                    r.path.clone(),
                    r.namespace.clone(),
                    r.name.clone(),
                    gv,
                    r.resource.clone(),
                    r.subresource.clone(),
                ]);
            }
            rows.push(row);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_like_tabwriter() {
        let rows = vec![
            headers(&["PriorityLevelName", "Index", "Last"]),
            headers(&["exempt", "0", "x"]),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "PriorityLevelName, Index,  Last");
        assert_eq!(
            lines[1],
            format!("exempt,{}0,{}x", " ".repeat(12), " ".repeat(6))
        );
    }
}
