//! The checks of the Pod Security Standards, one function per check and
//! policy version, with kube's wording (`k8s.io/pod-security-admission`
//! `policy/check_*.go`). A check answers `None` when the pod passes.

use super::{Level, PodView, Violation};
use crate::validation::go_quote;
use serde_json::Value;
use std::collections::BTreeSet;

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

// From v1.25 some restricted checks pass Windows pods (`spec.os.name`).

fn allow_privilege_escalation_1_25(pod: PodView<'_>) -> Option<Violation> {
    if windows(pod) {
        return None;
    }
    allow_privilege_escalation(pod)
}

fn capabilities_restricted_1_25(pod: PodView<'_>) -> Option<Violation> {
    if windows(pod) {
        return None;
    }
    capabilities_restricted(pod)
}

fn seccomp_restricted_1_25(pod: PodView<'_>) -> Option<Violation> {
    if windows(pod) {
        return None;
    }
    seccomp_restricted(pod)
}

/// kube's `relaxPolicyForUserNamespacePod`: `spec.hostUsers: false`.
fn in_user_namespace(pod: PodView<'_>) -> bool {
    pod.spec.get("hostUsers").and_then(Value::as_bool) == Some(false)
}

// From v1.35 some checks pass pods in a user namespace.

fn run_as_non_root_1_35(pod: PodView<'_>) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    run_as_non_root(pod)
}

