use super::names::requested_names;
use super::*;
use crate::registry::cel as rules;
use serde_json::json;
use std::cmp::Ordering;

fn crd(group: &str, plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind, "shortNames": ["wd"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {
                     "specReplicasPath": ".spec.replicas",
                     "statusReplicasPath": ".status.replicas",
                     "labelSelectorPath": ".status.selector"}},
                 "selectableFields": [{"jsonPath": ".spec.color"}],
                 "additionalPrinterColumns": [
                     {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "properties": {
                         "replicas": {"type": "integer"}, "color": {"type": "string"}}}}}}},
                {"name": "v2alpha1", "served": false, "storage": false}
            ]
        }
    })
}

#[test]
fn versions_sort_by_kube_priority() {
    let mut v = vec![
        "v1alpha1",
        "foo",
        "v2",
        "v1beta2",
        "v1",
        "v11alpha2",
        "v1beta1",
        "bar",
    ];
    v.sort_by(|a, b| version_order(a, b));
    assert_eq!(
        v,
        [
            "v2",
            "v1",
            "v1beta2",
            "v1beta1",
            "v11alpha2",
            "v1alpha1",
            "bar",
            "foo"
        ]
    );
    assert_eq!(version_order("v1", "v1"), Ordering::Equal);
}

#[test]
fn rows_follow_the_served_versions_and_are_interned() {
    let c = crd("example.com", "widgets", "Widget");
    let r = rows(&c);
    assert_eq!(
        r.iter().map(|r| r.version.to_string()).collect::<Vec<_>>(),
        ["v1", "v1beta1"]
    );
    let v1 = &r[0];
    assert_eq!(
        (&*v1.group, &*v1.kind, &*v1.plural, &*v1.singular),
        ("example.com", "Widget", "widgets", "widget")
    );
    assert!(v1.namespaced && v1.generation);
    assert_eq!(&*v1.short_names, ["wd"]);
    assert!(v1.has_status());
    match v1.subresource("scale") {
        Some(Subresource::Scale {
            spec_replicas,
            status_replicas,
            selector,
            ..
        }) => {
            assert_eq!(
                (&**spec_replicas, &**status_replicas, &**selector),
                ("/spec/replicas", "/status/replicas", "/status/selector")
            );
        }
        other => panic!("no scale: {other:?}"),
    }
    assert_eq!(v1.field_attrs[0].name, "spec.color");
    assert_eq!(v1.field_attrs[0].pointer, "/spec/color");
    let info = v1.custom.as_ref().unwrap();
    assert_eq!(info.storage_version, "v1");
    assert_eq!(info.columns[0].name, "Replicas");
    let schema = v1.schema().unwrap();
    assert_eq!(schema.name(), Some("com.example.v1.Widget"));
    assert!(schema.path(&["spec", "replicas"]).is_some());
    assert!(schema.path(&["metadata", "labels"]).is_some());
    // Without printer columns: kube's Age column.
    assert_eq!(r[1].custom.as_ref().unwrap().columns[0].name, "Age");
    // While they live, the same definition gives the same rows.
    let again = rows(&c);
    assert!(Shared::ptr_eq(&again[0], &r[0]));
}

#[test]
fn rows_are_freed_with_their_last_holder() {
    let mut c = crd("freed.example.com", "gadgets", "Gadget");
    c["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object",
            "x-kubernetes-validations": [{"rule": "has(self.spec)"}],
            "properties": {"spec": {"type": "object"}}}}}]);
    let r = rows(&c);
    let Shared::Owned(row) = &r[0] else {
        panic!("a CRD's row is not static")
    };
    let (row, info) = (
        std::sync::Arc::downgrade(row),
        std::sync::Arc::downgrade(r[0].custom.as_ref().unwrap()),
    );
    let held = r[0].clone();
    drop(r);
    assert!(row.upgrade().is_some(), "a holder keeps the row");
    drop(held);
    assert!(row.upgrade().is_none(), "the row outlived its holders");
    assert!(
        info.upgrade().is_none(),
        "the schema and CEL programs outlived the row"
    );
    // Built again from scratch, not from a stale entry.
    let again = rows(&c);
    assert_eq!(again[0].custom.as_ref().unwrap().storage_version, "v1");
}

