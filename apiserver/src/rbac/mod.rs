//! RBAC: the authorizer, its in-memory policy index, the aggregation of
//! ClusterRoles, and the escalation checks on role and binding writes.
//!
//! - **Index.** [`Rbac::start`] opens one watch per RBAC kind (Role,
//!   ClusterRole, RoleBinding, ClusterRoleBinding) on the store (the watch
//!   cache in production), with initial events; the objects live decoded in
//!   a [`Policy`] behind a `RwLock`. A request is decided from memory with
//!   no storage read; a change is visible as soon as the replica's watch
//!   delivers it. A broken watch restarts with a fresh snapshot that
//!   replaces the kind's entries whole, so a missed delete cannot linger.
//! - **Aggregation** runs on every replica, idempotently: after each
//!   ClusterRole change the replica computes, for every ClusterRole with an
//!   `aggregationRule`, the union of the rules of the ClusterRoles its
//!   selectors match (by name order, duplicates dropped, as kube's
//!   controller does) and, when it differs from the stored rules, writes it
//!   with a compare-and-swap on the revision it saw. Replicas that race
//!   compute the same union from the same objects; the loser's conflict is
//!   ignored and its next event re-checks. No leader hand-over can leave
//!   roles stale, and in-process servers (tests) need no election.
//! - **Escalation** ([`admit`]): kube's rules for writes of roles and
//!   bindings, with its refusal messages.
//!
//! The pure rule logic is `apimachinery::rbac`.
//!
//! On the floor of admission, below the state: it reads the store, the
//! request's scope, and the authorizer and index its caller passes.

pub mod policy;

use crate::auth::{Authorizer, Decision};
use crate::error::Result;
use crate::scope::RequestScope;
use apimachinery::auth::{RequestInfo, UserInfo, SYSTEM_MASTERS};
use apimachinery::rbac::{self as rules, PolicyRule, RoleRef, Subject};
use apimachinery::read::Freshness;
use apimachinery::selector::LabelSelector;
use apimachinery::Status;
use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use watchcache::{EventType, Storage, StorageError, WatchOptions};

