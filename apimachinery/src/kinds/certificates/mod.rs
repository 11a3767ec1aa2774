//! certificates.k8s.io/v1 CertificateSigningRequest: kube's validation
//! (`pkg/apis/certificates/validation`), its three strategies (the object,
//! `/status` and `/approval` each change their own part) and its printer.
//!
//! Not done here: `spec.username`/`uid`/`groups`/`extra` are not filled from
//! the requesting user (the rules see only the object).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;

use crate::kinds::print::{self, Column, PrintContext};
use crate::kinds::KindRules;
use crate::status::{cause, StatusCause};
use crate::validation::{
    self, forbidden, invalid, invalid_json, not_supported, required, too_long,
};

pub static CERTIFICATE_SIGNING_REQUEST: KindRules = KindRules {
    prepare_create_as: Some(record_requester),
    prepare_update: Some(keep_spec_and_status),
    validate: Some(validate),
    validate_status: Some(validate_status),
    columns: COLUMNS,
    ..KindRules::NONE
};

/// kube's CSR PrepareForCreate: the requester's name, uid, groups and
/// extra replace whatever the client wrote, and a request never starts
/// approved.
fn record_requester(obj: &mut Value, user: &crate::auth::UserInfo) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        for k in ["username", "uid", "groups", "extra"] {
            spec.remove(k);
        }
        if !user.username.is_empty() {
            spec.insert("username".into(), Value::String(user.username.clone()));
        }
        if !user.uid.is_empty() {
            spec.insert("uid".into(), Value::String(user.uid.clone()));
        }
        if !user.groups.is_empty() {
            spec.insert("groups".into(), serde_json::json!(user.groups));
        }
        if !user.extra.is_empty() {
            spec.insert("extra".into(), serde_json::json!(user.extra));
        }
    }
    // The zero status, which Go writes as `{}`.
    o.insert("status".into(), serde_json::json!({}));
}

/// `/approval`: only the conditions change, and none is removed.
pub static APPROVAL: crate::kinds::Part = crate::kinds::Part {
    name: "approval",
    verbs: &["get", "patch", "update"],
    take: take_conditions,
    validate: Some(validate_approval),
};

fn take_conditions(stored: &mut Value, request: &Value) {
    let conditions = request.pointer("/status/conditions").cloned();
    let Some(o) = stored.as_object_mut() else {
        return;
    };
    let status = o.entry("status").or_insert_with(|| json!({}));
    if let Some(st) = status.as_object_mut() {
        match conditions {
            Some(c) => st.insert("conditions".into(), c),
            None => st.remove("conditions"),
        };
    }
}

fn validate_approval(csr: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = validate_conditions(csr);
    if let Some(old) = old {
        errs.extend(removed_conditions(csr, old));
        if certificate(csr) != certificate(old) {
            errs.push(forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        }
    }
    errs
}

const SIGNER_NAME_MAX: usize = 571;
const LEGACY_SIGNER: &str = "kubernetes.io/legacy-unknown";
const MIN_EXPIRATION_SECONDS: i64 = 600;
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// A write of the object itself changes metadata only: spec and status
/// stay as stored (kube's `PrepareForUpdate`).
fn keep_spec_and_status(csr: &mut Value, old: &Value) {
    let Some(o) = csr.as_object_mut() else { return };
    for f in ["spec", "status"] {
        match old.get(f) {
            Some(v) => {
                o.insert(f.into(), v.clone());
            }
            None => {
                o.remove(f);
            }
        }
    }
}

fn spec_str<'a>(csr: &'a Value, f: &str) -> &'a str {
    csr.pointer(&format!("/spec/{f}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn validate(csr: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    if old.is_none() {
        errs.extend(validate_request(csr));
        errs.extend(validate_signer_name(spec_str(csr, "signerName")));
        if let Some(n) = csr
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64)
        {
            if n < MIN_EXPIRATION_SECONDS {
                errs.push(invalid_json(
                    "spec.expirationSeconds",
                    &Value::from(n),
                    "may not specify a duration less than 600 seconds (10 minutes)",
                ));
            }
        }
        errs.extend(validate_usages(csr));
    }
    errs.extend(validate_conditions(csr));
    errs
}

