//! kube's PodSecurity plugin (`k8s.io/pod-security-admission`): each
//! namespace's `pod-security.kubernetes.io/{enforce,audit,warn}` labels
//! (and their `-version`s) choose a Pod Security Standards level per mode;
//! a Pod create or update that breaks the enforce level is refused (403,
//! `violates PodSecurity "restricted:latest": ...`), one that breaks the
//! warn level gets a `Warning` header, and one that breaks the audit level
//! an `audit-violations` audit annotation. Workloads with a pod template
//! are checked for warn and audit only. Setting a stricter enforce level on
//! a namespace warns about the existing pods that break it; bad label
//! values on a namespace are refused (422).
//!
//! The checks themselves are `apimachinery::podsecurity` (pure); this
//! module brings the namespace (the replica's watch cache, via `lookup`)
//! and the pods. kube's exemptions (namespaces, users, runtime classes)
//! and non-default defaults come only from an admission configuration
//! file, which this server does not read: no exemptions, and every mode
//! defaults to `privileged:latest`, as in kube without one.

use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{Map, Value};

use super::chain::{lookup, Plugin};
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::{ApiError, Result};
use apimachinery::podsecurity::{
    evaluate, policy_from_labels, Level, LevelVersion, Outcome, PodView, Policy,
    ANNOTATION_AUDIT_VIOLATIONS, ANNOTATION_ENFORCE_POLICY, ANNOTATION_ERROR,
};
use apimachinery::read::Freshness;
use apimachinery::status::GroupKind;
use apimachinery::{Status, StatusCause};

const NAMESPACES: (&str, &str, &str) = ("", "v1", "namespaces");
const PODS: (&str, &str, &str) = ("", "v1", "pods");

/// How many existing pods a namespace relabel checks, and for how long
/// (kube's `defaultNamespaceMaxPodsToCheck`, `...PodCheckTimeout`).
const MAX_PODS_TO_CHECK: usize = 3000;
const POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Pod subresources whose writes cannot change what the checks read.
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

pub const POD_SECURITY: Plugin = Plugin {
    name: "PodSecurity",
    default_on: true,
    supported: true,
    handles,
    mutate: None,
    validate: Some(validate),
};

/// The workloads kube reads a pod template from, and where it is.
fn template_path(group: &str, plural: &str) -> Option<&'static str> {
    match (group, plural) {
        ("", "podtemplates") => Some("/template"),
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some("/spec/template"),
        ("batch", "cronjobs") => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

fn handles(a: &Attributes) -> bool {
    matches!(a.operation, "CREATE" | "UPDATE")
        && (matches!((&*a.res.group, &*a.res.plural), ("", "pods" | "namespaces"))
            || template_path(&a.res.group, &a.res.plural).is_some())
}

fn validate<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    async move {
        match (&*a.res.group, &*a.res.plural) {
            ("", "namespaces") => namespace(scope, a).await,
            ("", "pods") => pod(scope, a).await,
            _ => workload(scope, a).await,
        }
    }
    .boxed()
}

/// The newest policy version: the server's Kubernetes minor.
fn max_minor() -> u32 {
    crate::version::KUBE_MINOR
        .parse()
        .unwrap_or(apimachinery::podsecurity::MAX_MINOR)
}

fn labels(obj: Option<&Value>) -> Option<&Map<String, Value>> {
    obj?.pointer("/metadata/labels")?.as_object()
}

/// kube's field-error aggregate: one message, or `[m1, m2]`.
fn aggregate(errors: &[StatusCause]) -> String {
    let list: Vec<String> = errors
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    match list.len() {
        1 => list[0].clone(),
        _ => format!("[{}]", list.join(", ")),
    }
}

/// The namespace's policy, read from the replica's cache.
async fn namespace_policy(
    scope: &Scope<'_>,
    ns: &str,
) -> Result<Option<(Policy, Vec<StatusCause>)>> {
    let Some(namespace) = lookup(scope, NAMESPACES, None, ns).await? else {
        return Ok(None);
    };
    Ok(Some(policy_from_labels(
        labels(Some(&namespace)),
        Policy::default(),
    )))
}

