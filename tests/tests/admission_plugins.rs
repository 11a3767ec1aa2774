//! kube's built-in admission plugins end to end, through kubectl: what
//! the default set does to pods, nodes, claims and ingresses, the
//! PriorityClass and RuntimeClass lookups, the certificate restriction,
//! and `--enable-admission-plugins` / `--disable-admission-plugins`.

use e2e::{Server, StartError};
use serde_json::Value;
use watchcache::testing::TestEtcd;

fn pod(name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: nginx}}]\n{extra_spec}"
    )
}

/// Creates a namespace and waits for its `default` ServiceAccount (the
/// ServiceAccount plugin waits a little for it too, but not forever).
async fn namespace(s: &Server, ns: &str) {
    s.kubectl_ok(&["create", "namespace", ns]);
    e2e::eventually(
        "the default service account",
        std::time::Duration::from_secs(20),
        || {
            s.kubectl(&["get", "serviceaccount", "default", "-n", ns])
                .status
                .success()
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn pods_get_service_account_token_priority_and_tolerations() {
    let s = Server::start().await;
    namespace(&s, "p").await;
    s.kubectl_stdin_ok(&["create", "-n", "p", "-f", "-"], &pod("web", ""));
    let p = s.get_json(&["pod", "web", "-n", "p"]);
    let spec = &p["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    assert_eq!(spec["priority"], 0);
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    let tolerations: Vec<&str> = spec["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        tolerations,
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ]
    );
    // The projected token volume, mounted where in-cluster clients look.
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(
        name.starts_with("kube-api-access-") && name.len() == 21,
        "{name}"
    );
    let sources = &volume["projected"]["sources"];
    assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3607);
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    assert_eq!(
        sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let mount = &spec["containers"][0]["volumeMounts"][0];
    assert_eq!(mount["name"], name);
    assert_eq!(
        mount["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(mount["readOnly"], true);

    // An account that does not exist refuses the pod; one that opts out
    // of automounting gets no volume, and lends its pull secrets.
    let (_, err) = s.kubectl_err(&[
        "run",
        "x",
        "-n",
        "p",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"serviceAccountName":"missing"}}"#,
    ]);
    assert!(
        err.contains(r#"pods "x" is forbidden: error looking up service account p/missing: serviceaccount "missing" not found"#),
        "{err}"
    );
    s.kubectl_stdin_ok(
        &["create", "-n", "p", "-f", "-"],
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: quiet}\nautomountServiceAccountToken: false\nimagePullSecrets: [{name: registry}]\n",
    );
    s.kubectl_stdin_ok(
        &["create", "-n", "p", "-f", "-"],
        &pod("q", "  serviceAccountName: quiet\n"),
    );
    let q = s.get_json(&["pod", "q", "-n", "p"]);
    assert!(q["spec"].get("volumes").is_none(), "{q}");
    assert_eq!(
        q["spec"]["imagePullSecrets"],
        serde_json::json!([{"name": "registry"}])
    );

    // A new node is tainted not-ready until a node controller says otherwise.
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
    );
    let n = s.get_json(&["node", "n1"]);
    assert_eq!(
        n["spec"]["taints"],
        serde_json::json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    );
}

#[tokio::test]
async fn priority_classes_resolve_and_only_one_is_the_default() {
    let s = Server::start().await;
    namespace(&s, "pc").await;
    // The system classes are bootstrapped.
    let critical = s.get_json(&["priorityclass", "system-node-critical"]);
    assert_eq!(critical["value"], 2_000_001_000);
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\nglobalDefault: true\npreemptionPolicy: Never\n",
    );
    let (_, err) = s.kubectl_stdin_err(
        &["create", "-f", "-"],
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: higher}\nvalue: 2000\nglobalDefault: true\n",
    );
    assert!(
        err.contains(r#"priorityclasses.scheduling.k8s.io "higher" is forbidden: PriorityClass high is already marked as default. Only one default can exist"#),
        "{err}"
    );
    s.kubectl_stdin_ok(&["create", "-n", "pc", "-f", "-"], &pod("a", ""));
    let a = s.get_json(&["pod", "a", "-n", "pc"]);
    assert_eq!(a["spec"]["priorityClassName"], "high");
    assert_eq!(a["spec"]["priority"], 1000);
    assert_eq!(a["spec"]["preemptionPolicy"], "Never");
    s.kubectl_stdin_ok(
        &["create", "-n", "pc", "-f", "-"],
        &pod("b", "  priorityClassName: system-cluster-critical\n"),
    );
    assert_eq!(
        s.get_json(&["pod", "b", "-n", "pc"])["spec"]["priority"],
        2_000_000_000
    );
    let (_, err) = s.kubectl_stdin_err(
        &["create", "-n", "pc", "-f", "-"],
        &pod("c", "  priorityClassName: nope\n"),
    );
    assert!(
        err.contains(r#"pods "c" is forbidden: no PriorityClass with name nope was found"#),
        "{err}"
    );
    let (_, err) = s.kubectl_stdin_err(
        &["create", "-n", "pc", "-f", "-"],
        &pod("d", "  priority: 7\n"),
    );
    assert!(
        err.contains("the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"),
        "{err}"
    );
}

#[tokio::test]
async fn runtime_classes_storage_and_ingress_defaults() {
    let s = Server::start().await;
    namespace(&s, "r").await;
    let (_, err) = s.kubectl_stdin_err(
        &["create", "-n", "r", "-f", "-"],
        &pod("x", "  runtimeClassName: gvisor\n"),
    );
    assert!(
        err.contains(r#"pods "x" is forbidden: pod rejected: RuntimeClass "gvisor" not found"#),
        "{err}"
    );
    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\noverhead: {podFixed: {cpu: 250m}}\nscheduling: {nodeSelector: {sandbox: 'true'}}\n",
    );
    s.kubectl_stdin_ok(
        &["create", "-n", "r", "-f", "-"],
        &pod("x", "  runtimeClassName: gvisor\n"),
    );
    let x = s.get_json(&["pod", "x", "-n", "r"]);
    assert_eq!(x["spec"]["overhead"], serde_json::json!({"cpu": "250m"}));
    assert_eq!(
        x["spec"]["nodeSelector"],
        serde_json::json!({"sandbox": "true"})
    );

    // Claims get the newest default class and the protection finalizer;
    // one that says `storageClassName: ""` keeps it.
    for (name, default) in [("old", "true"), ("new", "true"), ("other", "false")] {
        s.kubectl_stdin_ok(
            &["create", "-f", "-"],
            &format!("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {name}\n  annotations: {{storageclass.kubernetes.io/is-default-class: '{default}'}}\nprovisioner: x\n"),
        );
        // creationTimestamp has second precision.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    let claim = |name: &str, class: &str| {
        format!("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: 1Gi}}}}\n{class}")
    };
    s.kubectl_stdin_ok(&["create", "-n", "r", "-f", "-"], &claim("c1", ""));
    s.kubectl_stdin_ok(
        &["create", "-n", "r", "-f", "-"],
        &claim("c2", "  storageClassName: ''\n"),
    );
    let c1 = s.get_json(&["pvc", "c1", "-n", "r"]);
    assert_eq!(c1["spec"]["storageClassName"], "new");
    assert_eq!(
        c1["metadata"]["finalizers"],
        serde_json::json!(["kubernetes.io/pvc-protection"])
    );
    assert_eq!(
        s.get_json(&["pvc", "c2", "-n", "r"])["spec"]["storageClassName"],
        ""
    );

    s.kubectl_stdin_ok(
        &["create", "-f", "-"],
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\n  annotations: {ingressclass.kubernetes.io/is-default-class: 'true'}\nspec: {controller: k8s.io/ingress-nginx}\n",
    );
    s.kubectl_ok(&[
        "create",
        "ingress",
        "web",
        "-n",
        "r",
        "--rule=example.com/=web:80",
    ]);
    assert_eq!(
        s.get_json(&["ingress", "web", "-n", "r"])["spec"]["ingressClassName"],
        "nginx"
    );
}

/// A CSR PEM (base64) for `O=<org>, CN=<cn>`, made with openssl.
fn csr(org: &str, cn: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("openssl")
        .current_dir(dir.path())
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "k.pem",
            "-out",
            "r.pem",
            "-subj",
        ])
        .arg(format!("/O={org}/CN={cn}"))
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .encode(std::fs::read(dir.path().join("r.pem")).unwrap())
}

