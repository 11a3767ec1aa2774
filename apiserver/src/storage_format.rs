//! How objects sit in etcd, as kube-apiserver keeps them, so that this
//! server can take over (or run beside) a kube-apiserver on the same etcd.
//!
//! Everything per resource is data in this file:
//! - the key segment under `--etcd-prefix` ([`segment`]): kube's
//!   `DefaultStorageFactory.ResourcePrefix`, i.e. the bare resource name
//!   for the built-in groups, the historical paths of
//!   `SpecialDefaultResourcePrefixes` (`services/specs`, `minions`, ...),
//!   and `<group>/<resource>` for what kube's apiextensions and aggregator
//!   servers store through their `SimpleStorageFactory` (CRDs, APIServices)
//!   and for every custom resource;
//! - the media type values are written in ([`MediaType`]): kube's
//!   `--storage-media-type` (protobuf by default) for built-in kinds that
//!   have a protobuf message, JSON for custom resources and for the groups
//!   kube's `SimpleStorageFactory` stores with its JSON `LegacyCodec`.
//!
//! Reads accept both media types whatever the flag says
//! (`watchcache::transform`), as kube's storage codec does.

use crate::registry::Resource;

/// kube's `SpecialDefaultResourcePrefixes`
/// (pkg/kubeapiserver/default_storage_factory_builder.go): resources kept
/// under a path other than their name. Cohabiting resources (extensions
/// and networking.k8s.io Ingresses) share the path.
const SPECIAL_PREFIXES: &[(&str, &str, &str)] = &[
    ("", "replicationcontrollers", "controllers"),
    ("", "endpoints", "services/endpoints"),
    ("", "nodes", "minions"),
    ("", "services", "services/specs"),
    ("extensions", "ingresses", "ingress"),
    ("networking.k8s.io", "ingresses", "ingress"),
];

/// Groups kube-apiserver serves from its apiextensions and aggregator
/// servers, whose `SimpleStorageFactory` keys resources as
/// `<group>/<resource>` and stores JSON (`LegacyCodec`).
const GROUP_QUALIFIED_JSON: &[&str] = &["apiextensions.k8s.io", "apiregistration.k8s.io"];

/// The media type values are written in (`--storage-media-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MediaType {
    /// `application/json`: every value as JSON.
    #[value(name = "application/json")]
    Json,
    /// `application/vnd.kubernetes.protobuf` (kube's default): built-in
    /// kinds as `k8s\0` + `runtime.Unknown`; custom resources, CRDs and
    /// APIServices stay JSON, as in kube.
    #[default]
    #[value(name = "application/vnd.kubernetes.protobuf")]
    Protobuf,
}

/// The group a resource's objects are stored under: the storage
/// version's (events.k8s.io Events are stored as core Events).
fn storage_group(res: &Resource) -> &str {
    match res.conversion {
        Some(c) => c.storage_version.rsplit_once('/').map_or("", |(g, _)| g),
        None => &res.group,
    }
}

/// The etcd key segment of `res` under the storage prefix (kube's
/// resource prefix): `pods`, `deployments`, `services/specs`,
/// `apiextensions.k8s.io/customresourcedefinitions`, `example.com/widgets`.
pub fn segment(res: &Resource) -> String {
    let group = storage_group(res);
    if res.custom.is_some() || GROUP_QUALIFIED_JSON.contains(&group) {
        return format!("{group}/{}", res.plural);
    }
    SPECIAL_PREFIXES
        .iter()
        .find(|(g, r, _)| *g == group && *r == res.plural)
        .map_or_else(|| res.plural.to_string(), |(_, _, p)| p.to_string())
}

/// The segment earlier versions of this server stored `res` under
/// (`<group>/<resource>` for every named group), when it differs from
/// kube's: what [`crate::storage_migration`] moves.
pub fn legacy_segment(res: &Resource) -> Option<String> {
    let group = storage_group(res);
    let old = if group.is_empty() {
        res.plural.to_string()
    } else {
        format!("{group}/{}", res.plural)
    };
    (old != segment(res)).then_some(old)
}

/// Whether values of `res` are written as protobuf under `media`: kube
/// stores built-in kinds in the configured media type, and the
/// apiextensions/aggregator groups and custom resources as JSON.
pub fn writes_protobuf(res: &Resource, media: MediaType) -> bool {
    let group = storage_group(res);
    let (version, kind) = match res.conversion {
        Some(c) => (
            c.storage_version
                .rsplit_once('/')
                .map_or(c.storage_version, |(_, v)| v),
            &*res.kind,
        ),
        None => (&*res.version, &*res.kind),
    };
    media == MediaType::Protobuf
        && res.custom.is_none()
        && !GROUP_QUALIFIED_JSON.contains(&group)
        && k8s_proto::message_for(group, version, kind).is_some()
}

