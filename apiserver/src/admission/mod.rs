//! kube's built-in admission plugins, run in the write path after
//! validation and before storage (see ARCHITECTURE.md). Each plugin decides
//! from the request's resource whether it applies. Policy and webhook
//! admission (issue 15) will join them here.

use apimachinery::auth::RequestInfo;
use apimachinery::Status;
use serde_json::Value;

use crate::auth::Decision;
use crate::error::Result;
use crate::handlers::Scope;

/// kube's `CertificateApproval`: approving or denying a
/// CertificateSigningRequest takes the `approve` verb on its signer
/// (`signers` in `certificates.k8s.io`, named by the signerName or by
/// `<domain>/*`).
pub async fn certificate_approval(scope: &Scope, csr: &Value) -> Result<()> {
    if scope.res.group != "certificates.k8s.io"
        || scope.res.plural != "certificatesigningrequests"
        || scope.subresource_name() != Some("approval")
    {
        return Ok(());
    }
    let signer = csr
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut names = vec![signer.to_string()];
    if let Some((domain, _)) = signer.split_once('/') {
        names.push(format!("{domain}/*"));
    }
    for name in names {
        let request = RequestInfo {
            resource_request: true,
            verb: "approve".into(),
            api_group: "certificates.k8s.io".into(),
            api_version: "*".into(),
            resource: "signers".into(),
            name,
            ..Default::default()
        };
        if crate::auth::decide(&scope.state, &scope.user, &request).await == Decision::Allow {
            return Ok(());
        }
    }
    let name = scope.name();
    let gr = scope.res.group_resource();
    Err(Status::forbidden(format!(
        "{gr} {name:?} is forbidden: user not permitted to approve requests with signerName {signer:?}"
    ))
    .with_details(name, scope.res.group, scope.res.plural)
    .into())
}
