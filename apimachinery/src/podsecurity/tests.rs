use super::*;
use proptest::prelude::*;
use serde_json::json;

fn lv(level: Level, version: Version) -> LevelVersion {
    LevelVersion { level, version }
}

const BASELINE: LevelVersion = LevelVersion {
    level: Level::Baseline,
    version: Version::Latest,
};
const RESTRICTED: LevelVersion = LevelVersion {
    level: Level::Restricted,
    version: Version::Latest,
};

/// A container that passes the restricted level.
fn good_container(name: &str) -> Value {
    json!({
        "name": name,
        "image": "busybox",
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}
        }
    })
}

/// A pod of good containers, then `edit` applied.
fn pod_with(edit: impl FnOnce(&mut Value)) -> Value {
    let mut pod = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [good_container("c")]}
    });
    edit(&mut pod);
    pod
}

fn eval(lv: LevelVersion, pod: &Value) -> Outcome {
    evaluate(lv, MAX_MINOR, PodView::of_pod(pod))
}

fn detail(lv: LevelVersion, pod: &Value) -> String {
    eval(lv, pod).details()
}

fn sc(pod: &mut Value) -> &mut Value {
    &mut pod["spec"]["containers"][0]["securityContext"]
}

#[test]
fn a_good_pod_passes_every_level() {
    let pod = pod_with(|_| {});
    for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
        assert!(eval(lv(level, Version::Latest), &pod).allowed(), "{level}");
    }
}

