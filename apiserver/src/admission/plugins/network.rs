//! kube's DefaultIngressClass and DenyServiceExternalIPs.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;

use super::chain::{list_all, on, Plugin};
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::Result;

const INGRESS_CLASSES: (&str, &str, &str) = ("networking.k8s.io", "v1", "ingressclasses");

fn default_ingress_class<'a>(
    scope: &'a Scope<'a>,
    _: &'a Attributes<'a>,
    ingress: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        let has_class = ingress
            .pointer("/spec/ingressClassName")
            .is_some_and(|v| !v.is_null())
            || ingress
                .pointer("/metadata/annotations/kubernetes.io~1ingress.class")
                .is_some();
        if has_class {
            return Ok(());
        }
        let classes = list_all(scope, INGRESS_CLASSES).await?;
        let Some(name) = super::storage::newest_default(
            &classes,
            &["ingressclass.kubernetes.io/is-default-class"],
        ) else {
            return Ok(());
        };
        if let Some(o) = ingress.as_object_mut() {
            let spec = o
                .entry("spec")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(spec) = spec.as_object_mut() {
                spec.insert("ingressClassName".into(), Value::String(name.to_string()));
            }
        }
        Ok(())
    }
    .boxed()
}

pub const DEFAULT_INGRESS_CLASS: Plugin = Plugin {
    name: "DefaultIngressClass",
    default_on: true,
    supported: true,
    handles: |a| on(a, "networking.k8s.io", "ingresses") && a.operation == "CREATE",
    mutate: Some(default_ingress_class),
    validate: None,
};

fn external_ips(svc: Option<&Value>) -> Vec<&str> {
    svc.and_then(|s| s.pointer("/spec/externalIPs"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn deny_external_ips<'a>(_: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    let new = external_ips(a.object);
    let old = external_ips(a.old);
    // An update that only keeps or drops addresses it had is allowed.
    let result = if new.iter().all(|ip| old.contains(ip)) {
        Ok(())
    } else {
        Err(forbidden(a, "use of external IPs is denied by admission control").into())
    };
    async move { result }.boxed()
}

pub const DENY_SERVICE_EXTERNAL_IPS: Plugin = Plugin {
    name: "DenyServiceExternalIPs",
    default_on: false,
    supported: true,
    handles: |a| on(a, "", "services") && matches!(a.operation, "CREATE" | "UPDATE"),
    mutate: None,
    validate: Some(deny_external_ips),
};
