//! Subresources, printer columns, selectable fields and conversion of a CRD.

use serde_json::Value;

use super::super::types::Structural;
use super::super::walk::valid_field_path;
use super::super::{
    child, duplicate, forbidden, index, invalid, invalid_str, not_supported, required, too_many,
};
use super::{get, go_strings, s, strings, Opts, MAX_SELECTABLE_FIELDS};
use crate::validation;
use crate::StatusCause;

fn simple_json_path(p: &str, path: &str, out: &mut Vec<StatusCause>) -> bool {
    if p.is_empty() {
        out.push(invalid_str(path, p, "must not be empty"));
        false
    } else if !p.starts_with('.') {
        out.push(invalid_str(
            path,
            p,
            "must be a simple json path starting with .",
        ));
        false
    } else {
        true
    }
}

pub(super) fn validate_subresources(sub: Option<&Value>, path: &str, out: &mut Vec<StatusCause>) {
    let Some(scale) = sub.and_then(|x| get(x, "scale")) else {
        return;
    };
    for (k, prefix, under) in [
        ("specReplicasPath", ".spec.", ".spec"),
        ("statusReplicasPath", ".status.", ".status"),
    ] {
        let fp = child(path, &format!("scale.{k}"));
        let v = s(scale, k);
        if v.is_empty() {
            out.push(required(&fp, ""));
        } else if simple_json_path(v, &fp, out) && !v.starts_with(prefix) {
            out.push(invalid_str(
                &fp,
                v,
                &format!("should be a json path under {under}"),
            ));
        }
    }
    let lsp = s(scale, "labelSelectorPath");
    if !lsp.is_empty() {
        let fp = child(path, "scale.labelSelectorPath");
        if simple_json_path(lsp, &fp, out)
            && !lsp.starts_with(".spec.")
            && !lsp.starts_with(".status.")
        {
            out.push(invalid_str(
                &fp,
                lsp,
                "should be a json path under either .spec or .status",
            ));
        }
    }
}

pub(super) fn validate_column(c: &Value, path: &str, out: &mut Vec<StatusCause>) {
    const TYPES: &str = "boolean,date,integer,number,string";
    const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
    if s(c, "name").is_empty() {
        out.push(required(&child(path, "name"), ""));
    }
    let t = s(c, "type");
    if t.is_empty() {
        out.push(required(
            &child(path, "type"),
            &format!("must be one of {TYPES}"),
        ));
    } else if !TYPES.split(',').any(|x| x == t) {
        out.push(invalid_str(
            &child(path, "type"),
            t,
            &format!("must be one of {TYPES}"),
        ));
    }
    let f = s(c, "format");
    if !f.is_empty() && !FORMATS.split(',').any(|x| x == f) {
        out.push(invalid_str(
            &child(path, "format"),
            f,
            &format!("must be one of {FORMATS}"),
        ));
    }
    let jp = s(c, "jsonPath");
    let jpath = child(path, "JSONPath");
    if jp.is_empty() {
        out.push(required(&jpath, ""));
    } else {
        simple_json_path(jp, &jpath, out);
    }
}

