//! The built-in rows: every kind this server serves without a CRD, in
//! discovery order. Everything about a kind that is data lives here or in
//! `apimachinery::kinds` (its defaults, validation, strategy and columns);
//! this file imports nothing above the registry.

use super::*;
use std::sync::LazyLock;

/// A static list of names.
macro_rules! strs {
    [$($s:expr),* $(,)?] => {{
        const S: &[Str] = &[$(Shared::Static($s)),*];
        Shared::Static(S)
    }};
}

/// A static list of subresources.
macro_rules! subs {
    [$($s:expr),* $(,)?] => {{
        const S: &[Subresource] = &[$($s),*];
        Shared::Static(S)
    }};
}

/// The connect subresources (`handlers::connect` answers them).
mod connect {
    use super::super::{Connect, ConnectTarget};

    const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];
    const PROXY_METHODS: &[&str] = &["delete", "get", "head", "options", "patch", "post", "put"];
    const STREAM_VERBS: &[&str] = &["create", "get"];
    const STREAM_METHODS: &[&str] = &["get", "post"];

    pub static POD_LOG: Connect = Connect {
        name: "log",
        kind: "Pod",
        verbs: &["get"],
        methods: &["get"],
        params: &[
            ("container", "string"),
            ("follow", "boolean"),
            ("insecureSkipTLSVerifyBackend", "boolean"),
            ("limitBytes", "integer"),
            ("pretty", "string"),
            ("previous", "boolean"),
            ("sinceSeconds", "integer"),
            ("stream", "string"),
            ("tailLines", "integer"),
            ("timestamps", "boolean"),
        ],
        with_path: false,
        read: true,
        target: ConnectTarget::PodLog,
    };

    /// A streaming subresource (`exec`, `attach`, `portforward`): GET or POST,
    /// the options in the query.
    const fn streaming(
        name: &'static str,
        kind: &'static str,
        params: &'static [(&'static str, &'static str)],
        target: ConnectTarget,
    ) -> Connect {
        Connect {
            name,
            kind,
            verbs: STREAM_VERBS,
            methods: STREAM_METHODS,
            params,
            with_path: false,
            read: false,
            target,
        }
    }

    const ATTACH_PARAMS: &[(&str, &str)] = &[
        ("container", "string"),
        ("stderr", "boolean"),
        ("stdin", "boolean"),
        ("stdout", "boolean"),
        ("tty", "boolean"),
    ];

    pub static POD_EXEC: Connect = streaming(
        "exec",
        "PodExecOptions",
        &[
            ("command", "string"),
            ("container", "string"),
            ("stderr", "boolean"),
            ("stdin", "boolean"),
            ("stdout", "boolean"),
            ("tty", "boolean"),
        ],
        ConnectTarget::PodExec,
    );

    pub static POD_ATTACH: Connect = streaming(
        "attach",
        "PodAttachOptions",
        ATTACH_PARAMS,
        ConnectTarget::PodAttach,
    );

    pub static POD_PORTFORWARD: Connect = streaming(
        "portforward",
        "PodPortForwardOptions",
        &[("ports", "integer")],
        ConnectTarget::PodPortForward,
    );

    /// A `proxy` subresource: every method, a trailing path.
    const fn proxy(kind: &'static str, target: ConnectTarget) -> Connect {
        Connect {
            name: "proxy",
            kind,
            verbs: PROXY_VERBS,
            methods: PROXY_METHODS,
            params: &[("path", "string")],
            with_path: true,
            read: false,
            target,
        }
    }

    pub static POD_PROXY: Connect = proxy("PodProxyOptions", ConnectTarget::PodProxy);
    pub static NODE_PROXY: Connect = proxy("NodeProxyOptions", ConnectTarget::NodeProxy);
    pub static SERVICE_PROXY: Connect = proxy("ServiceProxyOptions", ConnectTarget::ServiceProxy);
}

