//! WATCH of a collection (or of one object through
//! `fieldSelector=metadata.name=X`): a chunked stream of watch events,
//! served by the storage trait's watch (the watch cache, falling back to
//! etcd). The events are JSON lines, or in protobuf
//! (`application/vnd.kubernetes.protobuf;stream=watch`) frames of a 4-byte
//! big-endian length and a `WatchEvent` body whose `object` holds the
//! object's own protobuf body, as kube's stream encoder writes them; or,
//! for `application/cbor`, a CBOR sequence (`application/cbor-seq`) of
//! self-described `WatchEvent` items embedding the object's shared CBOR.
//!
//! The stream's lifecycle: initial events (when asked for), ended by the
//! bookmark storage sends at the snapshot's revision (sent to the client
//! annotated `k8s.io/initial-events-end` when it allows bookmarks); then the
//! changes; at the timeout (`timeoutSeconds`, else 30-60 minutes) a final
//! `BOOKMARK` at the newest revision the stream has reached, so the client
//! resumes from there; an error from storage becomes one `ERROR` event and
//! ends the stream. Every line sent is counted in
//! `apiserver_watch_events_total` (and its size in `_sizes`).

use super::{list, scope::Scope};
use crate::error::Result;
use crate::registry::{Resource, Row};
use crate::response::NoCompression;
use crate::response::{self, IncludeObject};
use apimachinery::media::{Format, Target};
use apimachinery::query::{self, ListParams, WatchPlan, WatchStart};
use apimachinery::read::{Freshness, Predicate};
use apimachinery::Status;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::{FutureExt, StreamExt};
use rand::Rng;
use serde_json::{json, Value};
use std::pin::Pin;
use std::time::Duration;
use watchcache::{EventType, StorageError, WatchEvent, WatchOptions, WatchStream};

/// kube-apiserver ends watches after a random 30-60 minutes so that clients
/// spread their re-lists.
const MIN_WATCH_TIMEOUT: u64 = 30 * 60;

/// Up to this many bytes of events already waiting are sent as one chunk.
const BATCH_BYTES: usize = 64 * 1024;

fn event_type(kind: EventType) -> &'static str {
    match kind {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
        EventType::Bookmark => "BOOKMARK",
    }
}

/// Where a watch starts in storage terms.
fn options(plan: &WatchPlan, predicate: Predicate) -> WatchOptions {
    let (after_revision, initial_freshness) = match plan.start {
        WatchStart::InitialState(freshness) => (0, Some(freshness)),
        WatchStart::Now { .. } => (0, None),
        WatchStart::After(n) => (n, None),
    };
    WatchOptions {
        after_revision,
        initial_events: initial_freshness.is_some(),
        initial_freshness: initial_freshness.unwrap_or(Freshness::MostRecent),
        predicate,
    }
}

/// Encodes one event as a line of the stream.
/// `{"type":T,"object":<shared JSON>}` and a newline.
fn object_event_line(kind: &str, object_json: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object_json.len() + kind.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// One item of a CBOR watch (`application/cbor-seq`): a self-described
/// `WatchEvent` map, `type` then `object`, whose object is the object's own
/// self-described CBOR (as kube embeds an already-encoded object).
fn cbor_event(kind: &str, object_cbor: &[u8]) -> Bytes {
    use apimachinery::cbor;
    let mut item = Vec::with_capacity(object_cbor.len() + kind.len() + 20);
    item.extend_from_slice(&cbor::SELF_DESCRIBED);
    cbor::write_map_head(&mut item, 2);
    cbor::write_str(&mut item, "type");
    cbor::write_str(&mut item, kind);
    cbor::write_str(&mut item, "object");
    item.extend_from_slice(object_cbor);
    Bytes::from(item)
}

/// The object an event carries in the response's representation.
fn event_object(
    kind: EventType,
    obj: &Value,
    target: Target,
    include: IncludeObject,
    res: &Resource,
    api_version: &str,
    initial_events_end: bool,
) -> Value {
    match kind {
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
            json!({"kind": res.kind, "apiVersion": api_version, "metadata": meta})
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
                    res,
                    std::iter::once(obj),
                    json!({"resourceVersion": rv}),
                    include,
                )
            }
        },
    }
}

