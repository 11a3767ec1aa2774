//! Drop-in: etcd contents written the way kube-apiserver 1.35 writes them
//! are served, and what this server writes back is what kube would read.
//!
//! The fixture is made here, independently of the server's codec: built-in
//! objects are encoded by `protoc --encode` from the upstream IDL in
//! `../shared/k8s-api/proto` (kube's storage serializer: `k8s\0` +
//! `runtime.Unknown` with empty contentEncoding and contentType), in each
//! resource's storage version, under kube's keys (`services/specs`,
//! `minions`, `controllers`, `ingress`, ...); Secrets are encrypted with
//! kube's aescbc format and Leases with its secretbox format, by the
//! cipher crates directly; the CRD and its custom resource are JSON. The
//! server then lists, gets, watches, updates and deletes all of it through
//! kubectl and HTTP, and every value it writes is read back from etcd,
//! decrypted and decoded by `protoc --decode` as kube would.

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::Engine;
use crypto_secretbox::aead::{Aead, KeyInit};
use e2e::{eventually, Server};
use etcd_client::{Client, GetOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use watchcache::testing::TestEtcd;

const AES_KEY: [u8; 32] = *b"0123456789abcdef0123456789abcdef";
const BOX_KEY: [u8; 32] = *b"fedcba9876543210fedcba9876543210";

use e2e::protoc_available;

/// One stored object of the fixture.
struct Fixture {
    /// Key under the prefix, as kube-apiserver keys it.
    key: &'static str,
    /// kubectl's name for the resource and the object's name.
    resource: &'static str,
    name: &'static str,
    namespaced: bool,
    /// The IDL file and message of the stored version; `None`: JSON.
    proto: Option<(&'static str, &'static str)>,
    api_version: &'static str,
    kind: &'static str,
    /// The object in protoc's text format (`raw`), or its JSON.
    body: &'static str,
    cipher: Cipher,
}

#[derive(Clone, Copy, PartialEq)]
enum Cipher {
    Plain,
    AesCbc,
    SecretBox,
}

const CORE: &str = "k8s.io/api/core/v1/generated.proto";
const META: &str = r#"name: "NAME" uid: "0d1c3b2a-0000-4000-8000-000000000001" creationTimestamp { seconds: 1763000000 }"#;

fn fixtures() -> Vec<Fixture> {
    let f = |key,
             resource,
             name,
             namespaced,
             proto: Option<(&'static str, &'static str)>,
             api_version,
             kind,
             body,
             cipher| Fixture {
        key,
        resource,
        name,
        namespaced,
        proto,
        api_version,
        kind,
        body,
        cipher,
    };
    vec![
        f(
            "namespaces/legacy",
            "namespaces",
            "legacy",
            false,
            Some((CORE, "k8s.io.api.core.v1.Namespace")),
            "v1",
            "Namespace",
            r#"metadata { META labels { key: "kubernetes.io/metadata.name" value: "legacy" } } spec { finalizers: "kubernetes" } status { phase: "Active" }"#,
            Cipher::Plain,
        ),
        f(
            "configmaps/legacy/cm1",
            "configmaps",
            "cm1",
            true,
            Some((CORE, "k8s.io.api.core.v1.ConfigMap")),
            "v1",
            "ConfigMap",
            r#"metadata { META } data { key: "colour" value: "blue" }"#,
            Cipher::Plain,
        ),
        f(
            "secrets/legacy/s1",
            "secrets",
            "s1",
            true,
            Some((CORE, "k8s.io.api.core.v1.Secret")),
            "v1",
            "Secret",
            r#"metadata { META } data { key: "password" value: "hunter2" } type: "Opaque""#,
            Cipher::AesCbc,
        ),
        f(
            "services/specs/legacy/svc1",
            "services",
            "svc1",
            true,
            Some((CORE, "k8s.io.api.core.v1.Service")),
            "v1",
            "Service",
            r#"metadata { META } spec { ports { name: "http" protocol: "TCP" port: 80 targetPort { type: 0 intVal: 8080 } } selector { key: "app" value: "x" } clusterIP: "None" type: "ClusterIP" sessionAffinity: "None" clusterIPs: "None" ipFamilies: "IPv4" ipFamilyPolicy: "SingleStack" internalTrafficPolicy: "Cluster" } status { loadBalancer { } }"#,
            Cipher::Plain,
        ),
        f(
            "services/endpoints/legacy/svc1",
            "endpoints",
            "svc1",
            true,
            Some((CORE, "k8s.io.api.core.v1.Endpoints")),
            "v1",
            "Endpoints",
            r#"metadata { META } subsets { addresses { ip: "10.1.2.3" } ports { name: "http" port: 8080 protocol: "TCP" } }"#,
            Cipher::Plain,
        ),
        f(
            "minions/n1",
            "nodes",
            "n1",
            false,
            Some((CORE, "k8s.io.api.core.v1.Node")),
            "v1",
            "Node",
            r#"metadata { META labels { key: "kubernetes.io/hostname" value: "n1" } } spec { podCIDR: "10.244.0.0/24" podCIDRs: "10.244.0.0/24" } status { nodeInfo { machineID: "m" systemUUID: "s" bootID: "b" kernelVersion: "6" osImage: "d" containerRuntimeVersion: "c" kubeletVersion: "v1.35.0" kubeProxyVersion: "" operatingSystem: "linux" architecture: "amd64" } }"#,
            Cipher::Plain,
        ),
        f(
            "controllers/legacy/rc1",
            "replicationcontrollers",
            "rc1",
            true,
            Some((CORE, "k8s.io.api.core.v1.ReplicationController")),
            "v1",
            "ReplicationController",
            r#"metadata { META generation: 1 labels { key: "app" value: "rc" } } spec { replicas: 0 minReadySeconds: 0 selector { key: "app" value: "rc" } template { metadata { labels { key: "app" value: "rc" } } spec { containers { name: "c" image: "nginx" terminationMessagePath: "/dev/termination-log" imagePullPolicy: "Always" terminationMessagePolicy: "File" resources { } } restartPolicy: "Always" terminationGracePeriodSeconds: 30 dnsPolicy: "ClusterFirst" securityContext { } schedulerName: "default-scheduler" } } } status { replicas: 0 }"#,
            Cipher::Plain,
        ),
        f(
            "pods/legacy/p1",
            "pods",
            "p1",
            true,
            Some((CORE, "k8s.io.api.core.v1.Pod")),
            "v1",
            "Pod",
            r#"metadata { META } spec { containers { name: "c" image: "nginx" terminationMessagePath: "/dev/termination-log" imagePullPolicy: "Always" terminationMessagePolicy: "File" resources { } } restartPolicy: "Always" terminationGracePeriodSeconds: 30 dnsPolicy: "ClusterFirst" securityContext { } schedulerName: "default-scheduler" enableServiceLinks: true priority: 0 preemptionPolicy: "PreemptLowerPriority" tolerations { key: "node.kubernetes.io/not-ready" operator: "Exists" effect: "NoExecute" tolerationSeconds: 300 } tolerations { key: "node.kubernetes.io/unreachable" operator: "Exists" effect: "NoExecute" tolerationSeconds: 300 } } status { phase: "Pending" qosClass: "BestEffort" }"#,
            Cipher::Plain,
        ),
        f(
            "deployments/legacy/d1",
            "deployments.apps",
            "d1",
            true,
            Some((
                "k8s.io/api/apps/v1/generated.proto",
                "k8s.io.api.apps.v1.Deployment",
            )),
            "apps/v1",
            "Deployment",
            r#"metadata { META generation: 1 } spec { replicas: 0 selector { matchLabels { key: "app" value: "d" } } template { metadata { labels { key: "app" value: "d" } } spec { containers { name: "c" image: "nginx" terminationMessagePath: "/dev/termination-log" imagePullPolicy: "Always" terminationMessagePolicy: "File" resources { } } restartPolicy: "Always" terminationGracePeriodSeconds: 30 dnsPolicy: "ClusterFirst" securityContext { } schedulerName: "default-scheduler" } } strategy { type: "RollingUpdate" rollingUpdate { maxUnavailable { type: 1 strVal: "25%" } maxSurge { type: 1 strVal: "25%" } } } revisionHistoryLimit: 10 progressDeadlineSeconds: 600 } status { }"#,
            Cipher::Plain,
        ),
        f(
            "ingress/legacy/i1",
            "ingresses.networking.k8s.io",
            "i1",
            true,
            Some((
                "k8s.io/api/networking/v1/generated.proto",
                "k8s.io.api.networking.v1.Ingress",
            )),
            "networking.k8s.io/v1",
            "Ingress",
            r#"metadata { META generation: 1 } spec { defaultBackend { service { name: "svc1" port { number: 80 } } } } status { loadBalancer { } }"#,
            Cipher::Plain,
        ),
        // Stored by an older kube in autoscaling/v1: served as v2.
        f(
            "horizontalpodautoscalers/legacy/h1",
            "horizontalpodautoscalers.autoscaling",
            "h1",
            true,
            Some((
                "k8s.io/api/autoscaling/v1/generated.proto",
                "k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler",
            )),
            "autoscaling/v1",
            "HorizontalPodAutoscaler",
            r#"metadata { META } spec { scaleTargetRef { kind: "Deployment" name: "d1" apiVersion: "apps/v1" } minReplicas: 1 maxReplicas: 5 targetCPUUtilizationPercentage: 70 } status { currentReplicas: 0 desiredReplicas: 0 }"#,
            Cipher::Plain,
        ),
        f(
            "events/legacy/e1",
            "events",
            "e1",
            true,
            Some((CORE, "k8s.io.api.core.v1.Event")),
            "v1",
            "Event",
            r#"metadata { META } involvedObject { kind: "Pod" namespace: "legacy" name: "p1" } reason: "Started" message: "started container" source { component: "kubelet" } firstTimestamp { seconds: 1763000000 } lastTimestamp { seconds: 1763000000 } count: 1 type: "Normal" eventTime { } reportingComponent: "" reportingInstance: """#,
            Cipher::Plain,
        ),
        f(
            "clusterroles/dropin-reader",
            "clusterroles",
            "dropin-reader",
            false,
            Some((
                "k8s.io/api/rbac/v1/generated.proto",
                "k8s.io.api.rbac.v1.ClusterRole",
            )),
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            r#"metadata { META } rules { verbs: "get" apiGroups: "" resources: "configmaps" }"#,
            Cipher::Plain,
        ),
        f(
            "leases/legacy/l1",
            "leases.coordination.k8s.io",
            "l1",
            true,
            Some((
                "k8s.io/api/coordination/v1/generated.proto",
                "k8s.io.api.coordination.v1.Lease",
            )),
            "coordination.k8s.io/v1",
            "Lease",
            r#"metadata { META } spec { holderIdentity: "kube-apiserver-1" leaseDurationSeconds: 15 }"#,
            Cipher::SecretBox,
        ),
        // Stored as v1beta1 (kube's storage-version override), served as v1.
        f(
            "mutatingadmissionpolicies/dropin-map",
            "mutatingadmissionpolicies.admissionregistration.k8s.io",
            "dropin-map",
            false,
            Some((
                "k8s.io/api/admissionregistration/v1beta1/generated.proto",
                "k8s.io.api.admissionregistration.v1beta1.MutatingAdmissionPolicy",
            )),
            "admissionregistration.k8s.io/v1beta1",
            "MutatingAdmissionPolicy",
            r#"metadata { META generation: 1 } spec { matchConstraints { namespaceSelector { } objectSelector { } resourceRules { ruleWithOperations { operations: "CREATE" rule { apiGroups: "" apiVersions: "v1" resources: "configmaps" scope: "*" } } } matchPolicy: "Equivalent" } mutations { patchType: "ApplyConfiguration" applyConfiguration { expression: "Object{metadata: Object.metadata{labels: {'mutated': 'yes'}}}" } } failurePolicy: "Fail" reinvocationPolicy: "Never" }"#,
            Cipher::Plain,
        ),
        f(
            "apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
            "customresourcedefinitions",
            "widgets.example.com",
            false,
            None,
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            r#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1beta1","metadata":{"name":"widgets.example.com","uid":"0d1c3b2a-0000-4000-8000-000000000002","generation":1,"creationTimestamp":"2025-11-13T02:13:20Z"},"spec":{"group":"example.com","version":"v1","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},"scope":"Namespaced","validation":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}},"versions":[{"name":"v1","served":true,"storage":true}],"additionalPrinterColumns":[{"name":"Size","type":"integer","JSONPath":".spec.size"}],"conversion":{"strategy":"None"},"preserveUnknownFields":false},"status":{"conditions":[{"type":"NamesAccepted","status":"True","lastTransitionTime":"2025-11-13T02:13:20Z","reason":"NoConflicts","message":"no conflicts found"},{"type":"Established","status":"True","lastTransitionTime":"2025-11-13T02:13:20Z","reason":"InitialNamesAccepted","message":"the initial names have been accepted"}],"acceptedNames":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},"storedVersions":["v1"]}}"#,
            Cipher::Plain,
        ),
        f(
            "example.com/widgets/legacy/w1",
            "widgets.example.com",
            "w1",
            true,
            None,
            "example.com/v1",
            "Widget",
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"2025-11-13T02:13:20Z","generation":1,"name":"w1","namespace":"legacy","uid":"0d1c3b2a-0000-4000-8000-000000000003"},"spec":{"size":3}}"#,
            Cipher::Plain,
        ),
    ]
}

