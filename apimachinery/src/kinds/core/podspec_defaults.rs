//! kube's defaults for a `PodSpec` and what it holds (containers, probes,
//! ports, env, volumes), as `SetDefaults_PodSpec`, `SetDefaults_Container`,
//! `SetDefaults_Probe`, `SetDefaults_HTTPGetAction`, `SetDefaults_Volume`
//! and the volume sources' defaulters apply them, plus the v1 conversion's
//! mirroring of `serviceAccountName` into the deprecated `serviceAccount`.
//!
//! The Pod-only defaults (`SetDefaults_Pod`: requests from limits,
//! `enableServiceLinks`, host ports under host networking) are applied when
//! `is_pod` is set; kube keeps them off pod templates.
//!
//! Not done: `SetDefaults_ResourceList`'s rounding to milli units, the
//! pod-level resources defaults (feature gated), the defaults of the legacy
//! volume plugins (iSCSI, RBD, AzureDisk, ScaleIO).

use serde_json::{Map, Value};

use crate::kinds::common::{default_field, each_mut, existing_mut};

/// Fills in a pod spec. `is_pod`: the spec is a Pod's, not a template's.
pub fn default_pod_spec(spec: &mut Map<String, Value>, is_pod: bool) {
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_field(spec, "securityContext", Value::Object(Map::new()));
    default_field(spec, "terminationGracePeriodSeconds", Value::from(30));
    default_str(spec, "schedulerName", "default-scheduler");
    mirror_service_account(spec);
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for c in each_mut(spec, key) {
            default_container(c);
            if is_pod && key != "ephemeralContainers" {
                requests_from_limits(c);
                if host_network {
                    for p in each_mut(c, "ports") {
                        if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0 {
                            if let Some(cp) = p.get("containerPort").cloned() {
                                p.insert("hostPort".into(), cp);
                            }
                        }
                    }
                }
            }
        }
    }
    for v in each_mut(spec, "volumes") {
        default_volume(v);
    }
    if is_pod {
        default_field(spec, "enableServiceLinks", Value::Bool(true));
    }
}

/// Sets a string field when absent, null or empty (Go's zero string).
pub fn default_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(v) if !v.is_null() && !v.is_string() => {}
        _ => {
            map.insert(key.to_string(), Value::String(value.to_string()));
        }
    }
}

/// Sets an integer field when absent, null or 0 (Go's zero int).
fn default_int(map: &mut Map<String, Value>, key: &str, value: i64) {
    match map.get(key) {
        Some(Value::Number(n)) if n.as_i64() != Some(0) => {}
        Some(v) if !v.is_null() && !v.is_number() => {}
        _ => {
            map.insert(key.to_string(), Value::from(value));
        }
    }
}

/// The v1 conversion reads `serviceAccount` when `serviceAccountName` is
/// empty and always writes `serviceAccountName` back into it.
pub fn mirror_service_account(spec: &mut Map<String, Value>) {
    let name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n,
        _ => match spec.get("serviceAccount").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n,
            _ => return,
        },
    };
    let same = |v: Option<&Value>| v.and_then(Value::as_str) == Some(name);
    if same(spec.get("serviceAccountName")) && same(spec.get("serviceAccount")) {
        return;
    }
    let name = Value::String(name.to_string());
    spec.insert("serviceAccountName".into(), name.clone());
    spec.insert("serviceAccount".into(), name);
}

