//! kube-apiserver's API Priority and Fairness bootstrap configuration
//! (1.35): the PriorityLevelConfigurations and FlowSchemas every cluster
//! starts with, kept here as tables, and kube's rule for an object of the
//! same name that is already stored.
//!
//! The mandatory objects (`exempt` and `catch-all` of each kind) are always
//! brought back to this spec; a suggested one only while its
//! `apf.kubernetes.io/autoupdate-spec` annotation says `true` (or, without a
//! readable annotation, while its generation is still 1: nobody edited it).

use serde_json::{json, Map, Value};

pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";
pub const API_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1";
/// The annotation saying whether the server may rewrite an object's spec.
pub const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

/// What a priority level does with the requests it is given.
enum Limits {
    /// No limit at all.
    Exempt,
    /// A share of the server's concurrency; `queuing` is the queue shape
    /// (queues, hand size, queue length limit), `None`: excess is rejected.
    Limited {
        shares: i64,
        lendable_percent: i64,
        queuing: Option<(i64, i64, i64)>,
    },
}

struct PriorityLevel {
    name: &'static str,
    mandatory: bool,
    limits: Limits,
}

const fn queued(
    name: &'static str,
    shares: i64,
    lendable_percent: i64,
    queuing: (i64, i64, i64),
) -> PriorityLevel {
    PriorityLevel {
        name,
        mandatory: false,
        limits: Limits::Limited {
            shares,
            lendable_percent,
            queuing: Some(queuing),
        },
    }
}

const PRIORITY_LEVELS: &[PriorityLevel] = &[
    PriorityLevel {
        name: "exempt",
        mandatory: true,
        limits: Limits::Exempt,
    },
    PriorityLevel {
        name: "catch-all",
        mandatory: true,
        limits: Limits::Limited {
            shares: 5,
            lendable_percent: 0,
            queuing: None,
        },
    },
    queued("system", 30, 33, (64, 6, 50)),
    queued("node-high", 40, 25, (64, 6, 50)),
    queued("leader-election", 10, 0, (16, 4, 50)),
    queued("workload-high", 40, 50, (128, 6, 50)),
    queued("workload-low", 100, 90, (128, 6, 50)),
    queued("global-default", 20, 50, (128, 6, 50)),
];

/// Who a FlowSchema matches.
enum Subject {
    Group(&'static str),
    User(&'static str),
    /// Every service account of `kube-system`.
    KubeSystemServiceAccounts,
}

/// A resource rule: verbs, API groups, resources, namespaces, and whether
/// cluster-scoped requests match too.
type ResourceRule = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    bool,
);
/// A non-resource rule: verbs, URLs.
type NonResourceRule = (&'static [&'static str], &'static [&'static str]);

/// Every request for a resource, namespaced or not.
const ANY_RESOURCE: &[ResourceRule] = &[(&["*"], &["*"], &["*"], &["*"], true)];
/// Every request for a non-resource URL.
const ANY_URL: &[NonResourceRule] = &[(&["*"], &["*"])];
const EVERYONE: &[Subject] = &[
    Subject::Group("system:unauthenticated"),
    Subject::Group("system:authenticated"),
];
const NODES: &[Subject] = &[Subject::Group("system:nodes")];

struct FlowSchema {
    name: &'static str,
    mandatory: bool,
    priority_level: &'static str,
    precedence: i64,
    /// `ByUser`, `ByNamespace`, or none (one flow).
    distinguisher: Option<&'static str>,
    subjects: &'static [Subject],
    resource_rules: &'static [ResourceRule],
    non_resource_rules: &'static [NonResourceRule],
}

/// A suggested schema matching every request of `subjects`.
const fn everything(
    name: &'static str,
    priority_level: &'static str,
    precedence: i64,
    distinguisher: &'static str,
    subjects: &'static [Subject],
) -> FlowSchema {
    FlowSchema {
        name,
        mandatory: false,
        priority_level,
        precedence,
        distinguisher: Some(distinguisher),
        subjects,
        resource_rules: ANY_RESOURCE,
        non_resource_rules: ANY_URL,
    }
}

