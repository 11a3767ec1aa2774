//! The resource registry: one table that drives every generic code path
//! (routing, storage keys, discovery, OpenAPI, validation rules, field
//! selectors). Adding a built-in kind is adding a row here; no handler code is
//! per kind. Schemas come from the upstream OpenAPI facts in
//! `apimachinery::schema`, looked up by group/version/kind.

use apimachinery::kinds::{self, KindRules};
use apimachinery::read::FieldAttr;
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

#[derive(Debug, Clone, Copy)]
pub enum Subresource {
    Status,
    /// `/scale`, an autoscaling/v1 Scale mapped onto the kind's replicas.
    Scale {
        /// JSON pointer of the spec replica count.
        spec_replicas: &'static str,
        /// JSON pointer of the observed replica count.
        status_replicas: &'static str,
        /// JSON pointer of the label selector (a `LabelSelector` object or a
        /// plain map, see `selector_is_map`).
        selector: &'static str,
        selector_is_map: bool,
    },
    /// A part of the object written on its own (`/approval`,
    /// `/finalize`, ...).
    Part(&'static apimachinery::kinds::Part),
    /// A create-only subresource taking a body of its own kind
    /// (`pods/binding`: a Binding), answered by `answer` through the
    /// generic create path.
    Create {
        name: &'static str,
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        answer: VirtualCreate,
    },
    /// A subresource kube answers by connecting to a kubelet (or to a
    /// Service's endpoints): `pods/exec`, `pods/log`, `nodes/proxy`, ...
    Connect(&'static Connect),
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
    pub answer: ConnectAnswer,
}

/// The answer of a [`Connect`] subresource: gets the request's method and
/// the path after the subresource (`proxy/{path}`).
pub type ConnectAnswer = for<'a> fn(
    &'a crate::handlers::Scope,
    &'a axum::http::Method,
    Option<&'a str>,
) -> futures_util::future::BoxFuture<
    'a,
    crate::error::Result<axum::response::Response>,
>;

/// A resource whose objects are computed when asked for, never stored
/// (`componentstatuses`): get and list only.
#[derive(Debug)]
pub struct Computed {
    pub list: for<'a> fn(
        &'a crate::server::AppState,
    ) -> futures_util::future::BoxFuture<'a, Vec<serde_json::Value>>,
    /// The answer to a GET of a name `list` does not have.
    pub not_found: fn(&str) -> Status,
    /// A warning sent with every answer (a deprecated kind).
    pub warning: Option<&'static str>,
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
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub namespaced: bool,
    pub subresources: &'static [Subresource],
    /// Kind-specific fields a field selector may use.
    pub field_attrs: &'static [FieldAttr],
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
    /// stored, answered by this function (see [`VirtualCreate`]).
    pub virtual_create: Option<VirtualCreate>,
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
    pub hooks: Option<&'static StorageHooks>,
    /// Objects expire `--event-ttl` after their last write, through a
    /// shared etcd lease (kube's TTLFunc for events).
    pub ttl_lease: bool,
    /// A create keeps the client's `status` (kube's Node strategy: the
    /// kubelet registers its node with status); other kinds with a status
    /// subresource start without one.
    pub keep_status_on_create: bool,
    /// What a CustomResourceDefinition says of a resource it defines
    /// (schema, printer columns, versions); `None` for built-in kinds.
    pub custom: Option<&'static crate::crd::CustomInfo>,
    /// A built-in kind served in several versions: its storage version and
    /// the conversion between them (`crate::conversion`). Every row of the
    /// kind names the same one and shares the storage segment.
    pub conversion: Option<&'static apimachinery::kinds::Conversion>,
    /// What a DELETE that names no propagation policy does to the
    /// object's dependents (kube's `DefaultGarbageCollectionPolicy`).
    pub gc_policy: GcPolicy,
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

/// A kind's storage steps around a write (kube's `BeginCreate`,
/// `BeginUpdate`, `AfterDelete`). The generic write path runs
/// `begin_*` after validation and
/// admission (their [`Reservation`](crate::allocator::Reservation) is
/// committed once the object is stored, or reverted if storing fails), and
/// `after_delete` once the object is gone from etcd.
pub struct StorageHooks {
    pub begin_create: for<'a> fn(
        &'a crate::server::AppState,
        &'a mut serde_json::Value,
        bool,
    ) -> futures_util::future::BoxFuture<
        'a,
        crate::error::Result<crate::allocator::Reservation>,
    >,
    pub begin_update: for<'a> fn(
        &'a crate::server::AppState,
        &'a mut serde_json::Value,
        &'a serde_json::Value,
        bool,
    ) -> futures_util::future::BoxFuture<
        'a,
        crate::error::Result<crate::allocator::Reservation>,
    >,
    pub after_delete: for<'a> fn(
        &'a crate::server::AppState,
        &'a serde_json::Value,
    ) -> futures_util::future::BoxFuture<'a, ()>,
}

