//! rbac.authorization.k8s.io/v1: kube's defaults (roleRef and subject API
//! groups), `ValidateRole`/`ValidateClusterRole`/`ValidateRoleBinding`/
//! `ValidateClusterRoleBinding` and the printers.

use serde_json::{json, Map, Value};

use crate::kinds::common::each_mut;
use crate::kinds::policy::validate_label_selector;
use crate::kinds::print::{column, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::validation as v;
use crate::StatusCause;

pub static ROLE: KindRules = KindRules {
    validate: Some(validate_role),
    // kube has no Role printer: the default (Name, Created At).
    ..KindRules::NONE
};

pub static ROLE_BINDING: KindRules = KindRules {
    defaults: Some(binding_defaults),
    validate: Some(validate_role_binding),
    columns: BINDING_COLUMNS,
    ..KindRules::NONE
};

pub static CLUSTER_ROLE: KindRules = KindRules {
    validate: Some(validate_cluster_role),
    ..KindRules::NONE
};

pub static CLUSTER_ROLE_BINDING: KindRules = KindRules {
    defaults: Some(binding_defaults),
    validate: Some(validate_cluster_role_binding),
    columns: CLUSTER_BINDING_COLUMNS,
    ..KindRules::NONE
};

const GROUP: &str = "rbac.authorization.k8s.io";

fn empty_str(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_str).is_none_or(str::is_empty)
}

fn binding_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(r) = o.get_mut("roleRef").and_then(Value::as_object_mut) {
        if empty_str(r, "apiGroup") {
            r.insert("apiGroup".into(), json!(GROUP));
        }
    }
    for s in each_mut(o, "subjects") {
        // A ServiceAccount's group is "", which kube leaves out.
        let named = matches!(
            s.get("kind").and_then(Value::as_str),
            Some("User" | "Group")
        );
        if named && empty_str(s, "apiGroup") {
            s.insert("apiGroup".into(), json!(GROUP));
        }
    }
}

