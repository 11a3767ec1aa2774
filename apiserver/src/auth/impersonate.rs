//! Impersonation (`Impersonate-User`, `Impersonate-Group`,
//! `Impersonate-Uid`, `Impersonate-Extra-<key>`), between authentication
//! and authorization: each thing asked for must be allowed to the
//! authenticated user as verb `impersonate` on `users`, `groups`,
//! `serviceaccounts` (core group), or `uids`, `userextras/<key>`
//! (authentication.k8s.io), as kube-apiserver checks it. The request then
//! runs as the impersonated user.

use super::{decide, Authorizer, Decision, Identity};
use crate::audit::slot::AuditSlot;
use crate::error::status_response;
use apimachinery::auth::{
    self as info, RequestInfo, UserInfo, ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS,
};
use apimachinery::Status;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use percent_encoding::percent_decode_str;
use std::sync::Arc;

pub const USER: &str = "impersonate-user";
pub const GROUP: &str = "impersonate-group";
pub const UID: &str = "impersonate-uid";
pub const EXTRA_PREFIX: &str = "impersonate-extra-";

/// One thing a request asks to impersonate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Uid(String),
    Extra { key: String, value: String },
}

impl Target {
    /// The attributes the authorizer is asked about.
    pub fn attributes(&self) -> RequestInfo {
        let mut r = RequestInfo {
            resource_request: true,
            verb: "impersonate".into(),
            ..Default::default()
        };
        match self {
            Target::User(name) => {
                r.resource = "users".into();
                r.name = name.clone();
            }
            Target::ServiceAccount { namespace, name } => {
                r.resource = "serviceaccounts".into();
                r.namespace = namespace.clone();
                r.name = name.clone();
            }
            Target::Group(name) => {
                r.resource = "groups".into();
                r.name = name.clone();
            }
            Target::Uid(uid) => {
                r.api_group = "authentication.k8s.io".into();
                r.resource = "uids".into();
                r.name = uid.clone();
            }
            Target::Extra { key, value } => {
                r.api_group = "authentication.k8s.io".into();
                r.resource = "userextras".into();
                r.subresource = key.clone();
                r.name = value.clone();
            }
        }
        r.path = String::new();
        r
    }
}

/// The impersonation the headers ask for: the targets to authorize (empty:
/// none) or an error (a 500, as kube answers it) when groups, uid or extras
/// come without a user or a header is not valid.
pub fn parse(headers: &HeaderMap) -> Result<Vec<Target>, String> {
    let text = |v: &axum::http::HeaderValue| {
        v.to_str()
            .map(str::to_string)
            .map_err(|_| "impersonation headers must be visible ASCII".to_string())
    };
    let mut targets = Vec::new();
    let user = match headers.get(USER) {
        Some(v) => Some(text(v)?),
        None => None,
    };
    let user = user.filter(|u| !u.is_empty());
    if let Some(u) = &user {
        targets.push(match split_service_account(u) {
            Some((namespace, name)) => Target::ServiceAccount { namespace, name },
            None => Target::User(u.clone()),
        });
    }
    for g in headers.get_all(GROUP) {
        targets.push(Target::Group(text(g)?));
    }
    let mut uid = false;
    for u in headers.get_all(UID) {
        let u = text(u)?;
        if u.is_empty() {
            continue;
        }
        if uid {
            return Err("only one Impersonate-Uid header may be given".into());
        }
        uid = true;
        targets.push(Target::Uid(u));
    }
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) else {
            continue;
        };
        let key = percent_decode_str(key)
            .decode_utf8()
            .map_err(|_| format!("invalid impersonation extra key {key:?}"))?
            .to_lowercase();
        targets.push(Target::Extra {
            key,
            value: text(value)?,
        });
    }
    if user.is_none() && !targets.is_empty() {
        let asked: Vec<String> = targets.iter().map(|t| format!("{t:?}")).collect();
        return Err(format!(
            "requested [{}] without impersonating a user",
            asked.join(" ")
        ));
    }
    Ok(targets)
}

/// `system:serviceaccount:<ns>:<name>` split into namespace and name.
fn split_service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':'))
        .then(|| (ns.to_string(), name.to_string()))
}

/// The user the targets make, once each was allowed.
pub fn impersonated_user(targets: &[Target], groups_given: bool) -> UserInfo {
    let mut user = UserInfo::default();
    for t in targets {
        match t {
            Target::User(name) => user.username = name.clone(),
            Target::ServiceAccount { namespace, name } => {
                user.username = format!("system:serviceaccount:{namespace}:{name}");
                if !groups_given {
                    user.groups.push("system:serviceaccounts".into());
                    user.groups
                        .push(format!("system:serviceaccounts:{namespace}"));
                }
            }
            Target::Group(g) => user.groups.push(g.clone()),
            Target::Uid(u) => user.uid = u.clone(),
            Target::Extra { key, value } => user
                .extra
                .entry(key.clone())
                .or_default()
                .push(value.clone()),
        }
    }
    if user.username == ANONYMOUS {
        if !user.in_group(ALL_UNAUTHENTICATED) {
            user.groups.push(ALL_UNAUTHENTICATED.into());
        }
    } else if !user.in_group(ALL_AUTHENTICATED) && !user.in_group(ALL_UNAUTHENTICATED) {
        user.groups.push(ALL_AUTHENTICATED.into());
    }
    user
}

