//! Table-driven tests with kube's messages (pkg/apis/flowcontrol/validation).

use super::*;

fn msgs(errs: Vec<StatusCause>) -> Vec<String> {
    errs.iter().map(v::cause_to_string).collect()
}

/// A FlowSchema named `name` with `spec` merged over a valid one, defaulted.
fn fs(name: &str, spec: Value) -> Value {
    let mut base = json!({
        "priorityLevelConfiguration": {"name": "workload-low"},
        "matchingPrecedence": 500,
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
            "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["default"]}]}],
    });
    base.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    let mut obj = json!({"metadata": {"name": name}, "spec": base});
    flow_schema_defaults(&mut obj);
    obj
}

fn fs_msgs(name: &str, spec: Value) -> Vec<String> {
    msgs(validate_flow_schema(&fs(name, spec), None))
}

fn rule(subjects: Value, resource: Value, non_resource: Value) -> Value {
    json!({"rules": [{"subjects": subjects, "resourceRules": resource, "nonResourceRules": non_resource}]})
}

fn alice() -> Value {
    json!([{"kind": "User", "user": {"name": "alice"}}])
}

#[test]
fn flow_schema_spec_rules() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("ok", json!({}), vec![]),
        // matchingPrecedence 0 is defaulted to 1000.
        ("ok", json!({"matchingPrecedence": 0}), vec![]),
        ("bad", json!({"matchingPrecedence": -1}),
            vec!["spec.matchingPrecedence: Invalid value: -1: must be a positive value"]),
        ("bad", json!({"matchingPrecedence": 10001}),
            vec!["spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"]),
        ("bad", json!({"matchingPrecedence": 1}),
            vec!["spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"]),
        ("bad", json!({"distinguisherMethod": {"type": "ByGroup"}}),
            vec!["spec.distinguisherMethod.type: Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:\"ByGroup\"}: supported values: \"ByNamespace\", \"ByUser\""]),
        ("bad", json!({"priorityLevelConfiguration": {}}),
            vec!["spec.priorityLevelConfiguration.name: Required value: must reference a priority level"]),
        ("bad", json!({"priorityLevelConfiguration": {"name": "Bad_Level"}}),
            vec!["spec.priorityLevelConfiguration.name: Invalid value: \"Bad_Level\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
        ("bad", rule(json!([]), json!([]), json!([])),
            vec!["spec.rules[0].subjects: Required value: subjects must contain at least one value",
                 "spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty"]),
        // Subjects: the kind's own part is required, the others forbidden.
        ("bad", rule(json!([{"kind": "Robot"}]), json!([]), json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])),
            vec!["spec.rules[0].subjects[0].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\""]),
        ("bad", rule(json!([{"kind": "User", "group": {"name": "g"}}, {"kind": "Group", "group": {}}]),
                json!([]), json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])),
            vec!["spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
                 "spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
                 "spec.rules[0].subjects[1].group.name: Required value"]),
        ("bad", rule(json!([{"kind": "ServiceAccount", "serviceAccount": {"name": "Bad_SA"}, "user": {"name": "u"}}]),
                json!([]), json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])),
            vec!["spec.rules[0].subjects[0].serviceAccount.name: Invalid value: \"Bad_SA\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                 "spec.rules[0].subjects[0].serviceAccount.namespace: Required value: must specify namespace for service account",
                 "spec.rules[0].subjects[0].user: Forbidden: user is forbidden when subject kind is not 'User'"]),
        ("ok", rule(json!([{"kind": "ServiceAccount", "serviceAccount": {"name": "*", "namespace": "kube-system"}}]),
                json!([]), json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])), vec![]),
        ("bad", rule(json!([{"kind": "ServiceAccount"}]), json!([]), json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])),
            vec!["spec.rules[0].subjects[0].serviceAccount: Required value: serviceAccount is required when subject kind is 'ServiceAccount'"]),
        // Resource rules.
        ("bad", rule(alice(), json!([{"verbs": []}]), json!([])),
            vec!["spec.rules[0].resourceRules[0].verbs: Required value: verbs must contain at least one value",
                 "spec.rules[0].resourceRules[0].apiGroups: Required value: resource rules must supply at least one api group",
                 "spec.rules[0].resourceRules[0].resources: Required value: resource rules must supply at least one resource",
                 "spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"]),
        ("bad", rule(alice(), json!([{"verbs": ["*", "get"], "apiGroups": ["*", "apps"], "resources": ["*", "pods"], "namespaces": ["*", "a"]}]), json!([])),
            vec!["spec.rules[0].resourceRules[0].verbs: Invalid value: [\"*\",\"get\"]: if '*' is present, must not specify other verbs",
                 "spec.rules[0].resourceRules[0].apiGroups: Invalid value: [\"*\",\"apps\"]: if '*' is present, must not specify other api groups",
                 "spec.rules[0].resourceRules[0].resources: Invalid value: [\"*\",\"pods\"]: if '*' is present, must not specify other resources",
                 "spec.rules[0].resourceRules[0].namespaces: Invalid value: [\"*\",\"a\"]: if '*' is present, must not specify other namespaces"]),
        ("bad", rule(alice(), json!([{"verbs": ["get", "fly"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["Bad"]}]), json!([])),
            vec!["spec.rules[0].resourceRules[0].verbs: Unsupported value: [\"get\",\"fly\"]: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
                 "spec.rules[0].resourceRules[0].namespaces[0]: Invalid value: \"Bad\": each member of this list must be '*' or a DNS-1123 label; a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
        ("ok", rule(alice(), json!([{"verbs": ["list"], "apiGroups": ["*"], "resources": ["nodes"], "clusterScope": true}]), json!([])), vec![]),
        // Non-resource rules.
        ("bad", rule(alice(), json!([]), json!([{"verbs": ["get"], "nonResourceURLs": []}, {"verbs": ["get"], "nonResourceURLs": ["*", "/healthz"]}])),
            vec!["spec.rules[0].nonResourceRules[0].nonResourceURLs: Required value: nonResourceURLs must contain at least one value",
                 "spec.rules[0].nonResourceRules[1].nonResourceURLs: Invalid value: [\"*\",\"/healthz\"]: if '*' is present, must not specify other non-resource URLs"]),
        ("bad", rule(alice(), json!([]), json!([{"verbs": ["get"], "nonResourceURLs": ["", "/", "healthz", "/a b", "//a", "/a*", "/a/*/*", "/metrics/*"]}])),
            vec!["spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"\": must not be empty",
                 "spec.rules[0].nonResourceRules[0].nonResourceURLs[2]: Invalid value: \"healthz\": must start with slash",
                 "spec.rules[0].nonResourceRules[0].nonResourceURLs[3]: Invalid value: \"/a b\": must not contain white-space",
                 "spec.rules[0].nonResourceRules[0].nonResourceURLs[4]: Invalid value: \"//a\": must not contain double slash",
                 "spec.rules[0].nonResourceRules[0].nonResourceURLs[5]: Invalid value: \"/a*\": wildcard can only do suffix matching",
                 "spec.rules[0].nonResourceRules[0].nonResourceURLs[6]: Invalid value: \"/a/*/*\": wildcard can only do suffix matching"]),
    ];
    for (name, spec, want) in cases {
        assert_eq!(fs_msgs(name, spec.clone()), want, "{name} {spec}");
    }
}

fn mandatory_fs(name: &str) -> Value {
    let mut obj = json!({"metadata": {"name": name}, "spec": mandatory_flow_schema(name).unwrap()});
    flow_schema_defaults(&mut obj);
    obj
}

#[test]
fn mandatory_flow_schemas_keep_their_spec() {
    for name in ["exempt", "catch-all"] {
        let mut obj = mandatory_fs(name);
        assert!(validate_flow_schema(&obj, None).is_empty(), "{obj}");
        // Zero values written out are the same spec.
        obj["spec"]["rules"][0]["resourceRules"][0]["apiGroups"] = json!(["*"]);
        obj["spec"]["rules"][0]["nonResourceRules"][0]["clusterScope"] = json!(false);
        obj["spec"]["rules"][0]["resourceRules"][0]["extra"] = json!(null);
        assert!(validate_flow_schema(&obj, None).is_empty(), "{obj}");
    }
    let mut obj = mandatory_fs("exempt");
    obj["spec"]["matchingPrecedence"] = json!(2);
    assert_eq!(
        msgs(validate_flow_schema(&obj, None)),
        ["spec: Invalid value: flowcontrol.FlowSchemaSpec{PriorityLevelConfiguration:flowcontrol.PriorityLevelConfigurationReference{Name:\"exempt\"}, MatchingPrecedence:2, DistinguisherMethod:(*flowcontrol.FlowDistinguisherMethod)(nil), Rules:[]flowcontrol.PolicyRulesWithSubjects{flowcontrol.PolicyRulesWithSubjects{Subjects:[]flowcontrol.Subject{flowcontrol.Subject{Kind:\"Group\", User:(*flowcontrol.UserSubject)(nil), Group:(*flowcontrol.GroupSubject)(0xc000000000), ServiceAccount:(*flowcontrol.ServiceAccountSubject)(nil)}}, ResourceRules:[]flowcontrol.ResourcePolicyRule{flowcontrol.ResourcePolicyRule{Verbs:[]string{\"*\"}, APIGroups:[]string{\"*\"}, Resources:[]string{\"*\"}, ClusterScope:true, Namespaces:[]string{\"*\"}}}, NonResourceRules:[]flowcontrol.NonResourcePolicyRule{flowcontrol.NonResourcePolicyRule{Verbs:[]string{\"*\"}, NonResourceURLs:[]string{\"*\"}}}}}}: spec of 'exempt' must equal the fixed value"]
    );
    let mut obj = mandatory_fs("catch-all");
    obj["spec"]["distinguisherMethod"] = json!({"type": "ByNamespace"});
    let got = msgs(validate_flow_schema(&obj, None));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].ends_with(": spec of 'catch-all' must equal the fixed value"),
        "{got:?}"
    );
}