const FLOW_SCHEMAS: &[FlowSchema] = &[
    FlowSchema {
        name: "exempt",
        mandatory: true,
        priority_level: "exempt",
        precedence: 1,
        distinguisher: None,
        subjects: &[Subject::Group("system:masters")],
        resource_rules: ANY_RESOURCE,
        non_resource_rules: ANY_URL,
    },
    FlowSchema {
        name: "catch-all",
        mandatory: true,
        priority_level: "catch-all",
        precedence: 10000,
        distinguisher: Some("ByUser"),
        subjects: EVERYONE,
        resource_rules: ANY_RESOURCE,
        non_resource_rules: ANY_URL,
    },
    FlowSchema {
        name: "probes",
        mandatory: false,
        priority_level: "exempt",
        precedence: 2,
        distinguisher: None,
        subjects: EVERYONE,
        resource_rules: &[],
        non_resource_rules: &[(&["get"], &["/healthz", "/readyz", "/livez"])],
    },
    FlowSchema {
        name: "system-leader-election",
        mandatory: false,
        priority_level: "leader-election",
        precedence: 100,
        distinguisher: Some("ByUser"),
        subjects: &[
            Subject::User("system:kube-controller-manager"),
            Subject::User("system:kube-scheduler"),
            Subject::KubeSystemServiceAccounts,
        ],
        resource_rules: &[(
            &["get", "create", "update"],
            &["coordination.k8s.io"],
            &["leases"],
            &["*"],
            false,
        )],
        non_resource_rules: &[],
    },
    FlowSchema {
        name: "system-node-high",
        mandatory: false,
        priority_level: "node-high",
        precedence: 400,
        distinguisher: Some("ByUser"),
        subjects: NODES,
        resource_rules: &[
            (&["*"], &[""], &["nodes", "nodes/status"], &["*"], true),
            (&["*"], &["coordination.k8s.io"], &["leases"], &["*"], false),
        ],
        non_resource_rules: &[],
    },
    everything("system-nodes", "system", 500, "ByUser", NODES),
    everything(
        "kube-controller-manager",
        "workload-high",
        800,
        "ByNamespace",
        &[Subject::User("system:kube-controller-manager")],
    ),
    everything(
        "kube-scheduler",
        "workload-high",
        800,
        "ByNamespace",
        &[Subject::User("system:kube-scheduler")],
    ),
    everything(
        "kube-system-service-accounts",
        "workload-high",
        900,
        "ByNamespace",
        &[Subject::KubeSystemServiceAccounts],
    ),
    everything(
        "service-accounts",
        "workload-low",
        9000,
        "ByUser",
        &[Subject::Group("system:serviceaccounts")],
    ),
    everything("global-default", "global-default", 9900, "ByUser", EVERYONE),
];

/// One bootstrap object and whether it is mandatory.
pub struct Bootstrap {
    pub object: Value,
    pub mandatory: bool,
}

fn metadata(name: &str) -> Value {
    json!({"name": name, "annotations": {AUTO_UPDATE: "true"}})
}

fn priority_level(pl: &PriorityLevel) -> Value {
    let spec = match pl.limits {
        Limits::Exempt => json!({
            "type": "Exempt",
            "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0},
        }),
        Limits::Limited {
            shares,
            lendable_percent,
            queuing,
        } => {
            let limit_response = match queuing {
                Some((queues, hand_size, queue_length_limit)) => json!({
                    "type": "Queue",
                    "queuing": {
                        "queues": queues,
                        "handSize": hand_size,
                        "queueLengthLimit": queue_length_limit,
                    },
                }),
                None => json!({"type": "Reject"}),
            };
            json!({
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": shares,
                    "lendablePercent": lendable_percent,
                    "limitResponse": limit_response,
                },
            })
        }
    };
    json!({
        "apiVersion": API_VERSION,
        "kind": "PriorityLevelConfiguration",
        "metadata": metadata(pl.name),
        "spec": spec,
    })
}

