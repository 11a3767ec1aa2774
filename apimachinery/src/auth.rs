//! Who is asking and what they ask for: the user an authenticator produced,
//! and the attributes an authorizer decides on, resolved from the request
//! line the way kube-apiserver's RequestInfo resolver does. Pure, so it is
//! property-tested.

use crate::status::{GroupResource, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The group every authenticated user is in.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of the anonymous user.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The superuser group: members are allowed everything.
pub const SYSTEM_MASTERS: &str = "system:masters";
/// The user name of unauthenticated requests, when anonymous auth is on.
pub const ANONYMOUS: &str = "system:anonymous";
/// The user requests on the plain-HTTP development port run as.
pub const LOOPBACK_ADMIN: &str = "system:apiserver";

/// An authenticated user, as `authentication.k8s.io/v1` UserInfo spells it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn new(username: impl Into<String>, groups: Vec<String>) -> Self {
        UserInfo {
            username: username.into(),
            groups,
            ..Default::default()
        }
    }

    /// The identity of requests on the plain-HTTP port (local development
    /// and tests): a member of `system:masters`.
    pub fn loopback_admin() -> Self {
        UserInfo::new(
            LOOPBACK_ADMIN,
            vec![SYSTEM_MASTERS.into(), ALL_AUTHENTICATED.into()],
        )
    }

    /// The anonymous user (only when anonymous authentication is enabled).
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS, vec![ALL_UNAUTHENTICATED.into()])
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Adds `system:authenticated`, as kube-apiserver does for every user
    /// an authenticator accepted (not for the anonymous user).
    pub fn with_authenticated_group(mut self) -> Self {
        if self.username != ANONYMOUS && !self.in_group(ALL_AUTHENTICATED) {
            self.groups.push(ALL_AUTHENTICATED.into());
        }
        self
    }
}

/// What a request asks to do, as an authorizer sees it (kube's
/// `authorizer.Attributes` built from RequestInfo).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// `false` for non-resource URLs (`/healthz`, `/api`, `/version`...).
    pub resource_request: bool,
    /// The URL path as requested.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; for non-resource URLs the lowercased method.
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// Raw selectors of a list or watch, for authorizers that use them.
    pub label_selector: String,
    pub field_selector: String,
    /// The parsed path the router serves (`None`: not an API path it
    /// serves, answered 404 after authorization).
    pub route: Option<crate::request::ApiPath>,
}

/// Resolves method, path and query into the attributes an authorizer
/// decides on, with the path parsed once ([`crate::request::parse_path`])
/// for every later stage (`route`). Paths the router does not serve as a
/// resource become non-resource requests; `Err` (a message for a 400) is a
/// path under `/api` or `/apis` that names no kind.
pub fn request_info(method: &str, path: &str, query: Option<&str>) -> Result<RequestInfo, String> {
    let route = crate::request::parse_path(path)?;
    let mut info = RequestInfo {
        path: path.to_string(),
        verb: method.to_ascii_lowercase(),
        ..Default::default()
    };
    if let Some(crate::request::ApiPath::Resource(r)) = &route {
        info.resource_request = true;
        info.api_group = r.group.clone();
        info.api_version = r.version.clone();
        info.verb = if r.watch_prefix {
            "watch"
        } else {
            match method {
                "POST" => "create",
                "GET" | "HEAD" => "get",
                "PUT" => "update",
                "PATCH" => "patch",
                "DELETE" => "delete",
                _ => "",
            }
        }
        .to_string();
        // A namespace's own path names it as the request's namespace too,
        // as kube's resolver does.
        info.namespace = match (&r.namespace, r.resource.as_str()) {
            (Some(ns), _) => ns.clone(),
            (None, "namespaces") => r.name.clone().unwrap_or_default(),
            _ => String::new(),
        };
        info.resource = r.resource.clone();
        info.name = r.name.clone().unwrap_or_default();
        info.subresource = r.subresource.clone().unwrap_or_default();
    }
    info.route = route;
    if !info.resource_request {
        return Ok(info);
    }
    let params: Vec<(String, String)> = query
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if info.name.is_empty() && info.verb == "get" {
        let watch = param("watch")
            .is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"));
        info.verb = if watch { "watch" } else { "list" }.into();
        info.label_selector = param("labelSelector").unwrap_or_default().to_string();
        info.field_selector = param("fieldSelector").unwrap_or_default().to_string();
        if let Some(name) = exact_name(&info.field_selector) {
            info.name = name;
        }
    }
    if info.verb == "watch" {
        info.label_selector = param("labelSelector").unwrap_or_default().to_string();
        info.field_selector = param("fieldSelector").unwrap_or_default().to_string();
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".into();
    }
    Ok(info)
}

/// The name a field selector pins with `metadata.name=x` (or `==`), when it
/// is a valid path segment: kube authorizes such a list as one object's.
fn exact_name(field_selector: &str) -> Option<String> {
    let sel = crate::selector::FieldSelector::parse(field_selector).ok()?;
    let name = sel.exact_match("metadata.name")?;
    let valid = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('%');
    valid.then(|| name.to_string())
}

/// The message of a 403, worded as kube-apiserver words it.
pub fn forbidden_message(user: &UserInfo, info: &RequestInfo) -> String {
    let user = &user.username;
    let verb = &info.verb;
    if !info.resource_request {
        return format!("User {user:?} cannot {verb} path {:?}", info.path);
    }
    let mut resource = info.resource.clone();
    if !info.subresource.is_empty() {
        resource = format!("{resource}/{}", info.subresource);
    }
    let group = &info.api_group;
    if info.namespace.is_empty() {
        format!("User {user:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope")
    } else {
        format!(
            "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {:?}",
            info.namespace
        )
    }
}