/// kube's pull policy default: `Always` for a `:latest` (or missing) tag,
/// `IfNotPresent` otherwise (a digest without a tag included).
pub fn default_pull_policy(image: &str) -> &'static str {
    // An image kube cannot parse has no tag: `IfNotPresent`.
    let repo_path = image.rsplit_once('/').map_or("", |(p, _)| p);
    if image.is_empty()
        || image
            .split('@')
            .next()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .is_some_and(|n| n.bytes().any(|b| b.is_ascii_uppercase()))
        || (repo_path.contains('/') && repo_path.bytes().any(|b| b.is_ascii_uppercase()))
    {
        return "IfNotPresent";
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    // A tag is what follows the last ':' after the last '/'.
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.rsplit_once(':').map(|(_, t)| t);
    match tag {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

fn default_container(c: &mut Map<String, Value>) {
    let missing_policy =
        !matches!(c.get("imagePullPolicy"), Some(Value::String(s)) if !s.is_empty());
    if missing_policy {
        let policy = default_pull_policy(c.get("image").and_then(Value::as_str).unwrap_or(""));
        c.insert("imagePullPolicy".into(), Value::String(policy.into()));
    }
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    for p in each_mut(c, "ports") {
        default_str(p, "protocol", "TCP");
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = existing_mut(c, probe) {
            default_int(p, "timeoutSeconds", 1);
            default_int(p, "periodSeconds", 10);
            default_int(p, "successThreshold", 1);
            default_int(p, "failureThreshold", 3);
            default_handler(p);
        }
    }
    if let Some(l) = existing_mut(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = existing_mut(l, hook) {
                default_handler(h);
            }
        }
    }
    for e in each_mut(c, "env") {
        if let Some(from) = existing_mut(e, "valueFrom") {
            if let Some(f) = existing_mut(from, "fieldRef") {
                default_str(f, "apiVersion", "v1");
            }
        }
    }
}

fn default_handler(h: &mut Map<String, Value>) {
    if let Some(g) = existing_mut(h, "httpGet") {
        default_str(g, "path", "/");
        default_str(g, "scheme", "HTTP");
    }
    if let Some(g) = existing_mut(h, "grpc") {
        default_field(g, "service", Value::String(String::new()));
    }
}

/// `SetDefaults_Pod`: every limit without a request becomes the request.
fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(res) = existing_mut(c, "resources") else {
        return;
    };
    let Some(limits) = res.get("limits").and_then(Value::as_object) else {
        return;
    };
    let missing: Vec<(String, Value)> = match res.get("requests") {
        Some(Value::Object(req)) => limits
            .iter()
            .filter(|(k, _)| !req.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => limits.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    };
    if missing.is_empty() && res.get("requests").is_some_and(Value::is_object) {
        return;
    }
    let req = crate::kinds::common::object_mut(res, "requests");
    if let Some(req) = req {
        req.extend(missing);
    }
}

const MODE_DEFAULTED: [&str; 4] = ["secret", "configMap", "downwardAPI", "projected"];

fn default_volume(v: &mut Map<String, Value>) {
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), Value::Object(Map::new()));
        return;
    }
    for source in MODE_DEFAULTED {
        if let Some(s) = existing_mut(v, source) {
            default_field(s, "defaultMode", Value::from(420));
        }
    }
    if let Some(h) = existing_mut(v, "hostPath") {
        default_field(h, "type", Value::String(String::new()));
    }
    if let Some(d) = existing_mut(v, "downwardAPI") {
        default_field_refs(d);
    }
    if let Some(p) = existing_mut(v, "projected") {
        for src in each_mut(p, "sources") {
            if let Some(t) = existing_mut(src, "serviceAccountToken") {
                default_field(t, "expirationSeconds", Value::from(3600));
            }
            if let Some(d) = existing_mut(src, "downwardAPI") {
                default_field_refs(d);
            }
        }
    }
    if let Some(e) = existing_mut(v, "ephemeral") {
        if let Some(t) = existing_mut(e, "volumeClaimTemplate") {
            if let Some(s) = existing_mut(t, "spec") {
                default_field(s, "volumeMode", Value::String("Filesystem".into()));
            }
        }
    }
}

fn default_field_refs(d: &mut Map<String, Value>) {
    for item in each_mut(d, "items") {
        if let Some(f) = existing_mut(item, "fieldRef") {
            default_str(f, "apiVersion", "v1");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaulted(mut spec: Value, is_pod: bool) -> Value {
        default_pod_spec(spec.as_object_mut().unwrap(), is_pod);
        spec
    }

    #[test]
    fn pull_policies() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:1", "IfNotPresent"),
            ("nginx@sha256:abc", "IfNotPresent"),
            ("nginx:latest@sha256:abc", "Always"),
            ("", "IfNotPresent"),
            ("Nginx", "IfNotPresent"),
        ] {
            assert_eq!(default_pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn spec_defaults() {
        let spec = defaulted(
            json!({"containers": [{"name": "a", "image": "nginx:1",
                "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"port": 80}},
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "1"}}}],
                "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "x"}},
                            {"name": "h", "hostPath": {"path": "/x"}}],
                "serviceAccount": "sa"}),
            true,
        );
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["resources"]["requests"], json!({"cpu": "1"}));
        assert_eq!(spec["volumes"][0], json!({"name": "v", "emptyDir": {}}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(spec["volumes"][2]["hostPath"]["type"], "");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["serviceAccountName"], "sa");
        assert_eq!(spec["serviceAccount"], "sa");
        // Idempotent.
        assert_eq!(defaulted(spec.clone(), true), spec);
    }

    #[test]
    fn templates_get_no_pod_only_defaults_and_client_values_stay() {
        let spec = defaulted(
            json!({"containers": [{"name": "a", "image": "nginx", "imagePullPolicy": "Never",
                "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}}}],
                "restartPolicy": "Never", "dnsPolicy": "Default",
                "terminationGracePeriodSeconds": 0, "hostNetwork": true}),
            false,
        );
        assert!(spec.get("enableServiceLinks").is_none());
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["dnsPolicy"], "Default");
        assert_eq!(spec["terminationGracePeriodSeconds"], 0);
        assert_eq!(
            spec["containers"][0]["resources"]["requests"],
            json!({"cpu": "500m"})
        );
        let pod = defaulted(
            json!({"hostNetwork": true, "containers": [{"name": "a", "image": "x",
                "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}}]}),
            true,
        );
        assert_eq!(pod["containers"][0]["ports"][0]["hostPort"], 80);
        assert_eq!(
            pod["containers"][0]["resources"]["requests"],
            json!({"cpu": "500m", "memory": "1Gi"})
        );
    }
}
