//! The checks of the restricted level.

use super::baseline::{seccomp_forbidden, seccomp_survey};
use super::*;

// From v1.25 some restricted checks pass Windows pods (`spec.os.name`),
// from v1.35 some pass pods in a user namespace.

pub(super) fn allow_privilege_escalation_1_25(pod: PodView<'_>) -> Option<Violation> {
    if windows(pod) {
        return None;
    }
    allow_privilege_escalation(pod)
}

pub(super) fn capabilities_restricted_1_25(pod: PodView<'_>) -> Option<Violation> {
    if windows(pod) {
        return None;
    }
    capabilities_restricted(pod)
}

pub(super) fn seccomp_restricted_1_25(pod: PodView<'_>) -> Option<Violation> {
    if windows(pod) {
        return None;
    }
    seccomp_restricted(pod)
}

pub(super) fn run_as_non_root_1_35(pod: PodView<'_>) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    run_as_non_root(pod)
}

pub(super) fn run_as_user_1_35(pod: PodView<'_>) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    run_as_user(pod)
}

pub(super) fn allow_privilege_escalation(pod: PodView<'_>) -> Option<Violation> {
    let bad: Vec<&str> = containers(pod.spec)
        .filter(|c| sc(c).and_then(|s| bool_at(s, &["allowPrivilegeEscalation"])) != Some(false))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

pub(super) fn capabilities_restricted(pod: PodView<'_>) -> Option<Violation> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(pod.spec) {
        let Some(caps) = sc(c).and_then(|s| at(s, &["capabilities"])) else {
            missing_drop.push(name(c));
            continue;
        };
        if !array_at(caps, &["drop"])
            .iter()
            .any(|d| d.as_str() == Some("ALL"))
        {
            missing_drop.push(name(c));
        }
        let mut added_forbidden = false;
        for a in array_at(caps, &["add"]) {
            let a = a.as_str().unwrap_or("");
            if a != "NET_BIND_SERVICE" {
                added_forbidden = true;
                forbidden.insert(a);
            }
        }
        if added_forbidden {
            adding.push(name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&forbidden)
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

/// Volume sources the restricted level allows.
const ALLOWED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The sources kube names when refusing a volume, in kube's order.
const NAMED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

pub(super) fn restricted_volumes(pod: PodView<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for vol in array_at(pod.spec, &["volumes"]) {
        if ALLOWED_VOLUMES.iter().any(|k| at(vol, &[k]).is_some()) {
            continue;
        }
        bad.push(name(vol));
        let t = NAMED_VOLUMES
            .iter()
            .find(|k| at(vol, &[k]).is_some())
            .copied()
            .unwrap_or("unknown");
        types.insert(t);
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

pub(super) fn run_as_non_root(pod: PodView<'_>) -> Option<Violation> {
    let mut setters = Vec::new();
    let mut pod_non_root = false;
    match pod_sc(pod).and_then(|s| bool_at(s, &["runAsNonRoot"])) {
        Some(false) => setters.push("pod".to_string()),
        Some(true) => pod_non_root = true,
        None => {}
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(pod.spec) {
        match sc(c).and_then(|s| bool_at(s, &["runAsNonRoot"])) {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_non_root => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if implicit.is_empty() {
        return None;
    }
    Violation::new(
        "runAsNonRoot != true",
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_phrase(&implicit)
        ),
    )
}

pub(super) fn run_as_user(pod: PodView<'_>) -> Option<Violation> {
    let root = |s: Option<&Value>| {
        s.and_then(|s| at(s, &["runAsUser"]))
            .and_then(Value::as_i64)
            == Some(0)
    };
    let mut setters = Vec::new();
    if root(pod_sc(pod)) {
        setters.push("pod".to_string());
    }
    let bad: Vec<&str> = containers(pod.spec)
        .filter(|c| root(sc(c)))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

pub(super) fn seccomp_restricted(pod: PodView<'_>) -> Option<Violation> {
    let s = seccomp_survey(pod);
    if let Some(v) = seccomp_forbidden(&s) {
        return Some(v);
    }
    if s.pod_set || s.unset.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            containers_phrase(&s.unset)
        ),
    )
}