#[test]
fn a_bare_pod_fails_restricted_in_kubes_words() {
    let pod = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    assert!(eval(BASELINE, &pod).allowed());
    assert_eq!(
        detail(RESTRICTED, &pod),
        "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
         unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
         runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
         seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    assert_eq!(
        eval(RESTRICTED, &pod).reasons(),
        "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
    );
}

#[test]
fn privileged_pod_fails_baseline_first_in_restricted() {
    let pod = pod_with(|p| sc(p)["privileged"] = json!(true));
    assert_eq!(
        detail(BASELINE, &pod),
        "privileged (container \"c\" must not set securityContext.privileged=true)"
    );
    assert!(detail(RESTRICTED, &pod).starts_with("privileged (container \"c\""));
}

/// (edit, baseline detail or "" when allowed, restricted detail).
type Case = (fn(&mut Value), &'static str, &'static str);

#[test]
fn each_check_at_latest() {
    let cases: &[Case] = &[
        (
            |p| p["spec"]["hostNetwork"] = json!(true),
            "host namespaces (hostNetwork=true)",
            "host namespaces (hostNetwork=true)",
        ),
        (
            |p| {
                p["spec"]["hostPID"] = json!(true);
                p["spec"]["hostIPC"] = json!(true);
            },
            "host namespaces (hostPID=true, hostIPC=true)",
            "host namespaces (hostPID=true, hostIPC=true)",
        ),
        (
            |p| p["spec"]["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}]),
            "hostPath volumes (volume \"h\")",
            // restrictedVolumes overrides hostPathVolumes.
            "restricted volume types (volume \"h\" uses restricted volume type \"hostPath\")",
        ),
        (
            |p| p["spec"]["volumes"] = json!([{"name": "n", "nfs": {}}, {"name": "g", "gitRepo": {}}, {"name": "x"}]),
            "",
            "restricted volume types (volumes \"n\", \"g\", \"x\" use restricted volume types \"gitRepo\", \"nfs\", \"unknown\")",
        ),
        (
            |p| p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 80}]),
            "hostPort (container \"c\" uses hostPorts 80, 8080)",
            "hostPort (container \"c\" uses hostPorts 80, 8080)",
        ),
        (
            |p| sc(p)["capabilities"]["add"] = json!(["NET_RAW", "CHOWN", "SYS_ADMIN"]),
            "non-default capabilities (container \"c\" must not include \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add)",
            "unrestricted capabilities (container \"c\" must not include \"CHOWN\", \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add)",
        ),
        (
            |p| sc(p)["capabilities"]["add"] = json!(["NET_BIND_SERVICE"]),
            "",
            "",
        ),
        (
            |p| sc(p)["capabilities"] = json!({"drop": ["NET_RAW"]}),
            "",
            "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"])",
        ),
        (
            |p| sc(p)["appArmorProfile"] = json!({"type": "Unconfined"}),
            "forbidden AppArmor profile (container \"c\" must not set AppArmor profile type to \"Unconfined\")",
            "forbidden AppArmor profile (container \"c\" must not set AppArmor profile type to \"Unconfined\")",
        ),
        (
            |p| {
                p["spec"]["securityContext"] = json!({"appArmorProfile": {"type": "Unconfined"}});
                p["metadata"]["annotations"] = json!({"container.apparmor.security.beta.kubernetes.io/c": "unconfined"});
            },
            "forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")",
            "forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")",
        ),
        (
            |p| sc(p)["seLinuxOptions"] = json!({"type": "spc_t", "user": "u", "role": "r"}),
            "seLinuxOptions (container \"c\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set; role may not be set)",
            "seLinuxOptions (container \"c\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set; role may not be set)",
        ),
        (
            |p| sc(p)["seLinuxOptions"] = json!({"type": "container_engine_t"}),
            "",
            "",
        ),
        (
            |p| sc(p)["procMount"] = json!("Unmasked"),
            "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
            "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
        ),
        (
            |p| sc(p)["seccompProfile"] = json!({"type": "Unconfined"}),
            "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")",
            "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")",
        ),
        (
            |p| p["spec"]["securityContext"] = json!({"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_rmem", "value": "1"}, {"name": "vm.x", "value": "1"}]}),
            "forbidden sysctls (kernel.msgmax, vm.x)",
            "forbidden sysctls (kernel.msgmax, vm.x)",
        ),
        (
            |p| {
                p["spec"]["securityContext"] = json!({"windowsOptions": {"hostProcess": true}});
                sc(p)["windowsOptions"] = json!({"hostProcess": true});
            },
            "hostProcess (pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true)",
            "hostProcess (pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true)",
        ),
        (
            |p| p["spec"]["containers"][0]["livenessProbe"] = json!({"httpGet": {"host": "10.0.0.1", "port": 80}}),
            "probe or lifecycle host (container \"c\" uses probe or lifecycle host \"10.0.0.1\")",
            "probe or lifecycle host (container \"c\" uses probe or lifecycle host \"10.0.0.1\")",
        ),
        (
            |p| sc(p)["allowPrivilegeEscalation"] = json!(true),
            "",
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)",
        ),
        (
            |p| sc(p)["runAsNonRoot"] = json!(false),
            "",
            "runAsNonRoot != true (container \"c\" must not set securityContext.runAsNonRoot=false)",
        ),
        (
            |p| {
                p["spec"]["securityContext"] = json!({"runAsUser": 0});
                sc(p)["runAsUser"] = json!(0);
            },
            "",
            "runAsUser=0 (pod and container \"c\" must not set runAsUser=0)",
        ),
    ];
    for (i, (edit, baseline, restricted)) in cases.iter().enumerate() {
        let pod = pod_with(edit);
        assert_eq!(detail(BASELINE, &pod), *baseline, "case {i} baseline");
        assert_eq!(detail(RESTRICTED, &pod), *restricted, "case {i} restricted");
        assert!(eval(LevelVersion::PRIVILEGED_LATEST, &pod).allowed());
    }
}

#[test]
fn several_containers_are_named_together() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "i", "securityContext": {"privileged": true}}],
        "containers": [{"name": "a", "securityContext": {"privileged": true}}, {"name": "b"}],
        "ephemeralContainers": [{"name": "e", "securityContext": {"privileged": true}}]
    }});
    assert_eq!(
        detail(BASELINE, &pod),
        "privileged (containers \"i\", \"a\", \"e\" must not set securityContext.privileged=true)"
    );
}

