//! RBAC through the secure port's filter chain, on real etcd: allow/deny
//! matrices for Role and ClusterRole via RoleBinding and
//! ClusterRoleBinding, resourceNames, subresources, wildcards and
//! non-resource URLs; aggregation; the escalation checks with kube's
//! messages; bindings taking effect and being revoked; and the access
//! reviews. Users come from a test header (`X-Test-User: name[,group...]`).
//!
//! The authorizer follows the store's watch, so a new or removed binding
//! is seen after the watch delivers it: tests poll (within `DEADLINE`) for
//! the first answer that reflects a change, then assert exact answers.

use crate::common::{Api, Resp, DEADLINE};
use apimachinery::auth::UserInfo;
use apiserver::auth::{Authentication, Authenticator};
use async_trait::async_trait;
use axum::http::request::Parts;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct HeaderUser;

#[async_trait]
impl Authenticator for HeaderUser {
    async fn authenticate(&self, request: &Parts) -> Authentication {
        let Some(v) = request
            .headers
            .get("x-test-user")
            .and_then(|v| v.to_str().ok())
        else {
            return Authentication::NoCredentials;
        };
        let mut parts = v.split(',').map(str::to_string);
        let name = parts.next().unwrap_or_default();
        Authentication::User(UserInfo::new(name, parts.collect()))
    }
}

const ADMIN: &str = "root,system:masters";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
const AUTHZ: &str = "/apis/authorization.k8s.io/v1";

async fn api(name: &str) -> Api {
    Api::secure_rbac(name, Arc::new(HeaderUser)).await
}

async fn call(api: &Api, user: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let mut headers = vec![("x-test-user", user)];
    let bytes = match body {
        Some(b) => {
            headers.push(("content-type", "application/json"));
            serde_json::to_vec(b).unwrap()
        }
        None => Vec::new(),
    };
    api.call(method, path, &headers, bytes).await
}

/// As an admin: POST that must answer 201.
async fn admin_create(api: &Api, collection: &str, body: Value) -> Value {
    let r = call(api, ADMIN, "POST", collection, Some(&body)).await;
    assert_eq!(r.code, 201, "create at {collection}: {}", r.body);
    r.body
}

async fn admin_delete(api: &Api, path: &str) {
    let r = call(api, ADMIN, "DELETE", path, None).await;
    assert_eq!(r.code, 200, "delete {path}: {}", r.body);
}

/// Polls until `user`'s request answers `code`; returns how long it took.
async fn eventually(
    api: &Api,
    user: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    code: u16,
) -> Duration {
    let start = Instant::now();
    loop {
        let r = call(api, user, method, path, body).await;
        if r.code.as_u16() == code {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{user} {method} {path}: still {} after {DEADLINE:?}: {}",
            r.code,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls until `user`'s request gets an answer `check` accepts.
async fn eventually_matching(
    api: &Api,
    user: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    check: impl Fn(&Resp) -> bool,
) -> Resp {
    let start = Instant::now();
    loop {
        let r = call(api, user, method, path, body).await;
        if check(&r) {
            return r;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{user} {method} {path}: still {} after {DEADLINE:?}: {}",
            r.code,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn role(ns: Option<&str>, name: &str, rules: Value) -> Value {
    let mut meta = json!({"name": name});
    let kind = match ns {
        Some(ns) => {
            meta["namespace"] = json!(ns);
            "Role"
        }
        None => "ClusterRole",
    };
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules})
}

fn binding(ns: Option<&str>, name: &str, role_kind: &str, role: &str, subjects: Value) -> Value {
    let mut meta = json!({"name": name});
    let kind = match ns {
        Some(ns) => {
            meta["namespace"] = json!(ns);
            "RoleBinding"
        }
        None => "ClusterRoleBinding",
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    })
}

fn user(name: &str) -> Value {
    json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}])
}

fn roles(ns: &str) -> String {
    format!("{RBAC}/namespaces/{ns}/roles")
}

fn rolebindings(ns: &str) -> String {
    format!("{RBAC}/namespaces/{ns}/rolebindings")
}