fn run_as_user_1_35(pod: PodView<'_>) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    run_as_user(pod)
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

// ---- baseline ----

fn app_armor_allowed_type(t: Option<&str>) -> bool {
    matches!(t, Some("RuntimeDefault" | "Localhost"))
}

fn app_armor_profile(pod: PodView<'_>) -> Option<Violation> {
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    if let Some(p) = pod_sc(pod).and_then(|s| at(s, &["appArmorProfile"])) {
        let t = str_at(p, &["type"]);
        if !app_armor_allowed_type(t) {
            setters.push("pod".to_string());
            values.insert(t.unwrap_or("").to_string());
        }
    }
    let mut bad = Vec::new();
    for c in containers(pod.spec) {
        if let Some(p) = sc(c).and_then(|s| at(s, &["appArmorProfile"])) {
            let t = str_at(p, &["type"]);
            if !app_armor_allowed_type(t) {
                bad.push(name(c));
                values.insert(t.unwrap_or("").to_string());
            }
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    let mut annotations = Vec::new();
    if let Some(a) = at(pod.metadata, &["annotations"]).and_then(Value::as_object) {
        for (k, v) in a {
            let v = v.as_str().unwrap_or("");
            let allowed = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
            if k.starts_with("container.apparmor.security.beta.kubernetes.io/") && !allowed {
                annotations.push(format!("{k}={}", go_quote(v)));
            }
        }
    }
    let mut values: Vec<String> = values.into_iter().collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(plural("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        plural(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quote(&values)
        ),
    )
}

const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capabilities_baseline(pod: PodView<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(pod.spec) {
        let Some(capabilities) = sc(c).and_then(|s| at(s, &["capabilities"])) else {
            continue;
        };
        let mut valid = true;
        for cap in array_at(capabilities, &["add"]) {
            let cap = cap.as_str().unwrap_or("");
            if !DEFAULT_CAPABILITIES.contains(&cap) {
                valid = false;
                caps.insert(cap);
            }
        }
        if !valid {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quote(&caps)
        ),
    )
}

fn host_namespaces(pod: PodView<'_>) -> Option<Violation> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| bool_at(pod.spec, &[k]) == Some(true))
        .map(|k| format!("{k}=true"))
        .collect();
    if set.is_empty() {
        return None;
    }
    Violation::new("host namespaces", set.join(", "))
}

fn host_path_volumes(pod: PodView<'_>) -> Option<Violation> {
    let bad: Vec<&str> = array_at(pod.spec, &["volumes"])
        .iter()
        .filter(|v| at(v, &["hostPath"]).is_some())
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "hostPath volumes",
        format!(
            "{} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad)
        ),
    )
}

fn host_ports(pod: PodView<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(pod.spec) {
        let mut valid = true;
        for p in array_at(c, &["ports"]) {
            let port = at(p, &["hostPort"]).and_then(Value::as_i64).unwrap_or(0);
            if port != 0 {
                valid = false;
                ports.insert(port.to_string());
            }
        }
        if !valid {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            plural("uses", "use", bad.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// The `host` of a probe's or a lifecycle handler's `httpGet` and
/// `tcpSocket`, where set.
fn handler_hosts(handler: Option<&Value>) -> impl Iterator<Item = &str> {
    ["httpGet", "tcpSocket"]
        .into_iter()
        .filter_map(move |k| str_at(handler?, &[k, "host"]).filter(|h| !h.is_empty()))
}

fn host_probes_and_lifecycle(pod: PodView<'_>) -> Option<Violation> {
    let mut bad = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in containers(pod.spec) {
        let handlers = [
            at(c, &["livenessProbe"]),
            at(c, &["readinessProbe"]),
            at(c, &["startupProbe"]),
            at(c, &["lifecycle", "postStart"]),
            at(c, &["lifecycle", "preStop"]),
        ];
        for h in handlers {
            for host in handler_hosts(h) {
                bad.insert(name(c));
                hosts.insert(host);
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "probe or lifecycle host",
        format!(
            "{} {} {} {} {}",
            plural("container", "containers", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(&hosts)
        ),
    )
}

fn privileged(pod: PodView<'_>) -> Option<Violation> {
    let bad: Vec<&str> = containers(pod.spec)
        .filter(|c| sc(c).and_then(|s| bool_at(s, &["privileged"])) == Some(true))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    )
}

fn proc_mount(pod: PodView<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in containers(pod.spec) {
        let Some(pm) = sc(c).and_then(|s| at(s, &["procMount"])) else {
            continue;
        };
        let pm = pm.as_str().unwrap_or("");
        if pm != "Default" {
            bad.push(name(c));
            types.insert(pm);
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad),
            join_quote(&types)
        ),
    )
}

fn proc_mount_unless_user_namespace(pod: PodView<'_>) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    proc_mount(pod)
}

const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const SELINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn se_linux_options_1_0(pod: PodView<'_>) -> Option<Violation> {
    se_linux_options(pod, SELINUX_TYPES_1_0)
}

fn se_linux_options_1_31(pod: PodView<'_>) -> Option<Violation> {
    se_linux_options(pod, SELINUX_TYPES_1_31)
}

fn se_linux_options(pod: PodView<'_>, allowed: &[&str]) -> Option<Violation> {
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |opts: &Value| {
        let mut ok = true;
        let t = str_at(opts, &["type"]).unwrap_or("");
        if !allowed.contains(&t) {
            ok = false;
            bad_types.insert(t.to_string());
        }
        if !str_at(opts, &["user"]).unwrap_or("").is_empty() {
            ok = false;
            set_user = true;
        }
        if !str_at(opts, &["role"]).unwrap_or("").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let mut setters = Vec::new();
    if let Some(opts) = pod_sc(pod).and_then(|s| at(s, &["seLinuxOptions"])) {
        if !valid(opts) {
            setters.push("pod".to_string());
        }
    }
    let mut bad = Vec::new();
    for c in containers(pod.spec) {
        if let Some(opts) = sc(c).and_then(|s| at(s, &["seLinuxOptions"])) {
            if !valid(opts) {
                bad.push(name(c));
            }
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        data.push(format!(
            "{} {}",
            plural("type", "types", bad_types.len()),
            join_quote(&bad_types)
        ));
    }
    if set_user {
        data.push("user may not be set".to_string());
    }
    if set_role {
        data.push("role may not be set".to_string());
    }
    Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
        ),
    )
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";

fn seccomp_annotation_allowed(v: &str) -> bool {
    v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/")
}

/// Before v1.19 seccomp was chosen by annotations.
fn seccomp_baseline_annotations(pod: PodView<'_>) -> Option<Violation> {
    let annotations = at(pod.metadata, &["annotations"]);
    let mut forbidden = BTreeSet::new();
    let mut check = |key: &str| {
        if let Some(v) = annotations.and_then(|a| a.get(key)) {
            let v = v.as_str().unwrap_or("");
            if !seccomp_annotation_allowed(v) {
                forbidden.insert(format!("{key}={}", go_quote(v)));
            }
        }
    };
    check(SECCOMP_POD_ANNOTATION);
    for c in containers(pod.spec) {
        check(&format!("{SECCOMP_CONTAINER_ANNOTATION}{}", name(c)));
    }
    if forbidden.is_empty() {
        return None;
    }
    let forbidden: Vec<String> = forbidden.into_iter().collect();
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            plural("annotation", "annotations", forbidden.len()),
            forbidden.join(", ")
        ),
    )
}

fn seccomp_type_allowed(t: Option<&str>) -> bool {
    matches!(t, Some("Localhost" | "RuntimeDefault"))
}

/// The pod's and the containers' explicitly forbidden seccomp profiles
/// (setters, values), and the containers that set none.
struct Seccomp<'v> {
    setters: Vec<String>,
    values: BTreeSet<&'v str>,
    pod_set: bool,
    unset: Vec<&'v str>,
}

fn seccomp_survey(pod: PodView<'_>) -> Seccomp<'_> {
    let mut s = Seccomp {
        setters: Vec::new(),
        values: BTreeSet::new(),
        pod_set: false,
        unset: Vec::new(),
    };
    if let Some(p) = pod_sc(pod).and_then(|sc| at(sc, &["seccompProfile"])) {
        let t = str_at(p, &["type"]);
        if seccomp_type_allowed(t) {
            s.pod_set = true;
        } else {
            s.setters.push("pod".to_string());
            s.values.insert(t.unwrap_or(""));
        }
    }
    let mut bad = Vec::new();
    for c in containers(pod.spec) {
        match sc(c).and_then(|sc| at(sc, &["seccompProfile"])) {
            Some(p) => {
                let t = str_at(p, &["type"]);
                if !seccomp_type_allowed(t) {
                    bad.push(name(c));
                    s.values.insert(t.unwrap_or(""));
                }
            }
            None => s.unset.push(name(c)),
        }
    }
    if !bad.is_empty() {
        s.setters.push(containers_phrase(&bad));
    }
    s
}

fn seccomp_forbidden(s: &Seccomp<'_>) -> Option<Violation> {
    if s.setters.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            s.setters.join(" and "),
            join_quote(&s.values)
        ),
    )
}

fn seccomp_baseline(pod: PodView<'_>) -> Option<Violation> {
    seccomp_forbidden(&seccomp_survey(pod))
}

fn seccomp_restricted(pod: PodView<'_>) -> Option<Violation> {
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

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
const SYSCTLS_1_37: &[&str] = &[
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
];

fn sysctls_1_0(pod: PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SYSCTLS_1_0])
}
fn sysctls_1_27(pod: PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27])
}
fn sysctls_1_29(pod: PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}
fn sysctls_1_32(pod: PodView<'_>) -> Option<Violation> {
    sysctls(
        pod,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}
fn sysctls_1_37(pod: PodView<'_>) -> Option<Violation> {
    sysctls(
        pod,
        &[
            SYSCTLS_1_0,
            SYSCTLS_1_27,
            SYSCTLS_1_29,
            SYSCTLS_1_32,
            SYSCTLS_1_37,
        ],
    )
}

fn sysctls(pod: PodView<'_>, allowed: &[&[&str]]) -> Option<Violation> {
    let sysctls = pod_sc(pod)
        .map(|s| array_at(s, &["sysctls"]))
        .unwrap_or(&[]);
    let bad: Vec<&str> = sysctls
        .iter()
        .map(name)
        .filter(|n| !allowed.iter().any(|set| set.contains(n)))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", bad.join(", "))
}

fn windows_host_process(pod: PodView<'_>) -> Option<Violation> {
    let host_process = |s: Option<&Value>| {
        s.and_then(|s| bool_at(s, &["windowsOptions", "hostProcess"])) == Some(true)
    };
    let mut setters = Vec::new();
    if host_process(pod_sc(pod)) {
        setters.push("pod".to_string());
    }
    let bad: Vec<&str> = containers(pod.spec)
        .filter(|c| host_process(sc(c)))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}

// ---- restricted ----

fn allow_privilege_escalation(pod: PodView<'_>) -> Option<Violation> {
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

fn capabilities_restricted(pod: PodView<'_>) -> Option<Violation> {
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

fn restricted_volumes(pod: PodView<'_>) -> Option<Violation> {
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

fn run_as_non_root(pod: PodView<'_>) -> Option<Violation> {
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

fn run_as_user(pod: PodView<'_>) -> Option<Violation> {
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