#[test]
fn seccomp_at_pod_level_covers_containers() {
    let pod = pod_with(|p| {
        sc(p).as_object_mut().unwrap().remove("seccompProfile");
        p["spec"]["securityContext"] =
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "x"}});
    });
    assert!(eval(RESTRICTED, &pod).allowed());
}

#[test]
fn versions_change_the_checks() {
    let v = |m| lv(Level::Restricted, Version::V1(m));
    let b = |m| lv(Level::Baseline, Version::V1(m));
    // runAsUser=0 is checked from v1.23.
    let root = pod_with(|p| sc(p)["runAsUser"] = json!(0));
    assert!(eval(v(22), &root).allowed());
    assert!(!eval(v(23), &root).allowed());
    // allowPrivilegeEscalation from v1.8.
    let ape = pod_with(|p| sc(p)["allowPrivilegeEscalation"] = json!(true));
    assert!(eval(v(7), &ape).allowed());
    assert!(!eval(v(8), &ape).allowed());
    // Before v1.22 restricted checks capabilities as baseline does.
    let caps = pod_with(|p| sc(p)["capabilities"] = json!({"add": ["CHOWN"]}));
    assert!(eval(v(21), &caps).allowed());
    assert_eq!(eval(v(22), &caps).reasons(), "unrestricted capabilities");
    // Before v1.19 seccomp is by annotation.
    let annotated = pod_with(|p| {
        p["metadata"]["annotations"] =
            json!({"seccomp.security.alpha.kubernetes.io/pod": "unconfined"});
        sc(p)["seccompProfile"] = json!({"type": "Unconfined"});
    });
    assert_eq!(
        detail(b(18), &annotated),
        "seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod=\"unconfined\")"
    );
    assert_eq!(
        detail(b(19), &annotated),
        "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
    // Windows pods pass some restricted checks from v1.25.
    let windows = json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "c", "securityContext": {"runAsNonRoot": true}}]}});
    assert_eq!(
        eval(v(24), &windows).reasons(),
        "allowPrivilegeEscalation != false, unrestricted capabilities, seccompProfile"
    );
    assert!(eval(v(25), &windows).allowed());
    // Sysctls allowed grow by version.
    let sysctl = |name: &str| {
        let name = name.to_string();
        pod_with(move |p| {
            p["spec"]["securityContext"] = json!({"sysctls": [{"name": name, "value": "1"}]})
        })
    };
    assert!(!eval(b(26), &sysctl("net.ipv4.ip_local_reserved_ports")).allowed());
    assert!(eval(b(27), &sysctl("net.ipv4.ip_local_reserved_ports")).allowed());
    assert!(!eval(b(28), &sysctl("net.ipv4.tcp_fin_timeout")).allowed());
    assert!(eval(b(29), &sysctl("net.ipv4.tcp_fin_timeout")).allowed());
    assert!(!eval(b(31), &sysctl("net.ipv4.tcp_wmem")).allowed());
    assert!(eval(b(32), &sysctl("net.ipv4.tcp_wmem")).allowed());
    // v1.37's additions are past this server's newest version.
    assert!(!eval(BASELINE, &sysctl("net.ipv4.tcp_notsent_lowat")).allowed());
    assert!(evaluate(
        BASELINE,
        37,
        PodView::of_pod(&sysctl("net.ipv4.tcp_notsent_lowat"))
    )
    .allowed());
    // SELinux container_engine_t from v1.31.
    let engine = pod_with(|p| sc(p)["seLinuxOptions"] = json!({"type": "container_engine_t"}));
    assert!(!eval(b(30), &engine).allowed());
    assert!(eval(b(31), &engine).allowed());
    // Probe hosts from v1.34.
    let probe = pod_with(|p| {
        p["spec"]["containers"][0]["readinessProbe"] =
            json!({"tcpSocket": {"host": "h", "port": 1}})
    });
    assert!(eval(b(33), &probe).allowed());
    assert!(!eval(b(34), &probe).allowed());
    // User namespaces relax procMount (baseline only), runAsNonRoot and
    // runAsUser from v1.35.
    let userns = pod_with(|p| {
        p["spec"]["hostUsers"] = json!(false);
        sc(p)["procMount"] = json!("Unmasked");
        sc(p)["runAsNonRoot"] = json!(false);
        sc(p)["runAsUser"] = json!(0);
    });
    assert_eq!(
        eval(v(34), &userns).reasons(),
        "procMount, runAsNonRoot != true, runAsUser=0"
    );
    assert!(eval(b(35), &userns).allowed());
    assert_eq!(eval(v(35), &userns).reasons(), "procMount");
    // Versions past the newest act as the newest; v1.0 has the fewest.
    assert_eq!(
        eval(v(99), &root).details(),
        eval(RESTRICTED, &root).details()
    );
    let bare = json!({"spec": {"containers": [{"name": "c"}]}});
    assert_eq!(eval(v(0), &bare).reasons(), "runAsNonRoot != true");
}

