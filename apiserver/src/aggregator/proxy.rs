//! The aggregator's proxy: a request under `/apis/<group>/<version>` of a
//! remote APIService, already authenticated and authorized here, goes to a
//! ready endpoint of the APIService's Service, streaming both ways. The
//! user travels in `X-Remote-User`/`X-Remote-Uid`/`X-Remote-Group`/
//! `X-Remote-Extra-*`; the client's own credentials (Authorization,
//! impersonation headers, any `X-Remote-*` it sent) are not forwarded. An
//! upgrade (SPDY, WebSocket) is passed through once the extension answers
//! 101.

use super::{Remote, Remotes};
use crate::auth::Identity;
use crate::backend::Backend;
use apimachinery::Status;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// The remote APIService that serves `path`, if any.
pub fn route(remotes: &Remotes, path: &str) -> Option<Remote> {
    let rest = path.strip_prefix("/apis/")?;
    let mut parts = rest.splitn(3, '/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    remotes.route(group, version)
}

/// kube's words for a backend that cannot take the request.
fn unavailable(message: &str) -> Response {
    crate::error::status_response(&Status::service_unavailable(message))
}

/// Headers that belong to one hop, or name the client's credentials.
fn dropped(name: &HeaderName) -> bool {
    let n = name.as_str();
    matches!(
        n,
        "authorization"
            | "proxy-authorization"
            | "keep-alive"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "proxy-connection"
            | "host"
    ) || n.starts_with("impersonate-")
        || n.starts_with("x-remote-")
}

/// Forwards `req` to `remote`, resolving its Service through `backend`.
pub async fn forward(backend: &Backend, remote: Remote, mut req: Request<Body>) -> Response {
    if !remote.available {
        return unavailable("service unavailable");
    }
    let Some(Identity(user)) = req.extensions().get::<Identity>().cloned() else {
        return crate::error::status_response(&Status::internal("missing user"));
    };
    let ep = match super::resolve(backend, &remote.service).await {
        Ok(ep) => ep,
        Err(u) => {
            tracing::warn!(service = %remote.service.name, namespace = %remote.service.namespace, reason = u.reason, "cannot resolve the APIService's endpoint");
            return unavailable("service unavailable");
        }
    };
    let upgrade = req
        .headers()
        .get(header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        })
        && req.headers().contains_key(header::UPGRADE);
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut out = hyper::Request::builder()
        .method(parts.method.clone())
        .uri(path);
    // Connection names the hop's own headers: drop those too, keeping an
    // upgrade's.
    let hop: Vec<String> = parts
        .headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    for (name, value) in &parts.headers {
        if dropped(name) || (name == header::CONNECTION && !upgrade) {
            continue;
        }
        if hop.iter().any(|h| h == name.as_str()) && !(upgrade && name == header::UPGRADE) {
            continue;
        }
        out = out.header(name, value);
    }
    out = out.header(header::HOST, ep.authority());
    for (name, value) in super::remote_user_headers(&user) {
        match HeaderValue::from_str(&value) {
            Ok(v) => out = out.header(name, v),
            Err(_) => {
                return crate::error::status_response(&Status::bad_request(format!(
                    "the user's {name} cannot be sent as a header"
                )))
            }
        }
    }
    let outgoing = match out.body(body) {
        Ok(r) => r,
        Err(e) => return crate::error::status_response(&Status::internal(e.to_string())),
    };
    let reach =
        |e: &dyn std::fmt::Display| unavailable(&format!("error trying to reach service: {e}"));
    // An upgraded connection is the client's from then on: never pooled.
    let mut outgoing = outgoing;
    if !upgrade {
        if let Some(mut sender) = remote.pool.take(&ep) {
            match sender.try_send_request(outgoing).await {
                Ok(resp) => {
                    remote.pool.give_back(&ep, sender);
                    return respond(resp, None);
                }
                // The extension closed it meanwhile before taking the
                // request: once more on a new connection.
                Err(mut e) => match e.take_message() {
                    Some(req) => outgoing = req,
                    None => return reach(e.error()),
                },
            }
        }
    }
    let mut sender = match super::connect(&ep, &remote.service, &remote.tls, DIAL_TIMEOUT).await {
        Ok(s) => s,
        Err(e) => return reach(&e),
    };
    let resp = match sender.send_request(outgoing).await {
        Ok(r) => r,
        Err(e) => return reach(&e),
    };
    if !upgrade {
        remote.pool.give_back(&ep, sender);
    }
    respond(resp, client_upgrade)
}

/// The extension's response as this server's; a 101 joins the client's
/// upgraded connection to the extension's.
fn respond(
    mut resp: hyper::Response<hyper::body::Incoming>,
    client_upgrade: Option<hyper::upgrade::OnUpgrade>,
) -> Response {
    if resp.status() == hyper::StatusCode::SWITCHING_PROTOCOLS {
        if let Some(client) = client_upgrade {
            let backend = hyper::upgrade::on(&mut resp);
            tokio::spawn(async move {
                match tokio::try_join!(client, backend) {
                    Ok((c, b)) => {
                        let mut c = hyper_util::rt::TokioIo::new(c);
                        let mut b = hyper_util::rt::TokioIo::new(b);
                        let _ = tokio::io::copy_bidirectional(&mut c, &mut b).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "upgrade through the proxy failed"),
                }
            });
        }
    }
    let (mut parts, incoming) = resp.into_parts();
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts.headers.remove("keep-alive");
    let mut response = Response::from_parts(parts, Body::new(incoming)).into_response();
    // The backend's bytes go out as they come (watches event by event).
    response
        .extensions_mut()
        .insert(crate::response::NoCompression);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_hop_headers_are_dropped() {
        for h in [
            "authorization",
            "impersonate-user",
            "impersonate-extra-scopes",
            "x-remote-user",
            "x-remote-extra-foo",
            "transfer-encoding",
            "host",
        ] {
            assert!(dropped(&HeaderName::from_static(h)), "{h}");
        }
        for h in ["accept", "content-type", "user-agent", "audit-id"] {
            assert!(!dropped(&HeaderName::from_static(h)), "{h}");
        }
    }
}