/// The Status of an `ERROR` event ending a watch on a storage error.
fn error_status(err: &StorageError) -> Status {
    match err {
        StorageError::Compacted {
            requested,
            compacted,
        } => Status::expired(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        StorageError::TooLargeResourceVersion { requested, current } => {
            Status::too_large_resource_version(*requested, *current, 1)
        }
        other => {
            tracing::warn!(error = %other, "watch ended with an error");
            Status::internal("the watch stream ended unexpectedly; please retry")
        }
    }
}

pub async fn watch(scope: &Scope, params: ListParams) -> Result<Response> {
    let plan = query::watch_plan(&params)?;
    let predicate = list::predicate(scope, &params)?;
    let key = match params.field_selector.exact_match("metadata.name") {
        Some(name) => scope.key_for(name),
        None => scope.collection_prefix(),
    };
    let opts = options(&plan, predicate);
    let (initial_events, after_revision) = (opts.initial_events, opts.after_revision);
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
    let body = WatchBody {
        events,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        stage: if initial_events {
            Stage::InitialEvents
        } else {
            Stage::Watching
        },
        // A watch from N has everything up to N already.
        reached: after_revision.max(0),
        encoder: Encoder {
            format: scope.out.format,
            target: scope.out.target,
            include: response::include_object(scope),
            res: scope.res.clone(),
            api_version: scope.res.api_version(),
        },
        bookmarks: plan.bookmarks,
        initial_events_end: plan.initial_events_end_bookmark,
        recorder: scope
            .state
            .metrics
            .as_ref()
            .map(|m| m.watch_recorder(&scope.res.group, &scope.res.version, &scope.res.plural)),
        pending: None,
    };
    let mut resp = (StatusCode::OK, Body::from_stream(body_stream(body))).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(scope.out.stream_content_type()),
    );
    resp.extensions_mut().insert(NoCompression);
    Ok(resp)
}

/// The response body's chunks. Its future lives as long as the watch,
/// idle or not: keep it small (see `WatchBody::next_line`).
fn body_stream(
    body: WatchBody,
) -> impl futures_util::Stream<Item = std::result::Result<Bytes, std::convert::Infallible>> {
    futures_util::stream::unfold(body, |mut body| async move {
        let line = body.next().await?;
        Some((Ok(line), body))
    })
}

/// How one response encodes its events.
struct Encoder {
    /// Protobuf frames, CBOR sequence items, else JSON lines.
    format: Format,
    target: Target,
    include: IncludeObject,
    res: Row,
    api_version: String,
}

impl Encoder {
    /// An event; an object that cannot be encoded is the stream's last
    /// event, an `ERROR` (a bug, logged).
    fn event(&self, event: &WatchEvent) -> Result<Bytes, Bytes> {
        if self.target == Target::Object && event.kind != EventType::Bookmark {
            // The object's encoding is made once and shared by every
            // watcher (and list) that carries this version; only the
            // event around it is written per watcher.
            let kind = event_type(event.kind);
            return match self.format {
                Format::Protobuf => match event.object.protobuf() {
                    Ok(body) => Ok(self.frame(kind, body)),
                    Err(e) => Err(self.failure(e)),
                },
                Format::Cbor => Ok(cbor_event(kind, event.object.cbor())),
                _ => Ok(object_event_line(kind, event.object.json())),
            };
        }
        self.encode(event.kind, event.object.value(), false)
    }

    fn bookmark(&self, revision: i64, initial_events_end: bool) -> Result<Bytes, Bytes> {
        let object = watchcache::Object::bookmark(revision);
        self.encode(EventType::Bookmark, object.value(), initial_events_end)
    }

    fn encode(
        &self,
        kind: EventType,
        obj: &Value,
        initial_events_end: bool,
    ) -> Result<Bytes, Bytes> {
        let object = event_object(
            kind,
            obj,
            self.target,
            self.include,
            &self.res,
            &self.api_version,
            initial_events_end,
        );
        self.value_event(event_type(kind), &object)
    }

    /// An `ERROR` event carrying `status`.
    fn status(&self, status: &Status) -> Bytes {
        let object = serde_json::to_value(status).unwrap_or_default();
        self.value_event("ERROR", &object).unwrap_or_else(|e| e)
    }

    fn value_event(&self, kind: &str, object: &Value) -> Result<Bytes, Bytes> {
        match self.format {
            Format::Protobuf => {
                return match k8s_proto::encode_object(object) {
                    Ok(body) => Ok(self.frame(kind, &body)),
                    Err(e) => Err(self.failure(e)),
                }
            }
            Format::Cbor => return Ok(cbor_event(kind, &apimachinery::cbor::encode(object))),
            _ => {}
        }
        let mut line =
            serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
        line.push(b'\n');
        Ok(Bytes::from(line))
    }