#[test]
fn checks_are_in_kubes_order() {
    let ids = |level| -> Vec<&str> {
        CHECKS
            .iter()
            .filter(|c| c.level == level)
            .map(|c| c.id)
            .collect()
    };
    for level in [Level::Baseline, Level::Restricted] {
        let mut sorted = ids(level);
        sorted.sort();
        assert_eq!(ids(level), sorted);
    }
    let first_restricted = CHECKS
        .iter()
        .position(|c| c.level == Level::Restricted)
        .unwrap();
    assert!(CHECKS[first_restricted..]
        .iter()
        .all(|c| c.level == Level::Restricted));
    for c in CHECKS {
        assert!(
            c.versions
                .windows(2)
                .all(|w| w[0].min_minor < w[1].min_minor),
            "{}",
            c.id
        );
    }
}

fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

#[test]
fn labels_choose_the_policy() {
    let (p, errs) = policy_from_labels(None, Policy::default());
    assert!(errs.is_empty());
    assert!(p.fully_privileged());
    let (p, errs) = policy_from_labels(
        Some(&labels(&[
            (ENFORCE_LABEL, "baseline"),
            (ENFORCE_VERSION_LABEL, "v1.30"),
            (AUDIT_LABEL, "restricted"),
        ])),
        Policy::default(),
    );
    assert!(errs.is_empty());
    assert_eq!(p.enforce.to_string(), "baseline:v1.30");
    assert_eq!(p.audit.to_string(), "restricted:latest");
    // warn follows a stricter enforce level, with its version.
    assert_eq!(p.warn.to_string(), "baseline:v1.30");
    let (p, _) = policy_from_labels(
        Some(&labels(&[
            (ENFORCE_LABEL, "restricted"),
            (WARN_VERSION_LABEL, "v1.25"),
        ])),
        Policy::default(),
    );
    assert_eq!(p.warn.to_string(), "restricted:v1.25");
    let (p, _) = policy_from_labels(
        Some(&labels(&[
            (ENFORCE_LABEL, "restricted"),
            (WARN_LABEL, "privileged"),
        ])),
        Policy::default(),
    );
    assert_eq!(p.warn.to_string(), "privileged:latest");
}

#[test]
fn bad_labels_fail_closed_for_enforce_and_open_for_the_rest() {
    let (p, errs) = policy_from_labels(
        Some(&labels(&[
            (ENFORCE_LABEL, "strict"),
            (ENFORCE_VERSION_LABEL, "v1.01"),
            (AUDIT_LABEL, "x"),
            (WARN_LABEL, "y"),
            (WARN_VERSION_LABEL, "1.2"),
        ])),
        Policy::default(),
    );
    assert_eq!(p.enforce.to_string(), "restricted:latest");
    assert_eq!(p.audit.level, Level::Privileged);
    assert_eq!(p.warn.to_string(), "privileged:latest");
    let messages: Vec<String> = errs
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    assert_eq!(
        messages,
        [
            "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
            "metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: \"v1.01\": must be \"latest\" or \"v1.x\"",
            "metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"x\": must be one of privileged, baseline, restricted",
            "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"y\": must be one of privileged, baseline, restricted",
            "metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"1.2\": must be \"latest\" or \"v1.x\"",
        ]
    );
}

