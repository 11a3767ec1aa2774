//! kube-apiserver's admission plugins, by kube's names and in kube's order
//! (`AllOrderedPlugins`), and the chain `--enable-admission-plugins` and
//! `--disable-admission-plugins` make of them.
//!
//! A plugin is data: its name, whether kube turns it on by default, which
//! requests it looks at, and up to two rule functions, one that may change
//! the object (mutating phase) and one that may only refuse (validating
//! phase). [`Chain::mutate`] runs every enabled plugin's mutating half in
//! order, then schema validation runs (in the write path), then
//! [`Chain::validate`] runs the validating halves in order. The CEL
//! policies and the webhooks are plugins of the table like the others,
//! which is how kube orders them: built-in mutators, then
//! MutatingAdmissionPolicy, then mutating webhooks; built-in validators,
//! then ValidatingAdmissionPolicy, then validating webhooks, then
//! ResourceQuota last.
//!
//! Plugins kube has but this server does not implement are listed too
//! (`supported: false`): they may not be enabled (the server refuses to
//! start, naming them). Those kube turns on by default only act behind
//! feature gates that are off by default or on kinds this server does not
//! serve, so leaving them out changes nothing a client sees.
//!
//! A plugin sees a request as [`Scope`]: the request's own scope and the
//! replica's admission context (the backend, the compiled configuration,
//! quota's turns, the authorizer); never the server's state.

// Fallible functions here answer with the `Status` the client is sent.
#![allow(clippy::result_large_err)]

mod certificates;
pub(crate) mod chain;
mod limitranger;
mod namespace;
mod network;
mod pods;
mod podsecurity;
pub(crate) mod quota;
mod storage;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;

use super::attributes::{Attributes, Scope};
use crate::error::Result;
pub use chain::{list_all, lookup, on, writes, Chain, MutateFn, Plugin, ValidateFn};

fn mutating_policies<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    obj: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        crate::admission::mutating_policy::mutate(scope, a, obj, false).await?;
        Ok(())
    }
    .boxed()
}

fn mutating_webhooks<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    obj: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    // Checked before the future is built: a webhook call's future is
    // large, and boxing it copies all of it even when nothing is called
    // (17k instructions per create; BENCHMARKS.md, "Instructions per
    // create").
    if !scope.ctx.webhooks.has_mutating() {
        return futures_util::future::ready(Ok(())).boxed();
    }
    async move {
        // The webhooks see the object as it came to them and change `obj`.
        let seen = obj.clone();
        let view = Attributes {
            object: (a.operation != "DELETE").then_some(&seen),
            ..*a
        };
        super::webhooks::mutating(scope, &view, obj).await?;
        // kube reinvokes the `IfNeeded` mutating policies when the
        // webhooks changed the object.
        if *obj != seen && scope.ctx.chain.enabled("MutatingAdmissionPolicy") {
            crate::admission::mutating_policy::mutate(scope, a, obj, true).await?;
        }
        Ok(())
    }
    .boxed()
}

fn validating_policies<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
) -> BoxFuture<'a, Result<()>> {
    super::policy::admit(scope, a).boxed()
}

fn validating_webhooks<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
) -> BoxFuture<'a, Result<()>> {
    // As for the mutating webhooks, above.
    if !scope.ctx.webhooks.has_validating() {
        return futures_util::future::ready(Ok(())).boxed();
    }
    super::webhooks::validating(scope, a).boxed()
}

fn any(_: &Attributes) -> bool {
    true
}

fn always_deny<'a>(_: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    let err = apimachinery::Status::forbidden(format!(
        "{} {:?} is forbidden: admission control is denying all modifications",
        a.res.group_resource(),
        a.name
    ));
    async move { Err(err.into()) }.boxed()
}

/// Every plugin kube-apiserver knows, in the order kube runs them.
pub static PLUGINS: &[Plugin] = &[
    Plugin {
        name: "AlwaysAdmit",
        default_on: false,
        supported: true,
        handles: |_| false,
        mutate: None,
        validate: None,
    },
    Plugin::unsupported("NamespaceAutoProvision", false),
    namespace::LIFECYCLE,
    Plugin::unsupported("NamespaceExists", false),
    Plugin::unsupported("LimitPodHardAntiAffinityTopology", false),
    limitranger::LIMIT_RANGER,
    pods::SERVICE_ACCOUNT,
    Plugin::unsupported("NodeRestriction", false),
    pods::TAINT_NODES_BY_CONDITION,
    Plugin::unsupported("AlwaysPullImages", false),
    Plugin::unsupported("ImagePolicyWebhook", false),
    podsecurity::POD_SECURITY,
    Plugin::unsupported("PodNodeSelector", false),
    pods::PRIORITY,
    pods::DEFAULT_TOLERATION_SECONDS,
    Plugin::unsupported("PodTolerationRestriction", false),
    Plugin::unsupported("EventRateLimit", false),
    Plugin::unsupported("ExtendedResourceToleration", false),
    storage::DEFAULT_STORAGE_CLASS,
    storage::STORAGE_OBJECT_IN_USE_PROTECTION,
    // Behind the GenericWorkload gate (off by default).
    Plugin::unsupported("PodGroupProtection", true),
    Plugin::unsupported("OwnerReferencesPermissionEnforcement", false),
    storage::PERSISTENT_VOLUME_CLAIM_RESIZE,
    pods::RUNTIME_CLASS,
    certificates::APPROVAL,
    certificates::SIGNING,
    // ClusterTrustBundles are not served (beta, off by default).
    Plugin::unsupported("ClusterTrustBundleAttest", true),
    certificates::SUBJECT_RESTRICTION,
    network::DEFAULT_INGRESS_CLASS,
    network::DENY_SERVICE_EXTERNAL_IPS,
    // Behind feature gates that are off by default.
    Plugin::unsupported("PodTopologyLabels", true),
    Plugin::unsupported("PodGroupWorkloadExists", true),
    Plugin::unsupported("NodeDeclaredFeatureValidator", true),
    Plugin::unsupported("JobValidation", true),
    // Checks resizes of running pods; no kubelet reports them here.
    Plugin::unsupported("PodResizeValidator", true),
    Plugin {
        name: "MutatingAdmissionPolicy",
        default_on: true,
        supported: true,
        handles: |a| matches!(a.operation, "CREATE" | "UPDATE"),
        mutate: Some(mutating_policies),
        validate: None,
    },
    Plugin {
        name: "MutatingAdmissionWebhook",
        default_on: true,
        supported: true,
        handles: any,
        mutate: Some(mutating_webhooks),
        validate: None,
    },
    Plugin {
        name: "ValidatingAdmissionPolicy",
        default_on: true,
        supported: true,
        handles: any,
        mutate: None,
        validate: Some(validating_policies),
    },
    Plugin {
        name: "ValidatingAdmissionWebhook",
        default_on: true,
        supported: true,
        handles: any,
        mutate: None,
        validate: Some(validating_webhooks),
    },
    quota::RESOURCE_QUOTA,
    Plugin {
        name: "AlwaysDeny",
        default_on: false,
        supported: true,
        handles: any,
        mutate: None,
        validate: Some(always_deny),
    },
];