/// An envelope (`runtime.Unknown`) whose `raw` is typed as `message`.
fn protoc(import: &str, message: &str, mode: &str, input: &[u8]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "syntax = \"proto2\";\npackage e2e;\nimport \"k8s.io/apimachinery/pkg/runtime/generated.proto\";\nimport \"{import}\";\n\
         message Envelope {{\n  optional k8s.io.apimachinery.pkg.runtime.TypeMeta typeMeta = 1;\n  optional {message} raw = 2;\n  \
         optional string contentEncoding = 3;\n  optional string contentType = 4;\n}}\n"
    );
    std::fs::write(dir.path().join("envelope.proto"), text).unwrap();
    e2e::protoc_envelope(dir.path(), mode, input)
}

/// The value kube-apiserver stores for `f` (before encryption).
fn encode(f: &Fixture, namespace: Option<&str>) -> Vec<u8> {
    let Some((import, message)) = f.proto else {
        return f.body.as_bytes().to_vec();
    };
    let mut meta = META.replace("NAME", f.name);
    if let Some(ns) = namespace {
        meta.push_str(&format!(" namespace: \"{ns}\""));
    }
    let text = format!(
        "typeMeta {{ apiVersion: \"{}\" kind: \"{}\" }} raw {{ {} }} contentEncoding: \"\" contentType: \"\"",
        f.api_version,
        f.kind,
        f.body.replace("META", &meta)
    );
    let mut out = b"k8s\0".to_vec();
    out.extend(protoc(
        import,
        message,
        "--encode=e2e.Envelope",
        text.as_bytes(),
    ));
    out
}