async fn pod(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
    if IGNORED_POD_SUBRESOURCES.contains(&a.subresource) {
        return Ok(());
    }
    let ns = a.namespace.unwrap_or("");
    let lookup_failed = || {
        ApiError::from(Status::internal(format!(
            "failed to lookup namespace {ns:?}"
        )))
    };
    let (policy, errors) = namespace_policy(scope, ns)
        .await
        .map_err(|_| lookup_failed())?
        .ok_or_else(lookup_failed)?;
    if errors.is_empty() && policy.fully_privileged() {
        scope.audit_annotate(
            ANNOTATION_ENFORCE_POLICY,
            &LevelVersion::PRIVILEGED_LATEST.to_string(),
        );
        return Ok(());
    }
    let Some(pod) = a.object else {
        return Ok(());
    };
    if a.operation == "UPDATE" && !a.old.is_some_and(|old| significant_update(pod, old)) {
        return Ok(());
    }
    check(scope, a, &policy, &errors, PodView::of_pod(pod), true)
}

/// A workload's pod template: warn and audit only.
async fn workload(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
    if !a.subresource.is_empty() {
        return Ok(());
    }
    let ns = a.namespace.unwrap_or("");
    let failed = match namespace_policy(scope, ns).await {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(format!("namespaces {ns:?} not found")),
        Err(e) => Err(e.to_status().message),
    };
    let (policy, errors) = match failed {
        Ok(p) => p,
        Err(why) => {
            // kube admits the workload and notes why nothing was checked.
            scope.audit_annotate(
                ANNOTATION_ERROR,
                &format!("failed to lookup namespace {ns:?}: {why}"),
            );
            return Ok(());
        }
    };
    if errors.is_empty()
        && policy.warn.level == Level::Privileged
        && policy.audit.level == Level::Privileged
    {
        return Ok(());
    }
    let template = template_path(&a.res.group, &a.res.plural)
        .zip(a.object)
        .and_then(|(path, obj)| obj.pointer(path))
        .filter(|t| !t.is_null());
    let Some(template) = template else {
        return Ok(());
    };
    check(
        scope,
        a,
        &policy,
        &errors,
        PodView::of_template(template),
        false,
    )
}

/// kube's `EvaluatePod`: enforce (when `enforce`), then audit, then warn,
/// each level and version evaluated once.
fn check(
    scope: &Scope<'_>,
    a: &Attributes<'_>,
    policy: &Policy,
    errors: &[StatusCause],
    pod: PodView<'_>,
    enforce: bool,
) -> Result<()> {
    let max = max_minor();
    let mut done: Vec<(LevelVersion, Outcome)> = Vec::with_capacity(3);
    let mut outcome = |lv: LevelVersion| -> Outcome {
        if let Some((_, o)) = done.iter().find(|(l, _)| *l == lv) {
            return o.clone();
        }
        let o = evaluate(lv, max, pod);
        done.push((lv, o.clone()));
        o
    };
    if !errors.is_empty() {
        scope.audit_annotate(
            ANNOTATION_ERROR,
            &format!("Failed to parse policy: {}", aggregate(errors)),
        );
    }
    let mut denial = None;
    if enforce {
        scope.audit_annotate(ANNOTATION_ENFORCE_POLICY, &policy.enforce.to_string());
        let o = outcome(policy.enforce);
        if !o.allowed() {
            denial = Some(forbidden(
                a,
                &format!(
                    "violates PodSecurity \"{}\": {}",
                    policy.enforce,
                    o.details()
                ),
            ));
        }
    }
    let o = outcome(policy.audit);
    if !o.allowed() {
        scope.audit_annotate(
            ANNOTATION_AUDIT_VIOLATIONS,
            &format!(
                "would violate PodSecurity \"{}\": {}",
                policy.audit,
                o.details()
            ),
        );
    }
    if let Some(status) = denial {
        // No warnings on a request that is refused.
        return Err(status.into());
    }
    let o = outcome(policy.warn);
    if !o.allowed() {
        scope.warn(format!(
            "would violate PodSecurity \"{}\": {}",
            policy.warn,
            o.details()
        ));
    }
    Ok(())
}

