//! One generic handler per verb, driven by the registry. `dispatch` resolves
//! the path and verb into a `Scope` (the request-scope struct every verb
//! shares) and calls the verb's module; errors become Status in `error`.

mod apply;
pub mod binding;
mod computed;
pub mod connect;
mod create;
pub mod delete;
pub mod eviction;
mod get;
mod list;
mod patch;
pub mod review;
mod scale;
mod scale_view;
mod scope;
pub mod token;
mod update;
mod watch;
pub mod write;

pub use scope::{object_response, Scope};

use crate::error::{status_response, Result};
use crate::registry::{Resource, Subresource};
use crate::request::{ApiPath, ResourceRequest};
use crate::scope::RequestScope;
use crate::state::AppState;
use apimachinery::auth::UserInfo;
use apimachinery::media;
use apimachinery::query;
use apimachinery::status::MAX_REQUEST_BODY_BYTES;
use apimachinery::Status;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Entry point for every path the router does not name.
pub async fn dispatch(state: Arc<AppState>, mut req: Request<Body>) -> Response {
    // The path was parsed once, by the first stage that needed it (the
    // request's `RequestInfo`); routing reads that parse.
    let route = match &*crate::auth::resolve(&mut req) {
        Ok(info) => info.route.clone(),
        Err(why) => return status_response(&Status::bad_request(why.clone())),
    };
    let (parts, body) = req.into_parts();
    let user = parts
        .extensions
        .get::<crate::auth::Identity>()
        .map(|i| Arc::clone(&i.0))
        .unwrap_or_default();
    let audit = parts.extensions.get::<crate::audit::AuditSlot>().cloned();
    match route {
        None => status_response(&Status::path_not_found()),
        Some(ApiPath::Resource(r)) => {
            match resource(
                state,
                parts.method,
                parts.uri.query(),
                parts.headers,
                r,
                body,
                (user, audit),
            )
            .await
            {
                Ok(resp) => resp,
                Err(e) => e.into_response(),
            }
        }
        Some(other) => {
            if parts.method == Method::GET || parts.method == Method::HEAD {
                state.discovery.serve_request(&other, &parts.headers)
            } else {
                status_response(&Status::method_not_allowed())
            }
        }
    }
}

async fn read_body(body: Body) -> Result<Bytes> {
    match axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES).await {
        Ok(b) => Ok(b),
        Err(e) => {
            // The only error a size-limited read reports besides I/O is the
            // limit itself.
            let too_large = std::error::Error::source(&e)
                .map(|s| s.is::<http_body_util::LengthLimitError>())
                .unwrap_or(false);
            if too_large {
                Err(Status::request_entity_too_large(MAX_REQUEST_BODY_BYTES).into())
            } else {
                Err(Status::bad_request(format!("unable to read the request body: {e}")).into())
            }
        }
    }
}