/// kube's aescbc value: prefix, random IV, AES-256-CBC with PKCS#7.
fn aescbc_seal(data: &[u8]) -> Vec<u8> {
    let iv: [u8; 16] = rand_bytes();
    let enc = cbc::Encryptor::<aes::Aes256>::new(&AES_KEY.into(), &iv.into());
    let mut out = b"k8s:enc:aescbc:v1:key1:".to_vec();
    out.extend(iv);
    out.extend(enc.encrypt_padded_vec_mut::<Pkcs7>(data));
    out
}

fn aescbc_open(data: &[u8]) -> Vec<u8> {
    let rest = data
        .strip_prefix(b"k8s:enc:aescbc:v1:key1:".as_slice())
        .unwrap_or_else(|| {
            panic!(
                "not aescbc: {:?}",
                String::from_utf8_lossy(&data[..data.len().min(40)])
            )
        });
    let (iv, body) = rest.split_at(16);
    cbc::Decryptor::<aes::Aes256>::new(&AES_KEY.into(), iv.into())
        .decrypt_padded_vec_mut::<Pkcs7>(body)
        .expect("aescbc decrypts")
}

/// kube's secretbox value: prefix, random 24-byte nonce, XSalsa20-Poly1305.
fn secretbox_seal(data: &[u8]) -> Vec<u8> {
    let nonce: [u8; 24] = rand_bytes();
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(&BOX_KEY.into());
    let mut out = b"k8s:enc:secretbox:v1:key2:".to_vec();
    out.extend(nonce);
    out.extend(cipher.encrypt(&nonce.into(), data).expect("seals"));
    out
}