fn str_at<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list<'v>(spec: Option<&'v Value>, key: &str) -> &'v [Value] {
    spec.and_then(|s| s.get(key))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// kube's `isSignificantPodUpdate`: whether an update may change what the
/// checks read (of a pod's spec only images and ephemeral containers can
/// change; metadata-only updates are not checked).
fn significant_update(pod: &Value, old: &Value) -> bool {
    let (new, old) = (pod.get("spec"), old.get("spec"));
    for key in ["containers", "initContainers"] {
        let (n, o) = (list(new, key), list(old, key));
        if n.len() != o.len() {
            return true;
        }
        if n.iter()
            .zip(o)
            .any(|(n, o)| str_at(n, "image") != str_at(o, "image"))
        {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| {
        match old_ephemeral
            .iter()
            .find(|o| str_at(o, "name") == str_at(c, "name"))
        {
            None => true,
            Some(o) => str_at(c, "image") != str_at(o, "image"),
        }
    })
}

/// kube's `ValidateNamespace`: labels must be valid (on update, only if
/// they changed); a stricter enforce level warns about existing pods.
async fn namespace(scope: &Scope<'_>, a: &Attributes<'_>) -> Result<()> {
    if !a.subresource.is_empty() {
        return Ok(());
    }
    let (new, new_errors) = policy_from_labels(labels(a.object), Policy::default());
    let invalid = |errors: Vec<StatusCause>| -> Result<()> {
        let gk = GroupKind {
            group: "",
            kind: "Namespace",
        };
        Err(Status::invalid(gk, a.name, errors).into())
    };
    match a.operation {
        "CREATE" => {
            if !new_errors.is_empty() {
                return invalid(new_errors);
            }
            Ok(())
        }
        "UPDATE" => {
            let (old, old_errors) = policy_from_labels(labels(a.old), Policy::default());
            if !new_errors.is_empty() && (old_errors.is_empty() || new_errors != old_errors) {
                return invalid(new_errors);
            }
            let relaxed_or_same = new.enforce.version == old.enforce.version
                && new.enforce.level <= old.enforce.level;
            if new.enforce == old.enforce
                || new.enforce.level == Level::Privileged
                || relaxed_or_same
            {
                return Ok(());
            }
            for w in existing_pods(scope, a.name, new.enforce).await {
                scope.warn(w);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// kube's `EvaluatePodsInNamespace`: the warnings for the namespace's pods
/// that break `enforce`, one per distinct set of reasons, named by the
/// first pod (by name) and the count of the others.
async fn existing_pods(scope: &Scope<'_>, ns: &str, enforce: LevelVersion) -> Vec<String> {
    let deadline = Instant::now() + POD_CHECK_TIMEOUT;
    let Ok(pods) = list_pods(scope, ns).await else {
        return vec!["failed to list pods while checking new PodSecurity enforce level".into()];
    };
    let pods = prioritize(&pods);
    let total = pods.len();
    let max = max_minor();
    // (reasons, first pod name, count), in the order first seen.
    let mut found: Vec<(String, &str, usize)> = Vec::new();
    let mut checked = total.min(MAX_PODS_TO_CHECK);
    for (i, pod) in pods.iter().take(MAX_PODS_TO_CHECK).enumerate() {
        let outcome = evaluate(enforce, max, PodView::of_pod(pod));
        if !outcome.allowed() {
            let reasons = outcome.reasons();
            let name = crate::object::name(pod).unwrap_or("");
            match found.iter_mut().find(|(r, _, _)| *r == reasons) {
                Some(entry) => {
                    if name < entry.1 {
                        entry.1 = name;
                    }
                    entry.2 += 1;
                }
                None => found.push((reasons, name, 1)),
            }
        }
        if Instant::now() > deadline {
            checked = i + 1;
            break;
        }
    }
    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
        ));
    }
    if !found.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {} violate the new PodSecurity enforce level \"{enforce}\"",
            apimachinery::validation::go_quote(ns)
        ));
    }
    let mut per_pod: Vec<String> = found
        .into_iter()
        .map(|(reasons, name, count)| match count {
            1 => format!("{name}: {reasons}"),
            2 => format!("{name} (and 1 other pod): {reasons}"),
            n => format!("{name} (and {} other pods): {reasons}", n - 1),
        })
        .collect();
    per_pod.sort();
    warnings.extend(per_pod);
    warnings
}