    /// A protobuf frame: the `WatchEvent` in the resource's group version.
    fn frame(&self, kind: &str, object_body: &[u8]) -> Bytes {
        Bytes::from(k8s_proto::watch_event_frame(
            &self.api_version,
            kind,
            object_body,
        ))
    }

    /// The `ERROR` event of an object the stream cannot encode.
    fn failure(&self, e: impl std::fmt::Display) -> Bytes {
        tracing::error!(kind = &*self.res.kind, error = %e, "watch event does not encode as protobuf");
        let status = Status::internal(format!(
            "unable to encode a {} watch event as protobuf",
            self.res.kind
        ));
        let object = serde_json::to_value(&status).unwrap_or_default();
        match k8s_proto::encode_object(&object) {
            Ok(body) => self.frame("ERROR", &body),
            Err(_) => Bytes::new(),
        }
    }
}

/// Where a watch response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Sending the initial state (ADDED in key order, not revision order:
    /// no bookmark may be sent before its end).
    InitialEvents,
    Watching,
    /// The last line was sent.
    Done,
}

/// The body of a watch response: storage events in, lines out.
struct WatchBody {
    events: WatchStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
    stage: Stage,
    /// The newest revision the stream has reached after the initial state
    /// (the last event's or bookmark's): what the final bookmark carries.
    reached: i64,
    encoder: Encoder,
    /// `allowWatchBookmarks`.
    bookmarks: bool,
    /// Annotate the bookmark that ends the initial state.
    initial_events_end: bool,
    /// `apiserver_watch_events_total` and `_sizes`: every line sent counts,
    /// bookmarks and errors included, as kube counts what its watch
    /// server writes.
    recorder: Option<crate::metrics::WatchEventRecorder>,
    /// An event taken while batching that must be converted first.
    pending: Option<WatchEvent>,
}

/// What one storage event becomes.
enum Step {
    /// A line to send.
    Line(Bytes),
    /// Nothing to send for it (a bookmark the client did not ask for).
    Skip,
    /// An object stored in another version: converted before it is sent.
    Convert(WatchEvent),
    /// The stream is over.
    End,
}

impl WatchBody {
    /// The next chunk to send, recorded; `None` ends the response. Events
    /// that are already waiting when one is ready go out with it, up to
    /// [`BATCH_BYTES`]: one chunk and one write for the lot, instead of
    /// one per event, which is what lets a busy watcher keep up.
    async fn next(&mut self) -> Option<Bytes> {
        let first = self.next_line().await?;
        self.record(&first);
        let mut batch: Option<BytesMut> = None;
        let mut len = first.len();
        while len < BATCH_BYTES && self.stage != Stage::Done && self.pending.is_none() {
            let Some(item) = self.events.next().now_or_never() else {
                break;
            };
            let line = match self.step(item) {
                Step::Line(line) => line,
                Step::Skip => continue,
                Step::End => break,
                Step::Convert(event) => {
                    // Conversion may wait (a webhook): it starts the next
                    // chunk instead.
                    self.pending = Some(event);
                    break;
                }
            };
            self.record(&line);
            len += line.len();
            batch
                .get_or_insert_with(|| {
                    let mut b = BytesMut::with_capacity(BATCH_BYTES.max(len));
                    b.extend_from_slice(&first);
                    b
                })
                .extend_from_slice(&line);
        }
        Some(batch.map_or(first, BytesMut::freeze))
    }

    /// Counts a line in `apiserver_watch_events_total` and `_sizes`.
    fn record(&self, line: &Bytes) {
        if let Some(r) = &self.recorder {
            r.sent(line.len());
        }
    }

