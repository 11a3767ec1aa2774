//! The Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`).
//!
//! A body is the 4-byte [`MAGIC`] `k8s\0` followed by a `runtime.Unknown`
//! message whose `raw` field holds the object's own protobuf encoding
//! ([`decode_unknown`], [`encode_unknown`]). The object is translated to and
//! from the JSON kube writes for it ([`decode_to_json`], [`encode_from_json`])
//! by walking a table of every built-in message (`data/messages.json`,
//! generated from the upstream IDL by `tools/gen_proto.py`).
//! [`decode_object`] and [`encode_object`] do all of it for a whole body.
//! [`encode_openapi_v2`] writes the OpenAPI v2 document as gnostic's
//! `openapi.v2.Document` (`/openapi/v2` in protobuf).
//!
//! # JSON produced by the decoder
//!
//! It mirrors kube decoding the protobuf into its Go structs and writing
//! those as JSON:
//! * fields come in Go struct (declaration) order; map keys sorted;
//! * int32/int64 are JSON numbers, `bytes` standard base64 strings;
//! * nested messages are objects, and always written when present (kube
//!   writes non-pointer structs even when empty: `"strategy": {}`);
//!   embedded Go structs (`Volume.volumeSource`, `Probe.handler`, ...) are
//!   inlined into the parent object;
//! * repeated fields and maps are written only when they have elements;
//! * scalars are written when present on the wire, except zero values
//!   (`""`, `0`, `false`, empty bytes), which are dropped the way Go's
//!   `omitempty` drops them, unless the table marks the field `keepZero`:
//!   fields without `omitempty` (required in the OpenAPI schema) and Go
//!   pointer fields, where an explicit zero is meaningful
//!   (`DeploymentSpec.replicas: 0`, `automountServiceAccountToken: false`,
//!   `storageClassName: ""`). The pointer list is kept by hand in the
//!   generator; a pointer field missing from it loses an explicit zero;
//! * special types: `IntOrString` -> number or string; `Quantity` -> its
//!   string (not canonicalized; an empty message gives `"0"`); `Time` ->
//!   `2006-01-02T15:04:05Z` (nanoseconds dropped, as kube does), empty ->
//!   `null`; `MicroTime` -> `2006-01-02T15:04:05.000000Z`; `Duration` -> Go
//!   duration string (`1h0m0s`); `RawExtension` and `FieldsV1` -> the
//!   embedded JSON value (a `RawExtension` holding a `k8s\0` body is decoded
//!   as an object), empty -> `null`; `Verbs`/`ExtraValue` -> array of strings;
//! * unknown field numbers are skipped; nesting deeper than [`MAX_DEPTH`]
//!   is rejected. No input makes the decoder panic.
//!
//! The top-level `kind` and `apiVersion` are not part of the protobuf
//! message; [`decode_object`] takes them from the envelope.

mod compose;
mod decode;
mod encode;
mod envelope;
mod error;
mod gvk;
mod openapi_v2;
mod order;
mod table;
mod timefmt;
mod wire;

pub use compose::{encode_list, encode_raw, watch_event_frame, ListParts};
pub use decode::decode_to_json;
pub use encode::encode_from_json;
pub use envelope::{
    decode_object, decode_object_metadata, decode_unknown, encode_object, encode_unknown,
    split_api_version, Unknown, CONTENT_TYPE,
};
pub use error::ProtoError;
pub use gvk::message_for;
pub use openapi_v2::encode_openapi_v2;
pub use order::{order_as, order_object, set_resource_version, OBJECT_META_ORDER};

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";

/// Deepest message nesting the decoder and encoder accept.
pub const MAX_DEPTH: usize = 100;