#[test]
fn flow_schema_status_conditions() {
    let obj = json!({"status": {"conditions": [{"type": "Dangling"}, {"type": "Dangling"}, {"type": ""}]}});
    assert_eq!(
        msgs(validate_status(&obj, Some(&obj))),
        [
            "status.conditions[1].type: Duplicate value: \"Dangling\"",
            "status.conditions[2].type: Required value: must not be empty"
        ]
    );
}

/// A PriorityLevelConfiguration named `name` with `spec`, defaulted.
fn pl(name: &str, spec: Value) -> Value {
    let mut obj = json!({"metadata": {"name": name}, "spec": spec});
    priority_level_defaults(&mut obj);
    obj
}

fn pl_msgs(name: &str, spec: Value) -> Vec<String> {
    msgs(validate_priority_level(&pl(name, spec), None))
}

fn queue(queuing: Value) -> Value {
    json!({"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": queuing}}})
}

#[test]
fn priority_level_defaults_are_kubes() {
    let obj = pl("x", queue(json!({})));
    assert_eq!(
        obj["spec"],
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 30, "lendablePercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"handSize": 8, "queues": 64, "queueLengthLimit": 50}}}})
    );
    let obj = pl("exempt", json!({"type": "Exempt", "exempt": {}}));
    assert_eq!(
        obj["spec"]["exempt"],
        json!({"nominalConcurrencyShares": 0, "lendablePercent": 0})
    );
    let mut obj = json!({"spec": {"matchingPrecedence": 0}});
    flow_schema_defaults(&mut obj);
    assert_eq!(obj["spec"]["matchingPrecedence"], 1000);
}

