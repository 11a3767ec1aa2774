//! The one place where failures become a `Status` response.
//!
//! Handlers return `ApiError`: either a `Status` they built on purpose (bad
//! input), a storage error with the resource and name it concerns, or an
//! internal error. Anything this module does not recognise is logged and
//! answered as a generic 500; internals never leak into messages.

use crate::registry::{Resource, Str};
use apimachinery::media::{self, Format};
use apimachinery::status::{GroupResource, Status};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use watchcache::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A failure already expressed as a Status.
    #[error("{0}")]
    Status(Box<Status>),
    /// A storage failure concerning one object (or a collection when `name`
    /// is empty).
    #[error("storage error on {} {name:?}: {source}", GroupResource { group: &resource.0, resource: &resource.1 })]
    Storage {
        #[source]
        source: StorageError,
        /// Group and plural (boxed: every `Result` of a handler carries
        /// this enum).
        resource: Box<(Str, Str)>,
        name: String,
    },
    /// A bug or an unexpected condition; logged, answered as 500.
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl From<Status> for ApiError {
    fn from(s: Status) -> Self {
        ApiError::Status(Box::new(s))
    }
}

impl ApiError {
    pub fn storage(source: StorageError, res: &Resource, name: &str) -> Self {
        ApiError::Storage {
            source,
            resource: Box::new((res.group.clone(), res.plural.clone())),
            name: name.to_string(),
        }
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        ApiError::Internal(msg.into())
    }

    /// The Status a client sees.
    pub fn to_status(&self) -> Status {
        match self {
            ApiError::Status(s) => (**s).clone(),
            ApiError::Storage {
                source,
                resource,
                name,
            } => storage_status(
                source,
                GroupResource {
                    group: &resource.0,
                    resource: &resource.1,
                },
                name,
            ),
            ApiError::Internal(msg) => {
                tracing::error!(error = %msg, "internal error");
                Status::internal("an unexpected error occurred; see the server log")
            }
        }
    }

    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            ApiError::Storage {
                source: StorageError::Conflict { .. },
                ..
            }
        ) || matches!(self, ApiError::Status(s) if s.is_conflict())
    }
}

fn storage_status(err: &StorageError, gr: GroupResource<'_>, name: &str) -> Status {
    match err {
        StorageError::NotFound { .. } => Status::not_found(gr, name),
        StorageError::AlreadyExists { .. } => Status::already_exists(gr, name),
        StorageError::Conflict { .. } => Status::conflict(gr, name, Status::CONFLICT_MODIFIED),
        StorageError::Compacted { .. } => {
            Status::expired("The resourceVersion for the provided list is too old.")
        }
        StorageError::ContinueExpired { fresh_token } => {
            let mut s = Status::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter, or use the continue token \
                 in this response to retrieve the remainder of the results. Continuing with the \
                 provided token results in an inconsistent list - objects that were created, \
                 modified, or deleted between the time the first chunk was returned and now may \
                 show up in the list.",
            );
            s.metadata.continue_ = fresh_token.clone();
            s
        }
        StorageError::TooLargeResourceVersion { requested, current } => {
            Status::too_large_resource_version(*requested, *current, 1)
        }
        StorageError::InvalidContinue(msg) => Status::bad_request(msg.clone()),
        StorageError::Unavailable(msg) => {
            tracing::warn!(error = %msg, "storage unavailable");
            Status::service_unavailable("etcd is unavailable; please retry")
        }
        StorageError::Corrupt { key, message } => {
            tracing::error!(%key, %message, "stored object does not decode");
            Status::internal(format!("object {name:?} in storage cannot be decoded"))
        }
        StorageError::Transform { key, message } => {
            // The message names the provider and key name that failed, never
            // key material; the etcd key stays in the log.
            tracing::error!(%key, %message, "stored object cannot be decrypted");
            let what = if name.is_empty() {
                format!("{gr}")
            } else {
                format!("{gr} {name:?}")
            };
            Status::internal(format!("failed to decrypt {what}: {message}"))
        }
        StorageError::Internal(msg) => {
            tracing::error!(error = %msg, "internal storage error");
            Status::internal("an unexpected storage error occurred; see the server log")
        }
    }
}

/// Serializes a Status as the response body with its code and headers.
pub fn status_response(status: &Status) -> Response {
    status_response_as(status, Format::Json)
}

/// A Status in the request's negotiated encoding: protobuf (a metav1 Status
/// message in the `k8s\0` envelope, as kube's `ErrorNegotiated` writes it
/// for a protobuf client), CBOR, or JSON. A YAML request still gets JSON: a
/// departure from kube, which writes the Status in YAML.
pub fn status_response_as(status: &Status, format: Format) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let binary = match format {
        Format::Protobuf => serde_json::to_value(status)
            .map_err(|e| e.to_string())
            .and_then(|v| k8s_proto::encode_object(&v).map_err(|e| e.to_string()))
            .inspect_err(|e| tracing::error!(error = %e, "a Status does not encode as protobuf"))
            .ok()
            .map(|b| (b, media::PROTOBUF)),
        Format::Cbor => serde_json::to_value(status)
            .inspect_err(|e| tracing::error!(error = %e, "a Status does not serialize"))
            .ok()
            .map(|v| (apimachinery::cbor::encode(&v), media::CBOR)),
        _ => None,
    };
    let (body, ctype) = match binary {
        Some(encoded) => encoded,
        None => {
            let mut body = serde_json::to_vec(status).unwrap_or_default();
            // As kube's JSON encoder writes it.
            body.push(b'\n');
            (body, media::JSON)
        }
    };
    let mut resp = (code, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Some(secs) = status.retry_after() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        status_response(&self.to_status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(resp: Response) -> Vec<u8> {
        axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn status_in_the_negotiated_encoding() {
        let status = Status::not_found(
            GroupResource {
                group: "",
                resource: "configmaps",
            },
            "x",
        );
        let resp = status_response_as(&status, Format::Protobuf);
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "application/vnd.kubernetes.protobuf"
        );
        let v = k8s_proto::decode_object(&body(resp).await).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["code"], 404);
        assert_eq!(v["reason"], "NotFound");
        assert_eq!(v["details"]["name"], "x");

        let resp = status_response_as(&status, Format::Cbor);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/cbor");
        let b = body(resp).await;
        assert!(b.starts_with(&apimachinery::cbor::SELF_DESCRIBED));
        let v = apimachinery::cbor::decode(&b).unwrap();
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["code"], 404);
        assert_eq!(v["details"]["name"], "x");

        // JSON for everything else, YAML included.
        for format in [Format::Json, Format::Yaml] {
            let resp = status_response_as(&status, format);
            assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
            let b = body(resp).await;
            assert!(b.ends_with(b"}\n"));
        }
    }
}