/// The four kinds the index follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::Role,
        Kind::ClusterRole,
        Kind::RoleBinding,
        Kind::ClusterRoleBinding,
    ];

    fn plural(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// A Role or ClusterRole as the index keeps it.
#[derive(Debug, Clone)]
struct RoleEntry {
    rules: Vec<PolicyRule>,
    /// ClusterRoles only: the selectors of `aggregationRule` (`None`: not
    /// aggregated).
    aggregation: Option<Vec<LabelSelector>>,
    /// The stored object (for aggregation's label matching and writes).
    object: Arc<Value>,
    revision: i64,
}

#[derive(Debug, Clone)]
struct BindingEntry {
    name: String,
    namespace: String,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

/// Every RBAC object of the cluster, decoded. Keys are `(namespace, name)`
/// (namespace empty for cluster-scoped kinds).
#[derive(Debug, Default)]
pub struct Policy {
    roles: HashMap<(String, String), RoleEntry>,
    cluster_roles: BTreeMap<String, RoleEntry>,
    role_bindings: HashMap<String, BTreeMap<String, BindingEntry>>,
    cluster_role_bindings: BTreeMap<String, BindingEntry>,
    synced: [bool; 4],
    /// The newest revision applied per kind.
    seen: [i64; 4],
}

fn meta(obj: &Value, field: &str) -> String {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn parse_rules(v: &Value) -> Vec<PolicyRule> {
    v.get("rules")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default()
}

fn role_entry(obj: &Arc<Value>, revision: i64) -> RoleEntry {
    let aggregation = obj
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .map(|sels| {
            sels.iter()
                .filter_map(|s| LabelSelector::from_label_selector(s).ok())
                .collect()
        });
    RoleEntry {
        rules: parse_rules(obj),
        aggregation,
        object: Arc::clone(obj),
        revision,
    }
}

fn binding_entry(obj: &Value) -> BindingEntry {
    BindingEntry {
        name: meta(obj, "name"),
        namespace: meta(obj, "namespace"),
        role_ref: obj
            .get("roleRef")
            .and_then(|r| serde_json::from_value(r.clone()).ok())
            .unwrap_or_default(),
        subjects: obj
            .get("subjects")
            .and_then(|r| serde_json::from_value(r.clone()).ok())
            .unwrap_or_default(),
    }
}

/// The rules a user holds, with the errors met resolving them (bindings
/// to roles that do not exist).
#[derive(Debug, Default, Clone)]
pub struct RuleSet {
    pub rules: Vec<PolicyRule>,
    pub errors: Vec<String>,
}

fn not_found(role_ref: &RoleRef) -> String {
    format!(
        "{}.rbac.authorization.k8s.io {:?} not found",
        role_ref.kind.to_ascii_lowercase(),
        role_ref.name
    )
}

impl Policy {
    fn put(&mut self, kind: Kind, obj: &Arc<Value>, revision: i64) {
        let (ns, name) = (meta(obj, "namespace"), meta(obj, "name"));
        match kind {
            Kind::Role => {
                self.roles.insert((ns, name), role_entry(obj, revision));
            }
            Kind::ClusterRole => {
                self.cluster_roles.insert(name, role_entry(obj, revision));
            }
            Kind::RoleBinding => {
                self.role_bindings
                    .entry(ns)
                    .or_default()
                    .insert(name, binding_entry(obj));
            }
            Kind::ClusterRoleBinding => {
                self.cluster_role_bindings.insert(name, binding_entry(obj));
            }
        }
    }

    fn remove(&mut self, kind: Kind, obj: &Value) {
        let (ns, name) = (meta(obj, "namespace"), meta(obj, "name"));
        match kind {
            Kind::Role => {
                self.roles.remove(&(ns, name));
            }
            Kind::ClusterRole => {
                self.cluster_roles.remove(&name);
            }
            Kind::RoleBinding => {
                if let Some(m) = self.role_bindings.get_mut(&ns) {
                    m.remove(&name);
                }
            }
            Kind::ClusterRoleBinding => {
                self.cluster_role_bindings.remove(&name);
            }
        }
    }

    fn clear(&mut self, kind: Kind) {
        match kind {
            Kind::Role => self.roles.clear(),
            Kind::ClusterRole => self.cluster_roles.clear(),
            Kind::RoleBinding => self.role_bindings.clear(),
            Kind::ClusterRoleBinding => self.cluster_role_bindings.clear(),
        }
    }

    /// The rules a binding's roleRef names; `namespace` is a RoleBinding's.
    pub fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<&[PolicyRule]> {
        match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            "Role" if !namespace.is_empty() => self
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone())),
            _ => None,
        }
        .map(|r| r.rules.as_slice())
    }

    /// The bindings that apply to `user` for requests in `namespace`:
    /// ClusterRoleBindings first, then the namespace's RoleBindings (kube's
    /// visiting order), each with the subject that matched.
    fn applicable<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a BindingEntry, &'a Subject)> + 'a {
        let cluster = self
            .cluster_role_bindings
            .values()
            .filter(|b| b.role_ref.kind == "ClusterRole");
        let local = (!namespace.is_empty())
            .then(|| self.role_bindings.get(namespace))
            .flatten()
            .into_iter()
            .flat_map(|m| m.values());
        cluster.chain(local).filter_map(move |b| {
            b.subjects
                .iter()
                .find(|s| s.applies_to(user, &b.namespace))
                .map(|s| (b, s))
        })
    }

    /// Every rule `user` holds in `namespace` (cluster-wide when empty).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RuleSet {
        let mut out = RuleSet::default();
        for (b, _) in self.applicable(user, namespace) {
            match self.role_rules(&b.role_ref, &b.namespace) {
                Some(r) => out.rules.extend(r.iter().cloned()),
                None => out.errors.push(not_found(&b.role_ref)),
            }
        }
        out
    }

    /// kube's RBAC decision: allowed by the first rule of an applicable
    /// binding's role that allows the request; otherwise no opinion, with
    /// the resolution errors (if any) as the reason.
    pub fn decide(&self, user: &UserInfo, request: &RequestInfo) -> (Decision, String) {
        let mut errors = Vec::new();
        for (b, subject) in self.applicable(user, &request.namespace) {
            match self.role_rules(&b.role_ref, &b.namespace) {
                Some(r) if r.iter().any(|rule| rules::rule_allows(rule, request)) => {
                    let source = if b.namespace.is_empty() {
                        format!("ClusterRoleBinding {:?}", b.name)
                    } else {
                        format!("RoleBinding \"{}/{}\"", b.namespace, b.name)
                    };
                    let why = format!(
                        "RBAC: allowed by {source} of {} {:?} to {}",
                        b.role_ref.kind,
                        b.role_ref.name,
                        subject.describe()
                    );
                    return (Decision::Allow, why);
                }
                Some(_) => {}
                None => errors.push(not_found(&b.role_ref)),
            }
        }
        let reason = match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        };
        (Decision::NoOpinion(reason.clone()), reason)
    }

    /// The writes aggregation needs: `(name, new object, revision seen)`.
    fn aggregation_plan(&self) -> Vec<(String, Value, i64)> {
        let mut plan = Vec::new();
        for (name, role) in &self.cluster_roles {
            let Some(selectors) = &role.aggregation else {
                continue;
            };
            let mut union: Vec<PolicyRule> = Vec::new();
            for (other, source) in &self.cluster_roles {
                if other == name || !selectors.iter().any(|s| s.matches_object(&source.object)) {
                    continue;
                }
                for r in &source.rules {
                    if !union.contains(r) {
                        union.push(r.clone());
                    }
                }
            }
            if union != role.rules {
                let mut obj = (*role.object).clone();
                if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                obj["rules"] = serde_json::to_value(&union).unwrap_or_default();
                plan.push((name.clone(), obj, role.revision));
            }
        }
        plan
    }
}

