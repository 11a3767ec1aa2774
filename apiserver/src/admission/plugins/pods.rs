//! The plugins kube runs on pods and nodes: ServiceAccount,
//! TaintNodesByCondition, Priority (with its PriorityClass check),
//! DefaultTolerationSeconds and RuntimeClass.

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Map, Value};

use super::chain::{list_all, lookup, on, writes, Plugin};
use crate::admission::attributes::forbidden;
use crate::admission::attributes::Attributes;
use crate::admission::attributes::Scope;
use crate::error::Result;

const SERVICE_ACCOUNTS: (&str, &str, &str) = ("", "v1", "serviceaccounts");
const PRIORITY_CLASSES: (&str, &str, &str) = ("scheduling.k8s.io", "v1", "priorityclasses");
const RUNTIME_CLASSES: (&str, &str, &str) = ("node.k8s.io", "v1", "runtimeclasses");

fn pod_create(a: &Attributes) -> bool {
    on(a, "", "pods") && a.operation == "CREATE"
}

fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("spec").and_then(Value::as_object_mut)
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
}

fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .filter_map(move |k| spec.get(k).and_then(Value::as_array))
        .flatten()
}

/// Whether the pod names any secret (volumes, projections, env, envFrom,
/// pull secrets), as kube's `VisitPodSecretNames` finds them.
fn references_secrets(spec: &Value) -> bool {
    let volumes = spec.get("volumes").and_then(Value::as_array);
    let in_volumes = volumes.into_iter().flatten().any(|v| {
        v.get("secret").is_some()
            || v.pointer("/projected/sources")
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|p| p.get("secret").is_some()))
    });
    let in_env = containers(spec).any(|c| {
        c.get("env").and_then(Value::as_array).is_some_and(|e| {
            e.iter()
                .any(|e| e.pointer("/valueFrom/secretKeyRef").is_some())
        }) || c
            .get("envFrom")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().any(|e| e.get("secretRef").is_some()))
    });
    let pulls = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty());
    in_volumes || in_env || pulls
}

// ---- ServiceAccount ----

/// Where kube mounts the service-account token.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the token volume's name.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// The service account a pod runs as, looked up like kube's plugin: the
/// `default` account is waited for a little, since the namespace's
/// controller makes it just after the namespace.
async fn service_account(scope: &Scope<'_>, a: &Attributes<'_>, name: &str) -> Result<Value> {
    let ns = a.namespace.unwrap_or("");
    let attempts = if name == "default" { 10 } else { 1 };
    for attempt in 0..attempts {
        if attempt > 0 {
            let wait = 100 + rand::random::<u64>() % 100;
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        }
        if let Some(sa) = lookup(scope, SERVICE_ACCOUNTS, Some(ns), name).await? {
            return Ok((*sa).clone());
        }
    }
    Err(forbidden(
        a,
        &format!("error looking up service account {ns}/{name}: serviceaccount {name:?} not found"),
    )
    .into())
}

fn mirror_pod_check(a: &Attributes, pod: &Value) -> Result<()> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    if !str_at(spec, "/serviceAccountName").is_empty() {
        return Err(forbidden(a, "a mirror pod may not reference service accounts").into());
    }
    if references_secrets(spec) {
        return Err(forbidden(a, "a mirror pod may not reference secrets").into());
    }
    Ok(())
}

/// kube's `limitSecretReferences`, for accounts annotated
/// `kubernetes.io/enforce-mountable-secrets: "true"`.
fn limit_secret_references(a: &Attributes, sa: &Value, pod: &Value) -> Result<()> {
    let enforce = sa
        .pointer("/metadata/annotations/kubernetes.io~1enforce-mountable-secrets")
        .and_then(Value::as_str)
        .is_some_and(|v| matches!(v, "true" | "1" | "t" | "T" | "TRUE" | "True"));
    if !enforce {
        return Ok(());
    }
    let sa_name = str_at(sa, "/metadata/name");
    let names = |key: &str| -> Vec<&str> {
        sa.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("name").and_then(Value::as_str))
            .collect()
    };
    let mountable = names("secrets");
    let pullable = names("imagePullSecrets");
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let refuse = |msg: String| Err(forbidden(a, &msg).into());
    for v in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(secret) = v.pointer("/secret/secretName").and_then(Value::as_str) {
            if !mountable.contains(&secret) {
                return refuse(format!("volume with secret.secretName=\"{secret}\" is not allowed because service account {sa_name} does not reference that secret"));
            }
        }
    }
    for (key, what) in [
        ("initContainers", "init container"),
        ("containers", "container"),
    ] {
        for c in spec
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for env in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                if let Some(secret) = env
                    .pointer("/valueFrom/secretKeyRef/name")
                    .and_then(Value::as_str)
                {
                    if !mountable.contains(&secret) {
                        return refuse(format!(
                            "{what} {} with envVar {} referencing secret.secretName=\"{secret}\" is not allowed because service account {sa_name} does not reference that secret",
                            str_at(c, "/name"),
                            str_at(env, "/name")
                        ));
                    }
                }
            }
        }
    }
    let pulls = spec.get("imagePullSecrets").and_then(Value::as_array);
    for (i, r) in pulls.into_iter().flatten().enumerate() {
        let name = str_at(r, "/name");
        if !pullable.contains(&name) {
            return refuse(format!("imagePullSecrets[{i}].name=\"{name}\" is not allowed because service account {sa_name} does not reference that imagePullSecret"));
        }
    }
    Ok(())
}

