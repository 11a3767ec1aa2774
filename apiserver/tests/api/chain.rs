//! The filter chain of the secure port: authentication (401 without or with
//! bad credentials, anonymous when allowed, `system:authenticated` added)
//! and authorization (403 worded as kube-apiserver words it,
//! `system:masters` always allowed). The authenticator here reads a test
//! header; the real ones (certificates, tokens) have their own tests.

use crate::common::Api;
use apimachinery::auth::{RequestInfo, UserInfo};
use apiserver::auth::{Authentication, Authenticator, Authorizer, Decision};
use async_trait::async_trait;
use axum::http::request::Parts;
use std::sync::Arc;

/// `X-Test-User: name[,group...]`; `bad` is an invalid credential.
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
        if v == "bad" {
            return Authentication::Invalid("bad test credential".into());
        }
        let mut parts = v.split(',').map(str::to_string);
        let name = parts.next().unwrap_or_default();
        Authentication::User(UserInfo::new(name, parts.collect()))
    }
}

/// Allows `get` and `list` of configmaps, and only to authenticated users;
/// and `alice` may impersonate the user `carol` and the group `dev`.
struct ReadConfigMaps;

#[async_trait]
impl Authorizer for ReadConfigMaps {
    async fn authorize(&self, user: &UserInfo, r: &RequestInfo) -> Decision {
        let reads = r.resource == "configmaps" && (r.verb == "get" || r.verb == "list");
        let impersonation = user.username == "alice"
            && r.verb == "impersonate"
            && r.api_group.is_empty()
            && ((r.resource == "users" && r.name == "carol")
                || (r.resource == "groups" && r.name == "dev"));
        if impersonation || reads && user.in_group("system:authenticated") {
            Decision::Allow
        } else {
            Decision::NoOpinion(String::new())
        }
    }
}

async fn api_without_anonymous() -> Api {
    api(false).await
}

async fn api(anonymous: bool) -> Api {
    Api::secure(
        "chain",
        Arc::new(HeaderUser),
        Arc::new(ReadConfigMaps),
        anonymous,
    )
    .await
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn no_or_bad_credentials_are_401() {
    let api = api(false).await;
    for headers in [vec![], vec![("x-test-user", "bad")]] {
        let r = api
            .call("GET", CMS, &headers, axum::body::Body::empty())
            .await;
        assert_eq!(
            r.status(),
            (401, "Unauthorized", "Unauthorized"),
            "{}",
            r.text()
        );
        assert_eq!(r.body["kind"], "Status");
    }
}

#[tokio::test]
async fn authenticated_users_are_authorized() {
    let api = api(false).await;
    let r = api
        .call(
            "GET",
            CMS,
            &[("x-test-user", "alice")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.text());
    let r = api
        .call(
            "GET",
            &format!("{CMS}?watch=1"),
            &[("x-test-user", "alice")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "configmaps is forbidden: User \"alice\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    assert_eq!(r.body["details"]["kind"], "configmaps");
    let r = api
        .call(
            "DELETE",
            &format!("{CMS}/x"),
            &[("x-test-user", "alice")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(
        r.status().2,
        "configmaps \"x\" is forbidden: User \"alice\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let r = api
        .call(
            "GET",
            "/metrics",
            &[("x-test-user", "alice")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        )
    );
    // Members of system:masters may do anything.
    let r = api
        .call(
            "GET",
            "/metrics",
            &[("x-test-user", "root,system:masters")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn anonymous_when_enabled() {
    let api = api(true).await;
    // Anonymous requests reach health, version and discovery only.
    let r = api.get(CMS).await;
    assert_eq!(r.status(), (401, "Unauthorized", "Unauthorized"));
    let r = api.get("/metrics").await;
    assert_eq!(r.code, 401);
    for path in [
        "/version",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps/v1",
        "/livez",
        "/readyz/ping",
    ] {
        let r = api.get(path).await;
        // The test authorizer has no rule for them: reaching it (403
        // naming system:anonymous) is what anonymous authentication allows.
        assert_eq!(r.code, 403, "{path}: {}", r.text());
        assert!(
            r.status().2.contains("User \"system:anonymous\""),
            "{path}: {}",
            r.text()
        );
    }
    let off = api_without_anonymous().await;
    assert_eq!(off.get("/version").await.code, 401);
    let r = api
        .call(
            "GET",
            CMS,
            &[("x-test-user", "bad")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, 401, "bad credentials are not anonymous");
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let api = api(false).await;
    let empty = || axum::body::Body::empty();
    // alice may impersonate carol: the request runs as carol (authenticated).
    let r = api
        .call(
            "GET",
            CMS,
            &[("x-test-user", "alice"), ("impersonate-user", "carol")],
            empty(),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.text());
    let r = api
        .call(
            "DELETE",
            &format!("{CMS}/x"),
            &[("x-test-user", "alice"), ("impersonate-user", "carol")],
            empty(),
        )
        .await;
    assert!(
        r.status().2.contains("User \"carol\" cannot delete"),
        "{}",
        r.text()
    );
    // ... but not bob, nor with a group she may not use.
    let r = api
        .call(
            "GET",
            CMS,
            &[("x-test-user", "alice"), ("impersonate-user", "bob")],
            empty(),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )
    );
    let r = api
        .call(
            "GET",
            CMS,
            &[
                ("x-test-user", "alice"),
                ("impersonate-user", "carol"),
                ("impersonate-group", "ops"),
            ],
            empty(),
        )
        .await;
    assert_eq!(
        r.status().2,
        "groups \"ops\" is forbidden: User \"alice\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
    );
    let r = api
        .call(
            "GET",
            CMS,
            &[
                ("x-test-user", "alice"),
                ("impersonate-user", "system:serviceaccount:ns:bot"),
            ],
            empty(),
        )
        .await;
    assert_eq!(
        r.status().2,
        "serviceaccounts \"bot\" is forbidden: User \"alice\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"ns\""
    );
    let r = api
        .call(
            "GET",
            CMS,
            &[("x-test-user", "alice"), ("impersonate-uid", "7")],
            empty(),
        )
        .await;
    assert_eq!(r.code, 500, "uid without a user: {}", r.text());
    assert!(r.status().2.contains("without impersonating a user"));
    // Members of system:masters may impersonate anyone; with groups given,
    // they are the impersonated user's groups (system:authenticated added).
    let r = api
        .call(
            "GET",
            CMS,
            &[
                ("x-test-user", "root,system:masters"),
                ("impersonate-user", "bob"),
                ("impersonate-group", "dev"),
            ],
            empty(),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.text());
    let r = api
        .call(
            "GET",
            "/metrics",
            &[
                ("x-test-user", "root,system:masters"),
                ("impersonate-user", "bob"),
            ],
            empty(),
        )
        .await;
    assert_eq!(
        r.status().2,
        "forbidden: User \"bob\" cannot get path \"/metrics\"",
        "bob is not a master"
    );
}