fn pods(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods")
}

fn cms(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps")
}

#[tokio::test]
async fn role_and_cluster_role_via_both_binding_kinds() {
    let api = api("rbac-matrix").await;
    let read = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
    admin_create(
        &api,
        &roles("default"),
        role(Some("default"), "pod-reader", read),
    )
    .await;
    let cm_read = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]);
    admin_create(
        &api,
        &format!("{RBAC}/clusterroles"),
        role(None, "cm-reader", cm_read),
    )
    .await;
    // Role via RoleBinding: alice may list pods in default only.
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "alice-pods",
            "Role",
            "pod-reader",
            user("alice"),
        ),
    )
    .await;
    // ClusterRole via RoleBinding: bob may list configmaps in default only.
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "bob-cms",
            "ClusterRole",
            "cm-reader",
            user("bob"),
        ),
    )
    .await;
    // ClusterRole via ClusterRoleBinding to a group: everywhere.
    admin_create(
        &api,
        &format!("{RBAC}/clusterrolebindings"),
        binding(
            None,
            "readers-cms",
            "ClusterRole",
            "cm-reader",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "readers"}]),
        ),
    )
    .await;
    eventually(&api, "alice", "GET", &pods("default"), None, 200).await;
    eventually(&api, "bob", "GET", &cms("default"), None, 200).await;
    eventually(
        &api,
        "carol,readers",
        "GET",
        "/api/v1/configmaps",
        None,
        200,
    )
    .await;

    let cases: &[(&str, String, u16)] = &[
        ("alice", pods("default"), 200),
        ("alice", format!("{}/nope", pods("default")), 404),
        ("alice", pods("kube-system"), 403),
        ("alice", "/api/v1/pods".into(), 403),
        ("alice", cms("default"), 403),
        ("bob", cms("default"), 200),
        ("bob", cms("kube-system"), 403),
        ("bob", "/api/v1/configmaps".into(), 403),
        ("bob", pods("default"), 403),
        ("carol,readers", cms("kube-system"), 200),
        ("carol,readers", "/api/v1/configmaps".into(), 200),
        ("carol,readers", pods("default"), 403),
        ("carol", cms("default"), 403),
        // The role is namespaced: a RoleBinding elsewhere cannot name it.
        ("nobody", pods("default"), 403),
    ];
    for (who, path, code) in cases {
        let r = call(&api, who, "GET", path, None).await;
        assert_eq!(r.code.as_u16(), *code, "{who} GET {path}: {}", r.body);
    }
    let r = call(&api, "alice", "GET", &pods("kube-system"), None).await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\""
        )
    );
    // Writes are not reads.
    let r = call(
        &api,
        "alice",
        "DELETE",
        &format!("{}/p", pods("default")),
        None,
    )
    .await;
    assert_eq!(r.code, 403);
    // A binding to a missing role says so in the reason.
    admin_create(
        &api,
        &rolebindings("default"),
        binding(Some("default"), "dan-ghost", "Role", "ghost", user("dan")),
    )
    .await;
    let want = "pods is forbidden: User \"dan\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\": RBAC: role.rbac.authorization.k8s.io \"ghost\" not found";
    let start = Instant::now();
    loop {
        let r = call(&api, "dan", "GET", &pods("default"), None).await;
        if r.status().2 == want {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "{}", r.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn resource_names_subresources_wildcards_and_urls() {
    let api = api("rbac-rules").await;
    admin_create(
        &api,
        &cms("default"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
    )
    .await;
    admin_create(
        &api,
        &cms("default"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
    )
    .await;
    admin_create(&api, &pods("default"), crate::common::pod("p", None)).await;
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["/metrics", "/livez/*"], "verbs": ["get"]},
    ]);
    admin_create(
        &api,
        &format!("{RBAC}/clusterroles"),
        role(None, "mixed", rules),
    )
    .await;
    admin_create(
        &api,
        &format!("{RBAC}/clusterrolebindings"),
        binding(None, "erin-mixed", "ClusterRole", "mixed", user("erin")),
    )
    .await;
    eventually(&api, "erin", "GET", "/metrics", None, 200).await;
    let cases: &[(&str, &str, u16)] = &[
        ("GET", "/api/v1/namespaces/default/configmaps/a", 200),
        ("GET", "/api/v1/namespaces/default/configmaps/b", 403),
        // A list names no object: resourceNames never allow it...
        ("GET", "/api/v1/namespaces/default/configmaps", 403),
        // ...unless a field selector pins the name.
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Da",
            200,
        ),
        ("DELETE", "/api/v1/namespaces/default/configmaps/a", 403),
        ("GET", "/api/v1/namespaces/default/pods/p/status", 200),
        ("GET", "/api/v1/namespaces/default/pods/p", 403),
        ("GET", "/apis/apps/v1/namespaces/default/deployments", 200),
        ("GET", "/apis/apps/v1/statefulsets", 200),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/default/deployments/x",
            404,
        ),
        ("GET", "/apis/batch/v1/namespaces/default/jobs", 403),
        ("GET", "/metrics", 200),
        ("GET", "/livez/ping", 200),
        ("GET", "/readyz/ping", 403),
        // Discovery and health come with system:authenticated.
        ("GET", "/apis", 200),
        ("GET", "/version", 200),
    ];
    for (method, path, code) in cases {
        let r = call(&api, "erin", method, path, None).await;
        assert_eq!(r.code.as_u16(), *code, "erin {method} {path}: {}", r.body);
    }
    let r = call(&api, "erin", "GET", "/readyz/ping", None).await;
    assert_eq!(
        r.status().2,
        "forbidden: User \"erin\" cannot get path \"/readyz/ping\""
    );
    // Without any binding only the defaults apply.
    for (path, code) in [("/metrics", 403), ("/version", 200), ("/openapi/v2", 200)] {
        let r = call(&api, "frank", "GET", path, None).await;
        assert_eq!(r.code.as_u16(), code, "frank GET {path}");
    }
}