impl std::fmt::Debug for StorageHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StorageHooks")
    }
}

/// The answer to a create of a virtual kind or a create-only subresource:
/// gets the decoded request object (kind checked, metadata.namespace
/// defaulted to the path's, through the mutating half of admission) and
/// the validating half, to run once its own checks pass and before it
/// acts (see [`crate::admission::CreateValidation`]), and returns the
/// response object (the request with its `status` filled in). The generic
/// create path decodes, admits, calls this, and answers 201; every other
/// verb is 405. Adding a virtual kind is a table row plus one function.
pub type VirtualCreate =
    for<'a> fn(
        &'a crate::handlers::Scope,
        serde_json::Value,
        crate::admission::CreateValidation<'a>,
    ) -> futures_util::future::BoxFuture<'a, crate::error::Result<serde_json::Value>>;

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

    pub fn group_resource(&self) -> apimachinery::status::GroupResource<'static> {
        apimachinery::status::GroupResource {
            group: self.group,
            resource: self.plural,
        }
    }

    pub fn group_kind(&self) -> apimachinery::status::GroupKind<'static> {
        apimachinery::status::GroupKind {
            group: self.group,
            kind: self.kind,
        }
    }

    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name() == name)
    }

    /// Whether objects may be stored in another version than the one this
    /// row serves (or need defaults on read): reads go through
    /// [`crate::conversion`].
    pub fn converts(&self) -> bool {
        self.custom.is_some() || self.conversion.is_some()
    }

    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// The etcd key segment of this resource under the storage prefix,
    /// as kube-apiserver keys it (see [`crate::storage_format::segment`]).
    pub fn storage_segment(&self) -> String {
        crate::storage_format::segment(self)
    }

    /// The schema of this kind: the upstream one for a built-in kind, the
    /// CRD's for a custom resource.
    pub fn schema(&self) -> Option<apimachinery::schema::TypeRef<'static>> {
        match self.custom {
            Some(c) => c.schema(),
            None => apimachinery::schema::builtin().by_gvk(self.group, self.version, self.kind),
        }
    }
}

const fn attr(name: &'static str, pointer: &'static str, default: &'static str) -> FieldAttr {
    FieldAttr {
        name,
        pointer,
        default,
    }
}

const POD_FIELDS: &[FieldAttr] = &[
    attr("spec.nodeName", "/spec/nodeName", ""),
    attr("spec.restartPolicy", "/spec/restartPolicy", ""),
    attr("spec.schedulerName", "/spec/schedulerName", ""),
    attr("spec.serviceAccountName", "/spec/serviceAccountName", ""),
    attr("spec.hostNetwork", "/spec/hostNetwork", "false"),
    attr("status.phase", "/status/phase", ""),
    attr("status.podIP", "/status/podIP", ""),
    attr("status.nominatedNodeName", "/status/nominatedNodeName", ""),
];

const SECRET_FIELDS: &[FieldAttr] = &[attr("type", "/type", "")];