    /// The next line to send; `None` ends the response.
    ///
    /// A conversion (which may call a webhook) is boxed where it is
    /// awaited: inline, its state machine made every watch body's future
    /// about 7.8 KB, held by each idle watcher for its whole life (massif,
    /// BENCHMARKS.md "Idle watchers, measured again").
    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if let Some(event) = self.pending.take() {
                return Box::pin(self.convert(event)).await;
            }
            if self.stage == Stage::Done {
                return None;
            }
            let item = tokio::select! {
                biased;
                _ = &mut self.deadline => return self.end_at_timeout(),
                item = self.events.next() => item,
            };
            match self.step(item) {
                Step::Line(line) => return Some(line),
                Step::Skip => {}
                Step::End => return None,
                Step::Convert(event) => return Box::pin(self.convert(event)).await,
            }
        }
    }

    /// What a storage event (`None`: the end of the storage stream)
    /// becomes, without waiting.
    fn step(&mut self, item: Option<Result<WatchEvent, StorageError>>) -> Step {
        let event = match item {
            None => {
                self.stage = Stage::Done;
                return Step::End;
            }
            Some(Err(e)) => {
                self.stage = Stage::Done;
                return Step::Line(self.encoder.status(&error_status(&e)));
            }
            Some(Ok(event)) => event,
        };
        if event.kind != EventType::Bookmark {
            if self.stage == Stage::Watching {
                self.reached = self.reached.max(event.object.revision);
            }
            if self.encoder.res.converts() {
                return Step::Convert(event);
            }
            let sent = self.encoder.event(&event);
            return self.emit(sent).map_or(Step::End, Step::Line);
        }
        let revision = event.object.revision;
        self.reached = self.reached.max(revision);
        if self.stage == Stage::InitialEvents {
            // Storage marks the end of the initial state with a bookmark
            // at the snapshot's revision.
            self.stage = Stage::Watching;
            if self.initial_events_end {
                let sent = self.encoder.bookmark(revision, true);
                return self.emit(sent).map_or(Step::End, Step::Line);
            }
        }
        if self.bookmarks {
            let sent = self.encoder.bookmark(revision, false);
            return self.emit(sent).map_or(Step::End, Step::Line);
        }
        Step::Skip
    }

    /// An object stored in another version, converted (a webhook failure
    /// ends the watch with the error) and with a custom resource's missing
    /// defaults applied.
    async fn convert(&mut self, event: WatchEvent) -> Option<Bytes> {
        let converted =
            match crate::conversion::for_request(&self.encoder.res, event.object.value()).await {
                // Unchanged: the shared encoding serves.
                Ok(std::borrow::Cow::Borrowed(_)) => {
                    let sent = self.encoder.event(&event);
                    return self.emit(sent);
                }
                Ok(v) => v.into_owned(),
                Err(e) => {
                    self.stage = Stage::Done;
                    return Some(self.encoder.status(&e.to_status()));
                }
            };
        let event = WatchEvent {
            kind: event.kind,
            object: watchcache::Object::new(std::sync::Arc::new(converted), event.object.revision),
        };
        let sent = self.encoder.event(&event);
        self.emit(sent)
    }

    /// The watch's time is up: a last bookmark at the newest revision
    /// reached, when the client takes bookmarks and one can be claimed.
    fn end_at_timeout(&mut self) -> Option<Bytes> {
        let watching = self.stage == Stage::Watching;
        self.stage = Stage::Done;
        (self.bookmarks && watching && self.reached > 0).then(|| {
            match self.encoder.bookmark(self.reached, false) {
                Ok(b) | Err(b) => b,
            }
        })
    }

    /// Sends an encoded event; one that failed to encode is the `ERROR`
    /// that ends the stream.
    fn emit(&mut self, encoded: Result<Bytes, Bytes>) -> Option<Bytes> {
        match encoded {
            Ok(b) => Some(b),
            Err(b) => {
                self.stage = Stage::Done;
                Some(b)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn an_idle_watch_body_holds_little_memory() {
        let res = crate::registry::Registry::builtin()
            .lookup("", "v1", "configmaps")
            .unwrap();
        let body = WatchBody {
            events: Box::pin(futures_util::stream::empty()),
            deadline: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            stage: Stage::Watching,
            reached: 0,
            encoder: Encoder {
                format: Format::Json,
                target: Target::Object,
                include: IncludeObject::default(),
                api_version: res.api_version(),
                res,
            },
            bookmarks: false,
            initial_events_end: false,
            recorder: None,
            pending: None,
        };
        let mut stream = Box::pin(body_stream(body));
        // Polled once, as an idle watch is: its state machine is now the
        // size of the body and the wait for the next event.
        let waker = futures_util::task::noop_waker();
        let _ = stream.poll_next_unpin(&mut std::task::Context::from_waker(&waker));
        let size = std::mem::size_of_val(&*stream);
        // A conversion awaited inline made it about 7,800 bytes.
        assert!(size < 1024, "the watch body stream is {size} bytes");
    }

    #[test]
    fn shared_object_line_is_the_event_json() {
        let obj = watchcache::Object::new(
            Arc::new(
                json!({"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "7"}}),
            ),
            7,
        );
        let line = object_event_line("MODIFIED", obj.json());
        assert!(line.ends_with(b"\n"));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v, json!({"type": "MODIFIED", "object": *obj.value()}));
    }

    #[test]
    fn cbor_events_embed_the_shared_object_and_bookmarks_carry_the_annotation() {
        let res = crate::registry::Registry::builtin()
            .lookup("", "v1", "configmaps")
            .unwrap();
        let enc = Encoder {
            format: Format::Cbor,
            target: Target::Object,
            include: IncludeObject::default(),
            api_version: res.api_version(),
            res,
        };
        let obj = watchcache::Object::at_revision(
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}}),
            7,
        );
        let event = enc
            .event(&WatchEvent {
                kind: EventType::Added,
                object: obj.clone(),
            })
            .unwrap();
        assert!(event.ends_with(obj.cbor()), "the shared bytes, tag and all");
        let mut stream = event.to_vec();
        stream.extend_from_slice(&enc.bookmark(9, true).unwrap());
        let items = apimachinery::cbor::decode_sequence(&stream).unwrap();
        assert_eq!(items[0], json!({"type": "ADDED", "object": *obj.value()}));
        assert_eq!(items[1]["type"], "BOOKMARK");
        assert_eq!(items[1]["object"]["kind"], "ConfigMap");
        assert_eq!(items[1]["object"]["metadata"]["resourceVersion"], "9");
        assert_eq!(
            items[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
    }

    fn protobuf_encoder() -> Encoder {
        let res = crate::registry::Registry::builtin()
            .lookup("apps", "v1", "deployments")
            .unwrap();
        Encoder {
            format: Format::Protobuf,
            target: Target::Object,
            include: IncludeObject::default(),
            api_version: res.api_version(),
            res,
        }
    }

    /// A frame's WatchEvent, and its object, decoded.
    fn decode_frame(frame: &[u8]) -> (Value, Value) {
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        let event = k8s_proto::decode_object(&frame[4..]).unwrap();
        assert_eq!(event["apiVersion"], "apps/v1");
        assert_eq!(event["kind"], "WatchEvent");
        let object = event["object"].clone();
        (event, object)
    }

    #[test]
    fn protobuf_frames_for_objects_bookmarks_and_errors() {
        let enc = protobuf_encoder();
        let obj = watchcache::Object::new(
            Arc::new(json!({"kind": "Deployment", "apiVersion": "apps/v1",
                            "metadata": {"name": "web", "resourceVersion": "7"},
                            "spec": {"replicas": 2}})),
            7,
        );
        let frame = enc
            .event(&WatchEvent {
                kind: EventType::Modified,
                object: obj.clone(),
            })
            .unwrap();
        let (event, object) = decode_frame(&frame);
        assert_eq!(event["type"], "MODIFIED");
        assert_eq!(object["metadata"]["name"], "web");
        assert_eq!(object["spec"]["replicas"], 2);
        // The object's own body is shared, not re-encoded.
        assert!(frame
            .windows(obj.protobuf().unwrap().len())
            .any(|w| w == &obj.protobuf().unwrap()[..]));

        let (event, object) = decode_frame(&enc.bookmark(9, true).unwrap());
        assert_eq!(event["type"], "BOOKMARK");
        assert_eq!(object["kind"], "Deployment");
        assert_eq!(object["metadata"]["resourceVersion"], "9");
        assert_eq!(
            object["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );

        let status = error_status(&StorageError::Compacted {
            requested: 3,
            compacted: 5,
        });
        let (event, object) = decode_frame(&enc.status(&status));
        assert_eq!(event["type"], "ERROR");
        assert_eq!(object["kind"], "Status");
        assert_eq!(object["code"], 410);
        assert_eq!(object["reason"], "Expired");

        // An object protobuf cannot carry ends the stream with an ERROR.
        let cr = watchcache::Object::new(
            Arc::new(json!({"kind": "Widget", "apiVersion": "example.com/v1"})),
            8,
        );
        let failed = enc
            .event(&WatchEvent {
                kind: EventType::Added,
                object: cr,
            })
            .unwrap_err();
        let (event, object) = decode_frame(&failed);
        assert_eq!(event["type"], "ERROR");
        assert_eq!(object["code"], 500);
    }
}