pub(super) fn validate_selectable(
    sel: &[Value],
    root: &Value,
    path: &str,
    out: &mut Vec<StatusCause>,
) {
    let Ok(schema) = Structural::from_json(root) else {
        return;
    };
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in sel.iter().enumerate() {
        let jp_path = child(&index(path, i), "jsonPath");
        let jp = s(f, "jsonPath");
        if jp.is_empty() {
            out.push(required(&jp_path, ""));
            continue;
        }
        let (fpath, node) = match valid_field_path(jp, &schema, false) {
            Ok(r) => r,
            Err(e) => {
                out.push(invalid_str(
                    &jp_path,
                    jp,
                    &format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if fpath.split(['.', '[']).next() == Some("metadata") {
            out.push(invalid_str(
                &jp_path,
                jp,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(node.type_.as_str(), "string" | "boolean" | "integer") {
            out.push(invalid_str(&jp_path, jp, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."));
        }
        if unique.contains(&fpath) {
            out.push(duplicate(&jp_path, &Value::String(jp.into())));
        } else {
            unique.push(fpath);
        }
    }
    if unique.len() as i64 > MAX_SELECTABLE_FIELDS {
        out.push(too_many(path, unique.len() as i64, MAX_SELECTABLE_FIELDS));
    }
}

/// The conversion, reported with the internal version's field names
/// (`webhookClientConfig`, `conversionReviewVersions` directly under
/// `spec.conversion`), as kube reports them.
pub(super) fn validate_conversion(conv: &Value, opts: Opts, out: &mut Vec<StatusCause>) {
    let path = "spec.conversion";
    let strategy = s(conv, "strategy");
    let strategies = ["None".to_string(), "Webhook".to_string()];
    if strategy.is_empty() {
        out.push(required(&child(path, "strategy"), ""));
    } else if !strategies.iter().any(|x| x == strategy) {
        out.push(not_supported(
            &child(path, "strategy"),
            &Value::String(strategy.into()),
            &strategies,
        ));
    }
    let webhook = get(conv, "webhook");
    let client_config = webhook.and_then(|w| get(w, "clientConfig"));
    let review: Vec<String> = webhook
        .map(|w| strings(w, "conversionReviewVersions"))
        .unwrap_or_default();
    let cpath = child(path, "webhookClientConfig");
    let rpath = child(path, "conversionReviewVersions");
    if strategy == "Webhook" {
        match client_config {
            None => out.push(required(&cpath, "required when strategy is set to Webhook")),
            Some(cc) => match (get(cc, "url"), get(cc, "service")) {
                (Some(url), None) => {
                    webhook_url(url.as_str().unwrap_or(""), &child(&cpath, "url"), out)
                }
                (None, Some(svc)) => webhook_service(svc, &child(&cpath, "service"), out),
                _ => out.push(required(
                    &cpath,
                    "exactly one of url or service is required",
                )),
            },
        }
        if review.is_empty() {
            out.push(required(&rpath, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            let mut accepted = false;
            for (i, v) in review.iter().enumerate() {
                if seen.contains(&v.as_str()) {
                    out.push(invalid_str(&index(&rpath, i), v, "duplicate version"));
                    continue;
                }
                seen.push(v);
                for m in validation::is_dns1035_label(v) {
                    out.push(invalid_str(&index(&rpath, i), v, &m));
                }
                accepted |= v == "v1" || v == "v1beta1";
            }
            if opts.require_recognized_conversion_review_version && !accepted {
                out.push(StatusCause::new(
                    crate::status::cause::FIELD_VALUE_INVALID,
                    format!(
                        "Invalid value: {}: must include at least one of v1, v1beta1",
                        go_strings(&review)
                    ),
                    rpath,
                ));
            }
        }
    } else {
        if client_config.is_some() {
            out.push(forbidden(
                &cpath,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review.is_empty() {
            out.push(forbidden(
                &rpath,
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
}

/// kube's `ValidateWebhookURL` (https only), on a light reading of the URL.
fn webhook_url(url: &str, path: &str, out: &mut Vec<StatusCause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = match url.split_once("://") {
        Some((sc, rest)) if !sc.is_empty() => (sc, rest),
        _ => ("", ""),
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = rest.split('/').next().unwrap_or("");
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        out.push(invalid_str(
            path,
            scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        out.push(invalid_str(
            path,
            host,
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        out.push(invalid_str(
            path,
            u,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        out.push(invalid_str(
            path,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        out.push(invalid_str(
            path,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// kube's `ValidateWebhookService`.
fn webhook_service(svc: &Value, path: &str, out: &mut Vec<StatusCause>) {
    if s(svc, "name").is_empty() {
        out.push(required(&child(path, "name"), "service name is required"));
    }
    if s(svc, "namespace").is_empty() {
        out.push(required(
            &child(path, "namespace"),
            "service namespace is required",
        ));
    }
    // v1 defaults the port to 443.
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        out.push(invalid(
            &child(path, "port"),
            &Value::from(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = svc.get("path").and_then(Value::as_str) else {
        return;
    };
    let ppath = child(path, "path");
    if url_path == "/" || url_path.is_empty() {
        return;
    }
    if url_path == "//" {
        out.push(invalid_str(&ppath, url_path, "segment[0] may not be empty"));
        return;
    }
    if !url_path.starts_with('/') {
        out.push(invalid_str(&ppath, url_path, "must start with a '/'"));
    }
    let trimmed = url_path.strip_prefix('/').unwrap_or(url_path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    for (i, step) in trimmed.split('/').enumerate() {
        if step.is_empty() {
            out.push(invalid_str(
                &ppath,
                url_path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in validation::is_dns1123_subdomain(step) {
            out.push(invalid_str(&ppath, url_path, &format!("segment[{i}]: {m}")));
        }
    }
}