#[tokio::test]
async fn bindings_take_effect_and_are_revoked() {
    let api = api("rbac-revoke").await;
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]);
    admin_create(&api, &roles("default"), role(Some("default"), "cms", rules)).await;
    let r = call(&api, "gina", "GET", &cms("default"), None).await;
    assert_eq!(r.code, 403);
    admin_create(
        &api,
        &rolebindings("default"),
        binding(Some("default"), "gina", "Role", "cms", user("gina")),
    )
    .await;
    let granted = eventually(&api, "gina", "GET", &cms("default"), None, 200).await;
    admin_delete(&api, &format!("{}/gina", rolebindings("default"))).await;
    let revoked = eventually(&api, "gina", "GET", &cms("default"), None, 403).await;
    // Changing the role's rules changes what its bindings allow.
    admin_create(
        &api,
        &rolebindings("default"),
        binding(Some("default"), "gina2", "Role", "cms", user("gina")),
    )
    .await;
    eventually(&api, "gina", "GET", &cms("default"), None, 200).await;
    let mut current = call(
        &api,
        ADMIN,
        "GET",
        &format!("{}/cms", roles("default")),
        None,
    )
    .await
    .body;
    current["rules"] = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]);
    let r = call(
        &api,
        ADMIN,
        "PUT",
        &format!("{}/cms", roles("default")),
        Some(&current),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    eventually(&api, "gina", "GET", &cms("default"), None, 403).await;
    eventually(
        &api,
        "gina",
        "GET",
        "/api/v1/namespaces/default/secrets",
        None,
        200,
    )
    .await;
    // Deleting the role revokes too.
    admin_delete(&api, &format!("{}/cms", roles("default"))).await;
    eventually(
        &api,
        "gina",
        "GET",
        "/api/v1/namespaces/default/secrets",
        None,
        403,
    )
    .await;
    eprintln!("binding took effect after {granted:?}, revoked after {revoked:?}");
}

