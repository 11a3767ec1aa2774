//! The checks of the baseline level.

use super::*;

pub(super) fn app_armor_allowed_type(t: Option<&str>) -> bool {
    matches!(t, Some("RuntimeDefault" | "Localhost"))
}

pub(super) fn app_armor_profile(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn capabilities_baseline(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn host_namespaces(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn host_path_volumes(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn host_ports(pod: PodView<'_>) -> Option<Violation> {
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
pub(super) fn handler_hosts(handler: Option<&Value>) -> impl Iterator<Item = &str> {
    ["httpGet", "tcpSocket"]
        .into_iter()
        .filter_map(move |k| str_at(handler?, &[k, "host"]).filter(|h| !h.is_empty()))
}

pub(super) fn host_probes_and_lifecycle(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn privileged(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn proc_mount(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn proc_mount_unless_user_namespace(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn se_linux_options_1_0(pod: PodView<'_>) -> Option<Violation> {
    se_linux_options(pod, SELINUX_TYPES_1_0)
}

pub(super) fn se_linux_options_1_31(pod: PodView<'_>) -> Option<Violation> {
    se_linux_options(pod, SELINUX_TYPES_1_31)
}

pub(super) fn se_linux_options(pod: PodView<'_>, allowed: &[&str]) -> Option<Violation> {
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

pub(super) fn seccomp_annotation_allowed(v: &str) -> bool {
    v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/")
}

/// Before v1.19 seccomp was chosen by annotations.
pub(super) fn seccomp_baseline_annotations(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn seccomp_type_allowed(t: Option<&str>) -> bool {
    matches!(t, Some("Localhost" | "RuntimeDefault"))
}

/// The pod's and the containers' explicitly forbidden seccomp profiles
/// (setters, values), and the containers that set none.
pub(super) struct Seccomp<'v> {
    pub(super) setters: Vec<String>,
    pub(super) values: BTreeSet<&'v str>,
    pub(super) pod_set: bool,
    pub(super) unset: Vec<&'v str>,
}

pub(super) fn seccomp_survey(pod: PodView<'_>) -> Seccomp<'_> {
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

pub(super) fn seccomp_forbidden(s: &Seccomp<'_>) -> Option<Violation> {
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

pub(super) fn seccomp_baseline(pod: PodView<'_>) -> Option<Violation> {
    seccomp_forbidden(&seccomp_survey(pod))
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

pub(super) fn sysctls_1_0(pod: PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SYSCTLS_1_0])
}
pub(super) fn sysctls_1_27(pod: PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27])
}
pub(super) fn sysctls_1_29(pod: PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}
pub(super) fn sysctls_1_32(pod: PodView<'_>) -> Option<Violation> {
    sysctls(
        pod,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}
pub(super) fn sysctls_1_37(pod: PodView<'_>) -> Option<Violation> {
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

pub(super) fn sysctls(pod: PodView<'_>, allowed: &[&[&str]]) -> Option<Violation> {
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

pub(super) fn windows_host_process(pod: PodView<'_>) -> Option<Violation> {
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
