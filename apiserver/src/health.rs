//! `/livez`, `/readyz`, `/healthz` as kube-apiserver serves them: named
//! checks, `?verbose`, `?exclude=NAME`, and `/readyz/NAME` for one check.
//! /livez never depends on etcd, so a replica with an etcd outage is taken
//! out of the load balancer (readyz) but not restarted (livez).
//!
//! With `--etcd-servers-overrides`, /readyz and /healthz have one more
//! check per override cluster after `etcd`, named as kube names them
//! (`etcd-override-0`, `-1`, … one per distinct server set, in the
//! flag's order). /livez leaves them out for the reason above (kube's
//! livez has them, beside its `etcd`).

use crate::state::{is_ready_flag, AppState};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Livez,
    Readyz,
    Healthz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
            Endpoint::Healthz => "healthz",
        }
    }

    /// The checks of this endpoint on `state`: the fixed ones, with an
    /// `etcd-override-N` after `etcd` for each override cluster.
    fn checks(self, state: &AppState) -> Vec<String> {
        let mut all = Vec::new();
        for name in self.fixed_checks() {
            all.push(name.to_string());
            if *name == "etcd" {
                all.extend(state.clusters.iter().map(|c| c.name.clone()));
            }
        }
        all
    }

    fn fixed_checks(self) -> &'static [&'static str] {
        match self {
            Endpoint::Livez => &["ping", "log"],
            Endpoint::Readyz => &[
                "ping",
                "log",
                "etcd",
                "watch-cache",
                "shutdown",
                "poststarthook/bootstrap",
                "poststarthook/rbac/bootstrap-roles",
            ],
            Endpoint::Healthz => &[
                "ping",
                "log",
                "etcd",
                "poststarthook/bootstrap",
                "poststarthook/rbac/bootstrap-roles",
            ],
        }
    }
}

/// Runs one check; `Err` carries the reason shown with `?verbose`.
async fn run_check(state: &AppState, name: &str) -> Result<(), &'static str> {
    match name {
        "ping" | "log" => Ok(()),
        "etcd" => {
            if state.etcd_ok().await {
                Ok(())
            } else {
                Err("etcd is not reachable")
            }
        }
        "watch-cache" => {
            if state.caches().all(|c| c.is_ready()) {
                Ok(())
            } else {
                Err("the watch cache has not finished its first list")
            }
        }
        name if name.starts_with("etcd-override-") => match state.cluster_ok(name).await {
            Some(true) => Ok(()),
            Some(false) => Err("etcd is not reachable"),
            None => Err("unknown check"),
        },
        "shutdown" => {
            if is_ready_flag(&state.shutting_down) {
                Err("process is shutting down")
            } else {
                Ok(())
            }
        }
        "poststarthook/bootstrap" => {
            if is_ready_flag(&state.bootstrapped) {
                Ok(())
            } else {
                Err("not finished")
            }
        }
        // Until the RBAC index has its first snapshot every user but
        // system:masters would be refused.
        "poststarthook/rbac/bootstrap-roles" => match &state.rbac {
            Some(r) if !r.is_synced() => Err("the RBAC policy is not loaded yet"),
            _ => Ok(()),
        },
        _ => Err("unknown check"),
    }
}

fn text(code: StatusCode, body: String) -> Response {
    let mut r = (code, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn query_flags(query: Option<&str>) -> (bool, Vec<String>) {
    let mut verbose = false;
    let mut exclude = Vec::new();
    for (k, v) in form_pairs(query.unwrap_or("")) {
        match k.as_str() {
            "verbose" => verbose = true,
            "exclude" => exclude.push(v),
            _ => {}
        }
    }
    (verbose, exclude)
}

fn form_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

async fn all_checks(state: &AppState, ep: Endpoint, query: Option<&str>) -> Response {
    let (verbose, exclude) = query_flags(query);
    let mut out = String::new();
    let mut failed = false;
    let checks = ep.checks(state);
    for name in &checks {
        let name = name.as_str();
        if exclude.iter().any(|e| e == name) {
            if verbose {
                out.push_str(&format!("[+]{name} excluded: ok\n"));
            }
            continue;
        }
        let result = run_check(state, name).await;
        // kube's healthcheck SLIs (`/metrics/slis`) record what the root
        // paths run; a single check's own path records nothing.
        if let Some(m) = &state.metrics {
            m.healthcheck(name, ep.name(), result.is_ok());
        }
        match result {
            Ok(()) => out.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                failed = true;
                if verbose {
                    out.push_str(&format!("[-]{name} failed: {reason}\n"));
                } else {
                    out.push_str(&format!("[-]{name} failed: reason withheld\n"));
                }
            }
        }
    }
    for e in &exclude {
        if !checks.contains(e) {
            out.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for \"{e}\"\n"
            ));
        }
    }
    let ep_name = ep.name();
    if failed {
        out.push_str(&format!("{ep_name} check failed\n"));
        return text(StatusCode::INTERNAL_SERVER_ERROR, out);
    }
    if verbose {
        out.push_str(&format!("{ep_name} check passed\n"));
        text(StatusCode::OK, out)
    } else {
        text(StatusCode::OK, "ok".into())
    }
}

async fn one_check(state: &AppState, ep: Endpoint, name: &str) -> Response {
    if !ep.checks(state).iter().any(|c| c == name) {
        return text(StatusCode::NOT_FOUND, "404 page not found\n".into());
    }
    match run_check(state, name).await {
        Ok(()) => text(StatusCode::OK, "ok".into()),
        Err(reason) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

pub async fn livez(State(s): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Response {
    all_checks(&s, Endpoint::Livez, q.as_deref()).await
}
pub async fn readyz(State(s): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Response {
    all_checks(&s, Endpoint::Readyz, q.as_deref()).await
}
pub async fn healthz(State(s): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Response {
    all_checks(&s, Endpoint::Healthz, q.as_deref()).await
}
pub async fn livez_check(State(s): State<Arc<AppState>>, Path(c): Path<String>) -> Response {
    one_check(&s, Endpoint::Livez, &c).await
}
pub async fn readyz_check(State(s): State<Arc<AppState>>, Path(c): Path<String>) -> Response {
    one_check(&s, Endpoint::Readyz, &c).await
}
pub async fn healthz_check(State(s): State<Arc<AppState>>, Path(c): Path<String>) -> Response {
    one_check(&s, Endpoint::Healthz, &c).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let (v, ex) = query_flags(Some("verbose&exclude=etcd&exclude=log"));
        assert!(v);
        assert_eq!(ex, vec!["etcd", "log"]);
        let (v, ex) = query_flags(None);
        assert!(!v && ex.is_empty());
    }
}