/// `componentstatuses`: listed by probing etcd (`componentstatus`).
static COMPONENT_STATUSES: Computed = Computed {
    source: ComputedSource::ComponentStatuses,
    // kube answers a plain error here, which becomes a 500 of no reason.
    not_found: |name| Status::failure(500, "", format!("Component not found: {name}")),
    warning: Some("v1 ComponentStatus is deprecated in v1.19+"),
};

/// kube's storage-version overrides (`NewStorageFactoryConfigEffectiveVersion`
/// in pkg/kubeapiserver/default_storage_factory_builder.go) for kinds this
/// server serves: MutatingAdmissionPolicies and their bindings are served
/// as `admissionregistration.k8s.io/v1` and stored as `v1beta1`, whose
/// schema is the same (the IDL's messages match field for field), so the
/// conversion renames the version.
pub(super) static ADMISSION_V1BETA1_STORAGE: apimachinery::kinds::Conversion =
    apimachinery::kinds::Conversion {
        storage_version: "admissionregistration.k8s.io/v1beta1",
        convert: rename_version,
    };

fn rename_version(obj: &serde_json::Value, to: &str) -> serde_json::Value {
    let mut out = obj.clone();
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), serde_json::Value::String(to.into()));
    }
    out
}

const fn attr(name: &'static str, pointer: &'static str, default: &'static str) -> FieldAttr {
    FieldAttr::of(name, pointer, default)
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
        spec_replicas: Shared::Static("/spec/replicas"),
        status_replicas: Shared::Static("/status/replicas"),
        selector: Shared::Static("/spec/selector"),
        selector_form: ScaleSelector::LabelSelector,
    },
];
const RC_STATUS_SCALE: &[Subresource] = &[
    Subresource::Status,
    Subresource::Scale {
        spec_replicas: Shared::Static("/spec/replicas"),
        status_replicas: Shared::Static("/status/replicas"),
        selector: Shared::Static("/spec/selector"),
        selector_form: ScaleSelector::Map,
    },
];

const ALL: Shared<[Str]> = strs!["all"];

/// A row of the table with the common defaults filled in.
fn res(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group: Shared::Static(group),
        version: Shared::Static(version),
        kind: Shared::Static(kind),
        plural: Shared::Static(plural),
        singular: Shared::Static(singular),
        short_names: strs![],
        categories: strs![],
        namespaced,
        subresources: Shared::Static(NONE),
        field_attrs: Shared::Static(&[]),
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
        delete: DeleteRules::DEFAULT,
        keep_status_on_create: false,
        custom: None,
        conversion: None,
        gc_policy: GcPolicy::Background,
    }
}

/// A row of a virtual (create-only) kind.
fn virtual_kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    answer: CreateAnswer,
) -> Resource {
    Resource {
        name_rule: NameRule::PathSegment,
        virtual_create: Some(answer),
        ..res(group, "v1", kind, plural, singular, namespaced)
    }
}

