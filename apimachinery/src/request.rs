//! Request paths to what they address, as kube-apiserver's RequestInfo
//! resolver does. Pure, so it is property-tested.

use percent_encoding::percent_decode_str;

/// What an API path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// `/api`
    LegacyVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group { group: String },
    /// `/api/v1`, `/apis/{group}/{version}`
    ResourceList { group: String, version: String },
    /// A resource request.
    Resource(ResourceRequest),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceRequest {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub watch_prefix: bool,
    /// The path after a `proxy` subresource (`.../proxy/{path}`).
    pub subpath: Option<String>,
}

/// Subresources of a namespace reached as `/namespaces/{name}/{sub}`.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Parses a request path. `None` means the path is not an API path (or has
/// too many segments, an empty segment, or a part that does not decode),
/// which the caller answers with 404.
pub fn parse(path: &str) -> Option<ApiPath> {
    parse_path(path).ok().flatten()
}

/// The one parser of request paths, which every stage of a request reads
/// through `auth::RequestInfo::route` (routing, authorization, audit, flow
/// control, metrics, admission). `Ok(None)`: not an API path the router
/// serves (404); `Err`: a path under `/api` or `/apis` that cannot be
/// resolved at all (a segment that does not decode as UTF-8; a `watch`
/// or `proxy` prefix with nothing after it), answered with 400.
pub fn parse_path(path: &str) -> Result<Option<ApiPath>, String> {
    let Some(trimmed) = path.strip_prefix('/') else {
        return Ok(None);
    };
    // kube reads the decoded path (Go's `URL.Path`) and splits it after
    // decoding: an encoded slash (`%2F`) separates segments as `/` does.
    let decoded = percent_decode_str(trimmed)
        .decode_utf8()
        .map_err(|_| format!("invalid path encoding: {path:?}"))?;
    let trimmed = decoded.strip_suffix('/').unwrap_or(&decoded);
    let mut segs = Vec::new();
    let mut empty = false;
    for seg in trimmed.split('/') {
        empty |= seg.is_empty();
        segs.push(seg.to_string());
    }
    let api = matches!(segs.first().map(String::as_str), Some("api" | "apis"));
    // `/api/v1/watch` and `/api/v1/proxy` name no kind: kube's resolver
    // refuses them.
    let prefix_only =
        |i: usize| segs.len() == i + 1 && matches!(segs[i].as_str(), "watch" | "proxy") && api;
    if prefix_only(2) || (segs.first().map(String::as_str) == Some("apis") && prefix_only(3)) {
        return Err(format!(
            "unable to determine kind and namespace from url {path:?}"
        ));
    }
    if empty {
        return Ok(None);
    }
    Ok(parse_segments(segs))
}

