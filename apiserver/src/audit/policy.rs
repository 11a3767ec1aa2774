//! The audit policy (`--audit-policy-file`): kube-apiserver's
//! `audit.k8s.io/v1` `Policy`. Rules are tried in order; the first that
//! matches decides the level and the stages left out; no match is level
//! `None`. Matching follows kube's policy checker:
//!
//! - `users`, `userGroups`, `verbs`: when given, the user name, one of the
//!   user's groups, the verb must be listed;
//! - `resources` / `namespaces`: only resource requests match; `namespaces`
//!   lists namespaces (`""` for cluster-scoped); each `resources[]` entry
//!   names a `group` and optional `resources` (`pods`, `pods/log`, `*`,
//!   `*/status`, `pods/*`) and `resourceNames`;
//! - `nonResourceURLs`: only non-resource requests match, a path exactly or
//!   by a prefix ending in `*`.

use apimachinery::auth::{RequestInfo, UserInfo};
use serde::Deserialize;

/// How much of a request is recorded, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// The points in a request's life an event is written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FilePolicy {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: bool,
}

/// One rule of the policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    pub level: Level,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupResources {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// A parsed, validated policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Vec<Stage>,
    omit_managed_fields: bool,
}

/// What the policy decides for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

impl Decision {
    pub fn records(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages.contains(&stage)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("audit policy: {0}")]
pub struct PolicyError(pub String);

impl Policy {
    pub fn load(path: &std::path::Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PolicyError(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text)
    }

    /// Parses a policy (YAML or JSON).
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let file: FilePolicy =
            serde_yaml_ng::from_str(text).map_err(|e| PolicyError(format!("cannot parse: {e}")))?;
        match file.api_version.as_deref() {
            Some("audit.k8s.io/v1") => {}
            other => {
                return Err(PolicyError(format!(
                    "apiVersion must be \"audit.k8s.io/v1\", got {:?}",
                    other.unwrap_or("")
                )))
            }
        }
        if file.kind.as_deref() != Some("Policy") {
            return Err(PolicyError(format!(
                "kind must be \"Policy\", got {:?}",
                file.kind.unwrap_or_default()
            )));
        }
        for (i, r) in file.rules.iter().enumerate() {
            if !r.non_resource_urls.is_empty()
                && (!r.resources.is_empty() || !r.namespaces.is_empty())
            {
                return Err(PolicyError(format!(
                    "rules[{i}]: rules cannot apply to both regular resources and non-resource URLs"
                )));
            }
            for (j, url) in r.non_resource_urls.iter().enumerate() {
                if url.is_empty() || url.trim_end_matches('*').contains('*') {
                    return Err(PolicyError(format!(
                        "rules[{i}].nonResourceURLs[{j}]: {url:?}: '*' may only end a path"
                    )));
                }
            }
            for (j, g) in r.resources.iter().enumerate() {
                if !g.resource_names.is_empty() && g.resources.is_empty() {
                    return Err(PolicyError(format!(
                        "rules[{i}].resources[{j}].resourceNames: requires resources"
                    )));
                }
            }
        }
        Ok(Policy {
            rules: file.rules,
            omit_stages: file.omit_stages,
            omit_managed_fields: file.omit_managed_fields,
        })
    }