/// The namespace's pods from the replica's cache.
async fn list_pods(scope: &Scope<'_>, ns: &str) -> Result<Vec<std::sync::Arc<Value>>> {
    let backend = &scope.backend;
    let (group, version, plural) = PODS;
    let res = backend
        .registry
        .lookup(group, version, plural)
        .ok_or_else(|| ApiError::internal("pods missing from the registry"))?;
    let opts = watchcache::ListOptions {
        freshness: Freshness::NotOlderThan(0),
        limit: None,
        continue_from: None,
        predicate: Default::default(),
    };
    let listed = backend
        .store
        .list(&backend.collection_prefix(&res, Some(ns)), &opts)
        .await
        .map_err(|e| ApiError::storage(e, &res, ""))?;
    Ok(listed.items.into_iter().map(|o| o.into_value()).collect())
}

/// kube's `prioritizePods`: one pod per controller first, then the pods
/// without a controller in between, then the other replicas.
fn prioritize(pods: &[std::sync::Arc<Value>]) -> Vec<&Value> {
    let mut first = Vec::with_capacity(pods.len());
    let mut rest = Vec::new();
    let mut controllers: Vec<&str> = Vec::new();
    for pod in pods {
        let controller = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| {
                refs.iter()
                    .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            })
            .map(|r| str_at(r, "uid"));
        match controller {
            None => first.push(&**pod),
            Some(uid) if controllers.contains(&uid) => rest.push(&**pod),
            Some(uid) => {
                controllers.push(uid);
                first.push(&**pod);
            }
        }
    }
    first.extend(rest);
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_servers_version_is_the_newest_policy_version() {
        assert_eq!(max_minor(), apimachinery::podsecurity::MAX_MINOR);
    }

    #[test]
    fn only_images_and_ephemeral_containers_make_an_update_significant() {
        let pod = |image: &str, eph: Value| {
            json!({"metadata": {"labels": {"a": image}},
                   "spec": {"containers": [{"name": "c", "image": image}], "ephemeralContainers": eph}})
        };
        let old = pod("a", json!([]));
        assert!(!significant_update(&old, &old));
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"]["x"] = json!("y");
        assert!(!significant_update(&relabelled, &old));
        assert!(significant_update(&pod("b", json!([])), &old));
        let debug = pod("a", json!([{"name": "d", "image": "busybox"}]));
        assert!(significant_update(&debug, &old));
        assert!(!significant_update(&debug, &debug));
        let mut more = old.clone();
        more["spec"]["initContainers"] = json!([{"name": "i", "image": "x"}]);
        assert!(significant_update(&more, &old));
    }

    #[test]
    fn one_pod_per_controller_comes_first() {
        let pod = |name: &str, uid: Option<&str>| {
            let refs = uid
                .map(|u| json!([{"uid": u, "controller": true}]))
                .unwrap_or(json!([]));
            std::sync::Arc::new(json!({"metadata": {"name": name, "ownerReferences": refs}}))
        };
        let pods = vec![
            pod("a1", Some("rs-a")),
            pod("a2", Some("rs-a")),
            pod("solo", None),
            pod("b1", Some("rs-b")),
        ];
        let names: Vec<&str> = prioritize(&pods)
            .into_iter()
            .map(|p| crate::object::name(p).unwrap())
            .collect();
        assert_eq!(names, ["a1", "solo", "b1", "a2"]);
    }

    #[test]
    fn workloads_name_their_templates() {
        assert_eq!(template_path("apps", "deployments"), Some("/spec/template"));
        assert_eq!(
            template_path("batch", "cronjobs"),
            Some("/spec/jobTemplate/spec/template")
        );
        assert_eq!(template_path("", "podtemplates"), Some("/template"));
        assert_eq!(template_path("", "services"), None);
    }
}
