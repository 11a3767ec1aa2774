//! RBAC without I/O: policy rules as `rbac.authorization.k8s.io/v1` spells
//! them, whether a rule allows a request (kube's `RuleAllows`), whether one
//! set of rules covers another (the escalation check kube runs on role and
//! binding writes), the wording of a refused escalation, and which subjects
//! of a binding name a user. Property-tested.

use crate::auth::{RequestInfo, UserInfo};
use serde::{Deserialize, Serialize};

/// `*`: every verb, group, resource or non-resource URL.
pub const ALL: &str = "*";
/// The API group of the RBAC kinds.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// A subject of a RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
}

/// The role a binding grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

impl Subject {
    /// Whether this subject of a binding names `user`. `binding_namespace`
    /// is the namespace of a RoleBinding (a ServiceAccount subject without
    /// a namespace means the binding's), empty for ClusterRoleBindings.
    pub fn applies_to(&self, user: &UserInfo, binding_namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => user.username == self.name,
            "Group" => user.in_group(&self.name),
            "ServiceAccount" => {
                let ns = if self.namespace.is_empty() {
                    binding_namespace
                } else {
                    &self.namespace
                };
                !ns.is_empty()
                    && user.username == format!("system:serviceaccount:{ns}:{}", self.name)
            }
            _ => false,
        }
    }

    /// The subject as kube names it in an allow reason: `User "alice"`,
    /// `ServiceAccount "ns/name"`.
    pub fn describe(&self) -> String {
        if self.kind == "ServiceAccount" && !self.namespace.is_empty() {
            format!("{} \"{}/{}\"", self.kind, self.namespace, self.name)
        } else {
            format!("{} {:?}", self.kind, self.name)
        }
    }
}

fn has(set: &[String], value: &str) -> bool {
    set.iter().any(|s| s == value)
}

fn has_all(set: &[String], values: &[String]) -> bool {
    values.iter().all(|v| has(set, v))
}

pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

pub fn group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups.iter().any(|g| g == ALL || g == group)
}

/// `resource` is `pods` or `pods/status`; a rule's `*/status` matches the
/// status subresource of every resource.
pub fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == ALL
            || r == resource
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

/// A rule without resourceNames matches every name (and requests without
/// one); a rule with names only requests for one of them.
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || has(&rule.resource_names, name)
}

/// `*` matches every path, `/apis/*` every path starting `/apis/`.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| url_covers(u, path))
}

fn url_covers(owner: &str, requested: &str) -> bool {
    owner == ALL
        || owner == requested
        || owner
            .strip_suffix('*')
            .is_some_and(|prefix| requested.starts_with(prefix))
}

/// Whether `rule` allows the request (kube's `RuleAllows`).
pub fn rule_allows(rule: &PolicyRule, request: &RequestInfo) -> bool {
    if !verb_matches(rule, &request.verb) {
        return false;
    }
    if !request.resource_request {
        return non_resource_url_matches(rule, &request.path);
    }
    let combined = if request.subresource.is_empty() {
        request.resource.clone()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    group_matches(rule, &request.api_group)
        && resource_matches(rule, &combined, &request.subresource)
        && resource_name_matches(rule, &request.name)
}

/// Splits a rule into rules of one verb, one group, one resource and at
/// most one name (or one verb and one URL), as kube's `BreakdownRule`.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |v: &String| vec![v.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                if rule.resource_names.is_empty() {
                    out.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        ..Default::default()
                    });
                }
                for name in &rule.resource_names {
                    out.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: one(name),
                        ..Default::default()
                    });
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..Default::default()
            });
        }
    }
    out
}

fn resources_cover_all(owner: &[String], requested: &[String]) -> bool {
    if has(owner, ALL) || has_all(owner, requested) {
        return true;
    }
    requested.iter().all(|r| {
        has(owner, r)
            || r.split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

/// Whether `owner` grants everything `sub` grants (kube's `ruleCovers`).
pub fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover_all(&owner.resources, &sub.resources);
    let urls = sub
        .non_resource_urls
        .iter()
        .all(|u| owner.non_resource_urls.iter().any(|o| url_covers(o, u)));
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// The parts of `requested` that no rule of `owner` covers, as simple rules
/// (empty: `owner` covers `requested`). kube's `Covers`.
pub fn uncovered(owner: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing: Vec<PolicyRule> = Vec::new();
    for rule in requested {
        for simple in breakdown(rule) {
            if !owner.iter().any(|o| rule_covers(o, &simple)) && !missing.contains(&simple) {
                missing.push(simple);
            }
        }
    }
    missing
}

/// Go's `%q` of a string slice: `["a" "b"]`.
pub fn go_quoted_list(values: &[String]) -> String {
    let quoted: Vec<String> = values
        .iter()
        .map(|v| crate::validation::go_quote(v))
        .collect();
    format!("[{}]", quoted.join(" "))
}

/// kube's `PolicyRule.CompactString`: `{APIGroups:[""], Resources:["pods"],
/// Verbs:["get"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:{}", go_quoted_list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:{}", go_quoted_list(&rule.resources)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!(
            "NonResourceURLs:{}",
            go_quoted_list(&rule.non_resource_urls)
        ));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!(
            "ResourceNames:{}",
            go_quoted_list(&rule.resource_names)
        ));
    }
    if !rule.verbs.is_empty() {
        parts.push(format!("Verbs:{}", go_quoted_list(&rule.verbs)));
    }
    format!("{{{}}}", parts.join(", "))
}