/// The impersonation layer.
pub async fn impersonate(
    State(authorizer): State<Arc<dyn Authorizer>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let targets = match parse(req.headers()) {
        Ok(t) if t.is_empty() => return next.run(req).await,
        Ok(t) => t,
        Err(why) => return status_response(&Status::internal(why)),
    };
    let Some(Identity(requester)) = req.extensions().get::<Identity>().cloned() else {
        return status_response(&Status::unauthorized());
    };
    for t in &targets {
        let attrs = t.attributes();
        match decide(&*authorizer, &requester, &attrs).await {
            Decision::Allow => {}
            Decision::Deny(reason) | Decision::NoOpinion(reason) => {
                return status_response(&info::forbidden(&requester, &attrs, &reason));
            }
        }
    }
    let groups_given = req.headers().contains_key(GROUP);
    let user = impersonated_user(&targets, groups_given);
    tracing::debug!(requester = %requester.username, acting_as = %user.username, "impersonating");
    let headers = req.headers_mut();
    headers.remove(USER);
    headers.remove(GROUP);
    headers.remove(UID);
    let extras: Vec<_> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(EXTRA_PREFIX))
        .cloned()
        .collect();
    for k in extras {
        headers.remove(k);
    }
    if let Some(slot) = req.extensions().get::<AuditSlot>() {
        slot.set_impersonated_user(user.clone());
    }
    req.extensions_mut().insert(Identity(Arc::new(user)));
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderName, HeaderValue};
    use proptest::prelude::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn targets() {
        assert!(parse(&headers(&[])).unwrap().is_empty());
        let t = parse(&headers(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Uid", "42"),
            ("Impersonate-Extra-Scopes%2Fa", "x"),
        ]))
        .unwrap();
        assert_eq!(
            t,
            vec![
                Target::User("bob".into()),
                Target::Group("dev".into()),
                Target::Group("ops".into()),
                Target::Uid("42".into()),
                Target::Extra {
                    key: "scopes/a".into(),
                    value: "x".into()
                },
            ]
        );
        let u = impersonated_user(&t, true);
        assert_eq!(u.username, "bob");
        assert_eq!(u.groups, vec!["dev", "ops", "system:authenticated"]);
        assert_eq!(u.uid, "42");
        assert_eq!(u.extra["scopes/a"], vec!["x".to_string()]);
        let sa = parse(&headers(&[(
            "Impersonate-User",
            "system:serviceaccount:ns:bot",
        )]))
        .unwrap();
        assert_eq!(
            sa,
            vec![Target::ServiceAccount {
                namespace: "ns".into(),
                name: "bot".into()
            }]
        );
        assert_eq!(
            impersonated_user(&sa, false).groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(sa[0].attributes().namespace, "ns");
        let err = parse(&headers(&[("Impersonate-Group", "dev")])).unwrap_err();
        assert!(err.ends_with("without impersonating a user"), "{err}");
        let anon = parse(&headers(&[("Impersonate-User", ANONYMOUS)])).unwrap();
        assert_eq!(
            impersonated_user(&anon, false).groups,
            vec![ALL_UNAUTHENTICATED]
        );
    }

    #[test]
    fn forbidden_wording() {
        let a = Target::User("bob".into()).attributes();
        let s = info::forbidden(&UserInfo::new("alice", vec![]), &a, "");
        assert_eq!(
            s.message,
            "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
    }

    proptest! {
        #[test]
        fn any_headers_never_panic(pairs in proptest::collection::vec(
            ("(impersonate-(user|group|uid|extra-[a-z%0-9]{0,6})|x-other)", "[ -~]{0,12}"), 0..6)) {
            let mut h = HeaderMap::new();
            for (k, v) in &pairs {
                h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
            }
            if let Ok(t) = parse(&h) {
                let has_user = h.get(USER).is_some_and(|v| !v.is_empty());
                prop_assert!(t.is_empty() || has_user);
                let u = impersonated_user(&t, h.contains_key(GROUP));
                if has_user {
                    prop_assert!(!u.username.is_empty());
                    prop_assert!(u.in_group(ALL_AUTHENTICATED) || u.in_group(ALL_UNAUTHENTICATED));
                }
            }
        }
    }
}