fn validate_status(csr: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = validate_conditions(csr);
    let Some(old) = old else { return errs };
    for t in ["Approved", "Denied"] {
        if has_condition(csr, t) && !has_condition(old, t) {
            errs.push(forbidden(
                "status.conditions",
                &format!(
                    "updates may not add a condition of type {}",
                    validation::go_quote(t)
                ),
            ));
        }
    }
    errs.extend(removed_conditions(csr, old));
    let (new_cert, old_cert) = (certificate(csr), certificate(old));
    if new_cert != old_cert {
        if !old_cert.is_empty() {
            errs.push(forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        } else if let Err(e) = check_certificates(new_cert) {
            errs.push(invalid("status.certificate", "<certificate data>", &e));
        }
    }
    errs
}

fn certificate(csr: &Value) -> &str {
    csr.pointer("/status/certificate")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn conditions(csr: &Value) -> &[Value] {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn has_condition(csr: &Value, t: &str) -> bool {
    conditions(csr)
        .iter()
        .any(|c| c.get("type").and_then(Value::as_str) == Some(t))
}

fn removed_conditions(csr: &Value, old: &Value) -> Vec<StatusCause> {
    ["Approved", "Denied", "Failed"]
        .iter()
        .filter(|t| has_condition(old, t) && !has_condition(csr, t))
        .map(|t| {
            forbidden(
                "status.conditions",
                &format!(
                    "updates may not remove a condition of type {}",
                    validation::go_quote(t)
                ),
            )
        })
        .collect()
}

fn validate_conditions(csr: &Value) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions(csr).iter().enumerate() {
        let t = c.get("type").and_then(Value::as_str).unwrap_or("");
        let field = format!("status.conditions[{i}].type");
        if t.is_empty() {
            errs.push(required(&field, ""));
            continue;
        }
        if seen.contains(&t) {
            errs.push(StatusCause::new(
                cause::FIELD_VALUE_DUPLICATE,
                format!("Duplicate value: {}", validation::go_quote(t)),
                field,
            ));
            continue;
        }
        let other = match t {
            "Approved" => Some("Denied"),
            "Denied" => Some("Approved"),
            _ => None,
        };
        if other.is_some_and(|o| seen.contains(&o)) {
            errs.push(invalid(
                &field,
                t,
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        seen.push(t);
    }
    errs
}

fn validate_usages(csr: &Value) -> Vec<StatusCause> {
    let usages: Vec<&str> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|u| u.as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    if usages.is_empty() {
        return vec![required("spec.usages", "")];
    }
    let mut errs = Vec::new();
    for (i, u) in usages.iter().enumerate() {
        let field = format!("spec.usages[{i}]");
        if !USAGES.contains(u) {
            errs.push(not_supported(&field, u, USAGES));
        }
        if usages[..i].contains(u) {
            errs.push(StatusCause::new(
                cause::FIELD_VALUE_DUPLICATE,
                format!("Duplicate value: {}", validation::go_quote(u)),
                field,
            ));
        }
    }
    errs
}

/// kube's `ValidateSignerName`: `<fully qualified domain>/<path>`.
fn validate_signer_name(name: &str) -> Vec<StatusCause> {
    const FIELD: &str = "spec.signerName";
    if name.is_empty() {
        return vec![required(FIELD, "")];
    }
    if name == LEGACY_SIGNER {
        return vec![invalid(
            FIELD,
            name,
            "the legacy signerName is not allowed via this API version",
        )];
    }
    let Some((domain, path)) = name.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        return vec![invalid(
            FIELD,
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    if name.len() > SIGNER_NAME_MAX {
        return vec![too_long(FIELD, SIGNER_NAME_MAX)];
    }
    let mut errs = Vec::new();
    if domain.len() > validation::DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(too_long(FIELD, validation::DNS1123_SUBDOMAIN_MAX_LENGTH));
    } else if !domain.contains('.') {
        errs.push(invalid(
            FIELD,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    } else {
        for label in domain.split('.') {
            for e in validation::is_dns1123_label(label) {
                let detail = format!("validating label {}: {e}", validation::go_quote(label));
                errs.push(invalid(FIELD, domain, &detail));
            }
        }
    }
    for part in path.split('.') {
        for e in validation::is_dns1123_subdomain(part) {
            let detail = format!("validating label {}: {e}", validation::go_quote(part));
            errs.push(invalid(FIELD, path, &detail));
        }
    }
    errs
}

/// kube's `ParseCSR` and `CheckSignature` of `spec.request` (base64 of a
/// PEM `CERTIFICATE REQUEST`).
fn validate_request(csr: &Value) -> Vec<StatusCause> {
    let raw = csr.pointer("/spec/request").cloned().unwrap_or(Value::Null);
    let shown = match &raw {
        Value::Null => Value::Null,
        v => v.clone(),
    };
    match check_request(raw.as_str().unwrap_or("")) {
        Ok(()) => Vec::new(),
        Err(e) => vec![invalid_json("spec.request", &shown, &e)],
    }
}

fn check_request(b64: &str) -> Result<(), String> {
    const TYPE: &str = "PEM block type must be CERTIFICATE REQUEST";
    let bytes = STANDARD.decode(b64).map_err(|_| TYPE.to_string())?;
    let pem = Pem::iter_from_buffer(&bytes)
        .next()
        .and_then(Result::ok)
        .filter(|p| p.label == "CERTIFICATE REQUEST")
        .ok_or_else(|| TYPE.to_string())?;
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .map_err(|e| format!("x509: {e}"))?;
    req.verify_signature()
        .map_err(|e| format!("x509: signature verification failure: {e}"))
}

/// `status.certificate`: CERTIFICATE PEM blocks only, each one certificate.
fn check_certificates(b64: &str) -> Result<(), String> {
    const NONE: &str = "must contain at least one CERTIFICATE PEM block";
    let bytes = STANDARD.decode(b64).map_err(|_| NONE.to_string())?;
    let mut count = 0;
    for pem in Pem::iter_from_buffer(&bytes) {
        let pem = pem.map_err(|_| NONE.to_string())?;
        if pem.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                validation::go_quote(&pem.label)
            ));
        }
        if pem.contents.is_empty() {
            return Err("found CERTIFICATE PEM block containing 0 certificates".into());
        }
        x509_parser::parse_x509_certificate(&pem.contents).map_err(|e| format!("x509: {e}"))?;
        count += 1;
    }
    if count == 0 {
        return Err(NONE.into());
    }
    Ok(())
}

const COLUMNS: &[Column] = &[
    print::NAME,
    print::AGE,
    Column {
        name: "SignerName",
        type_: "string",
        format: "",
        description: "Requested signer name for the certificate",
        priority: 0,
        cell: |o, _| json!(spec_str(o, "signerName")),
    },
    Column {
        name: "Requestor",
        type_: "string",
        format: "",
        description: "Name of the user requesting the certificate",
        priority: 0,
        cell: |o, _| json!(spec_str(o, "username")),
    },
    Column {
        name: "RequestedDuration",
        type_: "string",
        format: "",
        description: "Requested duration of the certificate",
        priority: 0,
        cell: requested_duration,
    },
    Column {
        name: "Condition",
        type_: "string",
        format: "",
        description: "Current condition of the certificate",
        priority: 0,
        cell: condition,
    },
];

fn requested_duration(csr: &Value, _: &PrintContext) -> Value {
    match csr
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
    {
        Some(s) => json!(crate::duration::human(s)),
        None => json!("<none>"),
    }
}

/// kube's `extractCSRStatus`.
fn condition(csr: &Value, _: &PrintContext) -> Value {
    let mut status = if has_condition(csr, "Denied") {
        "Denied".to_string()
    } else if has_condition(csr, "Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has_condition(csr, "Failed") {
        status.push_str(",Failed");
    }
    if !certificate(csr).is_empty() {
        status.push_str(",Issued");
    }
    json!(status)
}

#[cfg(test)]
mod tests;

/// The subject organizations of the CSR in `spec.request` (`None` when it
/// does not parse; validation reports that).
pub fn request_organizations(csr: &Value) -> Option<Vec<String>> {
    let bytes = STANDARD
        .decode(csr.pointer("/spec/request")?.as_str()?)
        .ok()?;
    let pem = Pem::iter_from_buffer(&bytes)
        .next()?
        .ok()
        .filter(|p| p.label == "CERTIFICATE REQUEST")?;
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .ok()?;
    Some(
        req.certification_request_info
            .subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect(),
    )
}
