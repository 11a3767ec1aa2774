//! The resource registry: one table that drives every generic code path
//! (routing, storage keys, discovery, OpenAPI, validation rules, field
//! selectors). Adding a built-in kind is adding a row to [`builtin`]; no
//! handler code is per kind. Schemas come from the upstream OpenAPI facts in
//! `apimachinery::schema`, looked up by group/version/kind.
//!
//! A row is a [`Row`]: a built-in kind's is part of the program, a CRD's is
//! reference counted and freed with the last request, watch or controller
//! that holds it. Rows name the behaviour that lives in higher floors
//! (which function answers a create-only kind, a connection, a computed
//! list, which storage hooks run) as data ([`CreateAnswer`],
//! [`ConnectTarget`], [`ComputedSource`], [`Hooks`]), so this floor imports
//! nothing of the handlers or the server.
//!
//! The bottom of the model floor: the registry and its children import
//! nothing of `crd`, `conversion`, `error` or `object` (they import the
//! registry). What a CRD says of a served version ([`custom`]), its CEL
//! rules ([`cel`]) and the CRD kind's own rules ([`definition`]) are parts
//! of rows, so they live here; `crate::crd` builds a CRD's rows from them.

mod builtin;
pub mod cel;
pub mod custom;
pub mod definition;
pub use builtin::RESOURCES;

use apimachinery::kinds::{self, KindRules};
use apimachinery::read::FieldAttr;
pub use apimachinery::shared::{Shared, Str};
use apimachinery::Status;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// How `metadata.name` is validated for a kind (kube's ValidateNameFunc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most kinds).
    Subdomain,
    /// DNS-1123 label (namespaces, services).
    Label,
    /// Any path segment name (RBAC kinds, events).
    PathSegment,
}

/// A row of the registry: a built-in kind's (static) or a CRD's (shared,
/// freed with its last holder). Clones are O(1).
pub type Row = Shared<Resource>;

#[derive(Debug, Clone)]
pub enum Subresource {
    Status,
    /// `/scale`, an autoscaling/v1 Scale mapped onto the kind's replicas.
    Scale {
        /// JSON pointer of the spec replica count.
        spec_replicas: Str,
        /// JSON pointer of the observed replica count.
        status_replicas: Str,
        /// JSON pointer of the label selector, held as `selector_form`
        /// says; empty: none.
        selector: Str,
        selector_form: ScaleSelector,
    },
    /// A part of the object written on its own (`/approval`,
    /// `/finalize`, ...).
    Part(&'static apimachinery::kinds::Part),
    /// A create-only subresource taking a body of its own kind
    /// (`pods/binding`: a Binding), answered as `answer` says through the
    /// generic create path.
    Create {
        name: &'static str,
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        answer: CreateAnswer,
    },
    /// A subresource kube answers by connecting to a kubelet (or to a
    /// Service's endpoints): `pods/exec`, `pods/log`, `nodes/proxy`, ...
    Connect(&'static Connect),
}

/// How a kind holds the label selector its Scale shows (as a string in
/// `status.selector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleSelector {
    /// A `LabelSelector` object (the apps workloads' `spec.selector`).
    LabelSelector,
    /// A plain label map (a ReplicationController's `spec.selector`).
    Map,
    /// The selector's string form, as a CRD's `labelSelectorPath` points
    /// at (kube reads it as a string; another type is an error).
    String,
}

/// A subresource kube answers by connecting elsewhere (kube's
/// `rest.Connecter`, and the pod log's `GetterWithOptions`). This server
/// has no kubelets: `answer` says so in a Status, after the checks kube
/// makes before it would connect.
#[derive(Debug)]
pub struct Connect {
    pub name: &'static str,
    /// The options kind discovery and OpenAPI name (`PodExecOptions`).
    pub kind: &'static str,
    /// The verbs discovery lists (RBAC checks them per HTTP method).
    pub verbs: &'static [&'static str],
    /// The HTTP methods served, lower case.
    pub methods: &'static [&'static str],
    /// The query parameters of the options kind: name and OpenAPI type.
    pub params: &'static [(&'static str, &'static str)],
    /// Also served with a trailing path (`proxy/{path}`).
    pub with_path: bool,
    /// A read of the parent (kube's `get` action: `pods/log`) rather than
    /// a `connect`.
    pub read: bool,
    /// Who answers it (`handlers::connect`).
    pub target: ConnectTarget,
}