#[tokio::test]
async fn no_client_certificates_for_system_masters() {
    let s = Server::start().await;
    let request = |name: &str, org: &str| {
        format!("apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: {name}}}\nspec:\n  signerName: kubernetes.io/kube-apiserver-client\n  usages: [client auth]\n  request: {}\n", csr(org, name))
    };
    let (_, err) = s.kubectl_stdin_err(&["create", "-f", "-"], &request("root", "system:masters"));
    assert!(
        err.contains(r#"certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"#),
        "{err}"
    );
    s.kubectl_stdin_ok(&["create", "-f", "-"], &request("dev", "developers"));
}

#[tokio::test]
async fn flags_turn_plugins_on_and_off() {
    let etcd = TestEtcd::shared().await;
    let s = Server::start_on(
        &etcd.endpoint(),
        &[
            "--disable-admission-plugins=ServiceAccount,DefaultTolerationSeconds",
            "--enable-admission-plugins=DenyServiceExternalIPs",
        ],
    )
    .await;
    s.kubectl_ok(&["create", "namespace", "f"]);
    // No default account needed, and none is filled in.
    s.kubectl_stdin_ok(&["create", "-n", "f", "-f", "-"], &pod("bare", ""));
    let bare = s.get_json(&["pod", "bare", "-n", "f"]);
    assert!(bare["spec"].get("serviceAccountName").is_none(), "{bare}");
    assert!(bare["spec"].get("volumes").is_none(), "{bare}");
    assert!(bare["spec"].get("tolerations").is_none(), "{bare}");
    let (_, err) = s.kubectl_stdin_err(
        &["create", "-n", "f", "-f", "-"],
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext}\nspec:\n  ports: [{port: 80}]\n  externalIPs: [203.0.113.7]\n",
    );
    assert!(
        err.contains(
            r#"services "ext" is forbidden: use of external IPs is denied by admission control"#
        ),
        "{err}"
    );
    drop(s);

    let s = Server::start_on(&etcd.endpoint(), &["--enable-admission-plugins=AlwaysDeny"]).await;
    let (_, err) = s.kubectl_err(&["create", "configmap", "c", "--from-literal=a=b"]);
    assert!(
        err.contains(
            r#"configmaps "c" is forbidden: admission control is denying all modifications"#
        ),
        "{err}"
    );
    drop(s);

    for (flags, said) in [
        (
            "--enable-admission-plugins=NoSuchPlugin",
            r#"enable-admission-plugins plugin "NoSuchPlugin" is unknown"#,
        ),
        (
            "--enable-admission-plugins=NodeRestriction",
            r#"admission plugin "NodeRestriction" is not supported by this server"#,
        ),
    ] {
        match Server::try_start_with_prefix(&etcd.endpoint(), &e2e::unique_prefix(), &[flags]).await
        {
            Err(StartError::Exited(log)) => assert!(log.contains(said), "{log}"),
            Err(StartError::PortTaken(log)) => panic!("port taken: {log}"),
            Ok(_) => panic!("the server started with {flags}"),
        }
    }
}