#[tokio::test]
async fn aggregation_follows_labelled_cluster_roles() {
    let api = api("rbac-agg").await;
    // The bootstrap's aggregated roles get their rules.
    let start = Instant::now();
    loop {
        let view = call(
            &api,
            ADMIN,
            "GET",
            &format!("{RBAC}/clusterroles/view"),
            None,
        )
        .await
        .body;
        let has_pods = view["rules"].as_array().is_some_and(|rules| {
            rules.iter().any(|r| {
                r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.contains(&json!("pods")))
            })
        });
        if has_pods {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "view never aggregated: {view}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "hank-view",
            "ClusterRole",
            "view",
            user("hank"),
        ),
    )
    .await;
    eventually(&api, "hank", "GET", &pods("default"), None, 200).await;
    let secrets = "/api/v1/namespaces/default/secrets";
    assert_eq!(
        call(&api, "hank", "GET", secrets, None).await.code,
        403,
        "view excludes secrets"
    );
    let r = call(
        &api,
        "hank",
        "DELETE",
        &format!("{}/x", pods("default")),
        None,
    )
    .await;
    assert_eq!(r.code, 403, "view is read-only");

    let extra = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]);
    let mut agg = role(None, "secrets-to-view", extra.clone());
    agg["metadata"]["labels"] = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
    admin_create(&api, &format!("{RBAC}/clusterroles"), agg).await;
    eventually(&api, "hank", "GET", secrets, None, 200).await;
    // view feeds edit and edit feeds admin.
    for name in ["view", "edit", "admin"] {
        let start = Instant::now();
        loop {
            let body = call(
                &api,
                ADMIN,
                "GET",
                &format!("{RBAC}/clusterroles/{name}"),
                None,
            )
            .await
            .body;
            if body["rules"]
                .as_array()
                .is_some_and(|r| r.contains(&extra[0]))
            {
                break;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{name} never gained the rule: {body}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    admin_delete(&api, &format!("{RBAC}/clusterroles/secrets-to-view")).await;
    eventually(&api, "hank", "GET", secrets, None, 403).await;
    // Only cluster admins may write an aggregationRule.
    let grant = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}]);
    admin_create(
        &api,
        &format!("{RBAC}/clusterroles"),
        role(None, "cr-writer", grant),
    )
    .await;
    admin_create(
        &api,
        &format!("{RBAC}/clusterrolebindings"),
        binding(None, "ivan-cr", "ClusterRole", "cr-writer", user("ivan")),
    )
    .await;
    let mut sneaky = role(None, "sneaky", json!([]));
    sneaky["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]});
    let r = eventually_matching(
        &api,
        "ivan",
        "POST",
        &format!("{RBAC}/clusterroles"),
        Some(&sneaky),
        |r| r.status().2.contains("aggregationRule"),
    )
    .await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "clusterroles.rbac.authorization.k8s.io \"sneaky\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        )
    );
}