fn subject(s: &Subject) -> Value {
    match s {
        Subject::Group(name) => json!({"kind": "Group", "group": {"name": name}}),
        Subject::User(name) => json!({"kind": "User", "user": {"name": name}}),
        Subject::KubeSystemServiceAccounts => json!({
            "kind": "ServiceAccount",
            "serviceAccount": {"namespace": "kube-system", "name": "*"},
        }),
    }
}

fn flow_schema(fs: &FlowSchema) -> Value {
    let mut rule = Map::new();
    rule.insert(
        "subjects".into(),
        fs.subjects.iter().map(subject).collect::<Vec<_>>().into(),
    );
    if !fs.resource_rules.is_empty() {
        let rules: Vec<Value> = fs
            .resource_rules
            .iter()
            .map(|(verbs, groups, resources, namespaces, cluster_scope)| {
                let mut r = json!({
                    "verbs": verbs,
                    "apiGroups": groups,
                    "resources": resources,
                    "namespaces": namespaces,
                });
                // kube leaves a false clusterScope out.
                if *cluster_scope {
                    r["clusterScope"] = Value::Bool(true);
                }
                r
            })
            .collect();
        rule.insert("resourceRules".into(), rules.into());
    }
    if !fs.non_resource_rules.is_empty() {
        let rules: Vec<Value> = fs
            .non_resource_rules
            .iter()
            .map(|(verbs, urls)| json!({"verbs": verbs, "nonResourceURLs": urls}))
            .collect();
        rule.insert("nonResourceRules".into(), rules.into());
    }
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": fs.priority_level},
        "matchingPrecedence": fs.precedence,
        "rules": [rule],
    });
    if let Some(method) = fs.distinguisher {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": "FlowSchema",
        "metadata": metadata(fs.name),
        "spec": spec,
    })
}

/// The PriorityLevelConfigurations, mandatory ones first.
pub fn priority_levels() -> Vec<Bootstrap> {
    PRIORITY_LEVELS
        .iter()
        .map(|pl| Bootstrap {
            object: priority_level(pl),
            mandatory: pl.mandatory,
        })
        .collect()
}

/// The FlowSchemas, mandatory ones first.
pub fn flow_schemas() -> Vec<Bootstrap> {
    FLOW_SCHEMAS
        .iter()
        .map(|fs| Bootstrap {
            object: flow_schema(fs),
            mandatory: fs.mandatory,
        })
        .collect()
}