#[test]
fn names_conflict_with_other_crds_of_the_group_and_builtins() {
    let a = crd("example.com", "widgets", "Widget");
    let mut accepted = a.clone();
    accepted["status"] = json!({"acceptedNames": requested_names(&a)});
    // Another CRD that wants the same plural under a different name.
    let mut b = crd("example.com", "widgets", "Gadget");
    b["metadata"]["name"] = json!("widgets2.example.com");
    b["spec"]["names"]["shortNames"] = json!([]);
    let r = accepted_names(&b, std::iter::once(&accepted), &[]);
    assert!(!r.accepted);
    assert_eq!(r.reason, "PluralConflict");
    assert_eq!(r.message, "\"widgets\" is already in use");
    // No conflict in another group.
    let c = crd("other.io", "widgets", "Widget");
    let r = accepted_names(&c, std::iter::once(&accepted), &[]);
    assert!(r.accepted, "{r:?}");
    assert_eq!(r.reason, "NoConflicts");
    assert_eq!(r.names["listKind"], "WidgetList");
    // A built-in kind of the group.
    let d = crd("apps", "things", "Deployment");
    let r = accepted_names(
        &d,
        std::iter::empty(),
        &[("deployments", "deployment", &["deploy"], "Deployment")],
    );
    // Kind and listKind both clash; as in kube, the last check names it.
    assert_eq!((r.accepted, r.reason), (false, "ListKindConflict"));
}

#[test]
fn status_becomes_established_and_records_the_storage_version() {
    let c = crd("example.com", "widgets", "Widget");
    let acc = accepted_names(&c, std::iter::empty(), &[]);
    let next = status::desired(&c, &acc, "2026-01-01T00:00:00Z").unwrap();
    assert!(condition_true(&next, "NamesAccepted"));
    assert!(condition_true(&next, "Established"));
    assert_eq!(next["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(next["status"]["acceptedNames"]["plural"], "widgets");
    let keys: Vec<&String> = next["status"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["conditions", "acceptedNames", "storedVersions"]);
    // Level-triggered: nothing left to write.
    assert_eq!(
        status::desired(
            &next,
            &accepted_names(&next, std::iter::empty(), &[]),
            "later"
        ),
        None
    );
    // Deleting adds Terminating.
    let mut gone = next.clone();
    gone["metadata"]["deletionTimestamp"] = json!("2026-01-02T00:00:00Z");
    let t = status::desired(&gone, &accepted_names(&gone, std::iter::empty(), &[]), "x").unwrap();
    assert!(condition_true(&t, "Terminating"));
}

#[test]
fn rules_that_cost_too_much_or_do_not_compile_are_refused() {
    let schema = |rule: &str, max_items: Option<u64>| {
        let mut list = json!({"type": "array", "items": {"type": "string"}});
        if let Some(m) = max_items {
            list["maxItems"] = json!(m);
            list["items"]["maxLength"] = json!(64);
        }
        apimachinery::crd::Structural::from_json(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": rule}],
                "properties": {"list": list}}}
        }))
        .unwrap()
    };
    let nested = "self.list.all(x, self.list.all(y, x == y))";
    let errs = rules::definition_errors(
        "spec.validation.openAPIV3Schema",
        &schema(nested, None),
        &Default::default(),
        false,
    );
    // The rule, its share of the total, and the total.
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert_eq!(
        errs[0].field,
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    );
    assert_eq!(
        errs[0].message,
        "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
    // Bounded by the schema, the same rule fits.
    assert!(
        rules::definition_errors("s", &schema(nested, Some(10)), &Default::default(), false)
            .is_empty()
    );
    let errs = rules::definition_errors(
        "s",
        &schema("self.list.size( > 1", None),
        &Default::default(),
        false,
    );
    assert!(errs[0].message.contains("compilation failed"), "{errs:?}");
}