#[tokio::test]
async fn escalation_is_refused_unless_held_or_escalate_or_bind() {
    let api = api("rbac-escalate").await;
    let writer = json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    ]);
    admin_create(
        &api,
        &format!("{RBAC}/clusterroles"),
        role(None, "rbac-writer", writer),
    )
    .await;
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "judy-writer",
            "ClusterRole",
            "rbac-writer",
            user("judy"),
        ),
    )
    .await;
    // A role within what judy holds.
    let held = role(
        Some("default"),
        "held",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
    );
    eventually(&api, "judy", "POST", &roles("default"), Some(&held), 201).await;
    // More than she holds.
    let more = role(
        Some("default"),
        "more",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]}]),
    );
    let r = call(&api, "judy", "POST", &roles("default"), Some(&more)).await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "roles.rbac.authorization.k8s.io \"more\" is forbidden: user \"judy\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        )
    );
    assert_eq!(r.body["details"]["name"], "more");
    // Updating a held role into more than she holds is refused too.
    let mut current = call(
        &api,
        "judy",
        "GET",
        &format!("{}/held", roles("default")),
        None,
    )
    .await
    .body;
    current["rules"] = more["rules"].clone();
    let r = call(
        &api,
        "judy",
        "PUT",
        &format!("{}/held", roles("default")),
        Some(&current),
    )
    .await;
    assert_eq!(r.code, 403, "{}", r.body);
    // Any change to a role beyond her is refused (a label can feed an
    // aggregated role); a change that only touches finalizers is not.
    let big = role(
        Some("default"),
        "big",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]),
    );
    admin_create(&api, &roles("default"), big).await;
    let big_path = format!("{}/big", roles("default"));
    let mut current = call(&api, "judy", "GET", &big_path, None).await.body;
    current["metadata"]["labels"] = json!({"x": "y"});
    let r = call(&api, "judy", "PUT", &big_path, Some(&current)).await;
    assert_eq!(r.code, 403, "{}", r.body);
    assert!(r
        .status()
        .2
        .contains("is attempting to grant RBAC permissions not currently held"));
    let mut current = call(&api, "judy", "GET", &big_path, None).await.body;
    current["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let r = call(&api, "judy", "PUT", &big_path, Some(&current)).await;
    assert_eq!(r.code, 200, "{}", r.body);
    // Binding a role she holds: allowed; binding cluster-admin: refused.
    let ok = binding(Some("default"), "held-to-kim", "Role", "held", user("kim"));
    let r = call(&api, "judy", "POST", &rolebindings("default"), Some(&ok)).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let admin = binding(
        Some("default"),
        "judy-admin",
        "ClusterRole",
        "cluster-admin",
        user("judy"),
    );
    let r = call(&api, "judy", "POST", &rolebindings("default"), Some(&admin)).await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "rolebindings.rbac.authorization.k8s.io \"judy-admin\" is forbidden: user \"judy\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"
        )
    );
    // A binding to a role that does not exist.
    let ghost = binding(Some("default"), "ghost", "Role", "ghost", user("kim"));
    let r = call(&api, "judy", "POST", &rolebindings("default"), Some(&ghost)).await;
    assert_eq!(
        r.status().2,
        "rolebindings.rbac.authorization.k8s.io \"ghost\" is forbidden: role.rbac.authorization.k8s.io \"ghost\" not found"
    );

    // `escalate` on roles lets her write any role...
    let esc = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}]);
    admin_create(
        &api,
        &format!("{RBAC}/clusterroles"),
        role(None, "escalator", esc),
    )
    .await;
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "judy-esc",
            "ClusterRole",
            "escalator",
            user("judy"),
        ),
    )
    .await;
    eventually(&api, "judy", "POST", &roles("default"), Some(&more), 201).await;
    // ...but not bind what she does not hold.
    let r = call(&api, "judy", "POST", &rolebindings("default"), Some(&admin)).await;
    assert_eq!(r.code, 403);
    // `bind` on that one ClusterRole lets her bind it.
    let bind = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["cluster-admin"], "verbs": ["bind"]}]);
    admin_create(
        &api,
        &format!("{RBAC}/clusterroles"),
        role(None, "binder", bind),
    )
    .await;
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "judy-bind",
            "ClusterRole",
            "binder",
            user("judy"),
        ),
    )
    .await;
    let may_bind = ssar(
        json!({"namespace": "default", "verb": "bind", "group": "rbac.authorization.k8s.io",
                               "resource": "clusterroles", "name": "cluster-admin"}),
    );
    eventually_matching(
        &api,
        "judy",
        "POST",
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        Some(&may_bind),
        |r| r.body["status"]["allowed"] == true,
    )
    .await;
    // `bind` is per role name: another ClusterRole is still refused...
    let edit = binding(
        Some("default"),
        "judy-edit",
        "ClusterRole",
        "edit",
        user("judy"),
    );
    let r = call(&api, "judy", "POST", &rolebindings("default"), Some(&edit)).await;
    assert_eq!(r.code, 403, "{}", r.body);
    assert!(r
        .status()
        .2
        .contains("is attempting to grant RBAC permissions not currently held"));
    // ...and the named one is allowed.
    let r = call(&api, "judy", "POST", &rolebindings("default"), Some(&admin)).await;
    assert_eq!(r.code, 201, "{}", r.body);
}

