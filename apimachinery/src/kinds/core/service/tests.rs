use super::*;
use serde_json::json;

fn applied(mut obj: Value) -> Value {
    defaults(&mut obj);
    prepare_create(&mut obj);
    obj
}

fn messages(obj: &Value, old: Option<&Value>) -> Vec<String> {
    check(obj, old).iter().map(v::cause_to_string).collect()
}

#[test]
fn defaults_fill_kube_values() {
    let obj = applied(json!({"spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]}}));
    assert_eq!(
        obj["spec"],
        json!({"selector": {"a": "b"}, "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
            "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]})
    );
    assert_eq!(obj["status"], json!({"loadBalancer": {}}));
    let lb = applied(
        json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": "http"}]}}),
    );
    assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
    assert_eq!(lb["spec"]["ports"][0]["targetPort"], "http");
    let headless = applied(json!({"spec": {"clusterIP": "None"}}));
    assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
    assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    let six = applied(json!({"spec": {"clusterIP": "fd00::1", "ports": [{"port": 1}]}}));
    assert_eq!(six["spec"]["ipFamilies"], json!(["IPv6"]));
    let ext = applied(json!({"spec": {"type": "ExternalName", "externalName": "a.b"}}));
    assert!(ext["spec"].get("ipFamilies").is_none());
    assert!(ext["spec"].get("internalTrafficPolicy").is_none());
    let affinity =
        applied(json!({"spec": {"sessionAffinity": "ClientIP", "ports": [{"port": 1}]}}));
    assert_eq!(
        affinity["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );
}

#[test]
fn defaults_keep_client_values_and_are_idempotent() {
    let given = json!({"spec": {"type": "NodePort", "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}},
        "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
        "ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv6"],
        "ports": [{"port": 80, "protocol": "UDP", "targetPort": 8080}]}});
    let mut once = given.clone();
    defaults(&mut once);
    assert_eq!(once, given);
    let mut obj = json!({"spec": {"ports": [{"port": 80}]}});
    defaults(&mut obj);
    let first = obj.clone();
    defaults(&mut obj);
    assert_eq!(obj, first);
}

#[test]
fn valid_services_pass() {
    for obj in [
        json!({"spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}),
        json!({"spec": {"clusterIP": "None"}}),
        json!({"spec": {"type": "ExternalName", "externalName": "example.com."}}),
        json!({"spec": {"type": "LoadBalancer", "ports": [{"name": "a", "port": 80, "nodePort": 30080},
            {"name": "b", "port": 80, "protocol": "UDP"}]}}),
        json!({"spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 80}]}}),
    ] {
        let obj = applied(obj);
        assert_eq!(messages(&obj, None), Vec::<String>::new(), "{obj}");
    }
}

#[test]
fn invalid_services_get_kube_messages() {
    let cases = [
        (json!({"spec": {}}), vec!["spec.ports: Required value"]),
        (
            json!({"spec": {"ports": [{"port": 70000}]}}),
            vec!["spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                 "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"],
        ),
        (
            json!({"spec": {"ports": [{"port": 80, "protocol": "X"}]}}),
            vec!["spec.ports[0].protocol: Unsupported value: \"X\": supported values: \"SCTP\", \"TCP\", \"UDP\""],
        ),
        (
            json!({"spec": {"ports": [{"port": 80}, {"port": 81}]}}),
            vec!["spec.ports[0].name: Required value", "spec.ports[1].name: Required value"],
        ),
        (
            json!({"spec": {"ports": [{"name": "a", "port": 80}, {"name": "a", "port": 80}]}}),
            vec!["spec.ports[1].name: Duplicate value: \"a\"",
                 "spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"],
        ),
        (
            json!({"spec": {"ports": [{"port": 80, "targetPort": "Http"}]}}),
            vec!["spec.ports[0].targetPort: Invalid value: \"Http\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"],
        ),
        (
            json!({"spec": {"ports": [{"port": 80, "nodePort": 30000}]}}),
            vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"],
        ),
        (
            json!({"spec": {"type": "Foo", "ports": [{"port": 80}]}}),
            vec!["spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""],
        ),
        (
            json!({"spec": {"type": "ExternalName"}}),
            vec!["spec.externalName: Required value"],
        ),
        (
            json!({"spec": {"clusterIP": "1.2.3", "ports": [{"port": 80}]}}),
            vec!["spec.clusterIPs[0]: Invalid value: \"1.2.3\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"],
        ),
        (
            json!({"spec": {"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]}}),
            vec!["spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"],
        ),
        (
            json!({"spec": {"sessionAffinity": "Sticky", "ports": [{"port": 80}]}}),
            vec!["spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\""],
        ),
        (
            json!({"spec": {"selector": {"a": "b c"}, "ports": [{"port": 80}]}}),
            vec!["spec.selector: Invalid value: \"b c\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"],
        ),
        (
            json!({"spec": {"externalIPs": ["127.0.0.1"], "ports": [{"port": 80}]}}),
            vec!["spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"],
        ),
    ];
    for (obj, want) in cases {
        let obj = applied(obj);
        assert_eq!(messages(&obj, None), want, "{obj}");
    }
}

#[test]
fn updates_keep_allocated_values_and_refuse_ip_changes() {
    let old = applied(json!({"spec": {"clusterIP": "10.0.0.5", "type": "NodePort",
        "ports": [{"port": 80, "nodePort": 30080}]}}));
    // A client that leaves the allocated values out keeps them.
    let mut new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
    defaults(&mut new);
    prepare_update(&mut new, &old);
    assert_eq!(new["spec"]["clusterIP"], "10.0.0.5");
    assert_eq!(new["spec"]["clusterIPs"], json!(["10.0.0.5"]));
    assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
    assert!(messages(&new, Some(&old)).is_empty());
    // Changing the IP is refused.
    let mut moved = old.clone();
    moved["spec"]["clusterIP"] = json!("10.0.0.6");
    moved["spec"]["clusterIPs"] = json!(["10.0.0.6"]);
    assert_eq!(
        messages(&moved, Some(&old)),
        vec!["spec.clusterIPs[0]: Invalid value: [\"10.0.0.6\"]: may not change once set"]
    );
    // Only `clusterIP` changed (a patch of it): `clusterIPs` follows it
    // first, so the answer is kube's immutability error, not a mismatch.
    let mut patched = old.clone();
    patched["spec"]["clusterIP"] = json!("10.0.0.7");
    prepare_update(&mut patched, &old);
    assert_eq!(patched["spec"]["clusterIPs"], json!(["10.0.0.7"]));
    assert_eq!(
        messages(&patched, Some(&old)),
        vec!["spec.clusterIPs[0]: Invalid value: [\"10.0.0.7\"]: may not change once set"]
    );
    // Both changed, to different addresses: left as given, so validation
    // names the mismatch as kube does.
    let mut both = old.clone();
    both["spec"]["clusterIP"] = json!("10.0.0.7");
    both["spec"]["clusterIPs"] = json!(["10.0.0.8"]);
    prepare_update(&mut both, &old);
    assert_eq!(both["spec"]["clusterIPs"], json!(["10.0.0.8"]));
    assert!(
        messages(&both, Some(&old))
            .iter()
            .any(|m| m.contains("first value must match `clusterIP`")),
        "{:?}",
        messages(&both, Some(&old))
    );
    // `clusterIPs` left out with `clusterIP` unchanged: the old list stays.
    let mut old_client = old.clone();
    old_client["spec"]
        .as_object_mut()
        .unwrap()
        .remove("clusterIPs");
    prepare_update(&mut old_client, &old);
    assert_eq!(old_client["spec"]["clusterIPs"], json!(["10.0.0.5"]));
    // Switching to ExternalName drops the unchanged type-dependent fields.
    let mut ext = old.clone();
    ext["spec"]["type"] = json!("ExternalName");
    ext["spec"]["externalName"] = json!("a.example.com");
    ext["spec"].as_object_mut().unwrap().remove("ports");
    defaults(&mut ext);
    prepare_update(&mut ext, &old);
    assert!(ext["spec"].get("clusterIP").is_none());
    assert!(ext["spec"].get("externalTrafficPolicy").is_none());
    assert_eq!(messages(&ext, Some(&old)), Vec::<String>::new());
}

#[test]
fn columns_print_like_kube() {
    let ctx = PrintContext { now: 0 };
    let cells = |obj: &Value| -> Vec<Value> {
        COLUMNS
            .iter()
            .filter(|c| c.name != "Age")
            .map(|c| (c.cell)(obj, &ctx))
            .collect()
    };
    let svc = applied(
        json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "10.0.0.5",
        "selector": {"app": "web"}, "type": "NodePort",
        "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}}),
    );
    assert_eq!(
        cells(&svc),
        vec![
            json!("web"),
            json!("NodePort"),
            json!("10.0.0.5"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("app=web")
        ]
    );
    let lb = applied(json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"}}));
    assert_eq!(
        cells(&lb),
        vec![
            json!("lb"),
            json!("LoadBalancer"),
            json!("<none>"),
            json!("<pending>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    let mut ready = lb.clone();
    ready["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "h"}]}});
    assert_eq!((COLUMNS[3].cell)(&ready, &ctx), json!("1.2.3.4,h"));
    assert_eq!(COLUMNS[6].priority, 1);
}

#[test]
fn status_updates_check_load_balancer_ingress() {
    let old = applied(json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}));
    let mut new = old.clone();
    new["status"] =
        json!({"loadBalancer": {"ingress": [{"ip": "1.2.3"}, {"hostname": "10.0.0.1"}]}});
    let got: Vec<String> = validate::validate_status(&new, Some(&old))
        .iter()
        .map(v::cause_to_string)
        .collect();
    assert_eq!(
        got,
        vec![
            "status.loadBalancer.ingress[0].ip: Invalid value: \"1.2.3\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "status.loadBalancer.ingress[1].hostname: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
        ]
    );
}