#[test]
fn priority_level_spec_rules() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("ok", queue(json!({})), vec![]),
        ("ok", json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 0, "lendablePercent": 100,
            "borrowingLimitPercent": 300, "limitResponse": {"type": "Reject"}}}), vec![]),
        ("bad", queue(json!({"queues": 4, "handSize": 5, "queueLengthLimit": -1})),
            vec!["spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: -1: must be positive",
                 "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)"]),
        ("bad", queue(json!({"queues": -3, "handSize": -1})),
            vec!["spec.limited.limitResponse.queuing.queues: Invalid value: -3: must be positive",
                 "spec.limited.limitResponse.queuing.handSize: Invalid value: -1: must be positive"]),
        ("bad", queue(json!({"queues": 10_000_001})),
            // kube checks the hand against the deck whatever the deck's own error.
            vec!["spec.limited.limitResponse.queuing.queues: Invalid value: 10000001: must not be greater than 10000000",
                 "spec.limited.limitResponse.queuing.handSize: Invalid value: 8: required entropy bits of deckSize 10000001 and handSize 8 should not be greater than 60"]),
        // ⌈log₂ 128 × 9⌉ = 63 bits > 60; ⌈log₂ 128 × 8⌉ = 56 is fine.
        ("bad", queue(json!({"queues": 128, "handSize": 9})),
            vec!["spec.limited.limitResponse.queuing.handSize: Invalid value: 9: required entropy bits of deckSize 128 and handSize 9 should not be greater than 60"]),
        ("ok", queue(json!({"queues": 128, "handSize": 8})), vec![]),
        ("bad", json!({"type": "Limited", "limited": {"nominalConcurrencyShares": -1, "lendablePercent": 101,
            "borrowingLimitPercent": -1, "limitResponse": {"type": "Reject", "queuing": {}}}}),
            vec!["spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
                 "spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited",
                 "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
                 "spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer"]),
        ("bad", json!({"type": "Limited", "limited": {"lendablePercent": -1, "limitResponse": {"type": "Queue"}}}),
            vec!["spec.limited.limitResponse.queuing: Required value: must not be empty if limited.limitResponse.type is Limited",
                 "spec.limited.lendablePercent: Invalid value: -1: must be between 0 and 100, inclusive"]),
        ("bad", json!({"type": "Limited", "limited": {"limitResponse": {"type": "Drop"}}}),
            vec!["spec.limited.limitResponse.type: Unsupported value: \"Drop\": supported values: \"Queue\", \"Reject\""]),
        ("bad", json!({"type": "Limited", "limited": {}}),
            vec!["spec.limited.limitResponse.type: Unsupported value: \"\": supported values: \"Queue\", \"Reject\""]),
        ("bad", json!({"type": "Limited"}),
            vec!["spec.limited: Required value: must not be empty when type is Limited"]),
        ("bad", json!({"type": "Limited", "exempt": {}, "limited": {"limitResponse": {"type": "Reject"}}}),
            vec!["spec.exempt: Forbidden: must be nil if the type is Limited"]),
        ("bad", json!({"type": "Exempt", "limited": {"limitResponse": {"type": "Reject"}}}),
            vec!["spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'",
                 "spec.limited: Forbidden: must be nil if the type is not Limited"]),
        ("bad", json!({"type": "Unlimited"}),
            vec!["spec.type: Unsupported value: \"Unlimited\": supported values: \"Exempt\", \"Limited\""]),
    ];
    for (name, spec, want) in cases {
        assert_eq!(pl_msgs(name, spec.clone()), want, "{name} {spec}");
    }
}