fn ssar(resource_attributes: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
           "spec": {"resourceAttributes": resource_attributes}})
}

#[tokio::test]
async fn access_reviews() {
    let api = api("rbac-reviews").await;
    let r = call(
        &api,
        ADMIN,
        "GET",
        "/readyz/poststarthook/rbac/bootstrap-roles",
        None,
    )
    .await;
    assert_eq!((r.code.as_u16(), r.text().as_str()), (200, "ok"));
    let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]);
    admin_create(
        &api,
        &roles("default"),
        role(Some("default"), "pod-lister", rules),
    )
    .await;
    let list_pods = ssar(json!({"namespace": "default", "verb": "list", "resource": "pods"}));
    let r = call(
        &api,
        "lena",
        "POST",
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        Some(&list_pods),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["kind"], "SelfSubjectAccessReview");
    assert_eq!(r.body["status"], json!({"allowed": false}));
    admin_create(
        &api,
        &rolebindings("default"),
        binding(
            Some("default"),
            "lena-pods",
            "Role",
            "pod-lister",
            user("lena"),
        ),
    )
    .await;
    eventually(&api, "lena", "GET", &pods("default"), None, 200).await;
    let r = call(
        &api,
        "lena",
        "POST",
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        Some(&list_pods),
    )
    .await;
    assert_eq!(
        r.body["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"default/lena-pods\" of Role \"pod-lister\" to User \"lena\""})
    );
    // Non-resource attributes.
    let url = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                     "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}});
    let r = call(
        &api,
        "lena",
        "POST",
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        Some(&url),
    )
    .await;
    assert_eq!(r.body["status"]["allowed"], false);
    let r = call(
        &api,
        ADMIN,
        "POST",
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        Some(&url),
    )
    .await;
    assert_eq!(r.body["status"]["allowed"], true);

    // SubjectAccessReview: about another user; creating one is an admin's.
    let sar = |user: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}})
    };
    let r = call(
        &api,
        ADMIN,
        "POST",
        &format!("{AUTHZ}/subjectaccessreviews"),
        Some(&sar("lena")),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["status"]["allowed"], true);
    let r = call(
        &api,
        ADMIN,
        "POST",
        &format!("{AUTHZ}/subjectaccessreviews"),
        Some(&sar("mo")),
    )
    .await;
    assert_eq!(r.body["status"], json!({"allowed": false}));
    let r = call(
        &api,
        "lena",
        "POST",
        &format!("{AUTHZ}/subjectaccessreviews"),
        Some(&sar("mo")),
    )
    .await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"lena\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        )
    );
    let r = call(
        &api,
        ADMIN,
        "POST",
        &format!("{AUTHZ}/subjectaccessreviews"),
        Some(&sar("")),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.user");

    // LocalSubjectAccessReview: the namespace must be the path's.
    let local = |ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
               "spec": {"user": "lena", "resourceAttributes": {"namespace": ns, "verb": "list", "resource": "pods"}}})
    };
    let path = format!("{AUTHZ}/namespaces/default/localsubjectaccessreviews");
    let r = call(&api, ADMIN, "POST", &path, Some(&local("default"))).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["status"]["allowed"], true);
    assert_eq!(r.body["metadata"]["namespace"], "default");
    let r = call(&api, ADMIN, "POST", &path, Some(&local("kube-system"))).await;
    assert_eq!(
        r.status(),
        (
            422,
            "Invalid",
            "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"kube-system\": must match metadata.namespace"
        )
    );

    // SelfSubjectRulesReview.
    let srr = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let r = call(
        &api,
        "lena",
        "POST",
        &format!("{AUTHZ}/selfsubjectrulesreviews"),
        Some(&srr),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let status = &r.body["status"];
    assert_eq!(status["incomplete"], false);
    let resource_rules = status["resourceRules"].as_array().unwrap();
    assert!(
        resource_rules
            .contains(&json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]})),
        "{status}"
    );
    assert!(resource_rules.contains(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})), "{status}");
    assert!(status["nonResourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["nonResourceURLs"]
            .as_array()
            .unwrap()
            .contains(&json!("/api/*"))));

    // SelfSubjectReview.
    let ssr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let r = call(
        &api,
        "lena,devs",
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(&ssr),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        r.body["status"],
        json!({"userInfo": {"username": "lena", "groups": ["devs", "system:authenticated"]}})
    );

    // Virtual kinds are create-only, in discovery as in the API.
    let r = call(
        &api,
        ADMIN,
        "GET",
        &format!("{AUTHZ}/selfsubjectaccessreviews"),
        None,
    )
    .await;
    assert_eq!(r.code, 405, "{}", r.body);
    let doc = call(&api, ADMIN, "GET", AUTHZ, None).await.body;
    for entry in doc["resources"].as_array().unwrap() {
        assert_eq!(entry["verbs"], json!(["create"]), "{entry}");
    }
    let names: Vec<&str> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews"
        ]
    );
}

