//! What every verb handler gets ([`Scope`]: the request's scope and the
//! server's state) and the one way a handler answers with an object. The
//! verb modules import this file, never `handlers/mod.rs` (the dispatcher
//! that imports them).

use crate::error::Result;
use crate::scope::RequestScope;
use crate::state::AppState;
use axum::response::Response;
use std::sync::Arc;

/// Responds with one object, in the request's version (a custom resource
/// stored in another version is converted first).
pub async fn object_response(
    scope: &Scope,
    code: axum::http::StatusCode,
    obj: &serde_json::Value,
) -> Result<Response> {
    let obj = match crate::conversion::for_request(&scope.res, obj).await? {
        std::borrow::Cow::Borrowed(stored) => std::borrow::Cow::Borrowed(stored),
        // Converted for this request: in the requested version's order.
        std::borrow::Cow::Owned(mut converted) => {
            k8s_proto::order_object(&mut converted);
            std::borrow::Cow::Owned(converted)
        }
    };
    Ok(crate::response::object(scope, code, &obj))
}

/// What every verb handler gets: the request's scope (resource, names,
/// query, negotiated output, identity; what admission and the response
/// writers see too) and the server's state.
pub struct Scope {
    pub state: Arc<AppState>,
    pub request: RequestScope,
}

impl std::ops::Deref for Scope {
    type Target = RequestScope;

    fn deref(&self) -> &RequestScope {
        &self.request
    }
}

/// Admission sees the request's scope and what the state lends it.
impl<'a> From<&'a Scope> for crate::admission::Scope<'a> {
    fn from(scope: &'a Scope) -> Self {
        crate::admission::Scope {
            request: &scope.request,
            ctx: scope.state.admission_context(),
        }
    }
}