const EVENT_FIELDS: &[FieldAttr] = &[
    attr("involvedObject.kind", "/involvedObject/kind", ""),
    attr("involvedObject.namespace", "/involvedObject/namespace", ""),
    attr("involvedObject.name", "/involvedObject/name", ""),
    attr("involvedObject.uid", "/involvedObject/uid", ""),
    attr(
        "involvedObject.apiVersion",
        "/involvedObject/apiVersion",
        "",
    ),
    attr(
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    attr("involvedObject.fieldPath", "/involvedObject/fieldPath", ""),
    attr("reason", "/reason", ""),
    attr("reportingComponent", "/reportingComponent", ""),
    attr("source", "/source/component", ""),
    attr("type", "/type", ""),
];

/// events.k8s.io/v1 Events' field selectors (kube's mapping onto the
/// stored core Event's fields).
const EVENTS_API_FIELDS: &[FieldAttr] = &[
    attr("regarding.kind", "/involvedObject/kind", ""),
    attr("regarding.namespace", "/involvedObject/namespace", ""),
    attr("regarding.name", "/involvedObject/name", ""),
    attr("regarding.uid", "/involvedObject/uid", ""),
    attr("regarding.apiVersion", "/involvedObject/apiVersion", ""),
    attr(
        "regarding.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    attr("regarding.fieldPath", "/involvedObject/fieldPath", ""),
    attr("reason", "/reason", ""),
    attr("reportingController", "/reportingComponent", ""),
    attr("source", "/source/component", ""),
    attr("type", "/type", ""),
];

const NODE_FIELDS: &[FieldAttr] = &[attr("spec.unschedulable", "/spec/unschedulable", "false")];
const NAMESPACE_FIELDS: &[FieldAttr] = &[attr("status.phase", "/status/phase", "")];
const REPLICAS_FIELDS: &[FieldAttr] = &[attr("status.replicas", "/status/replicas", "0")];
const JOB_FIELDS: &[FieldAttr] = &[attr("status.successful", "/status/succeeded", "0")];

const STATUS: &[Subresource] = &[Subresource::Status];
const NONE: &[Subresource] = &[];
const STATUS_SCALE: &[Subresource] = &[
    Subresource::Status,
    Subresource::Scale {
        spec_replicas: "/spec/replicas",
        status_replicas: "/status/replicas",
        selector: "/spec/selector",
        selector_is_map: false,
    },
];
const RC_STATUS_SCALE: &[Subresource] = &[
    Subresource::Status,
    Subresource::Scale {
        spec_replicas: "/spec/replicas",
        status_replicas: "/status/replicas",
        selector: "/spec/selector",
        selector_is_map: true,
    },
];

const ALL: &[&str] = &["all"];

/// A row of the table with the common defaults filled in.
const fn res(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group,
        version,
        kind,
        plural,
        singular,
        short_names: &[],
        categories: &[],
        namespaced,
        subresources: NONE,
        field_attrs: &[],
        name_rule: NameRule::Subdomain,
        immutable: &[],
        generation: false,
        create_on_update: false,
        delete_returns_object: false,
        virtual_create: None,
        computed: None,
        delete_finalizer: None,
        rules: &KindRules::NONE,
        hooks: None,
        ttl_lease: false,
        keep_status_on_create: false,
        custom: None,
        conversion: None,
        gc_policy: GcPolicy::Background,
    }
}

/// A row of a virtual (create-only) kind.
const fn virtual_kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    answer: VirtualCreate,
) -> Resource {
    Resource {
        name_rule: NameRule::PathSegment,
        virtual_create: Some(answer),
        ..res(group, "v1", kind, plural, singular, namespaced)
    }
}