/// Where a [`Connect`] subresource would connect; `handlers::connect`
/// answers each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectTarget {
    PodLog,
    PodExec,
    PodAttach,
    PodPortForward,
    PodProxy,
    NodeProxy,
    ServiceProxy,
}

/// A resource whose objects are computed when asked for, never stored
/// (`componentstatuses`): get and list only.
#[derive(Debug)]
pub struct Computed {
    /// What lists the objects (`handlers::computed`).
    pub source: ComputedSource,
    /// The answer to a GET of a name `list` does not have.
    pub not_found: fn(&str) -> Status,
    /// A warning sent with every answer (a deprecated kind).
    pub warning: Option<&'static str>,
}

/// The source of a [`Computed`] kind's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputedSource {
    /// The component statuses (`componentstatus::statuses`).
    ComponentStatuses,
}

/// The answer to a create of a create-only kind or subresource: the
/// generic create path decodes the request object (kind checked,
/// `metadata.namespace` defaulted to the path's), runs the mutating half
/// of admission, and hands it, with the validating half to run once its
/// own checks pass and before it acts, to the function
/// `handlers::create::answer` names for this tag; that function returns
/// the response object. Every other verb is 405. Adding a virtual kind is
/// a table row, a tag, and one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateAnswer {
    /// `bindings` and `pods/binding`.
    Binding,
    /// `pods/eviction`.
    Eviction,
    /// `serviceaccounts/token`.
    TokenRequest,
    SelfSubjectReview,
    TokenReview,
    LocalSubjectAccessReview,
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
}

/// The storage steps of a kind around a write that reach outside the
/// object; the write path runs the functions `allocator` has for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// Service ClusterIP and NodePort allocation.
    ServiceAllocation,
}

impl Subresource {
    /// The verbs it serves (discovery, OpenAPI, and which methods it
    /// takes).
    pub fn verbs(&self) -> &'static [&'static str] {
        match self {
            Subresource::Status | Subresource::Scale { .. } => &["get", "patch", "update"],
            Subresource::Part(p) => p.verbs,
            Subresource::Create { .. } => &["create"],
            Subresource::Connect(c) => c.verbs,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale { .. } => "scale",
            Subresource::Part(p) => p.name,
            Subresource::Create { name, .. } => name,
            Subresource::Connect(c) => c.name,
        }
    }
}

/// One REST resource.
#[derive(Debug)]
pub struct Resource {
    pub group: Str,
    pub version: Str,
    pub kind: Str,
    pub plural: Str,
    pub singular: Str,
    pub short_names: Shared<[Str]>,
    pub categories: Shared<[Str]>,
    pub namespaced: bool,
    pub subresources: Shared<[Subresource]>,
    /// Kind-specific fields a field selector may use.
    pub field_attrs: Shared<[FieldAttr]>,
    pub name_rule: NameRule,
    /// JSON pointers that may not change after create.
    pub immutable: &'static [&'static str],
    /// Whether `metadata.generation` is tracked (kinds with a spec).
    pub generation: bool,
    /// Whether PUT of a missing object creates it (kube's AllowCreateOnUpdate).
    pub create_on_update: bool,
    /// Whether an immediate DELETE answers with the deleted object (kube's
    /// ReturnDeletedObject) rather than a Success Status.
    pub delete_returns_object: bool,
    /// A virtual kind (access reviews, token reviews): create only, never
    /// stored, answered as [`CreateAnswer`] says.
    pub virtual_create: Option<CreateAnswer>,
    /// A computed kind (component statuses): get and list only, answered
    /// by [`Computed`].
    pub computed: Option<&'static Computed>,
    /// A finalizer the server adds when deletion of such an object starts,
    /// for a controller of this server to remove once its clean-up is done
    /// (CRDs: kube's `customresourcecleanup.apiextensions.k8s.io`).
    pub delete_finalizer: Option<&'static str>,
    /// What the kind does beyond its schema: defaults, strategy,
    /// validation, Table columns (`apimachinery::kinds`).
    pub rules: &'static KindRules,
    /// Steps of the kind's storage around a write that reach outside the
    /// object (Service IP and port allocation); `None` for most kinds.
    pub hooks: Option<Hooks>,
    /// Objects expire `--event-ttl` after their last write, through a
    /// shared etcd lease (kube's TTLFunc for events).
    pub ttl_lease: bool,
    /// A create keeps the client's `status` (kube's Node strategy: the
    /// kubelet registers its node with status); other kinds with a status
    /// subresource start without one.
    pub keep_status_on_create: bool,
    /// What a CustomResourceDefinition says of a resource it defines
    /// (schema, printer columns, versions); `None` for built-in kinds.
    pub custom: Option<Arc<custom::CustomInfo>>,
    /// A built-in kind served in several versions: its storage version and
    /// the conversion between them (`crate::conversion`). Every row of the
    /// kind names the same one and shares the storage segment.
    pub conversion: Option<&'static apimachinery::kinds::Conversion>,
    /// What a DELETE that names no propagation policy does to the
    /// object's dependents (kube's `DefaultGarbageCollectionPolicy`).
    pub gc_policy: GcPolicy,
    /// What a DELETE of the kind does beyond finalizers and the garbage
    /// collector's policy.
    pub delete: DeleteRules,
}

