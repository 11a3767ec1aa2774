//! What a ResourceQuota counts, without I/O: kube's quota evaluators
//! (`pkg/quota/v1/evaluator/core` for pods, services and claims, the
//! generic object counter for everything else), scope matching, and the
//! admission check (`CheckRequest` of kube's quota admission): which quotas
//! a request charges, by how much, and kube's refusals (`exceeded quota`,
//! `must specify`, `status unknown`).
//!
//! The admission plugin and the quota controller in the server read the
//! objects and write the quotas; the rules are here.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::pod::qos_class;
use super::quantity::Quantity;

/// A `ResourceList` (`resource name -> quantity`), ordered by name as kube
/// prints it.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The quantities of a JSON resource list (entries that do not parse are
/// left out).
pub fn list_of(v: Option<&Value>) -> ResourceList {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), Quantity::of(q)?)))
        .collect()
}

/// A resource list as JSON, each quantity in kube's canonical form.
pub fn list_json(l: &ResourceList) -> Value {
    Value::Object(
        l.iter()
            .map(|(k, q)| (k.clone(), Value::String(q.to_string())))
            .collect::<Map<String, Value>>(),
    )
}

/// kube's `quota.Add`.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        out.entry(k.clone())
            .and_modify(|v| *v = v.plus(*q))
            .or_insert(*q);
    }
    out
}

/// kube's `quota.SubtractWithNonNegativeResult`.
fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    for (k, q) in a {
        let d = match b.get(k) {
            Some(o) => q.minus(*o),
            None => *q,
        };
        out.insert(k.clone(), if d.nanos > 0 { d } else { Quantity::ZERO });
    }
    for k in b.keys() {
        out.entry(k.clone()).or_insert(Quantity::ZERO);
    }
    out
}

/// kube's `quota.Mask`: only the entries named.
pub fn mask<'n>(l: &ResourceList, names: impl IntoIterator<Item = &'n String>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|n| Some((n.clone(), *l.get(n)?)))
        .collect()
}

/// kube's `quota.Equals`: the same names with equal values.
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, q)| b.get(k).is_some_and(|o| o.nanos == q.nanos))
}