/// Every built-in resource this server serves, in discovery order.
pub static RESOURCES: &[Resource] = &[
    // core/v1
    Resource {
        short_names: &["ns"],
        subresources: &[
            Subresource::Status,
            Subresource::Part(&kinds::core::namespace::FINALIZE),
        ],
        field_attrs: NAMESPACE_FIELDS,
        name_rule: NameRule::Label,
        rules: &kinds::core::namespace::RULES,
        ..res("", "v1", "Namespace", "namespaces", "namespace", false)
    },
    Resource {
        short_names: &["cs"],
        computed: Some(&crate::componentstatus::COMPONENT_STATUSES),
        rules: &kinds::core::componentstatus::RULES,
        ..res(
            "",
            "v1",
            "ComponentStatus",
            "componentstatuses",
            "componentstatus",
            false,
        )
    },
    Resource {
        short_names: &["cm"],
        rules: &kinds::core::configmap::CONFIG_MAP,
        ..res("", "v1", "ConfigMap", "configmaps", "configmap", true)
    },
    Resource {
        field_attrs: SECRET_FIELDS,
        immutable: &["/type"],
        rules: &kinds::core::configmap::SECRET,
        ..res("", "v1", "Secret", "secrets", "secret", true)
    },
    Resource {
        delete_returns_object: true,
        short_names: &["po"],
        categories: ALL,
        subresources: &[
            Subresource::Status,
            Subresource::Create {
                name: "binding",
                group: "",
                version: "v1",
                kind: "Binding",
                answer: crate::handlers::binding::bind,
            },
            Subresource::Create {
                name: "eviction",
                group: "policy",
                version: "v1",
                kind: "Eviction",
                answer: crate::handlers::eviction::evict,
            },
            Subresource::Part(&kinds::core::pod_parts::EPHEMERAL_CONTAINERS),
            Subresource::Part(&kinds::core::pod_parts::RESIZE),
            Subresource::Connect(&crate::handlers::connect::POD_LOG),
            Subresource::Connect(&crate::handlers::connect::POD_EXEC),
            Subresource::Connect(&crate::handlers::connect::POD_ATTACH),
            Subresource::Connect(&crate::handlers::connect::POD_PORTFORWARD),
            Subresource::Connect(&crate::handlers::connect::POD_PROXY),
        ],
        field_attrs: POD_FIELDS,
        generation: true,
        rules: &kinds::core::pod::POD,
        ..res("", "v1", "Pod", "pods", "pod", true)
    },
    Resource {
        delete_returns_object: true,
        short_names: &["svc"],
        categories: ALL,
        subresources: &[
            Subresource::Status,
            Subresource::Connect(&crate::handlers::connect::SERVICE_PROXY),
        ],
        name_rule: NameRule::Label,
        rules: &kinds::core::service::RULES,
        hooks: Some(&crate::allocator::service::HOOKS),
        ..res("", "v1", "Service", "services", "service", true)
    },
    Resource {
        subresources: &[Subresource::Create {
            name: "token",
            group: "authentication.k8s.io",
            version: "v1",
            kind: "TokenRequest",
            answer: crate::handlers::token::token_request,
        }],
        delete_returns_object: true,
        short_names: &["sa"],
        rules: &kinds::core::serviceaccount::RULES,
        ..res(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            "serviceaccount",
            true,
        )
    },
    Resource {
        create_on_update: true,
        short_names: &["ep"],
        rules: &kinds::core::endpoints::RULES,
        ..res("", "v1", "Endpoints", "endpoints", "endpoints", true)
    },
    Resource {
        create_on_update: true,
        short_names: &["ev"],
        field_attrs: EVENT_FIELDS,
        name_rule: NameRule::PathSegment,
        rules: &kinds::core::event::RULES,
        ttl_lease: true,
        gc_policy: GcPolicy::Unsupported,
        conversion: Some(&kinds::events::EVENT_CONVERSION),
        ..res("", "v1", "Event", "events", "event", true)
    },
    Resource {
        short_names: &["no"],
        keep_status_on_create: true,
        subresources: &[
            Subresource::Status,
            Subresource::Connect(&crate::handlers::connect::NODE_PROXY),
        ],
        field_attrs: NODE_FIELDS,
        rules: &kinds::core::node::RULES,
        ..res("", "v1", "Node", "nodes", "node", false)
    },
    Resource {
        delete_returns_object: true,
        short_names: &["pv"],
        subresources: STATUS,
        rules: &kinds::core::volume::PERSISTENT_VOLUME,
        ..res(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            "persistentvolume",
            false,
        )
    },
    Resource {
        delete_returns_object: true,
        short_names: &["pvc"],
        subresources: STATUS,
        rules: &kinds::core::volume::PERSISTENT_VOLUME_CLAIM,
        ..res(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            true,
        )
    },
    Resource {
        short_names: &["rc"],
        categories: ALL,
        subresources: RC_STATUS_SCALE,
        field_attrs: REPLICAS_FIELDS,
        generation: true,
        rules: &kinds::core::replicationcontroller::RULES,
        gc_policy: GcPolicy::Orphan,
        ..res(
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            "replicationcontroller",
            true,
        )
    },
    Resource {
        create_on_update: true,
        short_names: &["limits"],
        rules: &kinds::core::quota::LIMIT_RANGE,
        ..res("", "v1", "LimitRange", "limitranges", "limitrange", true)
    },
    Resource {
        delete_returns_object: true,
        short_names: &["quota"],
        subresources: STATUS,
        rules: &kinds::core::quota::RESOURCE_QUOTA,
        ..res(
            "",
            "v1",
            "ResourceQuota",
            "resourcequotas",
            "resourcequota",
            true,
        )
    },
    Resource {
        delete_returns_object: true,
        rules: &kinds::core::pod::POD_TEMPLATE,
        ..res("", "v1", "PodTemplate", "podtemplates", "podtemplate", true)
    },
    // apiregistration.k8s.io/v1: kube's local APIServices (bootstrap)
    Resource {
        categories: &["api-extensions"],
        subresources: STATUS,
        rules: &kinds::apiregistration::API_SERVICE,
        ..res(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
            "apiservices",
            "apiservice",
            false,
        )
    },
    // apps/v1
    Resource {
        short_names: &["deploy"],
        categories: ALL,
        subresources: STATUS_SCALE,
        generation: true,
        rules: &kinds::apps::deployment::RULES,
        ..res(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            "deployment",
            true,
        )
    },
    Resource {
        short_names: &["rs"],
        categories: ALL,
        subresources: STATUS_SCALE,
        field_attrs: REPLICAS_FIELDS,
        generation: true,
        rules: &kinds::apps::replicaset::RULES,
        ..res(
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
            "replicaset",
            true,
        )
    },
    Resource {
        short_names: &["sts"],
        categories: ALL,
        subresources: STATUS_SCALE,
        generation: true,
        rules: &kinds::apps::statefulset::RULES,
        ..res(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            "statefulset",
            true,
        )
    },
    Resource {
        short_names: &["ds"],
        categories: ALL,
        subresources: STATUS,
        generation: true,
        rules: &kinds::apps::daemonset::RULES,
        ..res("apps", "v1", "DaemonSet", "daemonsets", "daemonset", true)
    },
    Resource {
        immutable: &["/data"],
        rules: &kinds::apps::controllerrevision::RULES,
        ..res(
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            "controllerrevision",
            true,
        )
    },
    // batch/v1
    Resource {
        categories: ALL,
        subresources: STATUS,
        field_attrs: JOB_FIELDS,
        immutable: &["/spec/selector", "/spec/template", "/spec/completions"],
        generation: true,
        rules: &kinds::batch::job::RULES,
        gc_policy: GcPolicy::Orphan,
        ..res("batch", "v1", "Job", "jobs", "job", true)
    },
    Resource {
        short_names: &["cj"],
        categories: ALL,
        subresources: STATUS,
        generation: true,
        rules: &kinds::batch::cronjob::RULES,
        ..res("batch", "v1", "CronJob", "cronjobs", "cronjob", true)
    },
    // certificates.k8s.io/v1
    Resource {
        short_names: &["csr"],
        subresources: &[
            Subresource::Status,
            Subresource::Part(&kinds::certificates::APPROVAL),
        ],
        name_rule: NameRule::PathSegment,
        rules: &kinds::certificates::CERTIFICATE_SIGNING_REQUEST,
        ..res(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            "certificatesigningrequest",
            false,
        )
    },
    // coordination.k8s.io/v1
    Resource {
        create_on_update: true,
        rules: &kinds::coordination::LEASE,
        ..res(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            "lease",
            true,
        )
    },
    // events.k8s.io/v1
    Resource {
        create_on_update: true,
        short_names: &["ev"],
        field_attrs: EVENTS_API_FIELDS,
        rules: &kinds::events::EVENT,
        ttl_lease: true,
        gc_policy: GcPolicy::Unsupported,
        conversion: Some(&kinds::events::EVENT_CONVERSION),
        ..res("events.k8s.io", "v1", "Event", "events", "event", true)
    },
    // policy/v1
    Resource {
        short_names: &["pdb"],
        subresources: STATUS,
        generation: true,
        rules: &kinds::policy::POD_DISRUPTION_BUDGET,
        ..res(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            true,
        )
    },
    // networking.k8s.io/v1
    Resource {
        short_names: &["ing"],
        subresources: STATUS,
        generation: true,
        rules: &kinds::networking::INGRESS,
        ..res(
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            "ingress",
            true,
        )
    },
    Resource {
        short_names: &["netpol"],
        generation: true,
        rules: &kinds::networking::NETWORK_POLICY,
        ..res(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            "networkpolicy",
            true,
        )
    },
    Resource {
        immutable: &["/spec/controller"],
        generation: true,
        rules: &kinds::networking::INGRESS_CLASS,
        ..res(
            "networking.k8s.io",
            "v1",
            "IngressClass",
            "ingressclasses",
            "ingressclass",
            false,
        )
    },
    Resource {
        ..res(
            "networking.k8s.io",
            "v1",
            "IPAddress",
            "ipaddresses",
            "ipaddress",
            false,
        )
    },
    Resource {
        subresources: STATUS,
        generation: true,
        ..res(
            "networking.k8s.io",
            "v1",
            "ServiceCIDR",
            "servicecidrs",
            "servicecidr",
            false,
        )
    },
    // discovery.k8s.io/v1
    Resource {
        immutable: &["/addressType"],
        rules: &kinds::discovery::ENDPOINT_SLICE,
        ..res(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            "endpointslice",
            true,
        )
    },
    // autoscaling/v2 (storage) and autoscaling/v1: one kind, one key
    // segment, converted on the way in and out.
    Resource {
        short_names: &["hpa"],
        categories: ALL,
        subresources: STATUS,
        generation: true,
        rules: &kinds::autoscaling::HORIZONTAL_POD_AUTOSCALER,
        conversion: Some(&kinds::autoscaling::HORIZONTAL_POD_AUTOSCALER_CONVERSION),
        ..res(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            true,
        )
    },
    Resource {
        short_names: &["hpa"],
        categories: ALL,
        subresources: STATUS,
        generation: true,
        rules: &kinds::autoscaling::HORIZONTAL_POD_AUTOSCALER_V1,
        conversion: Some(&kinds::autoscaling::HORIZONTAL_POD_AUTOSCALER_CONVERSION),
        ..res(
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            true,
        )
    },
    // scheduling.k8s.io/v1
    Resource {
        short_names: &["pc"],
        immutable: &["/value", "/preemptionPolicy"],
        rules: &kinds::scheduling::PRIORITY_CLASS,
        ..res(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            "priorityclass",
            false,
        )
    },
    // storage.k8s.io/v1
    Resource {
        delete_returns_object: true,
        short_names: &["sc"],
        immutable: &[
            "/provisioner",
            "/parameters",
            "/reclaimPolicy",
            "/volumeBindingMode",
        ],
        rules: &kinds::storage::STORAGE_CLASS,
        ..res(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            "storageclass",
            false,
        )
    },
    Resource {
        delete_returns_object: true,
        ..res(
            "storage.k8s.io",
            "v1",
            "CSIDriver",
            "csidrivers",
            "csidriver",
            false,
        )
    },
    Resource {
        delete_returns_object: true,
        ..res(
            "storage.k8s.io",
            "v1",
            "CSINode",
            "csinodes",
            "csinode",
            false,
        )
    },
    Resource {
        ..res(
            "storage.k8s.io",
            "v1",
            "CSIStorageCapacity",
            "csistoragecapacities",
            "csistoragecapacity",
            true,
        )
    },
    Resource {
        delete_returns_object: true,
        subresources: STATUS,
        ..res(
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            "volumeattachments",
            "volumeattachment",
            false,
        )
    },
    Resource {
        delete_returns_object: true,
        short_names: &["vac"],
        immutable: &["/driverName", "/parameters"],
        ..res(
            "storage.k8s.io",
            "v1",
            "VolumeAttributesClass",
            "volumeattributesclasses",
            "volumeattributesclass",
            false,
        )
    },
    // admissionregistration.k8s.io/v1: the admission chain (`admission`) acts on them
    Resource {
        rules: &kinds::admissionregistration::WEBHOOK_CONFIGURATION,
        categories: &["api-extensions"],
        generation: true,
        ..res(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            "mutatingwebhookconfiguration",
            false,
        )
    },
    Resource {
        rules: &kinds::admissionregistration::WEBHOOK_CONFIGURATION,
        categories: &["api-extensions"],
        generation: true,
        ..res(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            "validatingwebhookconfiguration",
            false,
        )
    },
    Resource {
        rules: &kinds::admissionregistration::VALIDATING_POLICY,
        categories: &["api-extensions"],
        generation: true,
        subresources: STATUS,
        ..res(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            false,
        )
    },
    Resource {
        rules: &kinds::admissionregistration::VALIDATING_POLICY_BINDING,
        categories: &["api-extensions"],
        generation: true,
        ..res(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            false,
        )
    },
    Resource {
        categories: &["api-extensions"],
        generation: true,
        conversion: Some(&crate::storage_format::ADMISSION_V1BETA1_STORAGE),
        ..res(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicy",
            false,
        )
    },
    Resource {
        categories: &["api-extensions"],
        generation: true,
        conversion: Some(&crate::storage_format::ADMISSION_V1BETA1_STORAGE),
        ..res(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
            "mutatingadmissionpolicybinding",
            false,
        )
    },
    // node.k8s.io/v1
    Resource {
        immutable: &["/handler"],
        ..res(
            "node.k8s.io",
            "v1",
            "RuntimeClass",
            "runtimeclasses",
            "runtimeclass",
            false,
        )
    },
    // flowcontrol.apiserver.k8s.io/v1
    Resource {
        generation: true,
        subresources: STATUS,
        rules: &kinds::flowcontrol::FLOW_SCHEMA,
        ..res(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "FlowSchema",
            "flowschemas",
            "flowschema",
            false,
        )
    },
    Resource {
        generation: true,
        subresources: STATUS,
        rules: &kinds::flowcontrol::PRIORITY_LEVEL_CONFIGURATION,
        ..res(
            "flowcontrol.apiserver.k8s.io",
            "v1",
            "PriorityLevelConfiguration",
            "prioritylevelconfigurations",
            "prioritylevelconfiguration",
            false,
        )
    },
    // resource.k8s.io/v1 (dynamic resource allocation)
    Resource {
        delete_returns_object: true,
        generation: true,
        ..res(
            "resource.k8s.io",
            "v1",
            "DeviceClass",
            "deviceclasses",
            "deviceclass",
            false,
        )
    },
    Resource {
        delete_returns_object: true,
        subresources: STATUS,
        immutable: &["/spec"],
        ..res(
            "resource.k8s.io",
            "v1",
            "ResourceClaim",
            "resourceclaims",
            "resourceclaim",
            true,
        )
    },
    Resource {
        delete_returns_object: true,
        immutable: &["/spec"],
        ..res(
            "resource.k8s.io",
            "v1",
            "ResourceClaimTemplate",
            "resourceclaimtemplates",
            "resourceclaimtemplate",
            true,
        )
    },
    Resource {
        delete_returns_object: true,
        generation: true,
        ..res(
            "resource.k8s.io",
            "v1",
            "ResourceSlice",
            "resourceslices",
            "resourceslice",
            false,
        )
    },
    // apiextensions.k8s.io/v1: the CRD controller (`crd`) serves what they define
    Resource {
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        subresources: STATUS,
        generation: true,
        delete_finalizer: Some(crate::crd::CLEANUP_FINALIZER),
        rules: &crate::crd::DEFINITION_RULES,
        conversion: Some(&crate::crd::v1beta1::STORED_V1BETA1),
        ..res(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            "customresourcedefinition",
            false,
        )
    },
    // rbac.authorization.k8s.io/v1 (enforced by `rbac`)
    Resource {
        create_on_update: true,
        name_rule: NameRule::PathSegment,
        rules: &kinds::rbac::ROLE,
        ..res(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            "role",
            true,
        )
    },
    Resource {
        create_on_update: true,
        name_rule: NameRule::PathSegment,
        immutable: &["/roleRef"],
        rules: &kinds::rbac::ROLE_BINDING,
        ..res(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            "rolebinding",
            true,
        )
    },
    Resource {
        create_on_update: true,
        name_rule: NameRule::PathSegment,
        rules: &kinds::rbac::CLUSTER_ROLE,
        ..res(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            "clusterrole",
            false,
        )
    },
    Resource {
        create_on_update: true,
        name_rule: NameRule::PathSegment,
        immutable: &["/roleRef"],
        rules: &kinds::rbac::CLUSTER_ROLE_BINDING,
        ..res(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            "clusterrolebinding",
            false,
        )
    },
    // Virtual kinds: create only, answered by `handlers::review`.
    // core/v1 bindings: a scheduler's create-only form of pods/binding
    virtual_kind(
        "",
        "Binding",
        "bindings",
        "binding",
        true,
        crate::handlers::binding::bind,
    ),
    virtual_kind(
        "authentication.k8s.io",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        false,
        crate::handlers::review::self_subject_review,
    ),
    virtual_kind(
        "authentication.k8s.io",
        "TokenReview",
        "tokenreviews",
        "tokenreview",
        false,
        crate::handlers::review::token_review,
    ),
    virtual_kind(
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        true,
        crate::handlers::review::local_subject_access_review,
    ),
    virtual_kind(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        false,
        crate::handlers::review::self_subject_access_review,
    ),
    virtual_kind(
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        false,
        crate::handlers::review::self_subject_rules_review,
    ),
    virtual_kind(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
        "subjectaccessreview",
        false,
        crate::handlers::review::subject_access_review,
    ),
];