/// Merges simple rules that differ only in their verbs (kube's
/// `CompactRules`), for a shorter refusal message.
pub fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let simple_resource = r.api_groups.len() == 1
            && r.resources.len() == 1
            && r.resource_names.len() <= 1
            && r.non_resource_urls.is_empty();
        if simple_resource {
            if let Some(existing) = out.iter_mut().find(|o| {
                o.api_groups == r.api_groups
                    && o.resources == r.resources
                    && o.resource_names == r.resource_names
                    && o.non_resource_urls.is_empty()
            }) {
                for v in &r.verbs {
                    if !has(&existing.verbs, v) {
                        existing.verbs.push(v.clone());
                    }
                }
                continue;
            }
        }
        out.push(r.clone());
    }
    out
}

/// The reason kube gives when a user tries to grant permissions they do
/// not hold (the Forbidden message after `... is forbidden: `).
pub fn escalation_message(user: &UserInfo, missing: &[PolicyRule]) -> String {
    let mut lines: Vec<String> = compact_rules(missing).iter().map(compact_string).collect();
    lines.sort();
    format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.username,
        go_quoted_list(&user.groups),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: s(verbs),
            api_groups: s(groups),
            resources: s(resources),
            ..Default::default()
        }
    }

    fn req(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> RequestInfo {
        RequestInfo {
            resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "ns".into(),
            ..Default::default()
        }
    }

    fn url(verb: &str, path: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn allows() {
        let r = rule(&["get", "list"], &[""], &["pods"]);
        assert!(rule_allows(&r, &req("get", "", "pods", "", "p")));
        assert!(rule_allows(&r, &req("list", "", "pods", "", "")));
        assert!(!rule_allows(&r, &req("delete", "", "pods", "", "p")));
        assert!(!rule_allows(&r, &req("get", "apps", "pods", "", "p")));
        assert!(
            !rule_allows(&r, &req("get", "", "pods", "status", "p")),
            "subresources are separate"
        );
        let star = rule(&["*"], &["*"], &["*"]);
        assert!(rule_allows(
            &star,
            &req("escalate", "x.io", "things", "sub", "n")
        ));
        assert!(!rule_allows(&star, &url("get", "/healthz")), "no URLs");
        let status = rule(&["update"], &[""], &["pods/status"]);
        assert!(rule_allows(
            &status,
            &req("update", "", "pods", "status", "p")
        ));
        assert!(!rule_allows(&status, &req("update", "", "pods", "", "p")));
        let any_status = rule(&["get"], &["*"], &["*/status"]);
        assert!(rule_allows(
            &any_status,
            &req("get", "apps", "deployments", "status", "d")
        ));
        assert!(!rule_allows(
            &any_status,
            &req("get", "apps", "deployments", "scale", "d")
        ));
        let named = PolicyRule {
            resource_names: s(&["a"]),
            ..rule(&["get", "list"], &[""], &["configmaps"])
        };
        assert!(rule_allows(&named, &req("get", "", "configmaps", "", "a")));
        assert!(!rule_allows(&named, &req("get", "", "configmaps", "", "b")));
        assert!(
            !rule_allows(&named, &req("list", "", "configmaps", "", "")),
            "names never match a request without one"
        );
        let urls = PolicyRule {
            verbs: s(&["get"]),
            non_resource_urls: s(&["/healthz", "/apis/*"]),
            ..Default::default()
        };
        assert!(rule_allows(&urls, &url("get", "/healthz")));
        assert!(rule_allows(&urls, &url("get", "/apis/apps/v1")));
        assert!(!rule_allows(&urls, &url("get", "/healthz/etcd")));
        assert!(!rule_allows(&urls, &url("post", "/healthz")));
        assert!(!rule_allows(&urls, &req("get", "", "healthz", "", "")));
    }

    #[test]
    fn covers() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods", "*/status"]),
            PolicyRule {
                verbs: s(&["get"]),
                non_resource_urls: s(&["/apis/*"]),
                ..Default::default()
            },
        ];
        assert!(uncovered(&owner, &[rule(&["get"], &[""], &["pods"])]).is_empty());
        assert!(uncovered(&owner, &[rule(&["list"], &[""], &["services/status"])]).is_empty());
        let named = PolicyRule {
            resource_names: s(&["x"]),
            ..rule(&["get"], &[""], &["pods"])
        };
        assert!(uncovered(&owner, std::slice::from_ref(&named)).is_empty());
        // A named rule does not cover the unnamed one.
        assert_eq!(
            uncovered(&[named], &[rule(&["get"], &[""], &["pods"])]).len(),
            1
        );
        let missing = uncovered(
            &owner,
            &[rule(&["get", "delete"], &["", "apps"], &["pods"])],
        );
        assert_eq!(missing.len(), 3, "{missing:?}");
        let u = PolicyRule {
            verbs: s(&["get"]),
            non_resource_urls: s(&["/apis/apps", "/healthz"]),
            ..Default::default()
        };
        assert_eq!(
            uncovered(&owner, &[u]),
            vec![PolicyRule {
                verbs: s(&["get"]),
                non_resource_urls: s(&["/healthz"]),
                ..Default::default()
            }]
        );
    }

    #[test]
    fn wording() {
        let user = UserInfo::new("x", s(&["g1", "system:authenticated"]));
        let missing = uncovered(&[], &[rule(&["get", "list"], &[""], &["pods"])]);
        assert_eq!(
            escalation_message(&user, &missing),
            "user \"x\" (groups=[\"g1\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}"
        );
    }

    #[test]
    fn subjects() {
        let u = UserInfo::new("system:serviceaccount:ns:sa", s(&["devs"]));
        let sub = |kind: &str, name: &str, ns: &str| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.into(),
            ..Default::default()
        };
        assert!(sub("Group", "devs", "").applies_to(&u, ""));
        assert!(sub("ServiceAccount", "sa", "ns").applies_to(&u, ""));
        assert!(sub("ServiceAccount", "sa", "").applies_to(&u, "ns"));
        assert!(!sub("ServiceAccount", "sa", "other").applies_to(&u, "ns"));
        assert!(!sub("User", "devs", "").applies_to(&u, ""));
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![Just("*".to_string()), "[ab]{1,2}".prop_map(String::from)]
    }

    fn arb_rule() -> impl Strategy<Value = PolicyRule> {
        let list = || proptest::collection::vec(word(), 0..3);
        let resources = proptest::collection::vec(
            prop_oneof![
                word(),
                ("[ab*]", "[st]").prop_map(|(r, sub)| format!("{r}/{sub}"))
            ],
            0..3,
        );
        let urls = proptest::collection::vec(
            prop_oneof![
                Just("*".to_string()),
                "/[ab]{0,2}\\*?".prop_map(String::from)
            ],
            0..2,
        );
        let names = proptest::collection::vec("[ab]".prop_map(String::from), 0..2);
        // Valid rules only (as validation admits them): resource rules, or
        // non-resource rules without groups, resources or names.
        (list(), list(), resources, names, urls, any::<bool>()).prop_map(
            |(v, g, r, n, u, url_rule)| {
                if url_rule {
                    PolicyRule {
                        verbs: v,
                        non_resource_urls: u,
                        ..Default::default()
                    }
                } else {
                    PolicyRule {
                        verbs: v,
                        api_groups: g,
                        resources: r,
                        resource_names: n,
                        ..Default::default()
                    }
                }
            },
        )
    }

    fn arb_request() -> impl Strategy<Value = RequestInfo> {
        (
            any::<bool>(),
            "[ab]{1,2}",
            "[ab]{0,1}",
            "[ab]{1,2}",
            "(|s|t)",
            "[ab]{0,1}",
            "/[ab]{0,3}",
        )
            .prop_map(
                |(res, verb, group, resource, sub, name, path)| RequestInfo {
                    resource_request: res,
                    verb,
                    api_group: group,
                    resource,
                    subresource: sub,
                    name,
                    path,
                    ..Default::default()
                },
            )
    }

    proptest! {
        /// A rule allows exactly what its simple parts allow.
        #[test]
        fn breakdown_preserves_meaning(r in arb_rule(), q in arb_request()) {
            let parts = breakdown(&r);
            prop_assert_eq!(rule_allows(&r, &q), parts.iter().any(|p| rule_allows(p, &q)));
        }

        /// Coverage is sound: whatever the requested rules allow, the
        /// owner's rules allow too.
        #[test]
        fn covered_rules_allow_nothing_more(owner in proptest::collection::vec(arb_rule(), 0..3), sub in arb_rule(), q in arb_request()) {
            if uncovered(&owner, std::slice::from_ref(&sub)).is_empty() && rule_allows(&sub, &q) {
                prop_assert!(owner.iter().any(|o| rule_allows(o, &q)));
            }
        }

        /// Every rule covers itself, and the missing parts are exactly what
        /// an empty owner lacks.
        #[test]
        fn self_coverage(r in arb_rule()) {
            prop_assert!(uncovered(std::slice::from_ref(&r), std::slice::from_ref(&r)).is_empty());
            let mut all = breakdown(&r);
            all.dedup();
            let missing = uncovered(&[], std::slice::from_ref(&r));
            prop_assert!(missing.iter().all(|m| all.contains(m)));
            prop_assert_eq!(missing.is_empty(), all.is_empty());
        }
    }
}