fn secretbox_open(data: &[u8]) -> Vec<u8> {
    let rest = data
        .strip_prefix(b"k8s:enc:secretbox:v1:key2:".as_slice())
        .unwrap_or_else(|| {
            panic!(
                "not secretbox: {:?}",
                String::from_utf8_lossy(&data[..data.len().min(40)])
            )
        });
    let (nonce, body) = rest.split_at(24);
    let cipher = crypto_secretbox::XSalsa20Poly1305::new(&BOX_KEY.into());
    cipher.decrypt(nonce.into(), body).expect("secretbox opens")
}

fn rand_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    for (i, b) in out.iter_mut().enumerate() {
        *b = (seed >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(37);
    }
    out
}

fn encryption_config(dir: &Path) -> PathBuf {
    let b64 = |k: &[u8]| base64::engine::general_purpose::STANDARD.encode(k);
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: key1\n        secret: {}\n  - identity: {{}}\n\
         - resources: [leases.coordination.k8s.io]\n  providers:\n  - secretbox:\n      keys:\n      - name: key2\n        secret: {}\n  - identity: {{}}\n",
        b64(&AES_KEY),
        b64(&BOX_KEY)
    );
    let path = dir.join("encryption.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The plaintext value at `key` (decrypted as kube would), if any.
async fn stored(client: &Client, key: &str, cipher: Cipher) -> Option<Vec<u8>> {
    let resp = client.kv_client().get(key, None).await.unwrap();
    let raw = resp.kvs().first()?.value().to_vec();
    Some(match cipher {
        Cipher::Plain => raw,
        Cipher::AesCbc => aescbc_open(&raw),
        Cipher::SecretBox => secretbox_open(&raw),
    })
}

/// What kube would decode from `value`: protoc's text of the envelope for
/// a protobuf kind, the JSON for the others.
fn kube_decode(f: &Fixture, value: &[u8], storage: Option<(&str, &str)>) -> String {
    match storage.or(f.proto) {
        Some((import, message)) => {
            let rest = value.strip_prefix(b"k8s\0".as_slice()).unwrap_or_else(|| {
                panic!(
                    "{}: not protobuf: {:?}",
                    f.key,
                    String::from_utf8_lossy(value)
                )
            });
            String::from_utf8(protoc(import, message, "--decode=e2e.Envelope", rest)).unwrap()
        }
        None => {
            let v: Value = serde_json::from_slice(value)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", f.key));
            v.to_string()
        }
    }
}

fn ns_args(f: &Fixture) -> Vec<&'static str> {
    if f.namespaced {
        vec!["-n", "legacy"]
    } else {
        vec![]
    }
}