/// A group with its served versions (preferred first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersions {
    pub group: &'static str,
    pub versions: Vec<&'static str>,
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

type Key = (&'static str, &'static str, &'static str);

/// The run-time rows and their index by group, version and plural (there
/// may be thousands: one per served version of every CRD).
#[derive(Default)]
struct Dynamic {
    rows: Vec<&'static Resource>,
    index: std::collections::HashMap<Key, &'static Resource>,
}

/// A consistent view of every row at one generation.
pub struct Snapshot {
    builtin: &'static [Resource],
    dynamic: Arc<Dynamic>,
}

impl Snapshot {
    pub fn iter(&self) -> impl Iterator<Item = &'static Resource> + '_ {
        self.builtin.iter().chain(self.dynamic.rows.iter().copied())
    }
}

impl Registry {
    /// A registry of the built-in kinds only (a new table each call).
    pub fn builtin() -> Self {
        Registry {
            inner: Arc::new(Inner {
                builtin: RESOURCES,
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
    /// Rows are compared by identity: interned rows of an unchanged CRD
    /// keep the generation where it is.
    pub fn set_dynamic(&self, rows: Vec<&'static Resource>) -> bool {
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
                .all(|(a, b)| std::ptr::eq(*a, *b));
        if same {
            return false;
        }
        let mut index = std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            // The first row of a name wins, as in a scan.
            index.entry((r.group, r.version, r.plural)).or_insert(*r);
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
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
        let hit = |r: &&Resource| r.group == group && r.version == version && r.plural == plural;
        if let Some(r) = self.inner.builtin.iter().find(hit) {
            return Some(r);
        }
        self.dynamic().index.get(&(group, version, plural)).copied()
    }

    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<&'static Resource> {
        self.all()
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
    }

    /// Whether `group/version` is served at all.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.all()
            .iter()
            .any(|r| r.group == group && r.version == version)
    }

    /// Resources of one group-version, in table order.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<&'static Resource> {
        self.all()
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .collect()
    }

    /// Named groups (not core) in first-seen order, each with its versions.
    pub fn groups(&self) -> Vec<GroupVersions> {
        let mut out: Vec<GroupVersions> = Vec::new();
        for r in self.all().iter().filter(|r| !r.group.is_empty()) {
            match out.iter_mut().find(|g| g.group == r.group) {
                Some(g) if !g.versions.contains(&r.version) => g.versions.push(r.version),
                Some(_) => {}
                None => out.push(GroupVersions {
                    group: r.group,
                    versions: vec![r.version],
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
        for r in RESOURCES {
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
        for r in RESOURCES {
            let Some(conv) = r.conversion else { continue };
            let storage = RESOURCES
                .iter()
                .find(|s| s.kind == r.kind && s.api_version() == conv.storage_version);
            // kube's storage-version overrides name versions not served.
            let Some(storage) = storage else {
                assert!(std::ptr::eq(
                    conv,
                    &crate::storage_format::ADMISSION_V1BETA1_STORAGE
                ));
                continue;
            };
            assert_eq!(r.storage_segment(), storage.storage_segment());
            assert!(std::ptr::eq(storage.conversion.unwrap(), conv));
        }
        let reg = Registry::builtin();
        let v1 = reg
            .lookup("autoscaling", "v1", "horizontalpodautoscalers")
            .unwrap();
        assert_eq!(v1.storage_segment(), "horizontalpodautoscalers");
        assert!(v1.converts() && v1.has_status());
        // events.k8s.io Events live with core Events, as in kube.
        let ev = reg.lookup("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(ev.storage_segment(), "events");
    }

    #[test]
    fn lookup_and_groups() {
        let reg = Registry::builtin();
        let d = reg.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(d.kind, "Deployment");
        assert!(d.subresource("scale").is_some());
        assert_eq!(d.storage_segment(), "deployments");
        assert!(reg.lookup("", "v1", "deployments").is_none());
        let groups = reg.groups();
        assert_eq!(groups[0].group, "apiregistration.k8s.io");
        assert_eq!(groups[1].group, "apps");
        assert!(groups
            .iter()
            .any(|g| g.group == "rbac.authorization.k8s.io"));
    }
}