/// The etcd key prefixes (under `prefix`, the `--etcd-prefix`) whose
/// values are written as protobuf under `media`.
pub fn protobuf_prefixes(prefix: &str, media: MediaType) -> Vec<String> {
    let prefix = prefix.trim_end_matches('/');
    let mut out: Vec<String> = crate::registry::RESOURCES
        .iter()
        .filter(|r| writes_protobuf(r, media))
        .map(|r| format!("{prefix}/{}/", segment(r)))
        .collect();
    // kube's lease reconciler keeps its Endpoints leases with the
    // Endpoints storage codec.
    if media == MediaType::Protobuf {
        out.push(format!("{prefix}/masterleases/"));
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn seg(group: &str, version: &str, plural: &str) -> String {
        let reg = Registry::builtin();
        segment(&reg.lookup(group, version, plural).expect("served"))
    }

    #[test]
    fn kube_paths() {
        assert_eq!(seg("", "v1", "pods"), "pods");
        assert_eq!(seg("", "v1", "services"), "services/specs");
        assert_eq!(seg("", "v1", "endpoints"), "services/endpoints");
        assert_eq!(seg("", "v1", "nodes"), "minions");
        assert_eq!(seg("", "v1", "replicationcontrollers"), "controllers");
        assert_eq!(seg("apps", "v1", "deployments"), "deployments");
        assert_eq!(seg("networking.k8s.io", "v1", "ingresses"), "ingress");
        assert_eq!(seg("events.k8s.io", "v1", "events"), "events");
        assert_eq!(
            seg("autoscaling", "v1", "horizontalpodautoscalers"),
            "horizontalpodautoscalers"
        );
        assert_eq!(
            seg("rbac.authorization.k8s.io", "v1", "clusterroles"),
            "clusterroles"
        );
        assert_eq!(
            seg("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            "apiextensions.k8s.io/customresourcedefinitions"
        );
    }

    /// Two resources share a path only when kube makes them cohabit (one
    /// kind in several versions or groups).
    #[test]
    fn no_two_kinds_share_a_path() {
        let reg = Registry::builtin();
        let all = reg.all();
        for a in all.iter() {
            for b in all.iter() {
                if segment(&a) == segment(&b) && a.kind != b.kind {
                    panic!(
                        "{}/{} and {}/{} share {}",
                        a.group,
                        a.plural,
                        b.group,
                        b.plural,
                        segment(&a)
                    );
                }
            }
        }
    }

    #[test]
    fn mutating_policies_are_stored_as_v1beta1() {
        let reg = Registry::builtin();
        let map = reg
            .lookup(
                "admissionregistration.k8s.io",
                "v1",
                "mutatingadmissionpolicies",
            )
            .unwrap();
        let conv = map.conversion.expect("a storage version");
        assert_eq!(conv.storage_version, "admissionregistration.k8s.io/v1beta1");
        assert_eq!(segment(&map), "mutatingadmissionpolicies");
        assert!(writes_protobuf(&map, MediaType::Protobuf));
        let stored = (conv.convert)(
            &serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "spec": {"failurePolicy": "Fail"}}),
            conv.storage_version,
        );
        assert_eq!(stored["apiVersion"], "admissionregistration.k8s.io/v1beta1");
        assert_eq!(stored["spec"]["failurePolicy"], "Fail");
    }

    #[test]
    fn media_types_follow_kube() {
        let reg = Registry::builtin();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        assert!(writes_protobuf(&pods, MediaType::Protobuf));
        assert!(!writes_protobuf(&pods, MediaType::Json));
        let crds = reg
            .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        assert!(!writes_protobuf(&crds, MediaType::Protobuf));
        let hpa = reg
            .lookup("autoscaling", "v1", "horizontalpodautoscalers")
            .unwrap();
        assert!(writes_protobuf(&hpa, MediaType::Protobuf));
    }

    #[test]
    fn legacy_segments_are_the_group_qualified_ones() {
        let reg = Registry::builtin();
        let d = reg.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(legacy_segment(&d).as_deref(), Some("apps/deployments"));
        assert_eq!(legacy_segment(&reg.lookup("", "v1", "pods").unwrap()), None);
        // services moved from `services` to `services/specs`.
        assert_eq!(
            legacy_segment(&reg.lookup("", "v1", "services").unwrap()).as_deref(),
            Some("services")
        );
    }
}
