//! GET and LIST of a computed kind ([`Computed`]): objects made on each
//! request, never stored, answered in every output the stored kinds have
//! (JSON, YAML, protobuf, CBOR, Table). Watching them is not supported,
//! as in kube, whose REST for them is no watcher.

use super::{list, scope::Scope};
use crate::error::Result;
use crate::registry::{Computed, ComputedSource};
use crate::response;
use apimachinery::query;
use apimachinery::Status;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use std::sync::Arc;
use watchcache::{ListResult, Object};

/// The objects of a computed kind, made now.
async fn list_of(scope: &Scope, source: ComputedSource) -> Vec<serde_json::Value> {
    match source {
        ComputedSource::ComponentStatuses => {
            crate::componentstatus::statuses(&scope.state.etcd_endpoints).await
        }
    }
}

pub async fn serve(scope: &Scope, c: &Computed, method: &Method, named: bool) -> Result<Response> {
    if method != Method::GET {
        return Err(Status::method_not_allowed().into());
    }
    let resp = if named {
        let items = list_of(scope, c.source).await;
        let mut obj = items
            .into_iter()
            .find(|o| crate::object::name(o) == Some(scope.name()))
            .ok_or_else(|| (c.not_found)(scope.name()))?;
        // Computed, never stored: ordered as kube writes its Go type.
        k8s_proto::order_object(&mut obj);
        response::object(scope, StatusCode::OK, &obj)
    } else {
        let params = query::list_params(&scope.query)?;
        if params.watch {
            // kube's NewMethodNotSupported.
            let mut s =
                Status::method_not_allowed().with_details("", &scope.res.group, &scope.res.plural);
            s.message = format!(
                "watch is not supported on resources of kind {:?}",
                scope.res.plural
            );
            return Err(s.into());
        }
        let predicate = list::predicate(scope, &params)?;
        let items = list_of(scope, c.source)
            .await
            .into_iter()
            .filter(|o| predicate.matches(o))
            .map(|mut o| {
                k8s_proto::order_object(&mut o);
                Object::new(Arc::new(o), 0)
            })
            .collect();
        let result = ListResult {
            items,
            revision: 0,
            continue_token: None,
            remaining_item_count: None,
        };
        response::list(scope, &scope.res, result)
    };
    Ok(match c.warning {
        Some(w) => response::with_warnings(resp, &[w.to_string()]),
        None => resp,
    })
}