#[test]
fn mandatory_priority_levels() {
    // exempt's spec.exempt is the administrator's to change, within range.
    let ok = pl(
        "exempt",
        json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 50}}),
    );
    assert!(validate_priority_level(&ok, None).is_empty());
    assert_eq!(
        pl_msgs("exempt", json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": -1, "lendablePercent": 101}})),
        ["spec.exempt.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
         "spec.exempt.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive"]
    );
    assert_eq!(
        pl_msgs("exempt", json!({"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}})),
        ["spec.type: Invalid value: \"Limited\": type must be 'Exempt' if and only if name is 'exempt'",
         "spec: Invalid value: flowcontrol.PriorityLevelConfigurationSpec{Type:\"Limited\", Limited:(*flowcontrol.LimitedPriorityLevelConfiguration)(0xc000000000), Exempt:(*flowcontrol.ExemptPriorityLevelConfiguration)(nil)}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value"]
    );
    let catch_all = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}});
    assert!(pl_msgs("catch-all", catch_all).is_empty());
    assert_eq!(
        pl_msgs("catch-all", json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 50, "limitResponse": {"type": "Reject"}}})),
        ["spec: Invalid value: flowcontrol.PriorityLevelConfigurationSpec{Type:\"Limited\", Limited:(*flowcontrol.LimitedPriorityLevelConfiguration)(0xc000000000), Exempt:(*flowcontrol.ExemptPriorityLevelConfiguration)(nil)}: spec of 'catch-all' must equal the fixed value"]
    );
    // A borrowing limit of 0 is not the fixed spec's absent one.
    assert_eq!(
        pl_msgs("catch-all", json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}})).len(),
        1
    );
}

#[test]
fn the_v1beta3_roundtrip_annotation_is_forbidden() {
    let mut obj = pl("x", queue(json!({})));
    obj["metadata"]["annotations"] = json!({ROUNDTRIP_ANNOTATION: ""});
    assert_eq!(
        msgs(validate_priority_level(&obj, None)),
        ["metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"]
    );
}
