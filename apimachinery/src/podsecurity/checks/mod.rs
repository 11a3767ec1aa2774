//! The checks of the Pod Security Standards, one function per check and
//! policy version, with kube's wording (`k8s.io/pod-security-admission`
//! `policy/check_*.go`). A check answers `None` when the pod passes.

use super::{Level, PodView, Violation};
use crate::validation::go_quote;
use serde_json::Value;
use std::collections::BTreeSet;

mod baseline;
mod restricted;

use baseline::*;
use restricted::*;

/// One check at one range of policy versions.
pub type CheckFn = fn(PodView<'_>) -> Option<Violation>;

/// A version of a check: it applies from policy `v1.<min_minor>` until the
/// next version of the same check.
pub struct VersionedCheck {
    pub min_minor: u32,
    pub check: CheckFn,
    /// Baseline checks this restricted check replaces (kube's
    /// `OverrideCheckIDs`).
    pub overrides: &'static [&'static str],
}

/// A check of the standard.
pub struct Check {
    /// kube's check ID; the order of evaluation (and of the messages) is
    /// the baseline checks by ID, then the restricted checks by ID.
    pub id: &'static str,
    pub level: Level,
    /// By increasing `min_minor`.
    pub versions: &'static [VersionedCheck],
}

const fn v(min_minor: u32, check: CheckFn) -> VersionedCheck {
    VersionedCheck {
        min_minor,
        check,
        overrides: &[],
    }
}

const fn over(
    min_minor: u32,
    check: CheckFn,
    overrides: &'static [&'static str],
) -> VersionedCheck {
    VersionedCheck {
        min_minor,
        check,
        overrides,
    }
}

/// Every check, in kube's order (IDs sorted bytewise, baseline first).
pub static CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        versions: &[v(0, app_armor_profile)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        versions: &[v(0, capabilities_baseline)],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        versions: &[v(0, host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        versions: &[v(0, host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        versions: &[v(0, host_ports)],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        versions: &[v(34, host_probes_and_lifecycle)],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        versions: &[v(0, privileged)],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        versions: &[v(0, proc_mount), v(35, proc_mount_unless_user_namespace)],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: &[v(0, se_linux_options_1_0), v(31, se_linux_options_1_31)],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        versions: &[v(0, seccomp_baseline_annotations), v(19, seccomp_baseline)],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: &[
            v(0, sysctls_1_0),
            v(27, sysctls_1_27),
            v(29, sysctls_1_29),
            v(32, sysctls_1_32),
            v(37, sysctls_1_37),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        versions: &[v(0, windows_host_process)],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: &[
            v(8, allow_privilege_escalation),
            v(25, allow_privilege_escalation_1_25),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: &[
            over(22, capabilities_restricted, &["capabilities_baseline"]),
            over(25, capabilities_restricted_1_25, &["capabilities_baseline"]),
        ],
    },
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        versions: &[over(35, proc_mount, &["procMount"])],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: &[over(0, restricted_volumes, &["hostPathVolumes"])],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: &[v(0, run_as_non_root), v(35, run_as_non_root_1_35)],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: &[v(23, run_as_user), v(35, run_as_user_1_35)],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: &[
            over(19, seccomp_restricted, &["seccompProfile_baseline"]),
            over(25, seccomp_restricted_1_25, &["seccompProfile_baseline"]),
        ],
    },
];

// ---- helpers ----

fn windows(pod: PodView<'_>) -> bool {
    str_at(pod.spec, &["os", "name"]) == Some("windows")
}

/// kube's `relaxPolicyForUserNamespacePod`: `spec.hostUsers: false`.
fn in_user_namespace(pod: PodView<'_>) -> bool {
    pod.spec.get("hostUsers").and_then(Value::as_bool) == Some(false)
}

/// A present, non-null value at `path`.
fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    at(v, path).and_then(Value::as_str)
}

fn bool_at(v: &Value, path: &[&str]) -> Option<bool> {
    at(v, path).and_then(Value::as_bool)
}

fn array_at<'v>(v: &'v Value, path: &[&str]) -> &'v [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Init containers, containers and ephemeral containers, in that order
/// (kube's `visitContainers`).
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |k| array_at(spec, &[k]))
}

fn name(v: &Value) -> &str {
    str_at(v, &["name"]).unwrap_or("")
}

/// A container's `securityContext`, if set.
fn sc(c: &Value) -> Option<&Value> {
    at(c, &["securityContext"])
}

/// The pod's `securityContext`, if set.
fn pod_sc(pod: PodView<'_>) -> Option<&Value> {
    at(pod.spec, &["securityContext"])
}

/// kube's `joinQuote`: `"a", "b"`.
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let items: Vec<String> = items
        .into_iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    items.join(", ")
}

fn plural<'s>(singular: &'s str, plural: &'s str, n: usize) -> &'s str {
    if n == 1 {
        singular
    } else {
        plural
    }
}

/// `container "a"` / `containers "a", "b"`.
fn containers_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        join_quote(names)
    )
}
