//! `meta/v1 Status`: the error object of the Kubernetes API.
//!
//! Constructors mirror the helpers of kube-apiserver's `apimachinery/pkg/api/errors`
//! so that codes, reasons and messages read exactly as clients expect them.
//! Turning internal errors into a `Status` happens in one place in the server
//! (`apiserver::error`); this module only knows how each kind of failure looks.

use serde::{Deserialize, Serialize};

/// Maximum request body kube-apiserver accepts (3 MiB).
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A `Status` object as returned by the API on failure (and by a few successful
/// deletes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub kind: String,
    pub api_version: String,
    pub metadata: ListMeta,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    pub code: u16,
}

/// `ListMeta` as it appears inside a `Status` (only `continue` and
/// `resourceVersion` are ever set there).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// One cause of a failure, usually one invalid field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusCause {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl StatusCause {
    pub fn new(reason: &str, message: impl Into<String>, field: impl Into<String>) -> Self {
        StatusCause {
            reason: reason.to_string(),
            message: message.into(),
            field: field.into(),
        }
    }
}

/// Group and plural resource, e.g. `deployments.apps`; the core group is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupResource<'a> {
    pub group: &'a str,
    pub resource: &'a str,
}

impl std::fmt::Display for GroupResource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Group and kind, e.g. `Deployment.apps`, as used in `Invalid` messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupKind<'a> {
    pub group: &'a str,
    pub kind: &'a str,
}

impl std::fmt::Display for GroupKind<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

pub mod reason {
    pub const NOT_FOUND: &str = "NotFound";
    pub const ALREADY_EXISTS: &str = "AlreadyExists";
    pub const CONFLICT: &str = "Conflict";
    pub const INVALID: &str = "Invalid";
    pub const BAD_REQUEST: &str = "BadRequest";
    pub const GONE: &str = "Gone";
    pub const EXPIRED: &str = "Expired";
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    pub const NOT_ACCEPTABLE: &str = "NotAcceptable";
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "UnsupportedMediaType";
    pub const REQUEST_ENTITY_TOO_LARGE: &str = "RequestEntityTooLarge";
    pub const TIMEOUT: &str = "Timeout";
    pub const TOO_MANY_REQUESTS: &str = "TooManyRequests";
    pub const INTERNAL_ERROR: &str = "InternalError";
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailable";
    pub const FORBIDDEN: &str = "Forbidden";
    pub const UNAUTHORIZED: &str = "Unauthorized";
}

/// Field-error cause reasons (`metav1.CauseType`).
pub mod cause {
    pub const FIELD_VALUE_NOT_FOUND: &str = "FieldValueNotFound";
    pub const FIELD_VALUE_REQUIRED: &str = "FieldValueRequired";
    pub const FIELD_VALUE_DUPLICATE: &str = "FieldValueDuplicate";
    pub const FIELD_VALUE_INVALID: &str = "FieldValueInvalid";
    pub const FIELD_VALUE_NOT_SUPPORTED: &str = "FieldValueNotSupported";
    pub const FIELD_VALUE_FORBIDDEN: &str = "FieldValueForbidden";
    pub const FIELD_VALUE_TOO_LONG: &str = "FieldValueTooLong";
    pub const FIELD_VALUE_TYPE_INVALID: &str = "FieldValueTypeInvalid";
    pub const UNEXPECTED_SERVER_RESPONSE: &str = "UnexpectedServerResponse";
    pub const FIELD_MANAGER_CONFLICT: &str = "FieldManagerConflict";
    pub const RESOURCE_VERSION_TOO_LARGE: &str = "ResourceVersionTooLarge";
}