/// The projected volume kube mounts for the account's token: a bound
/// token, the cluster CA and the namespace.
fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ],
            "defaultMode": 420
        }
    })
}

fn mount_token(spec: &mut Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        .map(str::to_string);
    let has_volume = existing.is_some();
    let volume_name = existing.unwrap_or_else(|| crate::object::generate_name(TOKEN_VOLUME_PREFIX));
    let mut mounted = false;
    for key in ["initContainers", "containers"] {
        let Some(list) = spec.get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in list.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = c
                .entry("volumeMounts")
                .or_insert_with(|| Value::Array(Vec::new()));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            {
                continue;
            }
            mounts.push(json!({"name": volume_name, "readOnly": true,
                               "mountPath": TOKEN_MOUNT_PATH}));
            mounted = true;
        }
    }
    if mounted && !has_volume {
        let volumes = spec
            .entry("volumes")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(v) = volumes.as_array_mut() {
            v.push(token_volume(&volume_name));
        }
    }
}

fn admit_service_account<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    pod: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        if is_mirror_pod(pod) {
            return mirror_pod_check(a, pod);
        }
        let Some(spec) = spec_mut(pod) else {
            return Ok(());
        };
        let name = match spec.get("serviceAccountName").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => "default".to_string(),
        };
        spec.insert("serviceAccountName".into(), Value::String(name.clone()));
        spec.insert("serviceAccount".into(), Value::String(name.clone()));
        let sa = service_account(scope, a, &name).await?;
        let automount = spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            .or_else(|| {
                sa.get("automountServiceAccountToken")
                    .and_then(Value::as_bool)
            })
            .unwrap_or(true);
        if automount {
            mount_token(spec);
        }
        let has_pull_secrets = spec
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .is_some_and(|p| !p.is_empty());
        if !has_pull_secrets {
            if let Some(pulls) = sa
                .get("imagePullSecrets")
                .filter(|p| p.as_array().is_some_and(|p| !p.is_empty()))
            {
                spec.insert("imagePullSecrets".into(), pulls.clone());
            }
        }
        Ok(())
    }
    .boxed()
}

fn validate_service_account<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
) -> BoxFuture<'a, Result<()>> {
    async move {
        let Some(pod) = a.object else {
            return Ok(());
        };
        if is_mirror_pod(pod) {
            return mirror_pod_check(a, pod);
        }
        let name = str_at(pod, "/spec/serviceAccountName");
        if name.is_empty() {
            return Err(forbidden(
                a,
                &format!(
                    "no service account specified for pod {}/{}",
                    a.namespace.unwrap_or(""),
                    a.name
                ),
            )
            .into());
        }
        let sa = service_account(scope, a, name).await?;
        limit_secret_references(a, &sa, pod)
    }
    .boxed()
}

pub const SERVICE_ACCOUNT: Plugin = Plugin {
    name: "ServiceAccount",
    default_on: true,
    supported: true,
    handles: pod_create,
    mutate: Some(admit_service_account),
    validate: Some(validate_service_account),
};

// ---- TaintNodesByCondition ----

fn taint_new_node<'a>(
    _: &'a Scope<'a>,
    _: &'a Attributes<'a>,
    node: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    const KEY: &str = "node.kubernetes.io/not-ready";
    if let Some(o) = node.as_object_mut() {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(spec) = spec.as_object_mut() {
            let taints = spec
                .entry("taints")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(taints) = taints.as_array_mut() {
                let present = taints.iter().any(|t| {
                    t.get("key").and_then(Value::as_str) == Some(KEY)
                        && t.get("effect").and_then(Value::as_str) == Some("NoSchedule")
                });
                if !present {
                    taints.push(json!({"key": KEY, "effect": "NoSchedule"}));
                }
            }
        }
    }
    async { Ok(()) }.boxed()
}

