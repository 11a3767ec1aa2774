//! kube's CertificateApproval, CertificateSigning and
//! CertificateSubjectRestriction: who may approve or sign a
//! CertificateSigningRequest (the `approve` or `sign` verb on its signer),
//! and no client certificate for `system:masters` through the
//! kube-apiserver-client signer.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;

use super::chain::{on, Plugin};
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::Result;
use apimachinery::auth::RequestInfo;

const GROUP: &str = "certificates.k8s.io";
const CSRS: &str = "certificatesigningrequests";

fn csr_subresource(a: &Attributes, sub: &str) -> bool {
    a.res.group == GROUP && a.res.plural == CSRS && a.subresource == sub && a.operation == "UPDATE"
}

fn signer(csr: Option<&Value>) -> &str {
    csr.and_then(|c| c.pointer("/spec/signerName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// kube's `IsAuthorizedForSignerName`: `verb` on `signers` named by the
/// signer, or by `<domain>/*`.
async fn authorized_for_signer(scope: &Scope<'_>, verb: &str, signer: &str) -> bool {
    let mut names = vec![signer.to_string()];
    if let Some((domain, _)) = signer.split_once('/') {
        names.push(format!("{domain}/*"));
    }
    for name in names {
        let request = RequestInfo {
            resource_request: true,
            verb: verb.into(),
            api_group: GROUP.into(),
            api_version: "*".into(),
            resource: "signers".into(),
            name,
            ..Default::default()
        };
        if crate::auth::decide(scope.ctx.authorizer, &scope.user, &request).await
            == crate::auth::Decision::Allow
        {
            return true;
        }
    }
    false
}

fn approve<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        let signer = signer(a.old.or(a.object));
        if authorized_for_signer(scope, "approve", signer).await {
            return Ok(());
        }
        Err(forbidden(
            a,
            &format!("user not permitted to approve requests with signerName {signer:?}"),
        )
        .into())
    }
    .boxed()
}

/// A status write that changes the certificate or the conditions.
fn changes_signing(a: &Attributes) -> bool {
    let at = |v: Option<&Value>, p: &str| v.and_then(|v| v.pointer(p)).cloned();
    at(a.old, "/status/certificate") != at(a.object, "/status/certificate")
        || at(a.old, "/status/conditions") != at(a.object, "/status/conditions")
}

fn sign<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        if !changes_signing(a) {
            return Ok(());
        }
        let signer = signer(a.old);
        if authorized_for_signer(scope, "sign", signer).await {
            return Ok(());
        }
        Err(forbidden(
            a,
            &format!("user not permitted to sign requests with signerName {signer:?}"),
        )
        .into())
    }
    .boxed()
}

const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

fn restrict_subject<'a>(_: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    let refused = signer(a.object) == KUBE_APISERVER_CLIENT
        && a.object
            .and_then(apimachinery::kinds::certificates::request_organizations)
            .is_some_and(|orgs| orgs.iter().any(|o| o == "system:masters"));
    let result = if refused {
        Err(forbidden(
            a,
            &format!(
                "use of {KUBE_APISERVER_CLIENT} signer with system:masters group is not allowed"
            ),
        )
        .into())
    } else {
        Ok(())
    };
    async move { result }.boxed()
}

pub const APPROVAL: Plugin = Plugin {
    name: "CertificateApproval",
    default_on: true,
    supported: true,
    handles: |a| csr_subresource(a, "approval"),
    mutate: None,
    validate: Some(approve),
};

pub const SIGNING: Plugin = Plugin {
    name: "CertificateSigning",
    default_on: true,
    supported: true,
    handles: |a| csr_subresource(a, "status"),
    mutate: None,
    validate: Some(sign),
};

pub const SUBJECT_RESTRICTION: Plugin = Plugin {
    name: "CertificateSubjectRestriction",
    default_on: true,
    supported: true,
    handles: |a| on(a, GROUP, CSRS) && a.operation == "CREATE",
    mutate: None,
    validate: Some(restrict_subject),
};