/// A kind's delete strategy beyond finalizers (kube's
/// `RESTGracefulDeleteStrategy` and the kinds whose REST deletes on their
/// own terms). [`DeleteRules::DEFAULT`] is most kinds'.
#[derive(Debug, Clone, Copy)]
pub struct DeleteRules {
    /// Whether the collection may be deleted at once (kube serves no
    /// `deletecollection` for namespaces).
    pub collection: bool,
    /// The grace period of an object's delete, from the object and the
    /// requested one (kube's `CheckGracefulDelete`): `Some` keeps the
    /// object, marked, for that many seconds' worth of clean-up.
    pub grace_period: Option<GracePeriod>,
    /// The kind's delete always marks the object and waits (a namespace's
    /// content is deleted by its controller first); this writes what the
    /// mark adds (a namespace's `Terminating` phase).
    pub mark: Option<fn(&mut serde_json::Value)>,
    /// `spec.finalizers` hold a marked object too (namespaces').
    pub spec_finalizers: bool,
}

/// A kind's grace period rule: the object and the requested period give
/// the period to wait, if any.
pub type GracePeriod = fn(&serde_json::Value, Option<i64>) -> Option<i64>;

impl DeleteRules {
    pub const DEFAULT: DeleteRules = DeleteRules {
        collection: true,
        grace_period: None,
        mark: None,
        spec_finalizers: false,
    };
}

/// A kind's default propagation of deletes to its dependents (kube's
/// `rest.GarbageCollectionPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcPolicy {
    /// Dependents are collected once the owner is gone (most kinds).
    Background,
    /// Dependents lose their reference and stay: kube keeps this default
    /// for `v1` ReplicationControllers and `batch/v1` Jobs, for backward
    /// compatibility.
    Orphan,
    /// Deletes never add the garbage collector's finalizers (Events).
    Unsupported,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn group_resource(&self) -> apimachinery::status::GroupResource<'_> {
        apimachinery::status::GroupResource {
            group: &self.group,
            resource: &self.plural,
        }
    }

    pub fn group_kind(&self) -> apimachinery::status::GroupKind<'_> {
        apimachinery::status::GroupKind {
            group: &self.group,
            kind: &self.kind,
        }
    }

    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name() == name)
    }

    /// Whether objects may be stored in another version than the one this
    /// row serves (or need defaults on read): reads go through
    /// [`crate::conversion`].
    pub fn converts(&self) -> bool {
        self.custom.is_some() || self.conversion.is_some()
    }

    /// The group, version and kind objects are stored as (kube's storage
    /// version: a CRD's `storage` version, a built-in kind's storage
    /// override), or `None` for a kind that is never stored (reviews,
    /// bindings, component statuses).
    pub fn storage_gvk(&self) -> Option<(&str, &str, &str)> {
        if self.virtual_create.is_some() || self.computed.is_some() {
            return None;
        }
        if let Some(c) = &self.custom {
            return Some((&self.group, &c.storage_version, &self.kind));
        }
        if let Some(c) = self.conversion {
            let (group, version) = c
                .storage_version
                .rsplit_once('/')
                .unwrap_or(("", c.storage_version));
            return Some((group, version, &self.kind));
        }
        Some((&self.group, &self.version, &self.kind))
    }

    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// The schema of this kind: the upstream one for a built-in kind, the
    /// CRD's for a custom resource.
    pub fn schema(&self) -> Option<apimachinery::schema::TypeRef<'_>> {
        match &self.custom {
            Some(c) => c.schema(),
            None => apimachinery::schema::builtin().by_gvk(&self.group, &self.version, &self.kind),
        }
    }

    /// `f` with [`Self::schema`], for a reader that visits every row once
    /// (OpenAPI): a CRD's schema not built yet is built for `f` alone
    /// (`CustomInfo::with_schema`), not kept.
    pub fn with_schema<R>(
        &self,
        f: impl FnOnce(Option<apimachinery::schema::TypeRef<'_>>) -> R,
    ) -> R {
        match &self.custom {
            Some(c) => c.with_schema(f),
            None => f(self.schema()),
        }
    }
}