pub const TAINT_NODES_BY_CONDITION: Plugin = Plugin {
    name: "TaintNodesByCondition",
    default_on: true,
    supported: true,
    handles: |a| on(a, "", "nodes") && a.operation == "CREATE",
    mutate: Some(taint_new_node),
    validate: None,
};

// ---- Priority ----

/// The class kube's Priority plugin resolves a pod's priority from.
struct Class {
    name: String,
    value: i64,
    preemption: String,
}

impl Class {
    fn of(pc: &Value) -> Class {
        Class {
            name: str_at(pc, "/metadata/name").to_string(),
            value: pc.get("value").and_then(Value::as_i64).unwrap_or(0),
            preemption: match str_at(pc, "/preemptionPolicy") {
                "" => "PreemptLowerPriority".to_string(),
                p => p.to_string(),
            },
        }
    }
}

/// The global default class with the lowest value, as kube picks it.
async fn default_class(scope: &Scope<'_>) -> Result<Option<Class>> {
    let classes = list_all(scope, PRIORITY_CLASSES).await?;
    Ok(classes
        .iter()
        .filter(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
        .map(|pc| Class::of(pc))
        .min_by_key(|c| c.value))
}

fn admit_priority<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    pod: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        if a.operation == "UPDATE" {
            // The priority set at create is kept when an update leaves it
            // out (validation refuses any change of it).
            if let (Some(old), Some(spec)) = (a.old.and_then(|o| o.get("spec")), spec_mut(pod)) {
                for key in ["priority", "preemptionPolicy"] {
                    if !spec.contains_key(key) {
                        if let Some(v) = old.get(key) {
                            spec.insert(key.into(), v.clone());
                        }
                    }
                }
            }
            return Ok(());
        }
        let named = str_at(pod, "/spec/priorityClassName").to_string();
        let class = if named.is_empty() {
            default_class(scope).await?
        } else {
            match lookup(scope, PRIORITY_CLASSES, None, &named).await? {
                Some(pc) => Some(Class::of(&pc)),
                None => {
                    return Err(forbidden(
                        a,
                        &format!("no PriorityClass with name {named} was found"),
                    )
                    .into())
                }
            }
        };
        let (value, preemption) = match &class {
            Some(c) => (c.value, c.preemption.as_str()),
            None => (0, "PreemptLowerPriority"),
        };
        let Some(spec) = spec_mut(pod) else {
            return Ok(());
        };
        if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
            if given != value {
                return Err(forbidden(a, &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name")).into());
            }
        }
        if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str) {
            if given != preemption {
                return Err(forbidden(a, &format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {preemption} from the given PriorityClass name")).into());
            }
        }
        if let Some(c) = &class {
            spec.insert("priorityClassName".into(), Value::String(c.name.clone()));
        }
        spec.insert("priority".into(), Value::from(value));
        spec.insert(
            "preemptionPolicy".into(),
            Value::String(preemption.to_string()),
        );
        Ok(())
    }
    .boxed()
}

/// Only one PriorityClass may be the global default.
fn validate_priority_class<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
) -> BoxFuture<'a, Result<()>> {
    async move {
        let Some(pc) = a.object else {
            return Ok(());
        };
        if pc.get("globalDefault").and_then(Value::as_bool) != Some(true) {
            return Ok(());
        }
        if let Some(existing) = default_class(scope).await? {
            if existing.name != a.name {
                return Err(forbidden(
                    a,
                    &format!(
                        "PriorityClass {} is already marked as default. Only one default can exist",
                        existing.name
                    ),
                )
                .into());
            }
        }
        Ok(())
    }
    .boxed()
}

fn validate_priority<'a>(scope: &'a Scope<'a>, a: &'a Attributes<'a>) -> BoxFuture<'a, Result<()>> {
    if a.res.plural == "priorityclasses" {
        validate_priority_class(scope, a)
    } else {
        async { Ok(()) }.boxed()
    }
}

pub const PRIORITY: Plugin = Plugin {
    name: "Priority",
    default_on: true,
    supported: true,
    handles: |a| {
        writes(a, "scheduling.k8s.io", "priorityclasses")
            || (on(a, "", "pods") && matches!(a.operation, "CREATE" | "UPDATE"))
    },
    mutate: Some(|scope, a, obj| {
        if on(a, "", "pods") {
            admit_priority(scope, a, obj)
        } else {
            async { Ok(()) }.boxed()
        }
    }),
    validate: Some(validate_priority),
};