/// Every built-in resource this server serves, in discovery order.
pub static RESOURCES: LazyLock<Vec<Resource>> = LazyLock::new(|| {
    vec![
        // core/v1
        Resource {
            short_names: strs!["ns"],
            subresources: subs![
                Subresource::Status,
                Subresource::Part(&kinds::core::namespace::FINALIZE),
            ],
            field_attrs: Shared::Static(NAMESPACE_FIELDS),
            name_rule: NameRule::Label,
            rules: &kinds::core::namespace::RULES,
            delete: DeleteRules {
                collection: false,
                mark: Some(kinds::core::namespace::mark_terminating),
                spec_finalizers: true,
                ..DeleteRules::DEFAULT
            },
            ..res("", "v1", "Namespace", "namespaces", "namespace", false)
        },
        Resource {
            short_names: strs!["cs"],
            computed: Some(&COMPONENT_STATUSES),
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
            short_names: strs!["cm"],
            rules: &kinds::core::configmap::CONFIG_MAP,
            ..res("", "v1", "ConfigMap", "configmaps", "configmap", true)
        },
        Resource {
            field_attrs: Shared::Static(SECRET_FIELDS),
            immutable: &["/type"],
            rules: &kinds::core::configmap::SECRET,
            ..res("", "v1", "Secret", "secrets", "secret", true)
        },
        Resource {
            delete_returns_object: true,
            short_names: strs!["po"],
            categories: ALL,
            subresources: subs![
                Subresource::Status,
                Subresource::Create {
                    name: "binding",
                    group: "",
                    version: "v1",
                    kind: "Binding",
                    answer: CreateAnswer::Binding,
                },
                Subresource::Create {
                    name: "eviction",
                    group: "policy",
                    version: "v1",
                    kind: "Eviction",
                    answer: CreateAnswer::Eviction,
                },
                Subresource::Part(&kinds::core::pod_parts::EPHEMERAL_CONTAINERS),
                Subresource::Part(&kinds::core::pod_parts::RESIZE),
                Subresource::Connect(&connect::POD_LOG),
                Subresource::Connect(&connect::POD_EXEC),
                Subresource::Connect(&connect::POD_ATTACH),
                Subresource::Connect(&connect::POD_PORTFORWARD),
                Subresource::Connect(&connect::POD_PROXY),
            ],
            field_attrs: Shared::Static(POD_FIELDS),
            generation: true,
            rules: &kinds::core::pod::POD,
            delete: DeleteRules {
                grace_period: Some(kinds::core::pod::grace_period),
                ..DeleteRules::DEFAULT
            },
            ..res("", "v1", "Pod", "pods", "pod", true)
        },
        Resource {
            delete_returns_object: true,
            short_names: strs!["svc"],
            categories: ALL,
            subresources: subs![
                Subresource::Status,
                Subresource::Connect(&connect::SERVICE_PROXY),
            ],
            name_rule: NameRule::Label,
            rules: &kinds::core::service::RULES,
            hooks: Some(Hooks::ServiceAllocation),
            ..res("", "v1", "Service", "services", "service", true)
        },
        Resource {
            subresources: subs![Subresource::Create {
                name: "token",
                group: "authentication.k8s.io",
                version: "v1",
                kind: "TokenRequest",
                answer: CreateAnswer::TokenRequest,
            }],
            delete_returns_object: true,
            short_names: strs!["sa"],
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
            short_names: strs!["ep"],
            rules: &kinds::core::endpoints::RULES,
            ..res("", "v1", "Endpoints", "endpoints", "endpoints", true)
        },
        Resource {
            create_on_update: true,
            short_names: strs!["ev"],
            field_attrs: Shared::Static(EVENT_FIELDS),
            name_rule: NameRule::PathSegment,
            rules: &kinds::core::event::RULES,
            ttl_lease: true,
            gc_policy: GcPolicy::Unsupported,
            conversion: Some(&kinds::events::EVENT_CONVERSION),
            ..res("", "v1", "Event", "events", "event", true)
        },
        Resource {
            short_names: strs!["no"],
            keep_status_on_create: true,
            subresources: subs![
                Subresource::Status,
                Subresource::Connect(&connect::NODE_PROXY),
            ],
            field_attrs: Shared::Static(NODE_FIELDS),
            rules: &kinds::core::node::RULES,
            ..res("", "v1", "Node", "nodes", "node", false)
        },
        Resource {
            delete_returns_object: true,
            short_names: strs!["pv"],
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["pvc"],
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["rc"],
            categories: ALL,
            subresources: Shared::Static(RC_STATUS_SCALE),
            field_attrs: Shared::Static(REPLICAS_FIELDS),
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
            short_names: strs!["limits"],
            rules: &kinds::core::quota::LIMIT_RANGE,
            ..res("", "v1", "LimitRange", "limitranges", "limitrange", true)
        },
        Resource {
            delete_returns_object: true,
            short_names: strs!["quota"],
            subresources: Shared::Static(STATUS),
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
            categories: strs!["api-extensions"],
            subresources: Shared::Static(STATUS),
            rules: &kinds::apiregistration::API_SERVICE,
            // kube's rule is a path segment ("v1." names the core group).
            name_rule: NameRule::PathSegment,
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
            short_names: strs!["deploy"],
            categories: ALL,
            subresources: Shared::Static(STATUS_SCALE),
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
            short_names: strs!["rs"],
            categories: ALL,
            subresources: Shared::Static(STATUS_SCALE),
            field_attrs: Shared::Static(REPLICAS_FIELDS),
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
            short_names: strs!["sts"],
            categories: ALL,
            subresources: Shared::Static(STATUS_SCALE),
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
            short_names: strs!["ds"],
            categories: ALL,
            subresources: Shared::Static(STATUS),
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
            subresources: Shared::Static(STATUS),
            field_attrs: Shared::Static(JOB_FIELDS),
            immutable: &["/spec/selector", "/spec/template", "/spec/completions"],
            generation: true,
            rules: &kinds::batch::job::RULES,
            gc_policy: GcPolicy::Orphan,
            ..res("batch", "v1", "Job", "jobs", "job", true)
        },
        Resource {
            short_names: strs!["cj"],
            categories: ALL,
            subresources: Shared::Static(STATUS),
            generation: true,
            rules: &kinds::batch::cronjob::RULES,
            ..res("batch", "v1", "CronJob", "cronjobs", "cronjob", true)
        },
        // certificates.k8s.io/v1
        Resource {
            short_names: strs!["csr"],
            subresources: subs![
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
            short_names: strs!["ev"],
            field_attrs: Shared::Static(EVENTS_API_FIELDS),
            rules: &kinds::events::EVENT,
            ttl_lease: true,
            gc_policy: GcPolicy::Unsupported,
            conversion: Some(&kinds::events::EVENT_CONVERSION),
            ..res("events.k8s.io", "v1", "Event", "events", "event", true)
        },
        // policy/v1
        Resource {
            short_names: strs!["pdb"],
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["ing"],
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["netpol"],
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
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["hpa"],
            categories: ALL,
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["hpa"],
            categories: ALL,
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["pc"],
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
            short_names: strs!["sc"],
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
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["vac"],
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
            categories: strs!["api-extensions"],
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
            categories: strs!["api-extensions"],
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
            categories: strs!["api-extensions"],
            generation: true,
            subresources: Shared::Static(STATUS),
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
            categories: strs!["api-extensions"],
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
            categories: strs!["api-extensions"],
            generation: true,
            conversion: Some(&ADMISSION_V1BETA1_STORAGE),
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
            categories: strs!["api-extensions"],
            generation: true,
            conversion: Some(&ADMISSION_V1BETA1_STORAGE),
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
            subresources: Shared::Static(STATUS),
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
            subresources: Shared::Static(STATUS),
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
            subresources: Shared::Static(STATUS),
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
            short_names: strs!["crd", "crds"],
            categories: strs!["api-extensions"],
            subresources: Shared::Static(STATUS),
            generation: true,
            delete_finalizer: Some(super::definition::CLEANUP_FINALIZER),
            rules: &super::definition::DEFINITION_RULES,
            conversion: Some(&super::definition::v1beta1::STORED_V1BETA1),
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
            CreateAnswer::Binding,
        ),
        virtual_kind(
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
            "selfsubjectreview",
            false,
            CreateAnswer::SelfSubjectReview,
        ),
        virtual_kind(
            "authentication.k8s.io",
            "TokenReview",
            "tokenreviews",
            "tokenreview",
            false,
            CreateAnswer::TokenReview,
        ),
        virtual_kind(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            true,
            CreateAnswer::LocalSubjectAccessReview,
        ),
        virtual_kind(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            false,
            CreateAnswer::SelfSubjectAccessReview,
        ),
        virtual_kind(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            false,
            CreateAnswer::SelfSubjectRulesReview,
        ),
        virtual_kind(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "subjectaccessreviews",
            "subjectaccessreview",
            false,
            CreateAnswer::SubjectAccessReview,
        ),
    ]
});