/// Go's `strconv.ParseBool`, which is how kube reads the annotation.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// kube's ensurer on a stored object of a bootstrap name: the object to
/// write instead of `current`, or `None` when it is to be left alone.
///
/// The spec is brought back to `bootstrap`'s when the object is mandatory,
/// or its annotation reads true, or (annotation missing or unreadable) its
/// generation is 1. The annotation is then set to say which of those
/// happened when it does not already.
pub fn revise(current: &Value, bootstrap: &Value, mandatory: bool) -> Option<Value> {
    let annotation = current
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTO_UPDATE))
        .and_then(Value::as_str);
    let parsed = annotation.and_then(parse_bool);
    let auto_update = mandatory
        || parsed.unwrap_or_else(|| {
            current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                == Some(1)
        });
    let fix_annotation = parsed != Some(auto_update);
    let fix_spec = auto_update && current.get("spec") != bootstrap.get("spec");
    if !fix_annotation && !fix_spec {
        return None;
    }
    let mut revised = current.clone();
    if fix_spec {
        revised["spec"] = bootstrap.get("spec").cloned().unwrap_or(Value::Null);
    }
    if fix_annotation {
        let meta = crate::object::meta_mut(&mut revised);
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        annotations[AUTO_UPDATE] = Value::String(auto_update.to_string());
    }
    Some(revised)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn names(objects: &[Bootstrap]) -> Vec<&str> {
        objects
            .iter()
            .map(|b| b.object["metadata"]["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn kube_1_35_names() {
        assert_eq!(
            names(&priority_levels()),
            [
                "exempt",
                "catch-all",
                "system",
                "node-high",
                "leader-election",
                "workload-high",
                "workload-low",
                "global-default",
            ]
        );
        assert_eq!(
            names(&flow_schemas()),
            [
                "exempt",
                "catch-all",
                "probes",
                "system-leader-election",
                "system-node-high",
                "system-nodes",
                "kube-controller-manager",
                "kube-scheduler",
                "kube-system-service-accounts",
                "service-accounts",
                "global-default",
            ]
        );
        let mandatory: Vec<_> = priority_levels()
            .into_iter()
            .chain(flow_schemas())
            .filter(|b| b.mandatory)
            .map(|b| b.object["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(mandatory, ["exempt", "catch-all", "exempt", "catch-all"]);
    }

    #[test]
    fn every_schema_names_a_bootstrap_level_and_carries_the_annotation() {
        let levels: BTreeSet<String> = priority_levels()
            .iter()
            .map(|b| b.object["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for b in priority_levels().iter().chain(flow_schemas().iter()) {
            assert_eq!(
                b.object["metadata"]["annotations"][AUTO_UPDATE], "true",
                "{}",
                b.object
            );
            assert_eq!(b.object["apiVersion"], API_VERSION);
        }
        for b in flow_schemas() {
            let pl = b.object["spec"]["priorityLevelConfiguration"]["name"]
                .as_str()
                .unwrap();
            assert!(levels.contains(pl), "{pl}");
            let precedence = b.object["spec"]["matchingPrecedence"].as_i64().unwrap();
            assert!((1..=10000).contains(&precedence));
        }
    }

    #[test]
    fn specs_as_kube_writes_them() {
        let pl = |name: &str| {
            priority_levels()
                .into_iter()
                .find(|b| b.object["metadata"]["name"] == name)
                .unwrap()
                .object
        };
        let fs = |name: &str| {
            flow_schemas()
                .into_iter()
                .find(|b| b.object["metadata"]["name"] == name)
                .unwrap()
                .object
        };
        assert_eq!(
            pl("exempt")["spec"],
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})
        );
        assert_eq!(
            pl("catch-all")["spec"],
            json!({"type": "Limited", "limited": {
                "nominalConcurrencyShares": 5, "lendablePercent": 0,
                "limitResponse": {"type": "Reject"}}})
        );
        assert_eq!(
            pl("global-default")["spec"],
            json!({"type": "Limited", "limited": {
                "nominalConcurrencyShares": 20, "lendablePercent": 50,
                "limitResponse": {"type": "Queue", "queuing": {
                    "queues": 128, "handSize": 6, "queueLengthLimit": 50}}}})
        );
        assert_eq!(
            fs("probes")["spec"],
            json!({
                "priorityLevelConfiguration": {"name": "exempt"},
                "matchingPrecedence": 2,
                "rules": [{
                    "subjects": [
                        {"kind": "Group", "group": {"name": "system:unauthenticated"}},
                        {"kind": "Group", "group": {"name": "system:authenticated"}},
                    ],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
                }],
            })
        );
        assert_eq!(
            fs("catch-all")["spec"]["rules"][0]["resourceRules"],
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}])
        );
        assert_eq!(
            fs("catch-all")["spec"]["distinguisherMethod"]["type"],
            "ByUser"
        );
        assert!(fs("exempt")["spec"].get("distinguisherMethod").is_none());
        let sle = fs("system-leader-election");
        assert_eq!(
            sle["spec"]["rules"][0]["subjects"][2],
            json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}})
        );
        assert_eq!(
            sle["spec"]["rules"][0]["resourceRules"],
            json!([{"verbs": ["get", "create", "update"], "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"], "namespaces": ["*"]}])
        );
    }

    /// Each object passes what a create of it through the API would check:
    /// the Go type check with strict field validation (no unknown field, so
    /// nothing is pruned), the metadata checks, and the kind's own rules.
    #[test]
    fn objects_pass_the_servers_write_checks() {
        use apimachinery::fieldvalidation::{check, Decoded, FieldValidationLevel};
        for (plural, boots) in [
            ("prioritylevelconfigurations", priority_levels()),
            ("flowschemas", flow_schemas()),
        ] {
            let res = crate::registry::RESOURCES
                .iter()
                .find(|r| r.group == GROUP && r.version == "v1" && r.plural == plural)
                .expect("registry row");
            let ty = res.schema();
            assert!(ty.is_some(), "{plural} has a schema");
            for b in boots {
                let mut obj = b.object.clone();
                crate::object::prepare_create(res, &mut obj, None, "2026-01-01T00:00:00Z");
                if let Some(defaults) = res.rules.defaults {
                    defaults(&mut obj);
                }
                if let Some(prepare) = res.rules.prepare_create {
                    prepare(&mut obj);
                }
                let decoded = Decoded {
                    value: obj.clone(),
                    duplicates: Vec::new(),
                };
                let warnings = check(FieldValidationLevel::Strict, ty, &decoded)
                    .unwrap_or_else(|e| panic!("{obj}: {e:?}"));
                assert!(warnings.is_empty(), "{obj}: {warnings:?}");
                let mut pruned = obj.clone();
                crate::object::prune_unknown_fields(ty.unwrap(), &mut pruned);
                assert_eq!(pruned, obj);
                assert!(crate::object::validate_meta(res, &obj).is_empty(), "{obj}");
                if let Some(validate) = res.rules.validate {
                    assert!(validate(&obj, None).is_empty(), "{obj}");
                }
            }
        }
    }

    fn stored(object: &Value, annotation: Option<&str>, generation: i64) -> Value {
        let mut o = object.clone();
        o["metadata"]["generation"] = json!(generation);
        match annotation {
            Some(a) => o["metadata"]["annotations"][AUTO_UPDATE] = json!(a),
            None => {
                o["metadata"].as_object_mut().unwrap().remove("annotations");
            }
        }
        o
    }

    #[test]
    fn revise_follows_kubes_ensurer() {
        let boot = priority_levels().remove(2).object; // system
        let mut edited = boot.clone();
        edited["spec"]["limited"]["nominalConcurrencyShares"] = json!(7);

        // Unchanged and annotated true: nothing to do.
        assert_eq!(revise(&stored(&boot, Some("true"), 3), &boot, false), None);
        // Suggested, annotated true: the spec comes back.
        let r = revise(&stored(&edited, Some("true"), 2), &boot, false).unwrap();
        assert_eq!(r["spec"], boot["spec"]);
        assert_eq!(r["metadata"]["generation"], 2);
        // Suggested, annotated false: the operator's spec stays.
        assert_eq!(
            revise(&stored(&edited, Some("false"), 2), &boot, false),
            None
        );
        // Mandatory, annotated false: spec and annotation are both reset.
        let r = revise(&stored(&edited, Some("false"), 2), &boot, true).unwrap();
        assert_eq!(r["spec"], boot["spec"]);
        assert_eq!(r["metadata"]["annotations"][AUTO_UPDATE], "true");
        // No annotation, never edited (generation 1): updated and annotated.
        let r = revise(&stored(&edited, None, 1), &boot, false).unwrap();
        assert_eq!(r["spec"], boot["spec"]);
        assert_eq!(r["metadata"]["annotations"][AUTO_UPDATE], "true");
        // No annotation, edited: the spec stays, the annotation says false.
        let r = revise(&stored(&edited, None, 2), &boot, false).unwrap();
        assert_eq!(r["spec"], edited["spec"]);
        assert_eq!(r["metadata"]["annotations"][AUTO_UPDATE], "false");
        // Go's ParseBool spellings count; a "TRUE" that matches is left.
        assert_eq!(revise(&stored(&boot, Some("TRUE"), 4), &boot, false), None);
        // An unreadable value is rewritten.
        let r = revise(&stored(&boot, Some("yes"), 1), &boot, false).unwrap();
        assert_eq!(r["metadata"]["annotations"][AUTO_UPDATE], "true");
    }
}