// ---- DefaultTolerationSeconds ----

pub const DEFAULT_TOLERATION_SECONDS: Plugin = Plugin {
    name: "DefaultTolerationSeconds",
    default_on: true,
    supported: true,
    handles: |a| writes(a, "", "pods"),
    mutate: Some(|_, _, pod| {
        if let Some(spec) = spec_mut(pod) {
            apimachinery::kinds::core::pod::default_tolerations(spec);
        }
        async { Ok(()) }.boxed()
    }),
    validate: None,
};

// ---- RuntimeClass ----

async fn runtime_class(
    scope: &Scope<'_>,
    a: &Attributes<'_>,
    pod: &Value,
) -> Result<Option<Value>> {
    let name = str_at(pod, "/spec/runtimeClassName");
    if name.is_empty() {
        return Ok(None);
    }
    match lookup(scope, RUNTIME_CLASSES, None, name).await? {
        Some(rc) => Ok(Some((*rc).clone())),
        None => Err(forbidden(a, &format!("pod rejected: RuntimeClass {name:?} not found")).into()),
    }
}

/// Two resource lists with the same quantities.
fn same_resources(a: &Value, b: &Value) -> bool {
    use apimachinery::kinds::core::quantity;
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter().all(|(k, v)| {
                    b.get(k).is_some_and(|w| {
                        quantity::of(v).is_some() && quantity::of(v) == quantity::of(w)
                    })
                })
        }
        _ => false,
    }
}

/// kube's `validateOverhead`: a pod's overhead is the RuntimeClass's.
fn overhead_mismatch(a: &Attributes, pod: &Value, rc: Option<&Value>) -> Result<()> {
    let want = rc.and_then(|rc| rc.pointer("/overhead/podFixed"));
    let problem = match (pod.pointer("/spec/overhead"), want) {
        (None, _) => None,
        (Some(h), Some(w)) if same_resources(h, w) => None,
        (Some(_), Some(_)) => {
            Some("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
        }
        (Some(_), None) => Some(
            "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
        ),
    };
    match problem {
        Some(p) => Err(forbidden(a, p).into()),
        None => Ok(()),
    }
}

fn admit_runtime_class<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
    pod: &'a mut Value,
) -> BoxFuture<'a, Result<()>> {
    async move {
        let Some(rc) = runtime_class(scope, a, pod).await? else {
            return Ok(());
        };
        overhead_mismatch(a, pod, Some(&rc))?;
        let Some(spec) = spec_mut(pod) else {
            return Ok(());
        };
        if let Some(fixed) = rc.pointer("/overhead/podFixed") {
            spec.entry("overhead").or_insert_with(|| fixed.clone());
        }
        if let Some(selector) = rc.pointer("/scheduling/nodeSelector").and_then(Value::as_object) {
            let current = spec
                .entry("nodeSelector")
                .or_insert_with(|| json!({}));
            if let Some(current) = current.as_object_mut() {
                for (k, v) in selector {
                    match current.get(k) {
                        Some(have) if have != v => {
                            return Err(forbidden(a, &format!(
                                "pod rejected: conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                                v.as_str().unwrap_or(""), have.as_str().unwrap_or("")
                            )).into());
                        }
                        Some(_) => {}
                        None => {
                            current.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
        if let Some(tolerations) = rc.pointer("/scheduling/tolerations").and_then(Value::as_array) {
            let current = spec
                .entry("tolerations")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(current) = current.as_array_mut() {
                for t in tolerations {
                    if !current.contains(t) {
                        current.push(t.clone());
                    }
                }
            }
        }
        Ok(())
    }
    .boxed()
}

fn validate_runtime_class<'a>(
    scope: &'a Scope<'a>,
    a: &'a Attributes<'a>,
) -> BoxFuture<'a, Result<()>> {
    async move {
        let Some(pod) = a.object else {
            return Ok(());
        };
        let rc = runtime_class(scope, a, pod).await?;
        overhead_mismatch(a, pod, rc.as_ref())
    }
    .boxed()
}

pub const RUNTIME_CLASS: Plugin = Plugin {
    name: "RuntimeClass",
    default_on: true,
    supported: true,
    handles: pod_create,
    mutate: Some(admit_runtime_class),
    validate: Some(validate_runtime_class),
};