#[tokio::test]
async fn kube_written_etcd_is_served_and_written_back_as_kube_reads_it() {
    if !protoc_available() {
        return;
    }
    let etcd = TestEtcd::shared().await;
    let client = Client::connect([etcd.endpoint()], None).await.unwrap();
    let prefix = e2e::unique_prefix();
    let fixtures = fixtures();
    for f in &fixtures {
        let ns = f.namespaced.then_some("legacy");
        let plain = encode(f, ns);
        let value = match f.cipher {
            Cipher::Plain => plain,
            Cipher::AesCbc => aescbc_seal(&plain),
            Cipher::SecretBox => secretbox_seal(&plain),
        };
        client
            .kv_client()
            .put(format!("{prefix}/{}", f.key), value, None)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let enc = encryption_config(dir.path());
    let flag = format!("--encryption-provider-config={}", enc.display());
    let s = Server::start_with_prefix(&etcd.endpoint(), &prefix, &[&flag]).await;

    // The CRD is established from kube's stored object.
    eventually(
        "the kube-written CRD is served",
        Duration::from_secs(20),
        || {
            s.kubectl(&["get", "widgets.example.com", "-n", "legacy"])
                .status
                .success()
                .then_some(())
        },
    )
    .await;

    // LIST and GET of every object.
    for f in &fixtures {
        let mut args = vec![f.resource];
        args.extend(ns_args(f));
        let list = s.get_json(&args);
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: {list}", f.resource))
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert!(names.contains(&f.name), "{} lists {names:?}", f.resource);
        let mut args = vec![f.resource, f.name];
        args.extend(ns_args(f));
        let obj = s.get_json(&args);
        assert_eq!(
            obj["metadata"]["uid"].as_str().map(|u| &u[..8]),
            Some("0d1c3b2a"),
            "{}: {obj}",
            f.key
        );
        assert!(
            obj["metadata"]["creationTimestamp"].as_str().is_some(),
            "{}",
            f.key
        );
    }
    // Contents decoded from protobuf, encrypted or not.
    let secret = s.get_json(&["secret", "s1", "-n", "legacy"]);
    assert_eq!(
        secret["data"]["password"],
        base64::engine::general_purpose::STANDARD.encode("hunter2")
    );
    let lease = s.get_json(&["lease", "l1", "-n", "legacy"]);
    assert_eq!(lease["spec"]["holderIdentity"], "kube-apiserver-1");
    let svc = s.get_json(&["service", "svc1", "-n", "legacy"]);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    let dep = s.get_json(&["deployment", "d1", "-n", "legacy"]);
    assert_eq!(dep["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    // autoscaling/v1 in etcd, served as v2 (the default) and as v1.
    let hpa = s.get_json(&[
        "horizontalpodautoscalers.v2.autoscaling",
        "h1",
        "-n",
        "legacy",
    ]);
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 70,
        "{hpa}"
    );
    // A core Event served as events.k8s.io.
    let ev = s.get_json(&["events.v1.events.k8s.io", "e1", "-n", "legacy"]);
    assert_eq!(ev["note"], "started container", "{ev}");
    assert_eq!(ev["regarding"]["name"], "p1");
    let map = s.get_json(&["mutatingadmissionpolicies", "dropin-map"]);
    assert_eq!(
        map["apiVersion"], "admissionregistration.k8s.io/v1",
        "{map}"
    );
    assert_eq!(map["spec"]["failurePolicy"], "Fail");
    let w = s.get_json(&["widgets.example.com", "w1", "-n", "legacy"]);
    assert_eq!(w["spec"]["size"], 3);
    // kube stores CRDs as v1beta1, shared fields hoisted: served as v1.
    let crd = s.get_json(&["crd", "widgets.example.com"]);
    assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
    let v1 = &crd["spec"]["versions"][0];
    assert_eq!(
        v1["additionalPrinterColumns"][0]["jsonPath"], ".spec.size",
        "{crd}"
    );
    assert_eq!(
        v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"],
        "object"
    );
    let table = s.kubectl_ok(&["get", "widgets.example.com", "-n", "legacy"]);
    assert!(
        table.contains("SIZE")
            && table
                .lines()
                .any(|l| l.starts_with("w1") && l.contains('3')),
        "{table}"
    );

    // WATCH from resourceVersion 0 starts with the kube-written objects.
    let mut lines = e2e::watch::open(
        s.addr(),
        "/api/v1/namespaces/legacy/configmaps?watch=1&resourceVersion=0",
    )
    .await
    .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), lines.recv())
        .await
        .unwrap();
    match first {
        Some(e2e::watch::Line::Event(seen)) => {
            assert_eq!((seen.kind.as_str(), seen.name.as_str()), ("ADDED", "cm1"))
        }
        other => panic!("watch began with {other:?}"),
    }

    // UPDATE each one; etcd then holds what kube would read: the same key,
    // the same media type, the same cipher, the storage version.
    for f in &fixtures {
        let mut args = vec!["label", f.resource, f.name, "dropin=written"];
        args.extend(ns_args(f));
        s.kubectl_ok(&args);
        let key = format!("{prefix}/{}", f.key);
        let value = stored(&client, &key, f.cipher)
            .await
            .unwrap_or_else(|| panic!("{key} is gone after an update"));
        let storage = (f.kind == "HorizontalPodAutoscaler").then_some((
            "k8s.io/api/autoscaling/v2/generated.proto",
            "k8s.io.api.autoscaling.v2.HorizontalPodAutoscaler",
        ));
        let text = kube_decode(f, &value, storage);
        assert!(
            text.contains("dropin") && text.contains("written"),
            "{key}: {text}"
        );
        assert!(
            text.contains("0d1c3b2a-0000-4000-8000"),
            "{key} kept its uid: {text}"
        );
        if f.proto.is_some() {
            let want = if storage.is_some() {
                "autoscaling/v2"
            } else {
                f.api_version
            };
            assert!(
                text.contains(&format!("apiVersion: \"{want}\"")),
                "{key}: {text}"
            );
        }
    }
    let text = kube_decode(
        &fixtures[2],
        &stored(
            &client,
            &format!("{prefix}/secrets/legacy/s1"),
            Cipher::AesCbc,
        )
        .await
        .unwrap(),
        None,
    );
    assert!(text.contains("hunter2"), "{text}");

    // CREATE: new objects land under kube's keys, as protobuf.
    s.kubectl_ok(&[
        "create",
        "configmap",
        "fresh",
        "-n",
        "legacy",
        "--from-literal=k=v",
    ]);
    s.kubectl_ok(&[
        "create",
        "service",
        "clusterip",
        "fresh",
        "-n",
        "legacy",
        "--tcp=80:80",
    ]);
    for (key, fixture) in [
        ("configmaps/legacy/fresh", 1),
        ("services/specs/legacy/fresh", 3),
    ] {
        let value = stored(&client, &format!("{prefix}/{key}"), Cipher::Plain)
            .await
            .unwrap();
        let text = kube_decode(&fixtures[fixture], &value, None);
        assert!(text.contains("name: \"fresh\""), "{key}: {text}");
    }

    // DELETE: the keys go.
    for f in fixtures.iter().rev() {
        if f.resource == "namespaces" || f.resource == "customresourcedefinitions" {
            continue;
        }
        let mut args = vec!["delete", f.resource, f.name, "--wait=false"];
        args.extend(ns_args(f));
        s.kubectl_ok(&args);
    }
    for f in &fixtures {
        if f.resource == "namespaces"
            || f.resource == "customresourcedefinitions"
            || f.resource == "pods"
        {
            continue;
        }
        let key = format!("{prefix}/{}", f.key);
        e2e::eventually_async(
            &format!("{key} is deleted"),
            Duration::from_secs(20),
            || {
                let (client, key) = (client.clone(), key.clone());
                async move {
                    let opts = GetOptions::new().with_count_only();
                    let resp = client.kv_client().get(key, Some(opts)).await.ok()?;
                    (resp.count() == 0).then_some(())
                }
            },
        )
        .await;
    }
}