#[tokio::test]
async fn namespace_lifecycle_keeps_its_messages() {
    let s = Server::start().await;
    let (_, err) = s.kubectl_err(&[
        "create",
        "configmap",
        "c",
        "-n",
        "absent",
        "--from-literal=a=b",
    ]);
    assert!(err.contains(r#"namespaces "absent" not found"#), "{err}");
    let (_, err) = s.kubectl_err(&["delete", "namespace", "kube-public"]);
    assert!(
        err.contains(r#"namespaces "kube-public" is forbidden: this namespace may not be deleted"#),
        "{err}"
    );
    let v: Value = s.get_json(&["namespace", "kube-public"]);
    assert_eq!(v["status"]["phase"], "Active");
}

const MUTATING_POLICIES: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - {name: opted-in, expression: "has(object.metadata.labels) && 'mutate' in object.metadata.labels"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"mutated": "yes"}}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/data/seen-label", value: object.metadata.labels["mutated"]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label}
spec: {policyName: label}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: broken}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: "[JSONPatch{op: 'replace', path: '/data/absent', value: 'x'}]"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: broken-binding}
spec: {policyName: broken}
"#;

#[tokio::test]
async fn mutating_admission_policies_apply_and_patch() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["apply", "-f", "-"], MUTATING_POLICIES);
    let cm = |name: &str, labels: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels: {labels}\ndata: {{a: b}}\n")
    };
    // The configuration reaches the replica's admission within moments.
    let mut n = 0;
    let mutated = e2e::eventually(
        "the mutating policy to apply",
        std::time::Duration::from_secs(10),
        || {
            n += 1;
            let name = format!("m{n}");
            s.kubectl_stdin_ok(&["create", "-f", "-"], &cm(&name, "{mutate: 'true'}"));
            let v = s.get_json(&["configmap", &name]);
            (v["metadata"]["labels"]["mutated"] == "yes").then_some(v)
        },
    )
    .await;
    assert_eq!(mutated["metadata"]["labels"]["mutate"], "true");
    // The second mutation saw the first one's result.
    assert_eq!(
        mutated["data"],
        serde_json::json!({"a": "b", "seen-label": "yes"})
    );
    s.kubectl_stdin_ok(&["create", "-f", "-"], &cm("plain", "{other: 'x'}"));
    let plain = s.get_json(&["configmap", "plain"]);
    assert!(
        plain["metadata"]["labels"].get("mutated").is_none(),
        "{plain}"
    );

    let (_, err) = s.kubectl_err(&["create", "secret", "generic", "s", "--from-literal=a=b"]);
    assert!(
        err.contains("policy 'broken' with binding 'broken-binding' denied request: JSON Patch:"),
        "{err}"
    );
    assert!(s.gone(&["get", "secret", "s"]));

    // Deleting the binding stops the mutation.
    s.kubectl_ok(&["delete", "mutatingadmissionpolicybinding", "broken-binding"]);
    e2e::eventually(
        "the binding to go",
        std::time::Duration::from_secs(10),
        || {
            s.kubectl(&["create", "secret", "generic", "s", "--from-literal=a=b"])
                .status
                .success()
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn connect_requests_are_admitted_with_their_options() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-rm}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec]}
  validations:
  - {expression: "object.kind == 'PodExecOptions' && !('rm' in object.command)", message: no rm, reason: Forbidden}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-rm}