#[test]
fn versions_parse_as_kube_parses_them() {
    assert_eq!(Version::parse("latest"), Some(Version::Latest));
    assert_eq!(Version::parse("v1.0"), Some(Version::V1(0)));
    assert_eq!(Version::parse("v1.35"), Some(Version::V1(35)));
    for bad in [
        "", "v1", "v1.", "v2.1", "v1.01", "1.2", "v1.-1", "v1.2a", "Latest",
    ] {
        assert_eq!(Version::parse(bad), None, "{bad}");
    }
}

fn arb_container() -> impl Strategy<Value = Value> {
    (
        "[a-c]",
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop::sample::select(vec![
            "RuntimeDefault",
            "Unconfined",
            "Localhost",
        ])),
        proptest::option::of(prop::collection::vec(
            prop::sample::select(vec!["ALL", "NET_RAW", "CHOWN", "NET_BIND_SERVICE"]),
            0..3,
        )),
        proptest::option::of(0i64..3),
    )
        .prop_map(|(name, privileged, ape, non_root, seccomp, caps, user)| {
            let mut sc = serde_json::Map::new();
            if let Some(b) = privileged {
                sc.insert("privileged".into(), json!(b));
            }
            if let Some(b) = ape {
                sc.insert("allowPrivilegeEscalation".into(), json!(b));
            }
            if let Some(b) = non_root {
                sc.insert("runAsNonRoot".into(), json!(b));
            }
            if let Some(t) = seccomp {
                sc.insert("seccompProfile".into(), json!({"type": t}));
            }
            if let Some(c) = caps {
                sc.insert("capabilities".into(), json!({"add": c.clone(), "drop": c}));
            }
            if let Some(u) = user {
                sc.insert("runAsUser".into(), json!(u));
            }
            json!({"name": name, "securityContext": sc})
        })
}

proptest! {
    /// Restricted is stricter than baseline, baseline than privileged, at
    /// every version.
    #[test]
    fn levels_nest(
        containers in prop::collection::vec(arb_container(), 0..4),
        host_network in any::<bool>(),
        host_users in proptest::option::of(any::<bool>()),
        windows in any::<bool>(),
        minor in 0u32..40,
    ) {
        let mut spec = json!({"containers": containers, "hostNetwork": host_network});
        if let Some(h) = host_users {
            spec["hostUsers"] = json!(h);
        }
        if windows {
            spec["os"] = json!({"name": "windows"});
        }
        let pod = json!({"spec": spec});
        let at = |level| evaluate(lv(level, Version::V1(minor)), MAX_MINOR, PodView::of_pod(&pod));
        prop_assert!(at(Level::Privileged).allowed());
        // (Not for Windows pods: from v1.25 restricted skips its
        // capabilities check for them, and that check replaces baseline's,
        // so a Windows pod adding capabilities passes restricted only, as
        // in kube.)
        if !windows && at(Level::Restricted).allowed() {
            prop_assert!(at(Level::Baseline).allowed());
        }
        let r = at(Level::Restricted);
        prop_assert_eq!(r.allowed(), r.details().is_empty());
    }

    /// Arbitrary JSON where a pod should be never panics a check.
    #[test]
    fn odd_json_never_panics(s in "[\\[\\]{}:,\"a-zA-Z0-9 ]{0,80}") {
        if let Ok(v) = serde_json::from_str::<Value>(&s) {
            let pod = json!({"metadata": v.clone(), "spec": v});
            let _ = evaluate(RESTRICTED, MAX_MINOR, PodView::of_pod(&pod));
        }
    }
}