async fn resource(
    state: Arc<AppState>,
    method: Method,
    raw_query: Option<&str>,
    headers: HeaderMap,
    r: ResourceRequest,
    body: Body,
    (user, audit): (Arc<UserInfo>, Option<crate::audit::AuditSlot>),
) -> Result<Response> {
    let Some(res) = state.registry.lookup(&r.group, &r.version, &r.resource) else {
        return Err(Status::path_not_found().into());
    };
    if r.namespace.is_some() && !res.namespaced {
        return Err(Status::path_not_found().into());
    }
    let subresource = match r.subresource.as_deref() {
        None => None,
        Some(s) => match res.subresource(s) {
            Some(sub) => Some(sub.clone()),
            None => return Err(Status::path_not_found().into()),
        },
    };
    if subresource.is_some() && r.name.is_none() {
        return Err(Status::path_not_found().into());
    }
    let connect = match &subresource {
        Some(Subresource::Connect(c)) => Some(*c),
        _ => None,
    };
    if r.subpath.is_some() && !connect.is_some_and(|c| c.with_path) {
        return Err(Status::path_not_found().into());
    }
    let query = query::parse(raw_query)?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let is_list = r.name.is_none() && method == Method::GET;
    let watching = method == Method::GET
        && r.name.is_none()
        && (r.watch_prefix
            || query.contains("watch")
                && query.get("watch") != Some("false")
                && query.get("watch") != Some("0"));
    let serves = serves(&res);
    let out = if watching {
        media::negotiate_watch(accept, serves)?
    } else if connect.is_some() {
        // A connection's answer is not an object: whatever the client
        // accepts, its errors are JSON Status.
        match media::negotiate(accept, false, media::Serves::JsonOnly) {
            Ok(n) if !n.format.is_binary() => n,
            _ => media::negotiate(None, false, serves)?,
        }
    } else {
        media::negotiate(accept, is_list, serves)?
    };
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let pretty = query::pretty(&query, ua) || out.pretty;
    if out.target == media::Target::Table {
        query::table_include_object(&query)?;
    }
    // kube's storage key functions refuse a name that is not one path
    // segment (`.`, `..`, or with `/` or `%` once decoded) before reading
    // or writing anything.
    if let Some(name) = r.name.as_deref() {
        let why = apimachinery::validation::is_path_segment_name(name);
        if !why.is_empty() {
            return Err(Status::bad_request(format!(
                "Name parameter invalid: {name:?}: {}",
                why.join(";")
            ))
            .into());
        }
    }
    let scope = Scope {
        request: RequestScope {
            backend: Arc::clone(&state.backend),
            res,
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            subresource,
            query,
            out,
            pretty,
            headers,
            user,
            warnings: Default::default(),
            audit,
        },
        state,
    };
    // From here on a failure is written in the negotiated encoding.
    match serve(&scope, method, r, connect, body).await {
        Err(e) if out.format.is_binary() => {
            Ok(crate::error::status_response_as(&e.to_status(), out.format))
        }
        answer => answer,
    }
}

/// Which encodings the resource's responses may use: protobuf for the kinds
/// the protobuf table knows (built-in kinds), never for custom resources.
fn serves(res: &Resource) -> media::Serves {
    if res.custom.is_none() && k8s_proto::message_for(&res.group, &res.version, &res.kind).is_some()
    {
        media::Serves::BuiltIn
    } else {
        media::Serves::JsonOnly
    }
}

/// Runs the request once its scope is negotiated; the warnings admission
/// gathered go on the answer, whichever path gave it.
async fn serve(
    scope: &Scope,
    method: Method,
    r: ResourceRequest,
    connect: Option<&'static crate::registry::Connect>,
    body: Body,
) -> Result<Response> {
    let res = &scope.res;
    let answer = if let Some(c) = connect {
        connection(scope, c, &method, r.subpath.as_deref()).await
    } else if let Some(c) = res.computed {
        computed::serve(scope, c, &method, r.name.is_some()).await
    } else if let Some(answer) = res.virtual_create {
        virtual_kind(scope, answer, method, r.name.is_some(), body).await
    } else {
        let is_scale = matches!(scope.subresource.as_ref(), Some(Subresource::Scale { .. }));
        verb(
            scope,
            method,
            r.name.is_some(),
            is_scale,
            r.watch_prefix,
            body,
        )
        .await
    };
    let warnings = scope.take_warnings();
    let answer = if warnings.is_empty() {
        answer
    } else {
        answer.map(|resp| crate::response::with_warnings(resp, &warnings))
    };
    match res.custom.as_ref().and_then(|c| c.deprecation.as_ref()) {
        // A deprecated custom resource version warns on every request.
        Some(w) => answer.map(|resp| crate::response::with_warnings(resp, std::slice::from_ref(w))),
        None => answer,
    }
}

