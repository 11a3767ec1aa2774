//! LIST of a collection, with the spec's resourceVersion / limit / continue
//! semantics decided by `apimachinery::query::list_plan`.

use super::scope::Scope;
use crate::error::Result;
use crate::response;
use apimachinery::query::{self, ListParams};
use apimachinery::read::{Predicate, COMMON_FIELD_ATTRS};
use apimachinery::Status;
use axum::response::Response;
use watchcache::ListOptions;

/// The storage predicate of a request, with field selectors checked against
/// the fields this kind supports.
pub fn predicate(scope: &Scope, params: &ListParams) -> Result<Predicate> {
    for req in params.field_selector.requirements() {
        let known = COMMON_FIELD_ATTRS
            .iter()
            .chain(scope.res.field_attrs.iter())
            .any(|a| a.name == req.field);
        if !known {
            // Kinds without field selectors of their own answer with kube's
            // DefaultMetaV1FieldSelectorConversion; the others with their
            // conversion function's wording.
            let msg = if scope.res.field_attrs.is_empty() {
                format!(
                    "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                    apimachinery::validation::go_quote(&req.field)
                )
            } else {
                format!("field label not supported: {}", req.field)
            };
            return Err(Status::bad_request(msg).into());
        }
    }
    Ok(Predicate {
        label: params.label_selector.clone(),
        field: params.field_selector.clone(),
        attrs: scope.res.field_attrs.clone(),
    })
}

pub async fn list(scope: &Scope, params: ListParams) -> Result<Response> {
    let plan = query::list_plan(&params)?;
    let opts = ListOptions {
        freshness: plan.freshness,
        limit: plan.limit,
        continue_from: plan.continue_from,
        predicate: predicate(scope, &params)?,
    };
    let mut result = scope
        .state
        .store
        .list(&scope.collection_prefix(), &opts)
        .await
        .map_err(|e| scope.storage_err(e))?;
    if scope.res.converts() && crate::conversion::any_needs(&scope.res, &result.items) {
        // Objects stored in another version (one conversion call for the
        // page), or custom resources missing defaults added to their
        // schema since.
        let mut values: Vec<serde_json::Value> =
            result.items.iter().map(|o| o.value().clone()).collect();
        crate::conversion::list_for_request(&scope.res, &mut values).await?;
        result.items = values
            .into_iter()
            .zip(&result.items)
            .map(|(v, o)| watchcache::Object::new(std::sync::Arc::new(v), o.revision))
            .collect();
    }
    Ok(response::list(scope, &scope.res, result))
}