/// Two replicas on one prefix both run the aggregation (compare-and-swap,
/// no leader): they converge on the same rules and both authorize by them.
#[tokio::test]
async fn two_replicas_aggregate_to_the_same_rules() {
    use watchcache::{Cacher, CacherConfig, Storage};
    let a = api("rbac-replicas").await;
    let store = watchcache::testing::TestEtcd::shared().await.store().await;
    let cache = Cacher::new(
        store,
        CacherConfig {
            prefix: format!("{}/", a.state.prefix),
            ..CacherConfig::default()
        },
    );
    let b_store: Arc<dyn Storage> = Arc::new(cache);
    let (_, b) = apiserver::authorizer(&["RBAC".to_string()], b_store, &a.state.prefix);
    let b = b.expect("RBAC index");
    tokio::time::timeout(DEADLINE, b.wait_synced())
        .await
        .expect("replica b synced");

    admin_create(
        &a,
        &rolebindings("default"),
        binding(
            Some("default"),
            "olga-view",
            "ClusterRole",
            "view",
            user("olga"),
        ),
    )
    .await;
    let extra =
        json!([{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}]);
    let mut agg = role(None, "widgets-to-view", extra.clone());
    agg["metadata"]["labels"] = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
    admin_create(&a, &format!("{RBAC}/clusterroles"), agg).await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let olga = UserInfo::new("olga", vec!["system:authenticated".into()]);
    let request = apimachinery::auth::request_info("GET", widgets, None).unwrap();
    let start = Instant::now();
    loop {
        let on_a = a.state.rbac.as_ref().unwrap().decide(&olga, &request).0;
        let on_b = b.decide(&olga, &request).0;
        if on_a == apiserver::auth::Decision::Allow && on_b == apiserver::auth::Decision::Allow {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "a: {on_a:?}, b: {on_b:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let view = call(&a, ADMIN, "GET", &format!("{RBAC}/clusterroles/view"), None)
        .await
        .body;
    let rules = view["rules"].as_array().unwrap();
    assert_eq!(
        rules.iter().filter(|r| **r == extra[0]).count(),
        1,
        "{view}"
    );
}

/// TokenReview is a virtual kind like the access reviews: listed in
/// discovery with verb `create` only, an empty token is kube's 400, and a
/// token no authenticator accepts is answered (201) as not authenticated.
#[tokio::test]
async fn token_reviews() {
    let api = api("rbac-token-reviews").await;
    let r = call(&api, ADMIN, "GET", "/apis/authentication.k8s.io/v1", None).await;
    let tokenreviews = r.body["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == "tokenreviews"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(tokenreviews["verbs"], json!(["create"]), "{}", r.body);
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let review = |token: &str| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let r = call(&api, ADMIN, "POST", path, Some(&review(""))).await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "token is required for TokenReview in authentication"
        )
    );
    let r = call(&api, ADMIN, "POST", path, Some(&review("not-a-token"))).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["status"]["authenticated"], Value::Null);
    assert_eq!(r.body["status"]["error"], "invalid bearer token");
    let r = call(&api, ADMIN, "GET", path, None).await;
    assert_eq!(r.code, 405);
}
