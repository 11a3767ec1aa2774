//! The default roles and bindings every cluster starts with, after kube's
//! bootstrap policy (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`):
//! the user-facing roles (cluster-admin; admin, edit and view built by
//! aggregation from the `system:aggregate-to-*` roles, with edit feeding
//! admin and view feeding edit through their labels) and the discovery
//! roles, with their bindings. Written as a compact table here; `bootstrap`
//! creates what is missing at start.

use apimachinery::rbac::PolicyRule;
use serde_json::{json, Value};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

const AGG_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const AGG_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGG_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: vec![group.to_string()],
        resources: strings(resources),
        ..Default::default()
    }
}

fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: strings(urls),
        ..Default::default()
    }
}

/// Everything: `*` on every resource of every group, and every URL.
pub fn full_authority() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            verbs: strings(&["*"]),
            api_groups: strings(&["*"]),
            resources: strings(&["*"]),
            ..Default::default()
        },
        urls(&["*"], &["*"]),
    ]
}

fn view_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            "",
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
            ],
        ),
        rule(
            READ,
            "",
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
        ),
        rule(READ, "", &["namespaces"]),
        rule(READ, "discovery.k8s.io", &["endpointslices"]),
        rule(
            READ,
            "apps",
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
        ),
        rule(
            READ,
            "autoscaling",
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            "batch",
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        ),
        rule(
            READ,
            "extensions",
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
            ],
        ),
        rule(
            READ,
            "policy",
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            "networking.k8s.io",
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
    ]
}

fn edit_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], "", &["serviceaccounts"]),
        rule(
            WRITE,
            "",
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
            ],
        ),
        rule(&["create"], "", &["pods/eviction"]),
        rule(
            WRITE,
            "",
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
        ),
        rule(&["create"], "", &["serviceaccounts/token"]),
        rule(
            WRITE,
            "apps",
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
        ),
        rule(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
        rule(WRITE, "batch", &["cronjobs", "jobs"]),
        rule(
            WRITE,
            "extensions",
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "ingresses",
                "networkpolicies",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
            ],
        ),
        rule(WRITE, "policy", &["poddisruptionbudgets"]),
        rule(
            WRITE,
            "networking.k8s.io",
            &["ingresses", "networkpolicies"],
        ),
        rule(READ_WRITE, "coordination.k8s.io", &["leases"]),
    ]
}

fn admin_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["create"],
            "authorization.k8s.io",
            &["localsubjectaccessreviews"],
        ),
        rule(
            READ_WRITE,
            "rbac.authorization.k8s.io",
            &["rolebindings", "roles"],
        ),
    ]
}

/// `(name, labels, rules, aggregation selector label)`.
type RoleRow = (
    &'static str,
    &'static [(&'static str, &'static str)],
    Vec<PolicyRule>,
    Option<&'static str>,
);

fn role_rows() -> Vec<RoleRow> {
    vec![
        ("cluster-admin", &[], full_authority(), None),
        (
            "system:discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
            None,
        ),
        (
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    "authentication.k8s.io",
                    &["selfsubjectreviews"],
                ),
            ],
            None,
        ),
        (
            // What Prometheus and health checkers need (kube binds it to
            // the system:monitoring group).
            "system:monitoring",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
            None,
        ),
        (
            "system:public-info-viewer",
            &[],
            vec![urls(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
            None,
        ),
        ("admin", &[], vec![], Some(AGG_ADMIN)),
        ("edit", &[(AGG_ADMIN, "true")], vec![], Some(AGG_EDIT)),
        ("view", &[(AGG_EDIT, "true")], vec![], Some(AGG_VIEW)),
        (
            "system:aggregate-to-admin",
            &[(AGG_ADMIN, "true")],
            admin_rules(),
            None,
        ),
        (
            "system:aggregate-to-edit",
            &[(AGG_EDIT, "true")],
            edit_rules(),
            None,
        ),
        (
            "system:aggregate-to-view",
            &[(AGG_VIEW, "true")],
            view_rules(),
            None,
        ),
    ]
}

fn default_metadata(name: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    for (k, v) in extra_labels {
        labels.insert((*k).into(), json!(v));
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

/// The default ClusterRoles, as objects to create.
pub fn cluster_roles() -> Vec<Value> {
    role_rows()
        .into_iter()
        .map(|(name, labels, rules, aggregate)| {
            let mut obj = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": default_metadata(name, labels),
            });
            // Aggregated roles start empty; the aggregation fills them.
            obj["rules"] = serde_json::to_value(rules).unwrap_or_default();
            if let Some(label) = aggregate {
                obj["aggregationRule"] =
                    json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
            }
            obj
        })
        .collect()
}

/// The default ClusterRoleBindings (each binds the ClusterRole of its name).
pub fn cluster_role_bindings() -> Vec<Value> {
    let rows: &[(&str, &[&str])] = &[
        ("cluster-admin", &["system:masters"]),
        ("system:discovery", &["system:authenticated"]),
        ("system:basic-user", &["system:authenticated"]),
        ("system:monitoring", &["system:monitoring"]),
        (
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ];
    rows.iter()
        .map(|(name, groups)| {
            let subjects: Vec<Value> = groups
                .iter()
                .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
                .collect();
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": default_metadata(name, &[]),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_names_a_default_role() {
        let roles: Vec<String> = cluster_roles()
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for b in cluster_role_bindings() {
            let name = b["roleRef"]["name"].as_str().unwrap();
            assert!(roles.iter().any(|r| r == name), "{name}");
        }
    }

    #[test]
    fn view_is_read_only() {
        for r in view_rules() {
            assert!(r.verbs.iter().all(|v| READ.contains(&v.as_str())), "{r:?}");
        }
    }
}
