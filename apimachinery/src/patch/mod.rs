//! The three patch formats of `PATCH` requests.
//!
//! - [`apply_json_patch`]: RFC 6902 JSON Patch (`application/json-patch+json`)
//! - [`apply_merge_patch`]: RFC 7396 JSON Merge Patch (`application/merge-patch+json`)
//! - [`apply_strategic_merge_patch`]: Kubernetes strategic merge patch
//!   (`application/strategic-merge-patch+json`), driven by the patch
//!   strategies and merge keys of [`crate::schema`]
//!
//! All three take the current object and the decoded patch body and return the
//! patched object, or a [`PatchError`] whose kind says which HTTP status
//! kube-apiserver answers with (see [`PatchError::to_status`]). The patched
//! object still has to be decoded, defaulted and validated by the caller.

mod gofmt;
mod rfc6902;
mod strategic;

pub use rfc6902::apply_json_patch;
pub use strategic::{apply_strategic_merge_patch, apply_strategic_merge_patch_owned};

use serde_json::Value;

use crate::status::{self, GroupKind, Status, StatusCause, StatusDetails};

/// The most operations kube-apiserver accepts in one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The message of kube-apiserver's generic 422 answer, used when a JSON patch
/// does not apply (the underlying reason is not shown to clients).
pub const UNPROCESSABLE_MESSAGE: &str =
    "the server rejected our request due to an error in our request";

/// How a patch failure is reported; each kind maps to one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchErrorKind {
    /// 400 `BadRequest`: the patch body is malformed.
    BadRequest,
    /// 422 `Invalid` with the generic message and the error as a cause
    /// (`NewGenericServerResponse(422, ...)`): a JSON patch operation does not
    /// apply, or a strategic patch has lists of lists.
    Unprocessable,
    /// 422 `Invalid` with field causes (`NewInvalid`): the patched document
    /// cannot be an object.
    Invalid,
    /// 413 `RequestEntityTooLarge`: too many JSON patch operations.
    RequestEntityTooLarge,
    /// 500 with an empty reason: the error kube-apiserver returns as a plain
    /// Go error (most strategic merge patch failures, e.g. a missing merge key
    /// or an unknown `$patch` directive).
    Internal,
}

impl PatchErrorKind {
    /// The HTTP status code kube-apiserver answers with.
    pub fn code(self) -> u16 {
        match self {
            PatchErrorKind::BadRequest => 400,
            PatchErrorKind::Unprocessable | PatchErrorKind::Invalid => 422,
            PatchErrorKind::RequestEntityTooLarge => 413,
            PatchErrorKind::Internal => 500,
        }
    }
}

/// A patch that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatchError {
    pub kind: PatchErrorKind,
    /// The message kube-apiserver sends to the client.
    pub message: String,
    /// Field causes (only for [`PatchErrorKind::Invalid`]).
    pub causes: Vec<StatusCause>,
    /// What actually went wrong when `message` is generic, for logs only.
    pub detail: Option<String>,
}

