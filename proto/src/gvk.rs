//! Group/version/kind -> protobuf message name.

use crate::table::{table, Table};

/// Kinds of `k8s.io.apimachinery.pkg.apis.meta.v1` that kube registers in
/// every built-in group version (and in `meta.k8s.io`).
const META_KINDS: &[&str] = &[
    "APIGroup",
    "APIGroupList",
    "APIResourceList",
    "APIVersions",
    "CreateOptions",
    "DeleteOptions",
    "GetOptions",
    "ListOptions",
    "PartialObjectMetadata",
    "PartialObjectMetadataList",
    "PatchOptions",
    "Status",
    "Table",
    "UpdateOptions",
    "WatchEvent",
];

/// The fully qualified protobuf message of a built-in kind, e.g.
/// (`apps`, `v1`, `Deployment`) -> `k8s.io.api.apps.v1.Deployment`,
/// (``, `v1`, `ConfigMap`) -> `k8s.io.api.core.v1.ConfigMap`,
/// (`rbac.authorization.k8s.io`, `v1`, `Role`) -> `k8s.io.api.rbac.v1.Role`,
/// (`autoscaling`, `v1`, `Scale`) -> `k8s.io.api.autoscaling.v1.Scale`.
/// `None` for groups that are not built in (custom resources), unknown
/// versions and kinds.
pub fn message_for(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    message_in(table().ok()?, group, version, kind)
}

pub(crate) fn message_in<'t>(
    t: &'t Table,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<&'t str> {
    if version.is_empty() || kind.is_empty() || version.contains('.') || kind.contains('.') {
        return None;
    }
    let find = |name: String| t.index(&name).map(|i| t.message(i).name.as_str());
    if group == "meta.k8s.io" {
        return find(format!(
            "k8s.io.apimachinery.pkg.apis.meta.{version}.{kind}"
        ))
        .or_else(|| meta_kind(t, kind));
    }
    // kube registers the meta kinds (DeleteOptions, Status, ...) in every
    // group version, custom groups included.
    let Some(short) = t.groups.get(group) else {
        return meta_kind(t, kind);
    };
    find(format!("k8s.io.api.{short}.{version}.{kind}")).or_else(|| meta_kind(t, kind))
}

fn meta_kind<'t>(t: &'t Table, kind: &str) -> Option<&'t str> {
    if !META_KINDS.contains(&kind) {
        return None;
    }
    let i = t.index(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"))?;
    Some(t.message(i).name.as_str())
}

#[cfg(test)]
mod tests {
    use super::message_for;

    #[test]
    fn built_in_kinds() {
        let cases = [
            ("", "v1", "ConfigMap", "k8s.io.api.core.v1.ConfigMap"),
            ("", "v1", "Pod", "k8s.io.api.core.v1.Pod"),
            ("apps", "v1", "Deployment", "k8s.io.api.apps.v1.Deployment"),
            ("batch", "v1", "CronJob", "k8s.io.api.batch.v1.CronJob"),
            (
                "autoscaling",
                "v1",
                "Scale",
                "k8s.io.api.autoscaling.v1.Scale",
            ),
            (
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
                "k8s.io.api.rbac.v1.ClusterRole",
            ),
            (
                "networking.k8s.io",
                "v1",
                "Ingress",
                "k8s.io.api.networking.v1.Ingress",
            ),
            (
                "coordination.k8s.io",
                "v1",
                "Lease",
                "k8s.io.api.coordination.v1.Lease",
            ),
            ("events.k8s.io", "v1", "Event", "k8s.io.api.events.v1.Event"),
            ("policy", "v1", "Eviction", "k8s.io.api.policy.v1.Eviction"),
            (
                "discovery.k8s.io",
                "v1",
                "EndpointSlice",
                "k8s.io.api.discovery.v1.EndpointSlice",
            ),
            (
                "scheduling.k8s.io",
                "v1",
                "PriorityClass",
                "k8s.io.api.scheduling.v1.PriorityClass",
            ),
            (
                "storage.k8s.io",
                "v1",
                "StorageClass",
                "k8s.io.api.storage.v1.StorageClass",
            ),
            (
                "flowcontrol.apiserver.k8s.io",
                "v1",
                "FlowSchema",
                "k8s.io.api.flowcontrol.v1.FlowSchema",
            ),
            (
                "internal.apiserver.k8s.io",
                "v1alpha1",
                "StorageVersion",
                "k8s.io.api.apiserverinternal.v1alpha1.StorageVersion",
            ),
            (
                "authorization.k8s.io",
                "v1",
                "SelfSubjectAccessReview",
                "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
            ),
            (
                "apps",
                "v1",
                "DeleteOptions",
                "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            ),
            (
                "",
                "v1",
                "Status",
                "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
            ),
            (
                "meta.k8s.io",
                "v1",
                "PartialObjectMetadataList",
                "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
            ),
        ];
        for (g, v, k, want) in cases {
            assert_eq!(message_for(g, v, k), Some(want), "{g}/{v} {k}");
        }
    }

    #[test]
    fn not_built_in() {
        assert_eq!(message_for("rbac.example.com", "v1", "Role"), None);
        assert_eq!(message_for("apps", "v1", "Nope"), None);
        assert_eq!(message_for("apps", "v9", "Deployment"), None);
        assert_eq!(
            message_for("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            None
        );
        assert_eq!(message_for("", "v1.x", "Pod"), None);
        assert_eq!(message_for("", "", "Pod"), None);
        // The meta kinds exist in custom groups too.
        assert_eq!(
            message_for("example.com", "v1", "DeleteOptions"),
            Some("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions")
        );
    }
}