/// The RBAC authorizer with its policy index. Dropping it stops the
/// watches.
pub struct Rbac {
    policy: Arc<RwLock<Policy>>,
    synced: tokio::sync::watch::Receiver<bool>,
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for Rbac {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

struct Feed {
    store: Arc<dyn Storage>,
    prefix: String,
    policy: Arc<RwLock<Policy>>,
    synced: tokio::sync::watch::Sender<bool>,
}

impl Feed {
    fn kind_prefix(&self, kind: Kind) -> String {
        let res = crate::registry::Registry::builtin()
            .lookup(rules::GROUP, "v1", kind.plural())
            .map(|r| crate::storage_format::segment(&r));
        let segment = res.unwrap_or_else(|| kind.plural().to_string());
        format!("{}/{segment}/", self.prefix)
    }

    /// Follows one kind for ever: snapshot, then changes; on any error a
    /// new snapshot replaces the kind's entries.
    async fn follow(self: Arc<Self>, kind: Kind) {
        let mut delay = Duration::from_millis(100);
        loop {
            match self.follow_once(kind).await {
                Ok(()) => delay = Duration::from_millis(100),
                Err(e) => {
                    tracing::warn!(error = %e, kind = kind.plural(), "RBAC watch ended; restarting");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn follow_once(&self, kind: Kind) -> std::result::Result<(), StorageError> {
        let opts = WatchOptions {
            initial_events: true,
            initial_freshness: Freshness::MostRecent,
            ..WatchOptions::default()
        };
        let mut stream = self.store.watch(&self.kind_prefix(kind), opts).await?;
        let mut snapshot: Option<Vec<watchcache::Object>> = Some(Vec::new());
        while let Some(ev) = stream.next().await {
            let ev = ev?;
            let changed = {
                let mut p = self.policy.write().unwrap_or_else(|e| e.into_inner());
                match (&mut snapshot, ev.kind) {
                    (Some(initial), EventType::Added) => {
                        initial.push(ev.object);
                        false
                    }
                    (Some(initial), EventType::Bookmark) => {
                        p.clear(kind);
                        for o in initial.drain(..) {
                            p.seen[kind as usize] = p.seen[kind as usize].max(o.revision);
                            p.put(kind, o.value_arc(), o.revision);
                        }
                        snapshot = None;
                        p.synced[kind as usize] = true;
                        let all = p.synced.iter().all(|s| *s);
                        self.synced.send_if_modified(|s| {
                            let was = *s;
                            *s = all;
                            was != all
                        });
                        true
                    }
                    (Some(_), _) => false,
                    (None, EventType::Added | EventType::Modified) => {
                        p.seen[kind as usize] = p.seen[kind as usize].max(ev.object.revision);
                        p.put(kind, ev.object.value_arc(), ev.object.revision);
                        true
                    }
                    (None, EventType::Deleted) => {
                        p.seen[kind as usize] = p.seen[kind as usize].max(ev.object.revision);
                        p.remove(kind, ev.object.value());
                        true
                    }
                    (None, EventType::Bookmark) => false,
                }
            };
            if changed && kind == Kind::ClusterRole {
                self.aggregate().await;
            }
        }
        Ok(())
    }

    /// Brings every aggregated ClusterRole's rules up to date (see the
    /// module comment: compare-and-swap, on every replica).
    async fn aggregate(&self) {
        let plan = self
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .aggregation_plan();
        for (name, obj, revision) in plan {
            let key = format!("{}{name}", self.kind_prefix(Kind::ClusterRole));
            match self.store.update(&key, &obj, revision).await {
                Ok(_) => tracing::info!(clusterrole = %name, "aggregated rules updated"),
                Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => {}
                Err(e) => {
                    tracing::warn!(clusterrole = %name, error = %e, "aggregation write failed")
                }
            }
        }
    }
}

impl Rbac {
    /// Starts following the RBAC objects under `prefix` (the storage
    /// prefix, e.g. `/registry`).
    pub fn start(store: Arc<dyn Storage>, prefix: &str) -> Arc<Rbac> {
        let policy = Arc::new(RwLock::new(Policy::default()));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let feed = Arc::new(Feed {
            store,
            prefix: prefix.trim_end_matches('/').to_string(),
            policy: Arc::clone(&policy),
            synced: tx,
        });
        let tasks = Kind::ALL
            .iter()
            .map(|k| tokio::spawn(Arc::clone(&feed).follow(*k)).abort_handle())
            .collect();
        Arc::new(Rbac {
            policy,
            synced: rx,
            tasks,
        })
    }

    /// Waits until every kind has its first snapshot.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Whether the policy has applied ClusterRoles up to `roles` and
    /// ClusterRoleBindings up to `bindings` (revisions).
    pub fn has_seen_cluster_policy(&self, roles: i64, bindings: i64) -> bool {
        let p = self.read();
        p.seen[Kind::ClusterRole as usize] >= roles
            && p.seen[Kind::ClusterRoleBinding as usize] >= bindings
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Policy> {
        self.policy.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RuleSet {
        self.read().rules_for(user, namespace)
    }

    /// The decision with kube's reason (for access reviews).
    pub fn decide(&self, user: &UserInfo, request: &RequestInfo) -> (Decision, String) {
        self.read().decide(user, request)
    }

    /// The rules of the role a binding references, or kube's not-found
    /// message.
    pub fn role_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> std::result::Result<Vec<PolicyRule>, String> {
        self.read()
            .role_rules(role_ref, namespace)
            .map(<[PolicyRule]>::to_vec)
            .ok_or_else(|| not_found(role_ref))
    }
}

#[async_trait]
impl Authorizer for Rbac {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        self.decide(user, request).0
    }
}

/// `--authorization-mode` with several modes: the first that allows or
/// denies decides, as kube's union authorizer.
pub struct Union(pub Vec<Arc<dyn Authorizer>>);

#[async_trait]
impl Authorizer for Union {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        let mut reasons = Vec::new();
        for a in &self.0 {
            match a.authorize(user, request).await {
                Decision::NoOpinion(r) => {
                    if !r.is_empty() {
                        reasons.push(r)
                    }
                }
                d => return d,
            }
        }
        Decision::NoOpinion(reasons.join(", "))
    }
}

/// Asks the chain's authorizer about a verb on an RBAC object (the
/// `escalate` and `bind` checks); members of `system:masters` may.
async fn may(
    scope: &RequestScope,
    authorizer: &dyn Authorizer,
    verb: &str,
    resource: &str,
    name: &str,
    namespace: &str,
) -> bool {
    let request = RequestInfo {
        resource_request: true,
        verb: verb.into(),
        api_group: rules::GROUP.into(),
        api_version: "*".into(),
        resource: resource.into(),
        name: name.into(),
        namespace: namespace.into(),
        ..Default::default()
    };
    crate::auth::decide(authorizer, &scope.user, &request).await == Decision::Allow
}

fn escalation_refused(scope: &RequestScope, name: &str, why: String) -> crate::error::ApiError {
    let gr = scope.res.group_resource();
    Status::forbidden(format!("{gr} {name:?} is forbidden: {why}"))
        .with_details(name, &scope.res.group, &scope.res.plural)
        .into()
}

/// Whether `user` holds every rule of `requested` in `namespace`; the
/// refusal (kube's wording) otherwise.
fn confirm_no_escalation(
    rbac: &Rbac,
    user: &UserInfo,
    namespace: &str,
    requested: &[PolicyRule],
) -> std::result::Result<(), String> {
    let held = rbac.rules_for(user, namespace);
    let missing = rules::uncovered(&held.rules, requested);
    if missing.is_empty() {
        return Ok(());
    }
    let mut msg = rules::escalation_message(user, &missing);
    if !held.errors.is_empty() {
        msg = format!("{msg}; resolution errors: [{}]", held.errors.join(", "));
    }
    Err(msg)
}

/// kube's escalation checks on writes of roles and bindings (the RBAC
/// kinds' policy-based storage), run after validation with the object as
/// it will be stored (`old`: the current one, for updates):
///
/// - members of `system:masters` may write anything;
/// - a Role/ClusterRole: allowed with `escalate` on it, else only if the
///   writer holds every rule in it (in its namespace; cluster-wide for
///   ClusterRoles); an `aggregationRule` needs full authority;
/// - a RoleBinding/ClusterRoleBinding: allowed with `bind` on the role it
///   references, else only if the writer holds every rule of that role.
///
/// Updates that change nothing but what the garbage collector writes
/// (owner references, finalizers) are not checked, as in kube; any other
/// change is (a label alone can feed an aggregated role). Without the RBAC index (another authorization mode) only the
/// authorizer's `escalate`/`bind` answer counts.
///
/// `authorizer` is the server's chain; `rbac` its RBAC index, when RBAC is
/// an authorization mode.
pub async fn admit(
    scope: &RequestScope,
    authorizer: &dyn Authorizer,
    rbac: Option<&Rbac>,
    new: &Value,
    old: Option<&Value>,
) -> Result<()> {
    if scope.res.group != rules::GROUP || scope.user.in_group(SYSTEM_MASTERS) {
        return Ok(());
    }
    let name = meta(new, "name");
    let namespace = scope.namespace.clone().unwrap_or_default();
    let is_role = matches!(&*scope.res.plural, "roles" | "clusterroles");
    if old.is_some_and(|o| only_gc_fields_changed(o, new)) {
        return Ok(());
    }
    if is_role {
        if may(
            scope,
            authorizer,
            "escalate",
            &scope.res.plural,
            &name,
            &namespace,
        )
        .await
        {
            return Ok(());
        }
        let Some(rbac) = rbac else {
            return Err(escalation_refused(
                scope,
                &name,
                "RBAC is not enabled".into(),
            ));
        };
        confirm_no_escalation(rbac, &scope.user, &namespace, &parse_rules(new))
            .map_err(|why| escalation_refused(scope, &name, why))?;
        let aggregated = new
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty());
        if scope.res.plural == "clusterroles" && aggregated {
            let full = policy::full_authority();
            if confirm_no_escalation(rbac, &scope.user, "", &full).is_err() {
                return Err(escalation_refused(
                    scope,
                    &name,
                    "must have cluster-admin privileges to use the aggregationRule".into(),
                ));
            }
        }
        return Ok(());
    }
    let role_ref: RoleRef = new
        .get("roleRef")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default();
    let role_resource = if role_ref.kind == "Role" {
        "roles"
    } else {
        "clusterroles"
    };
    if may(
        scope,
        authorizer,
        "bind",
        role_resource,
        &role_ref.name,
        &namespace,
    )
    .await
    {
        return Ok(());
    }
    let Some(rbac) = rbac else {
        return Err(escalation_refused(
            scope,
            &name,
            "RBAC is not enabled".into(),
        ));
    };
    let role_rules = rbac
        .role_rules(&role_ref, &namespace)
        .map_err(|why| escalation_refused(scope, &name, why))?;
    confirm_no_escalation(rbac, &scope.user, &namespace, &role_rules)
        .map_err(|why| escalation_refused(scope, &name, why))
}

/// Whether an update changes nothing but owner references and finalizers
/// (and the fields the server maintains).
fn only_gc_fields_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
            ] {
                m.remove(f);
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// The modes `--authorization-mode` accepts.
pub const MODES: &[&str] = &["RBAC", "AlwaysAllow"];

/// Checks a `--authorization-mode` list: known modes, none twice, at least
/// one.
pub fn validate_modes(modes: &[String]) -> std::result::Result<(), String> {
    if modes.is_empty() {
        return Err("at least one authorization-mode must be passed".into());
    }
    for (i, m) in modes.iter().enumerate() {
        if !MODES.contains(&m.as_str()) {
            return Err(format!(
                "authorization-mode {m:?} is not a valid mode (valid: {})",
                MODES.join(", ")
            ));
        }
        if modes[..i].contains(m) {
            return Err(format!(
                "authorization-mode {m:?} has already been specified"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(p: &mut Policy, kind: Kind, obj: Value) {
        p.put(kind, &Arc::new(obj), 1);
    }

    fn pods_request(verb: &str, ns: &str) -> RequestInfo {
        RequestInfo {
            resource_request: true,
            verb: verb.into(),
            resource: "pods".into(),
            namespace: ns.into(),
            ..Default::default()
        }
    }

    #[test]
    fn modes() {
        let m = |v: &[&str]| validate_modes(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(m(&["RBAC"]).is_ok());
        assert!(m(&["RBAC", "AlwaysAllow"]).is_ok());
        assert!(m(&[]).is_err());
        assert!(m(&["RBAC", "RBAC"])
            .unwrap_err()
            .contains("already been specified"));
        assert!(m(&["ABAC"])
            .unwrap_err()
            .contains("\"ABAC\" is not a valid mode"));
    }

    #[test]
    fn decisions_and_rules() {
        let mut p = Policy::default();
        put(
            &mut p,
            Kind::Role,
            json!({"metadata": {"name": "r", "namespace": "a"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        );
        put(
            &mut p,
            Kind::RoleBinding,
            json!({"metadata": {"name": "b", "namespace": "a"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "User", "name": "u"}]}),
        );
        put(
            &mut p,
            Kind::ClusterRoleBinding,
            json!({"metadata": {"name": "c"},
            "roleRef": {"kind": "ClusterRole", "name": "missing"},
            "subjects": [{"kind": "Group", "name": "g"}]}),
        );
        let u = UserInfo::new("u", vec![]);
        let sa = UserInfo::new("system:serviceaccount:a:sa", vec![]);
        assert_eq!(p.decide(&u, &pods_request("get", "a")).0, Decision::Allow);
        assert_eq!(
            p.decide(&sa, &pods_request("get", "a")).1,
            "RBAC: allowed by RoleBinding \"a/b\" of Role \"r\" to ServiceAccount \"sa\""
        );
        assert_eq!(
            p.decide(&u, &pods_request("get", "b")).0,
            Decision::NoOpinion(String::new())
        );
        assert_eq!(
            p.decide(&u, &pods_request("list", "a")).0,
            Decision::NoOpinion(String::new())
        );
        let g = UserInfo::new("x", vec!["g".into()]);
        assert_eq!(
            p.decide(&g, &pods_request("get", "a")).0,
            Decision::NoOpinion(
                "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found".into()
            )
        );
        assert_eq!(p.rules_for(&u, "a").rules.len(), 1);
        assert!(p.rules_for(&u, "").rules.is_empty());
        assert_eq!(p.rules_for(&g, "a").errors.len(), 1);
        p.remove(
            Kind::RoleBinding,
            &json!({"metadata": {"name": "b", "namespace": "a"}}),
        );
        assert_eq!(
            p.decide(&u, &pods_request("get", "a")).0,
            Decision::NoOpinion(String::new())
        );
    }

    #[test]
    fn aggregation_unions_matching_roles_in_name_order() {
        let mut p = Policy::default();
        let r1 = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let r2 = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]});
        put(
            &mut p,
            Kind::ClusterRole,
            json!({"metadata": {"name": "agg", "resourceVersion": "1"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}),
        );
        put(
            &mut p,
            Kind::ClusterRole,
            json!({"metadata": {"name": "b", "labels": {"x": "y"}}, "rules": [r2, r1]}),
        );
        put(
            &mut p,
            Kind::ClusterRole,
            json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "rules": [r1]}),
        );
        put(
            &mut p,
            Kind::ClusterRole,
            json!({"metadata": {"name": "c"}, "rules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}),
        );
        let plan = p.aggregation_plan();
        assert_eq!(plan.len(), 1);
        let (name, obj, rev) = &plan[0];
        assert_eq!((name.as_str(), *rev), ("agg", 1));
        assert_eq!(obj["rules"], json!([r1, r2]));
        assert!(obj["metadata"].get("resourceVersion").is_none());
        // Once stored, nothing more to do.
        put(&mut p, Kind::ClusterRole, obj.clone());
        assert!(p.aggregation_plan().is_empty());
    }

    #[tokio::test]
    async fn union_asks_in_order() {
        struct Deny;
        #[async_trait]
        impl Authorizer for Deny {
            async fn authorize(&self, _: &UserInfo, _: &RequestInfo) -> Decision {
                Decision::Deny("no".into())
            }
        }
        struct Shrug;
        #[async_trait]
        impl Authorizer for Shrug {
            async fn authorize(&self, _: &UserInfo, _: &RequestInfo) -> Decision {
                Decision::NoOpinion("meh".into())
            }
        }
        let u = UserInfo::default();
        let r = RequestInfo::default();
        let allow: Arc<dyn Authorizer> = Arc::new(crate::auth::AlwaysAllow);
        assert_eq!(
            Union(vec![Arc::new(Shrug), allow.clone()])
                .authorize(&u, &r)
                .await,
            Decision::Allow
        );
        assert_eq!(
            Union(vec![Arc::new(Deny), allow]).authorize(&u, &r).await,
            Decision::Deny("no".into())
        );
        assert_eq!(
            Union(vec![Arc::new(Shrug), Arc::new(Shrug)])
                .authorize(&u, &r)
                .await,
            Decision::NoOpinion("meh, meh".into())
        );
    }
}