spec: {policyName: no-rm, validationActions: [Deny]}
"#,
    );
    namespace(&s, "c").await;
    s.kubectl_stdin_ok(&["create", "-n", "c", "-f", "-"], &pod("p", ""));
    let exec = |cmd: &str| {
        format!("/api/v1/namespaces/c/pods/p/exec?command={cmd}&command=x&container=c&stdout=true")
    };
    let r = e2e::eventually_async(
        "the policy to refuse rm",
        std::time::Duration::from_secs(10),
        || async {
            let r = s.http("POST", &exec("rm"), &[], b"").await.unwrap();
            (r.status == 403).then_some(r)
        },
    )
    .await;
    assert!(
        r.text().contains(
            "ValidatingAdmissionPolicy 'no-rm' with binding 'no-rm' denied request: no rm"
        ),
        "{}",
        r.text()
    );
    // Another command passes admission and gets the connect answer.
    let r = s.http("POST", &exec("ls"), &[], b"").await.unwrap();
    assert_ne!(r.status, 403, "{}", r.text());
}

#[tokio::test]
async fn policies_ask_the_authorizer() {
    let s = Server::start().await;
    namespace(&s, "az").await;
    s.kubectl_ok(&["create", "serviceaccount", "writer", "-n", "az"]);
    s.kubectl_ok(&[
        "create",
        "role",
        "cm-writer",
        "-n",
        "az",
        "--verb=create",
        "--resource=configmaps",
    ]);
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "cm-writer",
        "-n",
        "az",
        "--role=cm-writer",
        "--serviceaccount=az:writer",
    ]);
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: owner-may-write}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - {name: owned, expression: "has(object.metadata.annotations) && 'owner' in object.metadata.annotations"}
  validations:
  - expression: "authorizer.requestResource.check('create').allowed()"
    message: requester may not create
  - expression: >
      authorizer.serviceAccount(object.metadata.namespace, object.metadata.annotations['owner'])
        .group('').resource('configmaps').namespace(object.metadata.namespace)
        .check('create').allowed()
    messageExpression: "'owner ' + object.metadata.annotations['owner'] + ' may not create configmaps'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: owner-may-write}