    /// The level of a request by `user` (`None`: authentication failed),
    /// with the stages the policy and the matching rule leave out.
    pub fn evaluate(&self, user: Option<&UserInfo>, info: &RequestInfo) -> Decision {
        for rule in &self.rules {
            if rule_matches(rule, user, info) {
                let mut omit = self.omit_stages.clone();
                omit.extend(rule.omit_stages.iter().copied());
                return Decision {
                    level: rule.level,
                    omit_stages: omit,
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        Decision {
            level: Level::None,
            omit_stages: Vec::new(),
            omit_managed_fields: false,
        }
    }
}

fn listed(list: &[String], s: &str) -> bool {
    list.iter().any(|x| x == s)
}

fn rule_matches(r: &Rule, user: Option<&UserInfo>, info: &RequestInfo) -> bool {
    if !r.users.is_empty() && !user.is_some_and(|u| listed(&r.users, &u.username)) {
        return false;
    }
    if !r.user_groups.is_empty()
        && !user.is_some_and(|u| u.groups.iter().any(|g| listed(&r.user_groups, g)))
    {
        return false;
    }
    if !r.verbs.is_empty() && !listed(&r.verbs, &info.verb) {
        return false;
    }
    if !r.namespaces.is_empty() || !r.resources.is_empty() {
        return matches_resource(r, info);
    }
    if !r.non_resource_urls.is_empty() {
        return !info.resource_request
            && r.non_resource_urls
                .iter()
                .any(|spec| path_matches(&info.path, spec));
    }
    true
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

fn matches_resource(r: &Rule, info: &RequestInfo) -> bool {
    if !info.resource_request {
        return false;
    }
    if !r.namespaces.is_empty() && !listed(&r.namespaces, &info.namespace) {
        return false;
    }
    if r.resources.is_empty() {
        return true;
    }
    let combined = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    r.resources.iter().any(|g| {
        if g.group != info.api_group {
            return false;
        }
        if g.resources.is_empty() {
            return true;
        }
        if !g.resource_names.is_empty() && !listed(&g.resource_names, &info.name) {
            return false;
        }
        g.resources.iter().any(|res| {
            res == "*"
                || *res == combined
                || (!info.subresource.is_empty()
                    && res.strip_prefix("*/") == Some(info.subresource.as_str()))
                || res.strip_suffix("/*") == Some(info.resource.as_str())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info(method: &str, path: &str) -> RequestInfo {
        apimachinery::auth::request_info(method, path, None).expect("request info")
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/log", "*/status"]
- level: Request
  userGroups: ["devs"]
  namespaces: ["dev"]
  omitStages: [ResponseStarted]
- level: Metadata
  resources:
  - group: apps
    resources: [deployments]
    resourceNames: [web]
- level: Metadata
  verbs: [delete]
"#;

    #[test]
    fn first_matching_rule_wins() {
        let p = Policy::parse(POLICY).expect("valid");
        let alice = UserInfo::new("alice", vec!["devs".into()]);
        let proxy = UserInfo::new("system:kube-proxy", vec![]);
        let lvl = |u: &UserInfo, m: &str, path: &str| p.evaluate(Some(u), &info(m, path)).level;
        assert_eq!(
            lvl(&proxy, "DELETE", "/api/v1/namespaces/a/pods/x"),
            Level::None
        );
        assert_eq!(lvl(&alice, "GET", "/healthz/etcd"), Level::None);
        assert_eq!(lvl(&alice, "GET", "/version"), Level::None);
        assert_eq!(lvl(&alice, "GET", "/versions"), Level::None);
        assert_eq!(
            lvl(&alice, "GET", "/api/v1/namespaces/a/pods/x/log"),
            Level::RequestResponse
        );
        assert_eq!(
            lvl(&alice, "PUT", "/api/v1/namespaces/a/services/x/status"),
            Level::RequestResponse
        );
        assert_eq!(
            lvl(&alice, "GET", "/api/v1/namespaces/a/pods/x"),
            Level::None
        );
        let d = p.evaluate(Some(&alice), &info("GET", "/api/v1/namespaces/dev/pods/x"));
        assert_eq!(d.level, Level::Request);
        assert_eq!(
            d.omit_stages,
            vec![Stage::RequestReceived, Stage::ResponseStarted]
        );
        assert!(!d.records(Stage::RequestReceived) && d.records(Stage::ResponseComplete));
        let bob = UserInfo::new("bob", vec![]);
        assert_eq!(
            lvl(&bob, "GET", "/apis/apps/v1/namespaces/a/deployments/web"),
            Level::Metadata
        );
        assert_eq!(
            lvl(&bob, "GET", "/apis/apps/v1/namespaces/a/deployments/api"),
            Level::None
        );
        assert_eq!(
            lvl(&bob, "DELETE", "/api/v1/namespaces/a/configmaps/c"),
            Level::Metadata
        );
        // Failed authentication: no user; user rules do not match.
        assert_eq!(
            p.evaluate(None, &info("DELETE", "/api/v1/namespaces/a/pods/x"))
                .level,
            Level::Metadata
        );
    }

    #[test]
    fn subresource_wildcards() {
        let p = Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources:\n  - group: ''\n    resources: ['pods/*']\n",
        )
        .expect("valid");
        let u = UserInfo::new("u", vec![]);
        assert_eq!(
            p.evaluate(Some(&u), &info("GET", "/api/v1/namespaces/a/pods/x/log"))
                .level,
            Level::Metadata
        );
        assert_eq!(
            p.evaluate(
                Some(&u),
                &info("GET", "/api/v1/namespaces/a/services/x/status")
            )
            .level,
            Level::None
        );
    }

    #[test]
    fn invalid_policies_are_refused() {
        for text in [
            "kind: Policy\nrules: []",
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n",
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: ['/a']\n  namespaces: [x]\n",
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: ['/a*b']\n",
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Never]\n",
        ] {
            assert!(Policy::parse(text).is_err(), "{text}");
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(text in "\\PC{0,300}") {
            let _ = Policy::parse(&text);
        }

        #[test]
        fn yamlish_garbage_never_panics(
            lines in proptest::collection::vec(
                prop::sample::select(vec![
                    "apiVersion: audit.k8s.io/v1", "kind: Policy", "rules:", "- level: Metadata",
                    "  users: [a]", "  resources:", "  - group: ''", "    resources: ['*']",
                    "  nonResourceURLs: ['*']", "omitStages: [Panic]", "  - {}", "- level: 3",
                    "  verbs: get", "metadata: {name: x}",
                ]),
                0..12,
            ),
            path in "/[a-z/]{0,30}",
        ) {
            if let Ok(p) = Policy::parse(&lines.join("\n")) {
                let i = apimachinery::auth::request_info("GET", &path, None);
                if let Ok(i) = i {
                    let _ = p.evaluate(None, &i);
                }
            }
        }
    }
}