/// kube's `validation_test.go` cases on rule costs: a rule under lists
/// and maps counts once per possible occurrence, and the sum over the
/// schema has a limit of its own.
#[test]
fn rule_costs_count_per_occurrence_and_in_total() {
    let base = "spec.validation.openAPIV3Schema";
    let errors = |schema: serde_json::Value| {
        let st = apimachinery::crd::Structural::from_json(&schema).unwrap();
        rules::definition_errors(base, &st, &Default::default(), false)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect::<Vec<_>>()
    };
    let nested = |key: serde_json::Value, max_items: Option<u64>, max_props: Option<u64>| {
        let mut items = json!({"type": "object", "additionalProperties": {
            "type": "object", "required": ["key"], "properties": {"key": key}}});
        if let Some(m) = max_props {
            items["maxProperties"] = json!(m);
        }
        let mut value = json!({"type": "array", "items": items, "x-kubernetes-validations": [
            {"rule": "self.all(x, x.all(y, x[y].key == x[y].key))"}]});
        if let Some(m) = max_items {
            value["maxItems"] = json!(m);
        }
        json!({"type": "object", "properties": {"value": value}})
    };
    let rule = format!("{base}.properties[value].x-kubernetes-validations[0].rule");
    for schema in [
        nested(json!({"type": "string"}), None, None),
        nested(json!({"type": "string", "maxLength": 10}), None, None),
    ] {
        let errs = errors(schema);
        let fields: Vec<&str> = errs.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, [rule.as_str(), rule.as_str(), base], "{errs:?}");
        assert_eq!(
            errs[1].1,
            "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
        );
        assert!(
            errs[2].1.starts_with(
                "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of "
            ),
            "{errs:?}"
        );
    }
    let bounded = nested(
        json!({"type": "string", "maxLength": 10}),
        Some(10),
        Some(10),
    );
    assert_eq!(errors(bounded), []);
    assert_eq!(errors(nested(json!({"type": "number"}), Some(4), None)), []);
    let rooted = json!({"type": "object", "properties": {"value": {"type": "integer",
        "x-kubernetes-validations": [{"rule": "self < 1024"}]}}});
    assert_eq!(errors(rooted), []);

    // 2001 per item: 200.1M for 100000 list items (over the rule limit
    // and the total's), 2.001M for 1000 map values (1% of the total's).
    let keyword = json!([{"rule": "self.contains('keyword')"}]);
    let total = json!({"type": "object", "properties": {
        "list": {"type": "array", "maxItems": 100000, "items": {"type": "string",
            "maxLength": 5000, "x-kubernetes-validations": keyword}},
        "map": {"type": "object", "maxProperties": 1000, "additionalProperties": {
            "type": "string", "maxLength": 5000, "x-kubernetes-validations": keyword}},
        "field": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 50 && self < 100"}]},
    }});
    let list = format!("{base}.properties[list].items.x-kubernetes-validations[0].rule");
    let map =
        format!("{base}.properties[map].additionalProperties.x-kubernetes-validations[0].rule");
    let contributed = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema";
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        errors(total),
        [
            (list.clone(), format!("Forbidden: estimated rule cost exceeds budget by factor of 20.0x {hint}")),
            (list, contributed.to_owned()),
            (map, contributed.to_owned()),
            (base.to_owned(), format!("Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 2.0x {hint}")),
        ]
    );
}

#[test]
fn rules_at_the_schema_root_run() {
    let mut c = crd("rooted.example.com", "roots", "Root");
    c["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object",
            "x-kubernetes-validations": [{"rule": "has(self.spec)", "message": "spec is required"}],
            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]);
    let r = rows(&c);
    let info = r[0].custom.as_ref().unwrap();
    let obj =
        json!({"apiVersion": "rooted.example.com/v1", "kind": "Root", "metadata": {"name": "x"}});
    let errs = info.validate(&obj, None);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        errs[0].message,
        "Invalid value: \"object\": spec is required"
    );
    let ok = json!({"apiVersion": "rooted.example.com/v1", "kind": "Root", "metadata": {"name": "x"}, "spec": {}});
    assert!(info.validate(&ok, None).is_empty());
}

/// Each CRD's rows compile their own schema: replacing one CRD's schema
/// changes its validation and no other's, and rows still held keep the
/// schema they were built with.
#[test]
fn crd_schemas_stay_independent() {
    let with_max = |group: &str, max: i64| {
        let mut c = crd(group, "knobs", "Knob");
        c["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object",
                    "x-kubernetes-validations": [{"rule": "self.level != 7", "message": "not seven"}],
                    "properties": {"level": {"type": "integer", "maximum": max}}}}}}}]);
        c
    };
    let errors = |r: &Row, level: i64| {
        r.custom
            .as_ref()
            .unwrap()
            .validate(&json!({"spec": {"level": level}}), None)
            .into_iter()
            .map(|c| c.message)
            .collect::<Vec<_>>()
    };
    let a = rows(&with_max("a.indep.example.com", 5));
    let b = rows(&with_max("b.indep.example.com", 5));
    assert_eq!(errors(&a[0], 6).len(), 1);
    assert_eq!(errors(&b[0], 6).len(), 1);
    assert_eq!(errors(&b[0], 7).len(), 2, "schema and CEL errors");

    let a2 = rows(&with_max("a.indep.example.com", 50));
    assert!(!Shared::ptr_eq(&a2[0], &a[0]));
    assert!(errors(&a2[0], 6).is_empty(), "the new schema is in force");
    assert_eq!(errors(&a2[0], 7), ["Invalid value: \"object\": not seven"]);
    assert_eq!(errors(&b[0], 6).len(), 1, "another CRD's schema changed");
    assert_eq!(errors(&a[0], 6).len(), 1, "held rows changed schema");
    // B's rows compiled before A changed, A's after: the same answers as
    // rows built afresh.
    let b2 = rows(&with_max("b.indep.example.com", 5));
    assert!(Shared::ptr_eq(&b2[0], &b[0]), "an unchanged CRD is rebuilt");
    assert_eq!(errors(&b2[0], 6).len(), 1);
}