/// Objects an earlier version of this server wrote (JSON under
/// `<group>/<resource>`, core Services and Nodes under their plural) move
/// to kube's keys at start-up; with `--storage-media-type=application/json`
/// what the server writes is JSON, and kube's protobuf is still read.
#[tokio::test]
async fn legacy_layout_moves_and_json_media_type_reads_both() {
    if !protoc_available() {
        return;
    }
    let etcd = TestEtcd::shared().await;
    let client = Client::connect([etcd.endpoint()], None).await.unwrap();
    let prefix = e2e::unique_prefix();
    let legacy = [
        (
            "namespaces/old",
            r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"old","uid":"6a1c3b2a-0000-4000-8000-000000000001","creationTimestamp":"2025-11-13T02:13:20Z","labels":{"kubernetes.io/metadata.name":"old"}},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}"#,
        ),
        (
            "apps/deployments/old/d",
            r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","namespace":"old","uid":"6a1c3b2a-0000-4000-8000-000000000002","generation":1,"creationTimestamp":"2025-11-13T02:13:20Z"},"spec":{"replicas":0,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"c","image":"nginx","terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always","resources":{}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}},"strategy":{"type":"Recreate"},"revisionHistoryLimit":10,"progressDeadlineSeconds":600},"status":{}}"#,
        ),
        (
            "services/old/svc",
            r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"svc","namespace":"old","uid":"6a1c3b2a-0000-4000-8000-000000000003","creationTimestamp":"2025-11-13T02:13:20Z"},"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":80}],"clusterIP":"None","clusterIPs":["None"],"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},"status":{"loadBalancer":{}}}"#,
        ),
        (
            "nodes/n",
            r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n","uid":"6a1c3b2a-0000-4000-8000-000000000004","creationTimestamp":"2025-11-13T02:13:20Z"},"spec":{},"status":{}}"#,
        ),
    ];
    for (key, value) in legacy {
        client
            .kv_client()
            .put(format!("{prefix}/{key}"), value, None)
            .await
            .unwrap();
    }
    // And one value kube wrote, in protobuf.
    let value = encode(&fixtures()[1], Some("old"));
    client
        .kv_client()
        .put(format!("{prefix}/configmaps/old/cm1"), value, None)
        .await
        .unwrap();

    let s = Server::start_with_prefix(
        &etcd.endpoint(),
        &prefix,
        &["--storage-media-type=application/json"],
    )
    .await;
    for (old, new, resource, name) in [
        (
            "apps/deployments/old/d",
            "deployments/old/d",
            "deployments",
            "d",
        ),
        (
            "services/old/svc",
            "services/specs/old/svc",
            "services",
            "svc",
        ),
    ] {
        assert!(
            stored(&client, &format!("{prefix}/{old}"), Cipher::Plain)
                .await
                .is_none(),
            "{old} is still there"
        );
        let moved = stored(&client, &format!("{prefix}/{new}"), Cipher::Plain)
            .await
            .unwrap_or_else(|| panic!("{new} missing"));
        let v: Value = serde_json::from_slice(&moved)
            .expect("JSON under --storage-media-type=application/json");
        assert_eq!(v["metadata"]["name"], name);
        let got = s.get_json(&[resource, name, "-n", "old"]);
        assert_eq!(
            got["metadata"]["uid"].as_str().map(|u| &u[..8]),
            Some("6a1c3b2a")
        );
    }
    assert!(
        stored(&client, &format!("{prefix}/minions/n"), Cipher::Plain)
            .await
            .is_some()
    );
    assert_eq!(s.get_json(&["node", "n"])["metadata"]["name"], "n");

    // kube's protobuf read; the update written back as JSON.
    let got = s.get_json(&["configmap", "cm1", "-n", "old"]);
    assert_eq!(got["data"]["colour"], "blue");
    s.kubectl_ok(&["label", "configmap", "cm1", "-n", "old", "now=json"]);
    let back = stored(
        &client,
        &format!("{prefix}/configmaps/old/cm1"),
        Cipher::Plain,
    )
    .await
    .unwrap();
    let v: Value = serde_json::from_slice(&back).expect("written back as JSON");
    assert_eq!(v["metadata"]["labels"]["now"], "json");
    assert_eq!(v["data"]["colour"], "blue");
}

/// Fields Go always writes (no `omitempty`, though optional) keep their
/// zero values through protobuf storage, as kube serves them: a
/// PriorityClass of value 0, an Event's empty `reportingComponent` and
/// `reportingInstance` (sent here; kube would also fill them in when a
/// JSON body leaves them out, which this server does not yet do).
#[tokio::test]
async fn zero_values_kube_always_writes_survive_protobuf_storage() {
    let server = Server::start().await;
    server.kubectl_stdin_ok(
        &["create", "-f", "-"],
        r#"{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "zero"}, "value": 0}"#,
    );
    let pc = server.get_json(&["priorityclass", "zero"]);
    assert_eq!(pc["value"], 0, "{pc}");
    server.kubectl_stdin_ok(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "R", "message": "m", "type": "Normal",
            "reportingComponent": "", "reportingInstance": ""}"#,
    );
    let ev = server.get_json(&["event", "e"]);
    assert_eq!(ev["reportingComponent"], "", "{ev}");
    assert_eq!(ev["reportingInstance"], "", "{ev}");
}