fn strs(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// kube's `ValidatePolicyRule`.
fn rules(obj: &Value, namespaced: bool) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let list = obj.get("rules").and_then(Value::as_array);
    for (i, rule) in list.into_iter().flatten().enumerate() {
        let p = format!("rules[{i}]");
        if strs(rule, "verbs").is_empty() {
            errs.push(v::required(
                &format!("{p}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = strs(rule, "nonResourceURLs");
        if !urls.is_empty() {
            let shown = v::go_slice("string", urls.iter().map(String::as_str));
            if namespaced {
                errs.push(v::invalid_rendered(
                    &format!("{p}.nonResourceURLs"),
                    &shown,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            let resources = ["apiGroups", "resources", "resourceNames"];
            if resources.iter().any(|k| !strs(rule, k).is_empty()) {
                errs.push(v::invalid_rendered(
                    &format!("{p}.nonResourceURLs"),
                    &shown,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if strs(rule, "apiGroups").is_empty() {
            errs.push(v::required(
                &format!("{p}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if strs(rule, "resources").is_empty() {
            errs.push(v::required(
                &format!("{p}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    errs
}

fn validate_role(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    rules(obj, true)
}

fn validate_cluster_role(obj: &Value, _old: Option<&Value>) -> Vec<StatusCause> {
    let mut errs = rules(obj, false);
    if let Some(agg) = obj.get("aggregationRule").filter(|a| !a.is_null()) {
        let sels = agg.get("clusterRoleSelectors").and_then(Value::as_array);
        if sels.is_none_or(Vec::is_empty) {
            errs.push(v::required(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, s) in sels.into_iter().flatten().enumerate() {
            errs.extend(validate_label_selector(
                Some(s),
                &format!("aggregationRule.clusterRoleSelectors[{i}]"),
            ));
        }
    }
    errs
}

fn s<'a>(v: Option<&'a Value>, k: &str) -> &'a str {
    v.and_then(|x| x.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// kube's `ValidateRoleBinding`/`ValidateClusterRoleBinding`, with the
/// roleRef kinds the binding may name.
fn binding(obj: &Value, old: Option<&Value>, kinds: &[&str], namespaced: bool) -> Vec<StatusCause> {
    let mut errs = Vec::new();
    let role_ref = obj.get("roleRef");
    let group = s(role_ref, "apiGroup");
    if group != GROUP {
        errs.push(v::not_supported("roleRef.apiGroup", group, &[GROUP]));
    }
    let kind = s(role_ref, "kind");
    if !kinds.contains(&kind) {
        errs.push(v::not_supported("roleRef.kind", kind, kinds));
    }
    let name = s(role_ref, "name");
    if name.is_empty() {
        errs.push(v::required("roleRef.name", ""));
    } else {
        for msg in v::name_is_path_segment(name, false) {
            errs.push(v::invalid("roleRef.name", name, &msg));
        }
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, sub) in subjects.into_iter().flatten().enumerate() {
        subject(sub, namespaced, &format!("subjects[{i}]"), &mut errs);
    }
    if let Some(old) = old {
        let old_ref = old.get("roleRef");
        let same = ["apiGroup", "kind", "name"]
            .iter()
            .all(|k| s(role_ref, k) == s(old_ref, k));
        if !same {
            let shown = format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                v::go_quote(group),
                v::go_quote(kind),
                v::go_quote(name)
            );
            errs.push(v::invalid_rendered(
                "roleRef",
                &shown,
                "cannot change roleRef",
            ));
        }
    }
    errs
}

/// kube's `ValidateRoleBindingSubject`.
fn subject(sub: &Value, namespaced: bool, p: &str, errs: &mut Vec<StatusCause>) {
    let sub = Some(sub);
    let name = s(sub, "name");
    let group = s(sub, "apiGroup");
    if name.is_empty() {
        errs.push(v::required(&format!("{p}.name"), ""));
    }
    match s(sub, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in v::name_is_dns_subdomain(name, false) {
                    errs.push(v::invalid(&format!("{p}.name"), name, &msg));
                }
            }
            if !group.is_empty() {
                errs.push(v::not_supported(&format!("{p}.apiGroup"), group, &[""]));
            }
            if !namespaced && s(sub, "namespace").is_empty() {
                errs.push(v::required(&format!("{p}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                errs.push(v::not_supported(&format!("{p}.apiGroup"), group, &[GROUP]));
            }
        }
        other => errs.push(v::not_supported(
            &format!("{p}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

fn validate_role_binding(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    binding(obj, old, &["Role", "ClusterRole"], true)
}

fn validate_cluster_role_binding(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    binding(obj, old, &["ClusterRole"], false)
}

// ---------------------------------------------------------------------------
// Printers.

const BINDING_COLUMNS: &[Column] = &[
    NAME,
    column("Role", "string", "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.", 0, role_ref),
    AGE,
    column("Users", "string", "Users in the roleBinding", 1, |o, _| subjects(o, "User")),
    column("Groups", "string", "Groups in the roleBinding", 1, |o, _| subjects(o, "Group")),
    column("ServiceAccounts", "string", "ServiceAccounts in the roleBinding", 1, |o, _| subjects(o, "ServiceAccount")),
];

const CLUSTER_BINDING_COLUMNS: &[Column] = &[
    NAME,
    column("Role", "string", "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.", 0, role_ref),
    AGE,
    column("Users", "string", "Users in the clusterRoleBinding", 1, |o, _| subjects(o, "User")),
    column("Groups", "string", "Groups in the clusterRoleBinding", 1, |o, _| subjects(o, "Group")),
    column("ServiceAccounts", "string", "ServiceAccounts in the clusterRoleBinding", 1, |o, _| subjects(o, "ServiceAccount")),
];

fn role_ref(obj: &Value, _: &PrintContext) -> Value {
    let r = obj.get("roleRef");
    Value::String(format!("{}/{}", s(r, "kind"), s(r, "name")))
}

/// kube's `SubjectsStrings`: names of one kind, service accounts as
/// `namespace/name`.
fn subjects(obj: &Value, kind: &str) -> Value {
    let list = obj.get("subjects").and_then(Value::as_array);
    let names: Vec<String> = list
        .into_iter()
        .flatten()
        .filter(|x| s(Some(x), "kind") == kind)
        .map(|x| {
            let (ns, name) = (s(Some(x), "namespace"), s(Some(x), "name"));
            if kind == "ServiceAccount" && !ns.is_empty() {
                format!("{ns}/{name}")
            } else {
                name.to_string()
            }
        })
        .collect();
    Value::String(names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(errs: Vec<StatusCause>) -> Vec<String> {
        errs.iter().map(v::cause_to_string).collect()
    }

    #[test]
    fn defaults_fill_api_groups() {
        let mut rb = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [
            {"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"},
            {"kind": "Group", "name": "g", "apiGroup": "x"}]});
        binding_defaults(&mut rb);
        assert_eq!(rb["roleRef"]["apiGroup"], GROUP);
        assert_eq!(rb["subjects"][0]["apiGroup"], GROUP);
        assert!(rb["subjects"][1].get("apiGroup").is_none());
        assert_eq!(rb["subjects"][2]["apiGroup"], "x");
        let again = rb.clone();
        binding_defaults(&mut rb);
        assert_eq!(rb, again);
    }

    #[test]
    fn validation() {
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        assert_eq!(msgs(validate_role(&role, None)), vec![
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[1].nonResourceURLs: Invalid value: [\"/x\"]: namespaced rules cannot apply to non-resource URLs",
        ]);
        assert!(validate_cluster_role(
            &json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}),
            None
        )
        .is_empty());
        let mut crb = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "s"}, {"kind": "Bot", "name": "b"}]});
        binding_defaults(&mut crb);
        assert_eq!(msgs(validate_cluster_role_binding(&crb, None)), vec![
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
            "subjects[0].namespace: Required value",
            "subjects[1].kind: Unsupported value: \"Bot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
        ]);
        let old = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "a"}});
        let new = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "b"}});
        assert_eq!(msgs(validate_role_binding(&new, Some(&old))), vec![
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"b\"}: cannot change roleRef",
        ]);
    }

    #[test]
    fn columns() {
        let ctx = PrintContext { now: 0 };
        let rb = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [
            {"kind": "User", "name": "a"}, {"kind": "User", "name": "b"},
            {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]});
        assert_eq!(
            (BINDING_COLUMNS[1].cell)(&rb, &ctx),
            json!("ClusterRole/view")
        );
        assert_eq!((BINDING_COLUMNS[3].cell)(&rb, &ctx), json!("a, b"));
        assert_eq!((BINDING_COLUMNS[4].cell)(&rb, &ctx), json!(""));
        assert_eq!((BINDING_COLUMNS[5].cell)(&rb, &ctx), json!("n/s"));
    }
}