/// A virtual kind (the access and token reviews, `bindings`): POST to the
/// collection only.
async fn virtual_kind(
    scope: &Scope,
    answer: crate::registry::CreateAnswer,
    method: Method,
    named: bool,
    body: Body,
) -> Result<Response> {
    match (method, named) {
        (Method::POST, false) => {
            create::create_virtual(scope, answer, read_body(body).await?).await
        }
        _ => Err(Status::method_not_allowed().into()),
    }
}

/// A connect subresource (`pods/exec`, `nodes/proxy`, ...): kube admits a
/// connection (`CONNECT`, both halves, the options as the object) before it
/// would connect; `pods/log` is a read of the pod, not admitted.
async fn connection(
    scope: &Scope,
    c: &'static crate::registry::Connect,
    method: &Method,
    subpath: Option<&str>,
) -> Result<Response> {
    if !connect::serves(c, method) {
        return Err(Status::method_not_allowed().into());
    }
    if !c.read {
        let options = connect::options_object(c, scope, subpath);
        crate::admission::unstored(
            scope,
            &crate::admission::Attributes::of(scope, "CONNECT", Some(&options), None, false),
        )
        .await?;
    }
    connect::answer(c.target, scope).await
}

/// Runs the verb module that answers `method` on the scope's resource.
async fn verb(
    scope: &Scope,
    method: Method,
    named: bool,
    is_scale: bool,
    watch_prefix: bool,
    body: Body,
) -> Result<Response> {
    let res = &scope.res;
    if let Some(sub) = scope.subresource.as_ref() {
        let wanted = match method {
            Method::GET => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::POST => "create",
            _ => "",
        };
        if !sub.verbs().contains(&wanted) {
            return Err(Status::method_not_allowed().into());
        }
    }
    // The writes are boxed, each in its own allocation: inline, the
    // largest of them (a patch, 3 KiB) set the size of every request's
    // future, reads included, and that future is copied whole at each move
    // through the filter chain (BENCHMARKS.md, "Instructions per GET:
    // logging and futures"). The reads stay inline: they are small.
    if let Some(Subresource::Create { answer, .. }) = scope.subresource.as_ref() {
        let body = read_body(body).await?;
        return Box::pin(create::create_virtual(scope, *answer, body)).await;
    }
    match (method, named) {
        (Method::GET, true) if is_scale => scale::get(scope).await,
        (Method::GET, true) => get::get(scope).await,
        (Method::GET, false) => {
            let params = query::list_params(&scope.query)?;
            if params.watch || watch_prefix {
                watch::watch(scope, params).await
            } else {
                list::list(scope, params).await
            }
        }
        (Method::POST, false) => Box::pin(create::create(scope, read_body(body).await?)).await,
        (Method::PUT, true) if is_scale => {
            Box::pin(scale::update(scope, read_body(body).await?)).await
        }
        (Method::PUT, true) => Box::pin(update::update(scope, read_body(body).await?)).await,
        (Method::PATCH, true) if is_scale => {
            Box::pin(scale::patch(scope, read_body(body).await?)).await
        }
        (Method::PATCH, true) => Box::pin(patch::patch(scope, read_body(body).await?)).await,
        (Method::DELETE, true) => Box::pin(delete::delete(scope, read_body(body).await?)).await,
        (Method::DELETE, false) if !res.delete.collection => {
            Err(Status::method_not_allowed().into())
        }
        (Method::DELETE, false) => {
            Box::pin(delete::delete_collection(scope, read_body(body).await?)).await
        }
        _ => Err(Status::method_not_allowed().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in resource is served in protobuf but the two whose
    /// IDL (apiextensions-apiserver's, kube-aggregator's) the shared
    /// `.proto` set lacks; kube serves those in protobuf too.
    #[test]
    fn built_in_resources_serve_protobuf() {
        let json_only: Vec<&str> = crate::registry::RESOURCES
            .iter()
            .filter(|r| serves(r) == media::Serves::JsonOnly)
            .map(|r| &*r.kind)
            .collect();
        assert_eq!(json_only, ["APIService", "CustomResourceDefinition"]);
    }
}