/// kube's `prettyPrint`: `name=quantity` sorted by name, comma-joined.
pub fn pretty(l: &ResourceList) -> String {
    l.iter()
        .map(|(k, q)| format!("{k}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
const SERVICE_RESOURCES: &[&str] = &[
    "count/services",
    "services",
    "services.nodeports",
    "services.loadbalancers",
];
const PVC_RESOURCES: &[&str] = &["persistentvolumeclaims", "requests.storage"];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
/// The resources kube refuses a pod for not naming in every container
/// when a quota tracks them (its "backward compatibility requirement").
const MUST_SPECIFY: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// kube's `count/<resource>[.<group>]` name.
pub fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// The group and resource a `count/...` name counts.
pub fn counted(name: &str) -> Option<(&str, &str)> {
    let gr = name.strip_prefix("count/")?;
    Some(match gr.split_once('.') {
        Some((plural, group)) => (group, plural),
        None => ("", gr),
    })
}

/// kube's `IsNativeResource`: no domain, or a `kubernetes.io` one.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// How usage of one resource is measured (kube's evaluators).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluator {
    Pods,
    Services,
    PersistentVolumeClaims,
    /// One object counts 1 under each name (`count/...` and, for a few
    /// core kinds, kube's legacy alias such as `configmaps`).
    Count(Vec<String>),
}

impl Evaluator {
    /// The evaluator of a collection (kube's registry, with an object
    /// counter for every collection without its own evaluator). Events are
    /// not counted (`None`), as in kube.
    pub fn for_resource(group: &str, plural: &str) -> Option<Evaluator> {
        if !group.is_empty() {
            return Some(Evaluator::Count(vec![count_name(group, plural)]));
        }
        Some(match plural {
            "events" => return None,
            "pods" => Evaluator::Pods,
            "services" => Evaluator::Services,
            "persistentvolumeclaims" => Evaluator::PersistentVolumeClaims,
            "configmaps" | "secrets" | "resourcequotas" | "replicationcontrollers" => {
                Evaluator::Count(vec![count_name("", plural), plural.to_string()])
            }
            _ => Evaluator::Count(vec![count_name("", plural)]),
        })
    }

    /// The collection a quota resource name is measured on (for the
    /// controller's recount), as `(group, plural)`.
    pub fn collection_of(name: &str) -> Option<(&str, &str)> {
        let pod = POD_RESOURCES.contains(&name)
            || name.starts_with("hugepages-")
            || name.starts_with("requests.hugepages-")
            || (!is_native(name) && name.starts_with("requests."));
        if pod {
            return Some(("", "pods"));
        }
        if SERVICE_RESOURCES.contains(&name) {
            return Some(("", "services"));
        }
        if name == "count/persistentvolumeclaims"
            || PVC_RESOURCES.contains(&name)
            || PVC_RESOURCES
                .iter()
                .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
        {
            return Some(("", "persistentvolumeclaims"));
        }
        if let r @ ("configmaps" | "secrets" | "resourcequotas" | "replicationcontrollers") = name {
            return Some(("", r));
        }
        counted(name)
    }

    /// kube's `Handles`: which requests change usage.
    pub fn handles(&self, operation: &str, subresource: &str) -> bool {
        match self {
            Evaluator::Pods => Evaluator::handles_request("", "pods", operation, subresource),
            Evaluator::Services => {
                Evaluator::handles_request("", "services", operation, subresource)
            }
            Evaluator::PersistentVolumeClaims => {
                Evaluator::handles_request("", "persistentvolumeclaims", operation, subresource)
            }
            Evaluator::Count(_) => subresource.is_empty() && operation == "CREATE",
        }
    }

    /// [`Evaluator::handles`] for the evaluator of `group`/`plural`,
    /// without making it (every write asks).
    pub fn handles_request(group: &str, plural: &str, operation: &str, subresource: &str) -> bool {
        match (group, plural) {
            ("", "events") => false,
            ("", "pods") => {
                (subresource.is_empty() && operation == "CREATE")
                    || (subresource == "resize" && operation == "UPDATE")
            }
            ("", "services" | "persistentvolumeclaims") => {
                matches!(operation, "CREATE" | "UPDATE")
            }
            _ => subresource.is_empty() && operation == "CREATE",
        }
    }

    /// kube's `MatchingResources`: the names among `names` this evaluator
    /// measures, sorted.
    pub fn matching_resources<'n>(
        &self,
        names: impl IntoIterator<Item = &'n String>,
    ) -> Vec<String> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        for n in names {
            let hit = match self {
                Evaluator::Pods => {
                    POD_RESOURCES.contains(&n.as_str())
                        || n.starts_with("hugepages-")
                        || n.starts_with("requests.hugepages-")
                        || (!is_native(n) && n.starts_with("requests."))
                }
                Evaluator::Services => SERVICE_RESOURCES.contains(&n.as_str()),
                Evaluator::PersistentVolumeClaims => {
                    n == "count/persistentvolumeclaims"
                        || PVC_RESOURCES.contains(&n.as_str())
                        || PVC_RESOURCES
                            .iter()
                            .any(|r| n.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
                }
                Evaluator::Count(names) => names.contains(n),
            };
            if hit {
                out.insert(n.clone());
            }
        }
        out.into_iter().collect()
    }

    /// kube's `Usage`: what one object charges. `now` (Unix seconds)
    /// decides whether a deleted pod's grace period has run out.
    pub fn usage(&self, obj: &Value, now: i64) -> ResourceList {
        match self {
            Evaluator::Pods => pod_usage(obj, now),
            Evaluator::Services => service_usage(obj),
            Evaluator::PersistentVolumeClaims => pvc_usage(obj),
            Evaluator::Count(names) => names
                .iter()
                .map(|n| (n.clone(), Quantity::int(1)))
                .collect(),
        }
    }

    /// kube's `Constraints`: a pod must name in every container the cpu
    /// and memory requests or limits a quota tracks.
    pub fn constraints(&self, required: &[String], obj: &Value) -> Result<(), String> {
        if *self != Evaluator::Pods {
            return Ok(());
        }
        let required: Vec<&String> = required
            .iter()
            .filter(|r| MUST_SPECIFY.contains(&r.as_str()))
            .collect();
        let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        for key in ["containers", "initContainers"] {
            for c in spec
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let res = c.get("resources");
                let usage = container_usage(
                    &list_of(res.and_then(|r| r.get("requests"))),
                    &list_of(res.and_then(|r| r.get("limits"))),
                );
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                for r in &required {
                    if !usage.contains_key(r.as_str()) {
                        missing.entry(r.as_str()).or_default().insert(name);
                    }
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let parts: Vec<String> = missing
            .iter()
            .map(|(r, names)| {
                format!(
                    "{r} for: {}",
                    names.iter().copied().collect::<Vec<_>>().join(",")
                )
            })
            .collect();
        Err(format!("must specify {}", parts.join("; ")))
    }

    /// Whether `obj` is in the scope a selector requirement names (kube's
    /// `MatchingScopes` test for one requirement): only pods have scopes.
    pub fn matches_scope(&self, req: &ScopeRequirement, obj: &Value) -> bool {
        if *self != Evaluator::Pods {
            return false;
        }
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        match req.scope.as_str() {
            "Terminating" => is_terminating(spec),
            "NotTerminating" => !is_terminating(spec),
            "BestEffort" => qos_class(spec) == "BestEffort",
            "NotBestEffort" => qos_class(spec) != "BestEffort",
            "PriorityClass" => {
                let class = spec
                    .get("priorityClassName")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let has = !class.is_empty();
                match req.operator.as_str() {
                    "Exists" => has,
                    "DoesNotExist" => !has,
                    "In" => has && req.values.iter().any(|v| v == class),
                    "NotIn" => !has || !req.values.iter().any(|v| v == class),
                    _ => false,
                }
            }
            "CrossNamespacePodAffinity" => cross_namespace_affinity(spec),
            _ => false,
        }
    }

    /// kube's `generic.Matches`: the quota tracks something this
    /// evaluator measures (by its `status.hard`), and `obj` is in every
    /// scope of the quota.
    pub fn matches(&self, quota: &Value, obj: &Value) -> bool {
        let hard = list_of(quota.pointer("/status/hard"));
        !self.matching_resources(hard.keys()).is_empty()
            && scope_requirements(quota)
                .iter()
                .all(|r| self.matches_scope(r, obj))
    }
}

/// One scope requirement of a quota: a `spec.scopes` entry (`Exists`) or
/// a `spec.scopeSelector.matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequirement {
    pub scope: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// kube's `getScopeSelectorsFromQuota`.
pub fn scope_requirements(quota: &Value) -> Vec<ScopeRequirement> {
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let mut out: Vec<ScopeRequirement> = strs(quota.pointer("/spec/scopes"))
        .into_iter()
        .map(|scope| ScopeRequirement {
            scope,
            operator: "Exists".into(),
            values: Vec::new(),
        })
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        out.push(ScopeRequirement {
            scope: s("scopeName"),
            operator: s("operator"),
            values: strs(e.get("values")),
        });
    }
    out
}

fn is_terminating(spec: &Value) -> bool {
    spec.get("activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0)
}

fn cross_namespace_affinity(spec: &Value) -> bool {
    let term = |t: &Value| {
        t.get("namespaces")
            .and_then(Value::as_array)
            .is_some_and(|n| !n.is_empty())
            || t.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let a = spec.pointer(&format!("/affinity/{kind}"));
        let required = a
            .and_then(|a| a.get("requiredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .is_some_and(|ts| ts.iter().any(term));
        let preferred = a
            .and_then(|a| a.get("preferredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .is_some_and(|ts| {
                ts.iter()
                    .any(|t| t.get("podAffinityTerm").is_some_and(term))
            });
        required || preferred
    })
}

/// kube's `podComputeUsageHelper`: what a pod's (or a container's)
/// requests and limits charge.
fn container_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("pods".into(), Quantity::int(1));
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.into(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (r, q) in requests {
        if r.starts_with("hugepages-") {
            out.insert(r.clone(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        // Extended resources: not native, not `requests.`-prefixed.
        if !is_native(r) && !r.starts_with("requests.") {
            out.insert(format!("requests.{r}"), *q);
        }
    }
    out
}

/// kube's `maxResourceList`: each entry of `new` that is larger (or
/// missing) replaces the one in `into`.
fn max_into(into: &mut ResourceList, new: &ResourceList) {
    for (k, q) in new {
        match into.get(k) {
            Some(o) if o.nanos >= q.nanos => {}
            _ => {
                into.insert(k.clone(), *q);
            }
        }
    }
}

/// kube's `PodRequests` / `PodLimits` (component-helpers) over the spec:
/// the containers' sum, at least the largest init container (each counted
/// with the sidecars started before it; sidecars add to the sum), then
/// pod-level cpu, memory and hugepages when set, then the overhead
/// (added to every request; to a limit only where there is one).
pub fn pod_resources(spec: &Value, which: &str, overhead: bool) -> ResourceList {
    let of = |c: &Value| list_of(c.pointer(&format!("/resources/{which}")));
    let mut total = ResourceList::new();
    for c in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        total = add(&total, &of(c));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let own = of(c);
        let this = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            total = add(&total, &own);
            sidecars = add(&sidecars, &own);
            sidecars.clone()
        } else {
            add(&own, &sidecars)
        };
        max_into(&mut init_max, &this);
    }
    max_into(&mut total, &init_max);
    for (k, q) in list_of(spec.pointer(&format!("/resources/{which}"))) {
        if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
            total.insert(k, q);
        }
    }
    if overhead {
        for (k, q) in list_of(spec.get("overhead")) {
            if which == "requests" {
                total = add(&total, &ResourceList::from([(k, q)]));
            } else if let Some(v) = total.get_mut(&k) {
                *v = v.plus(q);
            }
        }
    }
    total
}

/// kube's `QuotaV1Pod`: a pod is charged for compute (and `pods`) unless
/// it is terminal or deleted past its grace period.
fn charged(pod: &Value, now: i64) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return false;
    }
    let deleted = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(crate::kinds::print::parse_time);
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    match (deleted, grace) {
        (Some(at), Some(g)) => now <= at + g,
        _ => true,
    }
}

fn pod_usage(pod: &Value, now: i64) -> ResourceList {
    let mut out = ResourceList::from([("count/pods".to_string(), Quantity::int(1))]);
    if !charged(pod, now) {
        return out;
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let requests = pod_resources(spec, "requests", true);
    let limits = pod_resources(spec, "limits", true);
    out = add(&out, &container_usage(&requests, &limits));
    out
}

fn service_usage(svc: &Value) -> ResourceList {
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(0, Vec::len) as i64;
    let ty = svc.pointer("/spec/type").and_then(Value::as_str);
    let (node_ports, lbs) = match ty {
        Some("NodePort") => (ports, 0),
        Some("LoadBalancer") => (ports, 1),
        _ => (0, 0),
    };
    ResourceList::from([
        ("count/services".to_string(), Quantity::int(1)),
        ("services".to_string(), Quantity::int(1)),
        ("services.loadbalancers".to_string(), Quantity::int(lbs)),
        ("services.nodeports".to_string(), Quantity::int(node_ports)),
    ])
}

/// kube's `GetPersistentVolumeClaimClass`: the beta annotation, else
/// `spec.storageClassName`.
fn claim_class(pvc: &Value) -> &str {
    pvc.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .or_else(|| pvc.pointer("/spec/storageClassName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn pvc_usage(pvc: &Value) -> ResourceList {
    let mut out = ResourceList::from([
        ("persistentvolumeclaims".to_string(), Quantity::int(1)),
        ("count/persistentvolumeclaims".to_string(), Quantity::int(1)),
    ]);
    let class = claim_class(pvc);
    if !class.is_empty() {
        out.insert(
            format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            Quantity::int(1),
        );
    }
    let mut storage = pvc
        .pointer("/spec/resources/requests/storage")
        .and_then(Quantity::of)
        .map(Quantity::round_up);
    // RecoverVolumeExpansionFailure (on by default): a larger allocation
    // is what is charged.
    if let (Some(req), Some(alloc)) = (
        storage,
        pvc.pointer("/status/allocatedResources/storage")
            .and_then(Quantity::of),
    ) {
        if alloc.nanos > req.nanos {
            storage = Some(alloc.round_up());
        }
    }
    if let Some(q) = storage {
        out.insert("requests.storage".into(), q);
        if !class.is_empty() {
            out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"), q);
        }
    }
    out
}

/// The request as the quota check sees it.
pub struct Request<'a> {
    pub operation: &'a str,
    pub subresource: &'a str,
    pub object: &'a Value,
    /// The stored object, for an update.
    pub old: Option<&'a Value>,
    /// Unix seconds.
    pub now: i64,
}

/// kube's `hasUsageStats`: every tracked resource of interest has a used
/// value.
fn has_usage_stats(quota: &Value, interesting: &[String]) -> bool {
    let hard = list_of(quota.pointer("/status/hard"));
    let used = quota.pointer("/status/used").and_then(Value::as_object);
    hard.keys()
        .filter(|k| interesting.contains(k))
        .all(|k| used.is_some_and(|u| u.contains_key(k)))
}

fn quota_name(quota: &Value) -> &str {
    quota
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// kube's `CheckRequest`: the new `status.used` of each quota `request`
/// charges (indexes into `quotas`; quotas it does not change are left
/// out), or kube's refusal message.
pub fn check(
    ev: &Evaluator,
    quotas: &[&Value],
    request: &Request<'_>,
) -> Result<Vec<(usize, ResourceList)>, String> {
    if !ev.handles(request.operation, request.subresource) {
        return Ok(Vec::new());
    }
    let obj = request.object;
    let mut interesting = Vec::new();
    for (i, q) in quotas.iter().enumerate() {
        if !ev.matches(q, obj) {
            continue;
        }
        let hard = list_of(q.pointer("/status/hard"));
        let restricted = ev.matching_resources(hard.keys());
        ev.constraints(&restricted, obj)
            .map_err(|e| format!("failed quota: {}: {e}", quota_name(q)))?;
        if !has_usage_stats(q, &restricted) {
            return Err(format!(
                "status unknown for quota: {}, resources: {}",
                quota_name(q),
                restricted.join(",")
            ));
        }
        interesting.push(i);
    }
    let input = ev.usage(obj, request.now);
    let negative: Vec<&str> = input
        .iter()
        .filter(|(_, q)| q.nanos < 0)
        .map(|(k, _)| k.as_str())
        .collect();
    if !negative.is_empty() {
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            negative.join(",")
        ));
    }
    let mut deltas: BTreeMap<usize, ResourceList> =
        interesting.iter().map(|i| (*i, input.clone())).collect();
    if request.operation == "UPDATE" {
        let Some(old) = request.old else {
            return Err(
                "unable to get previous usage since prior version of object was not found".into(),
            );
        };
        let has_version = old
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty());
        if has_version {
            let delta = subtract_non_negative(&input, &ev.usage(old, request.now));
            for i in &interesting {
                if ev.matches(quotas[*i], old) {
                    deltas.insert(*i, delta.clone());
                }
            }
        }
    }
    deltas.retain(|_, d| {
        d.retain(|_, q| !q.is_zero());
        !d.is_empty()
    });
    let mut out = Vec::new();
    for (i, delta) in deltas {
        let q = quotas[i];
        let hard = list_of(q.pointer("/status/hard"));
        let used = list_of(q.pointer("/status/used"));
        let requested = mask(&delta, hard.keys());
        let new_used = add(&used, &requested);
        if request.subresource != "status" {
            let exceeded: Vec<String> = requested
                .keys()
                .filter(|k| {
                    matches!((new_used.get(*k), hard.get(*k)), (Some(u), Some(h)) if u.nanos > h.nanos)
                })
                .cloned()
                .collect();
            if !exceeded.is_empty() {
                return Err(format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    quota_name(q),
                    pretty(&mask(&requested, &exceeded)),
                    pretty(&mask(&used, &exceeded)),
                    pretty(&mask(&hard, &exceeded)),
                ));
            }
        }
        if !equals(&new_used, &used) {
            out.push((i, new_used));
        }
    }
    Ok(out)
}

/// kube's `CalculateUsageStats` for one evaluator: what `objects` (one
/// collection of the quota's namespace) use of `resources`, counting only
/// objects in every scope of the quota; each resource starts at 0.
pub fn usage_stats<'o>(
    ev: &Evaluator,
    quota: &Value,
    resources: &[String],
    objects: impl IntoIterator<Item = &'o Value>,
    now: i64,
) -> ResourceList {
    let mut used: ResourceList = resources
        .iter()
        .map(|r| (r.clone(), Quantity::ZERO))
        .collect();
    let scopes = scope_requirements(quota);
    for o in objects {
        if scopes.iter().all(|s| ev.matches_scope(s, o)) {
            used = add(&used, &ev.usage(o, now));
        }
    }
    mask(&used, resources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn quota(name: &str, hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"hard": hard},
               "status": {"hard": hard, "used": used}})
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    fn create<'a>(obj: &'a Value) -> Request<'a> {
        Request {
            operation: "CREATE",
            subresource: "",
            object: obj,
            old: None,
            now: 0,
        }
    }

    #[test]
    fn pod_usage_counts_requests_limits_and_sidecars() {
        let p = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"},
                                            "limits": {"cpu": "200m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "300m"}}}],
            "initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": "1"}}},
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}],
            "overhead": {"cpu": "10m"}}});
        let u = Evaluator::Pods.usage(&p, 0);
        // containers 400m + sidecar 50m = 450m; the init container needs 1
        // (no sidecar before it): the max is 1, plus 10m overhead.
        assert_eq!(u["requests.cpu"].to_string(), "1010m");
        assert_eq!(u["cpu"].to_string(), "1010m");
        assert_eq!(u["limits.cpu"].to_string(), "210m");
        assert_eq!(u["requests.memory"].to_string(), "1Gi");
        assert_eq!(u["pods"].to_string(), "1");
        assert_eq!(u["count/pods"].to_string(), "1");
        let done = json!({"spec": {}, "status": {"phase": "Succeeded"}});
        assert_eq!(
            Evaluator::Pods.usage(&done, 0).keys().collect::<Vec<_>>(),
            ["count/pods"]
        );
    }

    #[test]
    fn services_claims_and_counts() {
        let lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 1}, {"port": 2}]}});
        let u = Evaluator::Services.usage(&lb, 0);
        assert_eq!(
            pretty(&u),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
        );
        let pvc = json!({"spec": {"storageClassName": "gold",
            "resources": {"requests": {"storage": "1500m"}}}});
        let u = Evaluator::PersistentVolumeClaims.usage(&pvc, 0);
        assert_eq!(u["requests.storage"].to_string(), "2");
        assert_eq!(
            u["gold.storageclass.storage.k8s.io/requests.storage"].to_string(),
            "2"
        );
        assert_eq!(
            Evaluator::for_resource("apps", "deployments"),
            Some(Evaluator::Count(vec!["count/deployments.apps".into()]))
        );
        assert_eq!(
            Evaluator::for_resource("", "configmaps"),
            Some(Evaluator::Count(vec![
                "count/configmaps".into(),
                "configmaps".into()
            ]))
        );
        assert_eq!(Evaluator::for_resource("", "events"), None);
        assert_eq!(
            Evaluator::collection_of("count/widgets.example.com"),
            Some(("example.com", "widgets"))
        );
        assert_eq!(Evaluator::collection_of("requests.cpu"), Some(("", "pods")));
        assert_eq!(Evaluator::collection_of("secrets"), Some(("", "secrets")));
    }

    #[test]
    fn exceeded_quota_message() {
        let full = quota(
            "q",
            json!({"pods": "2", "requests.cpu": "1"}),
            json!({"pods": "2", "requests.cpu": "0"}),
        );
        let p = pod(json!([{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]));
        let err = check(&Evaluator::Pods, &[&full], &create(&p)).unwrap_err();
        assert_eq!(
            err,
            "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
        );
        let roomy = quota(
            "q",
            json!({"pods": "3", "requests.cpu": "1"}),
            json!({"pods": "2", "requests.cpu": "900m"}),
        );
        let big = pod(json!([{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]));
        assert_eq!(
            check(&Evaluator::Pods, &[&roomy], &create(&big)).unwrap_err(),
            "exceeded quota: q, requested: requests.cpu=200m, used: requests.cpu=900m, limited: requests.cpu=1"
        );
        let ok = check(&Evaluator::Pods, &[&roomy], &create(&p)).unwrap();
        assert_eq!(ok.len(), 1);
        assert_eq!(pretty(&ok[0].1), "pods=3,requests.cpu=1");
    }

    #[test]
    fn must_specify_and_status_unknown() {
        let cpu = quota(
            "compute",
            json!({"requests.cpu": "1", "limits.memory": "1Gi"}),
            json!({"requests.cpu": "0", "limits.memory": "0"}),
        );
        let p = pod(
            json!([{"name": "b", "resources": {}}, {"name": "a", "resources": {"requests": {"cpu": "1m"}}}]),
        );
        assert_eq!(
            check(&Evaluator::Pods, &[&cpu], &create(&p)).unwrap_err(),
            "failed quota: compute: must specify limits.memory for: a,b; requests.cpu for: b"
        );
        let unknown = quota("fresh", json!({"pods": "1"}), json!({}));
        assert_eq!(
            check(&Evaluator::Pods, &[&unknown], &create(&p)).unwrap_err(),
            "status unknown for quota: fresh, resources: pods"
        );
        // Without status.hard the quota does not apply yet.
        let new = json!({"metadata": {"name": "n"}, "spec": {"hard": {"pods": "0"}}});
        assert!(check(&Evaluator::Pods, &[&new], &create(&p))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn scopes_and_updates() {
        let mut be = quota("be", json!({"pods": "1"}), json!({"pods": "1"}));
        be["spec"]["scopes"] = json!(["NotBestEffort"]);
        let best_effort = pod(json!([{"name": "c"}]));
        assert!(check(&Evaluator::Pods, &[&be], &create(&best_effort))
            .unwrap()
            .is_empty());
        let mut pc = quota("pc", json!({"pods": "5"}), json!({"pods": "0"}));
        pc["spec"]["scopeSelector"] = json!({"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]});
        let mut high = best_effort.clone();
        high["spec"]["priorityClassName"] = json!("high");
        assert_eq!(
            check(&Evaluator::Pods, &[&pc], &create(&high))
                .unwrap()
                .len(),
            1
        );
        assert!(check(&Evaluator::Pods, &[&pc], &create(&best_effort))
            .unwrap()
            .is_empty());
        // A claim growing by 1Gi is charged the difference.
        let st = quota(
            "st",
            json!({"requests.storage": "3Gi"}),
            json!({"requests.storage": "1Gi"}),
        );
        let old = json!({"metadata": {"resourceVersion": "5"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}});
        let new = json!({"metadata": {"resourceVersion": "5"}, "spec": {"resources": {"requests": {"storage": "2Gi"}}}});
        let got = check(
            &Evaluator::PersistentVolumeClaims,
            &[&st],
            &Request {
                operation: "UPDATE",
                subresource: "",
                object: &new,
                old: Some(&old),
                now: 0,
            },
        )
        .unwrap();
        assert_eq!(pretty(&got[0].1), "requests.storage=2Gi");
    }

    #[test]
    fn usage_stats_start_at_zero() {
        let qv = quota(
            "q",
            json!({"pods": "10", "requests.memory": "1Gi"}),
            json!({}),
        );
        let pods = [
            pod(json!([{"name": "c", "resources": {"requests": {"memory": "100Mi"}}}])),
            pod(json!([{"name": "c"}])),
        ];
        let names = vec!["pods".to_string(), "requests.memory".to_string()];
        let used = usage_stats(&Evaluator::Pods, &qv, &names, pods.iter(), 0);
        assert_eq!(pretty(&used), "pods=2,requests.memory=100Mi");
        let none = usage_stats(&Evaluator::Pods, &qv, &names, [].iter(), 0);
        assert_eq!(pretty(&none), "pods=0,requests.memory=0");
        assert_eq!(q("1Gi").to_string(), "1Gi");
    }
}