fn parse_segments(segs: Vec<String>) -> Option<ApiPath> {
    let (group, version, rest) = match segs.first().map(String::as_str) {
        Some("api") => match segs.len() {
            1 => return Some(ApiPath::LegacyVersions),
            _ => (String::new(), segs[1].clone(), &segs[2..]),
        },
        Some("apis") => match segs.len() {
            1 => return Some(ApiPath::Groups),
            2 => {
                return Some(ApiPath::Group {
                    group: segs[1].clone(),
                })
            }
            _ => (segs[1].clone(), segs[2].clone(), &segs[3..]),
        },
        _ => return None,
    };
    if rest.is_empty() {
        return Some(ApiPath::ResourceList { group, version });
    }
    let mut req = ResourceRequest {
        group,
        version,
        ..Default::default()
    };
    let mut rest = rest;
    if rest[0] == "watch" {
        req.watch_prefix = true;
        rest = &rest[1..];
        if rest.is_empty() {
            return None;
        }
    }
    if rest[0] == "namespaces" && rest.len() > 1 {
        let ns = rest[1].clone();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2].as_str()) {
            req.namespace = Some(ns);
            rest = &rest[2..];
        } else if req.group.is_empty() || rest.len() <= 2 {
            // The namespace object itself (or one of its subresources).
            req.resource = "namespaces".into();
            req.name = Some(ns);
            req.subresource = rest.get(2).cloned();
            return Some(ApiPath::Resource(req));
        } else {
            req.namespace = Some(ns);
            rest = &rest[2..];
        }
    }
    if rest.len() > 3 {
        if rest[2] != "proxy" {
            return None;
        }
        req.subpath = Some(rest[3..].join("/"));
    }
    req.resource = rest[0].clone();
    req.name = rest.get(1).cloned();
    req.subresource = rest.get(2).cloned();
    Some(ApiPath::Resource(req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn res(path: &str) -> ResourceRequest {
        match parse(path) {
            Some(ApiPath::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse("/api"), Some(ApiPath::LegacyVersions));
        assert_eq!(parse("/api/"), Some(ApiPath::LegacyVersions));
        assert_eq!(parse("/apis"), Some(ApiPath::Groups));
        assert_eq!(
            parse("/apis/apps"),
            Some(ApiPath::Group {
                group: "apps".into()
            })
        );
        assert_eq!(
            parse("/api/v1"),
            Some(ApiPath::ResourceList {
                group: "".into(),
                version: "v1".into()
            })
        );
        assert_eq!(parse("/version"), None);
        assert_eq!(parse("/api//v1"), None);
    }

    #[test]
    fn resource_paths() {
        let r = res("/api/v1/pods");
        assert_eq!(
            (r.resource.as_str(), r.namespace, r.name),
            ("pods", None, None)
        );
        let r = res("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.name.as_deref(), Some("web"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/apis/apps/v1/namespaces/ns1/deployments/d/scale");
        assert_eq!(r.group, "apps");
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        let r = res("/api/v1/namespaces");
        assert_eq!((r.resource.as_str(), r.name), ("namespaces", None));
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!(r.resource, "namespaces");
        assert_eq!(r.name.as_deref(), Some("kube-system"));
        assert_eq!(r.namespace, None);
        let r = res("/api/v1/namespaces/foo/status");
        assert_eq!(r.resource, "namespaces");
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/api/v1/namespaces/foo/configmaps");
        assert_eq!(r.namespace.as_deref(), Some("foo"));
        assert_eq!(r.resource, "configmaps");
        let r = res("/api/v1/watch/namespaces/foo/configmaps");
        assert!(r.watch_prefix);
        let r = res("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aadmin");
        assert_eq!(r.name.as_deref(), Some("system:admin"));
        assert_eq!(parse("/api/v1/namespaces/a/pods/b/status/extra"), None);
        // Only a proxy takes a path of its own.
        let r = res("/api/v1/namespaces/a/pods/b/proxy/metrics/x");
        assert_eq!(r.subresource.as_deref(), Some("proxy"));
        assert_eq!(r.subpath.as_deref(), Some("metrics/x"));
        let r = res("/api/v1/nodes/n1/proxy/stats");
        assert_eq!(
            (r.name.as_deref(), r.subpath.as_deref()),
            (Some("n1"), Some("stats"))
        );
        assert_eq!(res("/api/v1/nodes/n1/proxy").subpath, None);
    }

    #[test]
    fn the_decoded_path_is_split() {
        // kube splits Go's decoded `URL.Path`: `%2F` separates segments.
        let r = res("/api/v1/namespaces/a/configmaps/x%2Fstatus");
        assert_eq!(r.name.as_deref(), Some("x"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        assert_eq!(
            res("/api/v1/namespaces/a/configmaps/x%2F").name.as_deref(),
            Some("x")
        );
        // `%25` is a literal percent sign in the name (the handlers refuse it).
        assert_eq!(
            res("/api/v1/namespaces/a/configmaps/x%25").name.as_deref(),
            Some("x%")
        );
        // Dot segments are names like any other (the handlers refuse them).
        assert_eq!(
            res("/api/v1/namespaces/a/configmaps/..").name.as_deref(),
            Some("..")
        );
        assert_eq!(parse("/api/v1/namespaces/a/configmaps/x%2F%2F"), None);
        assert!(parse_path("/api/v1/namespaces/a/configmaps/%FF").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(path in "\\PC*") {
            let _ = parse(&path);
        }

        #[test]
        fn segments_round_trip(
            ns in "[a-z0-9]{1,10}",
            res_name in "[a-z]{1,10}",
            name in "[a-z0-9.:-]{1,20}",
        ) {
            let path = format!("/apis/g.io/v1/namespaces/{ns}/{res_name}/{name}");
            let r = match parse(&path) { Some(ApiPath::Resource(r)) => r, _ => panic!() };
            prop_assert_eq!(r.namespace, Some(ns));
            prop_assert_eq!(r.resource, res_name);
            prop_assert_eq!(r.name, Some(name));
        }
    }
}