impl Default for Chain {
    /// kube's default set.
    fn default() -> Chain {
        Chain::new(&[], &[]).expect("the default plugins are known")
    }
}

impl Chain {
    /// The chain of kube's default plugins plus `enable`, minus `disable`,
    /// as kube-apiserver's flags make it. A name kube does not know, a
    /// name in both lists, or enabling a plugin this server does not
    /// implement is an error naming it.
    pub fn new(enable: &[String], disable: &[String]) -> std::result::Result<Chain, String> {
        let mut errors = Vec::new();
        for (flag, names) in [
            ("enable-admission-plugins", enable),
            ("disable-admission-plugins", disable),
        ] {
            for name in names {
                if !PLUGINS.iter().any(|p| p.name == name) {
                    errors.push(format!("{flag} plugin {name:?} is unknown"));
                }
            }
        }
        for name in enable {
            if disable.contains(name) {
                errors.push(format!(
                    "{name} in enable-admission-plugins and disable-admission-plugins overlapped"
                ));
            }
        }
        let mut chain = Chain {
            mutating: Vec::new(),
            validating: Vec::new(),
        };
        for p in PLUGINS {
            let on = (p.default_on || enable.iter().any(|n| n == p.name))
                && !disable.iter().any(|n| n == p.name);
            if !on {
                continue;
            }
            if !p.supported {
                if !p.default_on {
                    errors.push(format!(
                        "admission plugin {:?} is not supported by this server",
                        p.name
                    ));
                }
                continue;
            }
            if p.mutate.is_some() {
                chain.mutating.push(p);
            }
            if p.validate.is_some() {
                chain.validating.push(p);
            }
        }
        if errors.is_empty() {
            Ok(chain)
        } else {
            Err(errors.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plugin_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for p in PLUGINS {
            assert!(seen.insert(p.name), "{} listed twice", p.name);
        }
    }

    #[test]
    fn default_chain_runs_policies_before_webhooks() {
        let (mutating, validating) = Chain::default().names();
        let pos = |v: &[&str], n: &str| v.iter().position(|x| *x == n).unwrap();
        assert!(
            pos(&mutating, "MutatingAdmissionPolicy") < pos(&mutating, "MutatingAdmissionWebhook")
        );
        assert!(
            pos(&validating, "ValidatingAdmissionPolicy")
                < pos(&validating, "ValidatingAdmissionWebhook")
        );
        assert!(
            pos(&validating, "NamespaceLifecycle") < pos(&validating, "ValidatingAdmissionPolicy")
        );
        assert!(!validating.contains(&"AlwaysDeny"));
    }

    #[test]
    fn flags_enable_and_disable() {
        let c = Chain::new(
            &names(&["AlwaysDeny"]),
            &names(&["ValidatingAdmissionWebhook"]),
        )
        .unwrap();
        assert!(c.enabled("AlwaysDeny"));
        assert!(!c.enabled("ValidatingAdmissionWebhook"));
        assert!(c.enabled("ValidatingAdmissionPolicy"));
    }

    #[test]
    fn bad_flags_are_named() {
        let e = Chain::new(&names(&["NoSuchPlugin"]), &[]).err().unwrap();
        assert_eq!(
            e,
            "enable-admission-plugins plugin \"NoSuchPlugin\" is unknown"
        );
        let e = Chain::new(&names(&["AlwaysDeny"]), &names(&["AlwaysDeny"]))
            .err()
            .unwrap();
        assert!(
            e.contains(
                "AlwaysDeny in enable-admission-plugins and disable-admission-plugins overlapped"
            ),
            "{e}"
        );
        let e = Chain::new(&names(&["NodeRestriction"]), &[]).err().unwrap();
        assert!(e.contains("\"NodeRestriction\" is not supported"), "{e}");
        // Disabling an unsupported default plugin is fine.
        assert!(Chain::new(&[], &names(&["PodSecurity"])).is_ok());
    }
}