impl Status {
    /// A bare failure with code, reason and message.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: ListMeta::default(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.to_string(),
            details: None,
            code,
        }
    }

    /// The `Status` a successful delete returns for kinds that answer with one.
    pub fn success(gr: GroupResource<'_>, name: &str, uid: &str) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            metadata: ListMeta::default(),
            status: "Success".into(),
            message: String::new(),
            reason: String::new(),
            details: Some(StatusDetails {
                name: name.into(),
                group: gr.group.into(),
                kind: gr.resource.into(),
                uid: uid.into(),
                ..Default::default()
            }),
            code: 200,
        }
    }

    /// Sets the details' name, group and kind (the resource).
    pub fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        self.details = Some(StatusDetails {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            ..Default::default()
        });
        self
    }

    pub fn not_found(gr: GroupResource<'_>, name: &str) -> Self {
        Status::failure(404, reason::NOT_FOUND, format!("{gr} \"{name}\" not found")).with_details(
            name,
            gr.group,
            gr.resource,
        )
    }

    /// 404 for a URL that names no resource.
    pub fn path_not_found() -> Self {
        let mut s = Status::failure(
            404,
            reason::NOT_FOUND,
            "the server could not find the requested resource",
        );
        s.details = Some(StatusDetails::default());
        s
    }

    pub fn already_exists(gr: GroupResource<'_>, name: &str) -> Self {
        Status::failure(
            409,
            reason::ALREADY_EXISTS,
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(name, gr.group, gr.resource)
    }

    /// 409 for an optimistic-concurrency failure.
    pub fn conflict(gr: GroupResource<'_>, name: &str, why: &str) -> Self {
        Status::failure(
            409,
            reason::CONFLICT,
            format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
        )
        .with_details(name, gr.group, gr.resource)
    }

    /// The wording of a stale-resourceVersion conflict.
    pub const CONFLICT_MODIFIED: &'static str =
        "the object has been modified; please apply your changes to the latest version and try again";

    /// 422 with one cause per field error. `kind` is the object's kind.
    pub fn invalid(gk: GroupKind<'_>, name: &str, causes: Vec<StatusCause>) -> Self {
        let list = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let joined = match list.len() {
            0 => String::new(),
            1 => list[0].clone(),
            _ => format!("[{}]", list.join(", ")),
        };
        let mut s = Status::failure(
            422,
            reason::INVALID,
            format!("{gk} \"{name}\" is invalid: {joined}"),
        )
        .with_details(name, gk.group, gk.kind);
        if let Some(d) = s.details.as_mut() {
            d.causes = causes;
        }
        s
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::failure(400, reason::BAD_REQUEST, message)
    }

    /// 410 with reason `Expired` (compacted revision, expired continue token).
    pub fn expired(message: impl Into<String>) -> Self {
        Status::failure(410, reason::EXPIRED, message)
    }

    /// 410 with reason `Gone` (watch from a too old resourceVersion).
    pub fn gone(message: impl Into<String>) -> Self {
        Status::failure(410, reason::GONE, message)
    }

    pub fn method_not_allowed() -> Self {
        Status::failure(
            405,
            reason::METHOD_NOT_ALLOWED,
            "the server does not allow this method on the requested resource",
        )
        .with_details("", "", "")
    }

    pub fn not_acceptable(supported: &[&str]) -> Self {
        Status::failure(
            406,
            reason::NOT_ACCEPTABLE,
            format!(
                "only the following media types are accepted: {}",
                supported.join(", ")
            ),
        )
    }

    pub fn unsupported_media_type(content_type: &str, supported: &[&str]) -> Self {
        Status::failure(
            415,
            reason::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                supported.join(", ")
            ),
        )
        .with_details("", "", content_type)
    }

    pub fn request_entity_too_large(limit: usize) -> Self {
        Status::failure(
            413,
            reason::REQUEST_ENTITY_TOO_LARGE,
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 504 with a `ResourceVersionTooLarge` cause and `retryAfterSeconds`.
    pub fn too_large_resource_version(minimum: i64, current: i64, retry_after: u32) -> Self {
        let mut s = Status::failure(
            504,
            reason::TIMEOUT,
            format!("Timeout: Too large resource version: {minimum}, current: {current}"),
        );
        s.details = Some(StatusDetails {
            causes: vec![StatusCause::new(
                cause::RESOURCE_VERSION_TOO_LARGE,
                "Too large resource version",
                "",
            )],
            retry_after_seconds: Some(retry_after),
            ..Default::default()
        });
        s
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Status::failure(504, reason::TIMEOUT, message)
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Status::failure(503, reason::SERVICE_UNAVAILABLE, message)
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> Self {
        let mut s = Status::failure(429, reason::TOO_MANY_REQUESTS, message);
        s.details = Some(StatusDetails {
            retry_after_seconds: Some(retry_after),
            ..Default::default()
        });
        s
    }

    /// 500 for a failure the server did not anticipate. The message must not
    /// carry internals; callers log the real error.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        let mut s = Status::failure(
            500,
            reason::INTERNAL_ERROR,
            format!("Internal error occurred: {message}"),
        );
        s.details = Some(StatusDetails {
            causes: vec![StatusCause::new("", message, "")],
            ..Default::default()
        });
        s
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Status::failure(403, reason::FORBIDDEN, message)
    }

    pub fn unauthorized() -> Self {
        Status::failure(401, reason::UNAUTHORIZED, "Unauthorized")
    }

    pub fn is_not_found(&self) -> bool {
        self.reason == reason::NOT_FOUND
    }
    pub fn is_conflict(&self) -> bool {
        self.reason == reason::CONFLICT
    }
    pub fn is_already_exists(&self) -> bool {
        self.reason == reason::ALREADY_EXISTS
    }
    pub fn is_invalid(&self) -> bool {
        self.reason == reason::INVALID
    }
    pub fn is_expired(&self) -> bool {
        self.code == 410
    }

    /// `retryAfterSeconds` from the details, if any (becomes `Retry-After`).
    pub fn retry_after(&self) -> Option<u32> {
        self.details.as_ref().and_then(|d| d.retry_after_seconds)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PODS: GroupResource<'static> = GroupResource {
        group: "",
        resource: "pods",
    };

    #[test]
    fn not_found_matches_kube_apiserver() {
        let s = Status::not_found(PODS, "web");
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "pods \"web\" not found",
                "reason": "NotFound", "details": {"name": "web", "kind": "pods"},
                "code": 404
            })
        );
    }

    #[test]
    fn grouped_resource_is_qualified() {
        let s = Status::already_exists(
            GroupResource {
                group: "apps",
                resource: "deployments",
            },
            "d",
        );
        assert_eq!(s.message, "deployments.apps \"d\" already exists");
        assert_eq!(s.details.unwrap().group, "apps");
    }

    #[test]
    fn invalid_joins_causes() {
        let gk = GroupKind {
            group: "",
            kind: "ConfigMap",
        };
        let one = Status::invalid(
            gk,
            "x",
            vec![StatusCause::new(
                cause::FIELD_VALUE_REQUIRED,
                "Required value",
                "metadata.name",
            )],
        );
        assert_eq!(
            one.message,
            "ConfigMap \"x\" is invalid: metadata.name: Required value"
        );
        let two = Status::invalid(
            gk,
            "x",
            vec![
                StatusCause::new(cause::FIELD_VALUE_INVALID, "a", "f1"),
                StatusCause::new(cause::FIELD_VALUE_INVALID, "b", "f2"),
            ],
        );
        assert_eq!(two.message, "ConfigMap \"x\" is invalid: [f1: a, f2: b]");
        assert_eq!(two.code, 422);
    }

    #[test]
    fn round_trips_through_json() {
        let s = Status::too_large_resource_version(10, 5, 1);
        let back: Status = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.retry_after(), Some(1));
    }
}