spec: {policyName: owner-may-write, validationActions: [Deny]}
"#,
    );
    let cm = |name: &str, owner: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: az\n  annotations: {{owner: {owner}}}\n")
    };
    let err = e2e::eventually(
        "the policy to refuse",
        std::time::Duration::from_secs(10),
        || {
            let out = s.kubectl_stdin(&["create", "-f", "-"], &cm("bad", "nobody"));
            (!out.status.success()).then(|| e2e::stderr(&out))
        },
    )
    .await;
    assert!(
        err.contains("ValidatingAdmissionPolicy 'owner-may-write' with binding 'owner-may-write' denied request: owner nobody may not create configmaps"),
        "{err}"
    );
    s.kubectl_stdin_ok(&["create", "-f", "-"], &cm("good", "writer"));
}

#[tokio::test]
async fn policy_status_reports_type_checking() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typo}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicaz > 1"
  - expression: "object.spec.replicas < 10"
    messageExpression: "'too many: ' + string(object.spec.replicas)"
  - expression: "object.spec.replicas == 'x'"
"#,
    );
    let status = e2e::eventually(
        "the type-checking status",
        std::time::Duration::from_secs(20),
        || {
            let p = s.get_json(&["validatingadmissionpolicy", "typo"]);
            (p["status"]["observedGeneration"] == 1).then(|| p["status"].clone())
        },
    )
    .await;
    assert_eq!(
        status["typeChecking"]["expressionWarnings"],
        // kube's typechecking.go: per kind, `<gvk>: <cel-go issues>\n`.
        serde_json::json!([{
            "fieldRef": "spec.validations[0].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz > 1\n | ...........^\n"
        }, {
            "fieldRef": "spec.validations[2].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.replicas == 'x'\n | .....................^\n"
        }])
    );
    // Fixing the expressions clears the warnings at the next generation.
    s.kubectl_ok(&[
        "patch", "validatingadmissionpolicy", "typo", "--type=json",
        "-p", r#"[{"op":"replace","path":"/spec/validations/0/expression","value":"object.spec.replicas > 1"},{"op":"remove","path":"/spec/validations/2"}]"#,
    ]);
    let status = e2e::eventually("the new status", std::time::Duration::from_secs(20), || {
        let p = s.get_json(&["validatingadmissionpolicy", "typo"]);
        (p["status"]["observedGeneration"] == 2).then(|| p["status"].clone())
    })
    .await;
    assert_eq!(status["typeChecking"], serde_json::json!({}));
}

#[tokio::test]
async fn audit_action_and_annotations_reach_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let etcd = TestEtcd::shared().await;
    let s = Server::start_on(
        &etcd.endpoint(),
        &[
            &format!("--audit-policy-file={}", policy.display()),
            &format!("--audit-log-path={}", log.display()),
        ],
    )
    .await;
    s.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: audited}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - {expression: "!has(object.data) || object.data.size() < 1", message: too much data}
  auditAnnotations:
  - {key: size, valueExpression: "string(has(object.data) ? object.data.size() : 0)"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: audited-binding}
spec: {policyName: audited, validationActions: [Audit, Warn]}
"#,
    );
    let mut n = 0;
    e2e::eventually("the policy to warn", std::time::Duration::from_secs(10), || {
        n += 1;
        let name = format!("c{n}");
        let out = s.kubectl(&["create", "configmap", &name, "--from-literal=a=b"]);
        assert!(out.status.success(), "{}", e2e::stderr(&out));
        e2e::stderr(&out)
            .contains("Validation failed for ValidatingAdmissionPolicy 'audited' with binding 'audited-binding': too much data")
            .then_some(())
    })
    .await;
    let event = e2e::eventually(
        "the audit event",
        std::time::Duration::from_secs(10),
        || {
            std::fs::read_to_string(&log).ok()?.lines().find_map(|l| {
                let v: Value = serde_json::from_str(l).ok()?;
                (v["verb"] == "create"
                    && v["objectRef"]["resource"] == "configmaps"
                    && v["stage"] == "ResponseComplete"
                    && v["annotations"].get("audited/size").is_some())
                .then_some(v)
            })
        },
    )
    .await;
    let annotations = &event["annotations"];
    assert_eq!(annotations["audited/size"], "1", "{event}");
    let failures: Value = serde_json::from_str(
        annotations["validation.policy.admission.k8s.io/validation_failure"]
            .as_str()
            .unwrap_or_else(|| panic!("{event}")),
    )
    .unwrap();
    assert_eq!(
        failures,
        serde_json::json!([{"message": "too much data", "policy": "audited",
            "binding": "audited-binding", "expressionIndex": 0,
            "validationActions": ["Audit", "Warn"]}])
    );
}