/// A group with its served versions (preferred first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersions {
    pub group: Str,
    pub versions: Vec<Str>,
}

/// The lookup side of the registry: the built-in rows plus the rows that
/// CustomResourceDefinitions add and remove at run time.
///
/// Clones share one table. Readers take a snapshot (an `Arc` of row
/// references) and never block writers for longer than the swap; the
/// generation moves with every change so that derived documents
/// (discovery, OpenAPI) know when to rebuild.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    builtin: &'static [Resource],
    /// Rows added at run time, in the order they were installed.
    dynamic: RwLock<Arc<Dynamic>>,
    generation: AtomicU64,
    /// Carries the generation to those who follow changes
    /// ([`Registry::changes`]).
    changed: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("generation", &self.generation())
            .field("dynamic", &self.dynamic().rows.len())
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

/// The run-time rows and their index by a hash of group, version and
/// plural (there may be thousands: one per served version of every CRD).
#[derive(Default)]
struct Dynamic {
    rows: Vec<Row>,
    index: std::collections::HashMap<u64, Vec<Row>>,
}

/// The index key of a row's name.
fn key_of(group: &str, version: &str, plural: &str) -> u64 {
    use std::hash::BuildHasher;
    // Fixed keys: the index is rebuilt on every change, never persisted.
    static HASHER: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    HASHER
        .get_or_init(Default::default)
        .hash_one((group, version, plural))
}

/// A consistent view of every row at one generation.
pub struct Snapshot {
    builtin: &'static [Resource],
    dynamic: Arc<Dynamic>,
}

impl Snapshot {
    /// Every row, built-in first.
    pub fn iter(&self) -> impl Iterator<Item = Row> + '_ {
        self.builtin
            .iter()
            .map(Shared::Static)
            .chain(self.dynamic.rows.iter().cloned())
    }

    /// Every row by reference, for scans that keep nothing (no reference
    /// count moves).
    pub fn refs(&self) -> impl Iterator<Item = &Resource> + '_ {
        self.builtin
            .iter()
            .chain(self.dynamic.rows.iter().map(|r| &**r))
    }

    /// The rows `keep` picks, as rows; the others are only looked at.
    pub fn filter<'a>(
        &'a self,
        keep: impl Fn(&Resource) -> bool + Copy + 'a,
    ) -> impl Iterator<Item = Row> + 'a {
        self.builtin
            .iter()
            .filter(move |r| keep(r))
            .map(Shared::Static)
            .chain(self.dynamic.rows.iter().filter(move |r| keep(r)).cloned())
    }
}