impl PatchError {
    pub(crate) fn new(kind: PatchErrorKind, message: impl Into<String>) -> Self {
        PatchError {
            kind,
            message: message.into(),
            causes: Vec::new(),
            detail: None,
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        PatchError::new(PatchErrorKind::BadRequest, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        PatchError::new(PatchErrorKind::Internal, message)
    }

    pub(crate) fn unprocessable(detail: impl Into<String>) -> Self {
        PatchError {
            detail: Some(detail.into()),
            ..PatchError::new(PatchErrorKind::Unprocessable, UNPROCESSABLE_MESSAGE)
        }
    }

    /// The HTTP status code kube-apiserver answers with.
    pub fn code(&self) -> u16 {
        self.kind.code()
    }

    /// The `Status` kube-apiserver sends for this failure.
    pub fn to_status(&self) -> Status {
        match self.kind {
            PatchErrorKind::BadRequest => Status::bad_request(self.message.clone()),
            PatchErrorKind::Unprocessable => {
                // kube's NewGenericServerResponse: the generic message, and
                // the underlying error as an UnexpectedServerResponse cause.
                let mut s = Status::failure(422, status::reason::INVALID, self.message.clone());
                let mut details = StatusDetails::default();
                if let Some(d) = self.detail.as_ref().filter(|d| !d.is_empty()) {
                    details.causes.push(StatusCause::new(
                        status::cause::UNEXPECTED_SERVER_RESPONSE,
                        d.clone(),
                        "",
                    ));
                }
                s.details = Some(details);
                s
            }
            PatchErrorKind::Invalid => {
                let mut s = Status::invalid(
                    GroupKind {
                        group: "",
                        kind: "",
                    },
                    "",
                    self.causes.clone(),
                );
                s.message = self.message.clone();
                s
            }
            PatchErrorKind::RequestEntityTooLarge => Status::failure(
                413,
                status::reason::REQUEST_ENTITY_TOO_LARGE,
                self.message.clone(),
            ),
            PatchErrorKind::Internal => Status::failure(500, "", self.message.clone()),
        }
    }
}

impl From<PatchError> for Status {
    fn from(e: PatchError) -> Status {
        e.to_status()
    }
}

/// The word Go's `encoding/json` uses for the JSON type of a value in
/// `cannot unmarshal X into ...` errors.
pub(crate) fn json_type_word(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Applies an RFC 7396 JSON merge patch.
///
/// As in kube-apiserver, the patch must be a JSON object: `null` or a scalar
/// is a 400 (`Invalid JSON Patch`), and an array (which would replace the
/// whole object) is the 422 kube-apiserver reports when the result cannot be
/// decoded into an object.
pub fn apply_merge_patch(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    check_merge_patch(patch)?;
    let mut doc = original.clone();
    json_patch::merge(&mut doc, patch);
    Ok(doc)
}

/// [`apply_merge_patch`] on an owned document, saving a copy.
pub fn apply_merge_patch_owned(mut original: Value, patch: &Value) -> Result<Value, PatchError> {
    check_merge_patch(patch)?;
    json_patch::merge(&mut original, patch);
    Ok(original)
}

fn check_merge_patch(patch: &Value) -> Result<(), PatchError> {
    match patch {
        Value::Object(_) => Ok(()),
        Value::Array(items) => {
            // evanphx/json-patch returns the array (without null elements) as
            // the document; decoding it into an object then fails.
            let pruned: Vec<&Value> = items.iter().filter(|v| !v.is_null()).collect();
            let doc = serde_json::to_string(&pruned).unwrap_or_default();
            Err(invalid_patched_document(&doc, "array"))
        }
        _ => Err(PatchError::bad_request("Invalid JSON Patch")),
    }
}

/// The 422 kube-apiserver sends when the patched document is not an object.
fn invalid_patched_document(doc: &str, json_type: &str) -> PatchError {
    let quoted = serde_json::to_string(doc).unwrap_or_default();
    let cause = StatusCause::new(
        status::cause::FIELD_VALUE_INVALID,
        format!(
            "Invalid value: {quoted}: couldn't get version/kind; json parse error: json: \
             cannot unmarshal {json_type} into Go value of type struct {{ APIVersion string \
             \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
        ),
        "patch",
    );
    let status = Status::invalid(
        GroupKind {
            group: "",
            kind: "",
        },
        "",
        vec![cause.clone()],
    );
    PatchError {
        kind: PatchErrorKind::Invalid,
        message: status.message,
        causes: vec![cause],
        detail: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "1"}},
            "data": {"k": "v"},
            "list": [1, 2, 3]
        })
    }

    #[test]
    fn json_patch_applies_operations() {
        let out = apply_json_patch(
            &obj(),
            &json!([
                {"op": "test", "path": "/data/k", "value": "v"},
                {"op": "add", "path": "/data/n", "value": "new"},
                {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
                {"op": "remove", "path": "/list/0"},
                {"op": "add", "path": "/list/-", "value": 4},
                {"op": "copy", "from": "/data/k", "path": "/data/copied"},
                {"op": "move", "from": "/data/n", "path": "/data/moved"}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "labels": {"a": "2"}},
                "data": {"k": "v", "copied": "v", "moved": "new"},
                "list": [2, 3, 4]
            })
        );
    }

    #[test]
    fn json_patch_value_defaults_to_null() {
        let out = apply_json_patch(&obj(), &json!([{"op": "add", "path": "/x"}])).unwrap();
        assert_eq!(out["x"], Value::Null);
        assert_eq!(apply_json_patch(&obj(), &Value::Null).unwrap(), obj());
        assert_eq!(apply_json_patch(&obj(), &json!([])).unwrap(), obj());
    }

    #[test]
    fn json_patch_errors_map_to_kube_codes() {
        let table: &[(Value, u16, &str)] = &[
            (
                json!({"op": "add"}),
                400,
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
            ),
            (
                json!("x"),
                400,
                "json: cannot unmarshal string into Go value of type jsonpatch.Patch",
            ),
            (
                json!(["add"]),
                400,
                "json: cannot unmarshal string into Go value of type jsonpatch.Operation",
            ),
            (
                json!([{"op": "test", "path": "/data/k", "value": "nope"}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
            (
                json!([{"op": "remove", "path": "/missing"}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
            (
                json!([{"op": "replace", "path": "/missing", "value": 1}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
            (
                json!([{"op": "add", "path": "/a/b/c", "value": 1}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
            (
                json!([{"op": "bogus", "path": "/a"}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
            (json!([{"path": "/a"}]), 422, UNPROCESSABLE_MESSAGE),
            (json!([null]), 422, UNPROCESSABLE_MESSAGE),
            (
                json!([{"op": "add", "path": "no-slash", "value": 1}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
            (
                json!([{"op": "move", "from": "/missing", "path": "/x"}]),
                422,
                UNPROCESSABLE_MESSAGE,
            ),
        ];
        for (patch, code, message) in table {
            let err = apply_json_patch(&obj(), patch).unwrap_err();
            assert_eq!(err.code(), *code, "{patch}");
            assert_eq!(err.message, *message, "{patch}");
        }
        let err =
            apply_json_patch(&obj(), &json!([{"op": "remove", "path": "/missing"}])).unwrap_err();
        assert!(err.detail.is_some());
        let status = serde_json::to_value(err.to_status()).unwrap();
        assert_eq!(
            status,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": UNPROCESSABLE_MESSAGE,
                "reason": "Invalid",
                "details": {"causes": [{
                    "reason": "UnexpectedServerResponse",
                    "message": "operation '/0' failed at path '/missing': path is invalid"
                }]},
                "code": 422
            })
        );
    }

    #[test]
    fn json_patch_operation_limit() {
        let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}))
            .collect();
        let err = apply_json_patch(&obj(), &Value::Array(ops)).unwrap_err();
        assert_eq!(err.code(), 413);
        assert_eq!(
            err.message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        assert_eq!(err.to_status().reason, "RequestEntityTooLarge");
    }

    #[test]
    fn json_patch_failure_is_atomic() {
        let original = obj();
        let err = apply_json_patch(
            &original,
            &json!([
                {"op": "add", "path": "/data/x", "value": 1},
                {"op": "test", "path": "/data/k", "value": "other"}
            ]),
        );
        assert!(err.is_err());
        assert_eq!(original, obj());
    }

    #[test]
    fn merge_patch_follows_rfc7396() {
        let out = apply_merge_patch(
            &obj(),
            &json!({
                "metadata": {"labels": {"a": null, "b": "2"}},
                "data": null,
                "list": [9],
                "new": {"x": 1, "gone": null}
            }),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "labels": {"b": "2"}},
                "list": [9],
                "new": {"x": 1}
            })
        );
        assert_eq!(apply_merge_patch(&obj(), &json!({})).unwrap(), obj());
        assert_eq!(
            apply_merge_patch_owned(obj(), &json!({"data": null})).unwrap(),
            apply_merge_patch(&obj(), &json!({"data": null})).unwrap()
        );
        assert!(apply_merge_patch_owned(obj(), &json!(1)).is_err());
    }

    #[test]
    fn merge_patch_must_be_an_object() {
        for patch in [Value::Null, json!("x"), json!(1), json!(true)] {
            let err = apply_merge_patch(&obj(), &patch).unwrap_err();
            assert_eq!(err.code(), 400);
            assert_eq!(err.message, "Invalid JSON Patch");
            assert_eq!(err.to_status().reason, "BadRequest");
        }
        let err = apply_merge_patch(&obj(), &json!([1, null])).unwrap_err();
        assert_eq!(err.code(), 422);
        assert!(
            err.message.starts_with(
                " \"\" is invalid: patch: Invalid value: \"[1]\": couldn't get version/kind"
            ),
            "{}",
            err.message
        );
        let status = err.to_status();
        assert_eq!(status.reason, "Invalid");
        assert_eq!(status.details.unwrap().causes[0].field, "patch");
    }

    #[test]
    fn internal_errors_have_no_reason() {
        let status = PatchError::internal("boom").to_status();
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "boom", "code": 500
            })
        );
    }

    pub(crate) fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1.0e6f64..1.0e6).prop_map(|f| json!(f)),
            prop_oneof![
                Just("$patch".to_string()),
                Just("delete".to_string()),
                Just("replace".to_string()),
                Just("merge".to_string()),
                Just("name".to_string()),
                "[a-z/$]{0,6}",
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((arb_key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    pub(crate) fn arb_key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("$patch".to_string()),
            Just("$retainKeys".to_string()),
            Just("$setElementOrder/containers".to_string()),
            Just("$setElementOrder/finalizers".to_string()),
            Just("$deleteFromPrimitiveList/finalizers".to_string()),
            Just("$deleteFromPrimitiveList".to_string()),
            Just("name".to_string()),
            Just("containers".to_string()),
            Just("finalizers".to_string()),
            Just("metadata".to_string()),
            Just("spec".to_string()),
            "[a-z]{1,4}",
        ]
    }

    proptest! {
        #[test]
        fn json_and_merge_patches_never_panic(original in arb_json(), patch in arb_json()) {
            let _ = apply_json_patch(&original, &patch);
            let _ = apply_merge_patch(&original, &patch);
        }

        #[test]
        fn empty_merge_patch_is_identity(original in arb_json()) {
            if original.is_object() {
                prop_assert_eq!(apply_merge_patch(&original, &json!({})).unwrap(), original);
            }
        }
    }
}
