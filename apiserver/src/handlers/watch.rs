//! WATCH of a collection (or of one object through
//! `fieldSelector=metadata.name=X`): a chunked stream of JSON watch events.
//! The watch cache will serve these from memory; today they come straight
//! from the storage trait's watch.

use super::{list, Scope};
use crate::error::Result;
use crate::response::{self, IncludeObject};
use crate::server::NoCompression;
use apimachinery::media::Target;
use apimachinery::query::{self, ListParams, WatchPlan, WatchStart};
use apimachinery::read::Freshness;
use apimachinery::Status;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use rand::Rng;
use serde_json::{json, Value};
use std::time::Duration;
use watchcache::{EventType, StorageError, WatchEvent, WatchOptions};

/// kube-apiserver ends watches after a random 30-60 minutes so that clients
/// spread their re-lists.
const MIN_WATCH_TIMEOUT: u64 = 30 * 60;

fn event_type(kind: EventType) -> &'static str {
    match kind {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
        EventType::Bookmark => "BOOKMARK",
    }
}

/// Where a watch starts in storage terms: (after_revision, initial_events).
fn start(plan: &WatchPlan) -> (i64, bool) {
    match plan.start {
        WatchStart::InitialState(Freshness::Exact(n)) => (n, true),
        WatchStart::InitialState(_) => (0, true),
        WatchStart::Now { .. } => (0, false),
        WatchStart::After(n) => (n, false),
    }
}

/// Encodes one event as a line of the stream.
fn encode_event(
    kind: EventType,
    obj: &Value,
    target: Target,
    include: IncludeObject,
    res_kind: &str,
    api_version: &str,
    initial_events_end: bool,
) -> Bytes {
    let object = match kind {
        EventType::Bookmark => {
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            let meta = if initial_events_end {
                json!({"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}})
            } else {
                json!({"resourceVersion": rv})
            };
            json!({"kind": res_kind, "apiVersion": api_version, "metadata": meta})
        }
        _ => match target {
            Target::Object => obj.clone(),
            Target::PartialObjectMetadata | Target::PartialObjectMetadataList => {
                response::partial_metadata(obj)
            }
            Target::Table => {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null);
                response::table(
                    std::iter::once(obj),
                    json!({"resourceVersion": rv}),
                    include,
                )
            }
        },
    };
    let mut line = serde_json::to_vec(&json!({"type": event_type(kind), "object": object}))
        .unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn error_event(err: &StorageError) -> Bytes {
    let status = match err {
        StorageError::Compacted {
            requested,
            compacted,
        } => Status::expired(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        other => {
            tracing::warn!(error = %other, "watch ended with an error");
            Status::internal("the watch stream ended unexpectedly; please retry")
        }
    };
    let mut line =
        serde_json::to_vec(&json!({"type": "ERROR", "object": status})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

pub async fn watch(scope: &Scope, params: ListParams) -> Result<Response> {
    let plan = query::watch_plan(&params)?;
    let (after_revision, initial_events) = start(&plan);
    let predicate = list::predicate(scope, &params)?;
    let key = match params.field_selector.exact_match("metadata.name") {
        Some(name) => scope.key_for(name),
        None => scope.collection_prefix(),
    };
    let opts = WatchOptions {
        after_revision,
        initial_events,
        predicate,
    };
    let events = scope
        .state
        .store
        .watch(&key, opts)
        .await
        .map_err(|e| scope.storage_err(e))?;
    let timeout = match plan.timeout_seconds {
        Some(t) => Duration::from_secs(t),
        None => {
            let jitter = rand::rng().random_range(0..MIN_WATCH_TIMEOUT);
            Duration::from_secs(MIN_WATCH_TIMEOUT + jitter)
        }
    };
    let target = scope.out.target;
    let include = response::include_object(scope);
    let res_kind = scope.res.kind;
    let api_version = scope.res.api_version();
    let want_bookmarks = plan.bookmarks;
    let want_initial_end = plan.initial_events_end_bookmark;
    // (failed, initial state finished)
    let stream = events
        .take_until(tokio::time::sleep(timeout))
        .scan(
            (false, !initial_events),
            move |st, item: watchcache::storage::Result<WatchEvent>| {
                if st.0 {
                    return std::future::ready(None);
                }
                let out = match item {
                    Ok(ev) if ev.kind == EventType::Bookmark => {
                        let initial_end = !st.1;
                        st.1 = true;
                        if initial_end && want_initial_end {
                            encode_event(
                                ev.kind,
                                &ev.object.value,
                                target,
                                include,
                                res_kind,
                                &api_version,
                                true,
                            )
                        } else if want_bookmarks {
                            encode_event(
                                ev.kind,
                                &ev.object.value,
                                target,
                                include,
                                res_kind,
                                &api_version,
                                false,
                            )
                        } else {
                            Bytes::new()
                        }
                    }
                    Ok(ev) => encode_event(
                        ev.kind,
                        &ev.object.value,
                        target,
                        include,
                        res_kind,
                        &api_version,
                        false,
                    ),
                    Err(e) => {
                        st.0 = true;
                        error_event(&e)
                    }
                };
                std::future::ready(Some(Ok::<_, std::convert::Infallible>(out)))
            },
        )
        .filter(|b| std::future::ready(!matches!(b, Ok(b) if b.is_empty())));
    let mut resp = (StatusCode::OK, Body::from_stream(stream)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.extensions_mut().insert(NoCompression);
    Ok(resp)
}