impl Registry {
    /// A registry of the built-in kinds only (a new table each call).
    pub fn builtin() -> Self {
        Registry {
            inner: Arc::new(Inner {
                builtin: &RESOURCES,
                dynamic: RwLock::new(Arc::new(Dynamic::default())),
                generation: AtomicU64::new(0),
                changed: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    fn dynamic(&self) -> Arc<Dynamic> {
        Arc::clone(&self.inner.dynamic.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Every row, built-in first.
    pub fn all(&self) -> Snapshot {
        Snapshot {
            builtin: self.inner.builtin,
            dynamic: self.dynamic(),
        }
    }

    /// Changes with every [`Registry::set_dynamic`] that changed the rows.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Replaces the run-time rows (the CRD controller's whole desired set).
    /// Rows are compared by identity: the rows of an unchanged CRD (the
    /// CRD controller reuses them) keep the generation where it is. Rows
    /// left out are dropped here and freed once their last holder (a
    /// request, a watch, a controller) lets go.
    pub fn set_dynamic(&self, rows: Vec<Row>) -> bool {
        let mut cur = self
            .inner
            .dynamic
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let same = cur.rows.len() == rows.len()
            && cur
                .rows
                .iter()
                .zip(&rows)
                .all(|(a, b)| Shared::ptr_eq(a, b));
        if same {
            return false;
        }
        let mut index: std::collections::HashMap<u64, Vec<Row>> =
            std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            // The first row of a name wins, as in a scan.
            let same = index
                .entry(key_of(&r.group, &r.version, &r.plural))
                .or_default();
            if !same
                .iter()
                .any(|x| (&x.group, &x.version, &x.plural) == (&r.group, &r.version, &r.plural))
            {
                same.push(r.clone());
            }
        }
        *cur = Arc::new(Dynamic { rows, index });
        let generation = self.inner.generation.fetch_add(1, Ordering::AcqRel) + 1;
        drop(cur);
        self.inner.changed.send_replace(generation);
        true
    }

    /// Follows the rows: the receiver sees each new generation (loops that
    /// work on every collection open the new ones).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// The resource served at `group/version/plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Row> {
        let hit = |r: &&Resource| r.group == group && r.version == version && r.plural == plural;
        if let Some(r) = self.inner.builtin.iter().find(hit) {
            return Some(Shared::Static(r));
        }
        self.dynamic()
            .index
            .get(&key_of(group, version, plural))?
            .iter()
            .find(|r| hit(&&***r))
            .cloned()
    }

    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Row> {
        self.all()
            .filter(|r| r.group == group && r.version == version && r.kind == kind)
            .next()
    }

    /// Whether `group/version` is served at all.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.all()
            .refs()
            .any(|r| r.group == group && r.version == version)
    }

    /// Resources of one group-version, in table order.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Row> {
        self.all()
            .filter(|r| r.group == group && r.version == version)
            .collect()
    }

    /// Named groups (not core) in first-seen order, each with its versions.
    pub fn groups(&self) -> Vec<GroupVersions> {
        let mut out: Vec<GroupVersions> = Vec::new();
        for r in self.all().refs().filter(|r| !r.group.is_empty()) {
            match out.iter_mut().find(|g| g.group == r.group) {
                Some(g) if !g.versions.contains(&r.version) => g.versions.push(r.version.clone()),
                Some(_) => {}
                None => out.push(GroupVersions {
                    group: r.group.clone(),
                    versions: vec![r.version.clone()],
                }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_has_an_upstream_schema() {
        for r in RESOURCES.iter() {
            assert!(
                r.schema().is_some(),
                "no schema for {}/{} {}",
                r.group,
                r.version,
                r.kind
            );
        }
    }

    #[test]
    fn plurals_are_unique_per_group_version() {
        for (i, a) in RESOURCES.iter().enumerate() {
            for b in &RESOURCES[i + 1..] {
                assert!(
                    !(a.group == b.group && a.version == b.version && a.plural == b.plural),
                    "duplicate {}/{}",
                    a.group,
                    a.plural
                );
            }
        }
    }

    #[test]
    fn converted_rows_share_storage_with_their_storage_version() {
        for r in RESOURCES.iter() {
            let Some(conv) = r.conversion else { continue };
            let storage = RESOURCES
                .iter()
                .find(|s| s.kind == r.kind && s.api_version() == conv.storage_version);
            // kube's storage-version overrides name versions not served.
            let Some(storage) = storage else {
                assert!(std::ptr::eq(conv, &builtin::ADMISSION_V1BETA1_STORAGE));
                continue;
            };
            assert_eq!(
                crate::storage_format::segment(r),
                crate::storage_format::segment(storage)
            );
            assert!(std::ptr::eq(storage.conversion.unwrap(), conv));
        }
        let reg = Registry::builtin();
        let v1 = reg
            .lookup("autoscaling", "v1", "horizontalpodautoscalers")
            .unwrap();
        assert_eq!(
            crate::storage_format::segment(&v1),
            "horizontalpodautoscalers"
        );
        assert!(v1.converts() && v1.has_status());
        // events.k8s.io Events live with core Events, as in kube.
        let ev = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(crate::storage_format::segment(&ev), "events");
    }

    #[test]
    fn lookup_and_groups() {
        let reg = Registry::builtin();
        let d = reg.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(d.kind, "Deployment");
        assert!(d.subresource("scale").is_some());
        assert_eq!(crate::storage_format::segment(&d), "deployments");
        assert!(reg.lookup("", "v1", "deployments").is_none());
        let groups = reg.groups();
        assert_eq!(groups[0].group, "apiregistration.k8s.io");
        assert_eq!(groups[1].group, "apps");
        assert!(groups
            .iter()
            .any(|g| g.group == "rbac.authorization.k8s.io"));
    }
}