/// The 403 Status for a request the authorizer did not allow; `reason` is
/// the authorizer's explanation, if it gave one.
pub fn forbidden(user: &UserInfo, info: &RequestInfo, reason: &str) -> Status {
    let mut why = forbidden_message(user, info);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let gr = GroupResource {
        group: &info.api_group,
        resource: &info.resource,
    };
    if !info.resource_request {
        return Status::forbidden(format!("forbidden: {why}"));
    }
    let message = if info.name.is_empty() {
        format!("{gr} is forbidden: {why}")
    } else {
        format!("{gr} {:?} is forbidden: {why}", info.name)
    };
    Status::forbidden(message).with_details(&info.name, &info.api_group, &info.resource)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info(method: &str, path: &str, query: Option<&str>) -> RequestInfo {
        request_info(method, path, query).unwrap()
    }

    #[test]
    fn resource_requests() {
        let i = info("GET", "/api/v1/namespaces/ns/pods", None);
        assert!(i.resource_request);
        assert_eq!(
            (i.verb.as_str(), i.namespace.as_str(), i.resource.as_str()),
            ("list", "ns", "pods")
        );
        let i = info("GET", "/api/v1/namespaces/ns/pods", Some("watch=true"));
        assert_eq!(i.verb, "watch");
        let i = info("GET", "/api/v1/watch/namespaces/ns/pods", None);
        assert_eq!((i.verb.as_str(), i.resource.as_str()), ("watch", "pods"));
        let i = info("PUT", "/api/v1/namespaces/ns/pods/p/status", None);
        assert_eq!(
            (i.verb.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("update", "p", "status")
        );
        let i = info("DELETE", "/apis/apps/v1/namespaces/ns/deployments", None);
        assert_eq!(
            (i.verb.as_str(), i.api_group.as_str()),
            ("deletecollection", "apps")
        );
        let i = info("GET", "/api/v1/namespaces/ns", None);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.namespace.as_str()),
            ("namespaces", "ns", "ns")
        );
        let i = info("PUT", "/api/v1/namespaces/ns/finalize", None);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("namespaces", "ns", "finalize")
        );
        let i = info(
            "GET",
            "/api/v1/nodes",
            Some("fieldSelector=metadata.name%3Dn1"),
        );
        assert_eq!((i.verb.as_str(), i.name.as_str()), ("list", "n1"));
    }

    #[test]
    fn non_resource_requests() {
        for p in [
            "/healthz",
            "/api",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
        ] {
            let i = info("GET", p, None);
            assert!(!i.resource_request, "{p}");
            assert_eq!(i.verb, "get");
        }
    }

    #[test]
    fn the_route_is_the_one_parse() {
        let i = info("GET", "/api/v1/namespaces/y/pods/p/log", None);
        match &i.route {
            Some(crate::request::ApiPath::Resource(r)) => {
                assert_eq!(
                    (
                        r.namespace.as_deref(),
                        r.resource.as_str(),
                        r.name.as_deref()
                    ),
                    (Some("y"), "pods", Some("p"))
                );
            }
            other => panic!("{other:?}"),
        }
        // An empty segment: no route, and not a resource request either.
        let i = info("GET", "/api//v1/pods", None);
        assert!(!i.resource_request && i.route.is_none());
        // A prefix with nothing after it names no kind.
        assert!(request_info("GET", "/api/v1/watch", None).is_err());
        assert!(request_info("GET", "/apis/apps/v1/watch/", None).is_err());
        assert!(request_info("GET", "/api/v1/%ff", None).is_err());
        // A namespace's own path is also its namespace.
        let i = info("DELETE", "/api/v1/namespaces/y", None);
        assert_eq!(
            (i.namespace.as_str(), i.name.as_str(), i.verb.as_str()),
            ("y", "y", "delete")
        );
    }

    #[test]
    fn forbidden_wording() {
        let u = UserInfo::new("x", vec![]);
        let s = forbidden(&u, &info("GET", "/api/v1/namespaces/y/pods", None), "");
        assert_eq!(
            s.message,
            "pods is forbidden: User \"x\" cannot list resource \"pods\" in API group \"\" in the namespace \"y\""
        );
        assert_eq!(s.code, 403);
        let s = forbidden(&u, &info("GET", "/apis/apps/v1/deployments", None), "");
        assert_eq!(
            s.message,
            "deployments.apps is forbidden: User \"x\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        );
        let s = forbidden(
            &u,
            &info("GET", "/api/v1/namespaces/y/pods/p/log", None),
            "",
        );
        assert!(s
            .message
            .starts_with("pods \"p\" is forbidden: User \"x\" cannot get resource \"pods/log\""));
        let s = forbidden(&u, &info("GET", "/metrics", None), "");
        assert_eq!(
            s.message,
            "forbidden: User \"x\" cannot get path \"/metrics\""
        );
    }

    proptest! {
        #[test]
        fn never_panics(method in "(GET|PUT|POST|PATCH|DELETE|HEAD|OPTIONS)", path in "(/[a-z%0-9.]{0,6}){0,8}/?", query in proptest::option::of("[a-zA-Z=&%0-9.,!]{0,30}")) {
            if let Ok(i) = request_info(&method, &path, query.as_deref()) {
                if i.resource_request {
                    prop_assert!(!i.resource.is_empty());
                    prop_assert!(!i.api_version.is_empty());
                }
            }
        }
    }
}
