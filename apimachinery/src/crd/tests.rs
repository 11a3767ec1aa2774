//! Kube-shaped CRDs and custom resources through validation, pruning and
//! defaulting, with kube's messages; property tests for robustness.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::validation::cause_to_string;

fn crd_with_versions(versions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": versions
        }
    })
}

fn crd(schema: Value) -> Value {
    crd_with_versions(json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}
    ]))
}

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "image": {"type": "string", "minLength": 1, "maxLength": 20, "pattern": "^[a-z]+$"},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                    "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "multipleOf": 0.5},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "size": {"type": "integer", "enum": [1, 2]},
                    "when": {"type": "string", "format": "date-time"},
                    "note": {"type": "string", "nullable": true},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "maxItems": 3, "minItems": 1,
                             "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"},
                                  "port": {"type": "integer"},
                                  "protocol": {"type": "string", "default": "TCP"}}}},
                    "labels": {"type": "object", "maxProperties": 2,
                               "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "x-kubernetes-preserve-unknown-fields": true},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                    "choice": {"type": "object",
                               "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
                               "oneOf": [{"required": ["x"]}, {"required": ["y"]}]},
                    "nope": {"type": "string", "not": {"enum": ["forbidden"]}}
                }
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }
    })
}

fn widget() -> Structural {
    Structural::from_json(&widget_schema()).unwrap()
}

fn msgs(causes: &[StatusCause]) -> Vec<String> {
    causes.iter().map(cause_to_string).collect()
}

fn cr(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

// ---------------------------------------------------------------------------
// Custom resource validation.

#[test]
fn valid_widget_has_no_errors() {
    let v = cr(json!({
        "image": "nginx", "replicas": 3, "ratio": 1.5, "mode": "a", "size": 2,
        "when": "2024-01-02T03:04:05Z", "note": null, "port": "http",
        "tags": ["a", "b"], "ports": [{"name": "http", "port": 80}, {"name": "https"}],
        "labels": {"a": "b"},
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
        "choice": {"x": "1"}, "nope": "fine"
    }));
    assert_eq!(msgs(&validate(&widget(), &v)), Vec::<String>::new());
    let validator = SchemaValidator::new(widget());
    assert!(validator.validate(&v).is_empty());
    assert_eq!(validator.validate(&cr(json!({}))).len(), 1);
}

#[test]
fn wrong_type_reads_like_kube() {
    let errs = validate(&widget(), &cr(json!({"image": "a", "replicas": "3"})));
    assert_eq!(
        msgs(&errs),
        vec![
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        ]
    );
    assert_eq!(errs[0].reason, "FieldValueTypeInvalid");
    // An integral float is an integer; null is not unless nullable.
    assert!(validate(&widget(), &cr(json!({"image": "a", "replicas": 2.0}))).is_empty());
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "replicas": null}))
        )),
        vec![
            r#"spec.replicas: Invalid value: "null": spec.replicas in body must be of type integer: "null""#
        ]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "port": true}))
        )),
        vec![
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
        ]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "ratio": "x"}))
        )),
        vec![
            r#"spec.ratio: Invalid value: "string": spec.ratio in body must be of type number: "string""#
        ]
    );
}

#[test]
fn required_and_enum() {
    let errs = validate(&widget(), &cr(json!({"mode": "x", "size": 3})));
    assert_eq!(
        msgs(&errs),
        vec![
            r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#,
            r#"spec.size: Unsupported value: 3: supported values: "1", "2""#,
            "spec.image: Required value",
        ]
    );
    assert_eq!(errs[0].reason, "FieldValueNotSupported");
    assert_eq!(errs[2].reason, "FieldValueRequired");
}

#[test]
fn string_rules() {
    assert_eq!(
        msgs(&validate(&widget(), &cr(json!({"image": ""})))),
        vec![
            r#"spec.image: Invalid value: "": spec.image in body should be at least 1 chars long"#,
            r#"spec.image: Invalid value: "": spec.image in body should match '^[a-z]+$'"#,
        ]
    );
    assert_eq!(
        msgs(&validate(&widget(), &cr(json!({"image": "a".repeat(21)})))),
        vec!["spec.image: Too long: may not be more than 20 bytes"]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "when": "yesterday"}))
        )),
        vec![
            r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#
        ]
    );
}

#[test]
fn number_rules() {
    assert_eq!(
        msgs(&validate(&widget(), &cr(json!({"image": "a", "replicas": 11})))),
        vec!["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]
    );
    assert_eq!(
        msgs(&validate(&widget(), &cr(json!({"image": "a", "replicas": -1})))),
        vec!["spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"]
    );
    assert_eq!(
        msgs(&validate(&widget(), &cr(json!({"image": "a", "ratio": 0})))),
        vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "ratio": 0.75}))
        )),
        vec!["spec.ratio: Invalid value: 0.75: spec.ratio in body should be a multiple of 0.5"]
    );
}

#[test]
fn array_and_object_counts() {
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "tags": ["a", "b", "c", "d"]}))
        )),
        vec!["spec.tags: Too many: 4: must have at most 3 items"]
    );
    assert_eq!(
        msgs(&validate(&widget(), &cr(json!({"image": "a", "tags": []})))),
        vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "labels": {"a": "1", "b": "2", "c": "3"}}))
        )),
        vec!["spec.labels: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "labels": {"a": 1}}))
        )),
        vec![
            r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#
        ]
    );
}

#[test]
fn array_items_use_kube_openapi_paths() {
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "ports": [{"name": "a", "port": "x"}, {}]}))
        )),
        vec![
            r#"spec.ports.0.port: Invalid value: "string": spec.ports.0.port in body must be of type integer: "string""#,
            "spec.ports.1.name: Required value",
        ]
    );
}

#[test]
fn list_types_report_duplicates() {
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "tags": ["a", "b", "a"]}))
        )),
        vec![r#"spec.tags[2]: Duplicate value: "a""#]
    );
    let errs = validate(
        &widget(),
        &cr(
            json!({"image": "a", "ports": [{"name": "http"}, {"name": "x"}, {"name": "http", "port": 1}]}),
        ),
    );
    assert_eq!(
        msgs(&errs),
        vec![r#"spec.ports[2]: Duplicate value: map[string]interface {}{"name":"http"}"#]
    );
    assert_eq!(errs[0].reason, "FieldValueDuplicate");
}

#[test]
fn embedded_resources_need_type_meta() {
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "template": {"metadata": {"name": "Bad/Name"}}}))
        )),
        vec![
            "spec.template.apiVersion: Required value",
            "spec.template.kind: Required value",
            r#"spec.template.metadata.name: Invalid value: "Bad/Name": may not contain '/'"#,
        ]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "template": {"apiVersion": "a/b/c", "kind": "Pod_X"}}))
        )),
        vec![
            r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            r#"spec.template.kind: Invalid value: "Pod_X": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
        ]
    );
}

#[test]
fn logical_junctors() {
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "choice": {"x": "1", "y": "2"}}))
        )),
        vec![
            r#"<nil>: Invalid value: "": "spec.choice" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "choice": {}}))
        )),
        vec![
            r#"<nil>: Invalid value: "": "spec.choice" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.choice.x: Required value",
        ]
    );
    assert_eq!(
        msgs(&validate(
            &widget(),
            &cr(json!({"image": "a", "nope": "forbidden"}))
        )),
        vec![r#"<nil>: Invalid value: "": "spec.nope" must not validate the schema (not)"#]
    );
    let s = Structural::from_json(&json!({"type": "object", "properties": {"v": {
        "type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}],
        "allOf": [{"minLength": 2}]}}}))
    .unwrap();
    assert_eq!(
        msgs(&validate(&s, &json!({"v": "c"}))),
        vec![
            r#"<nil>: Invalid value: "": "v" must validate at least one schema (anyOf)"#,
            r#"v: Invalid value: "c": v in body should match '^a'"#,
            r#"v: Invalid value: "c": v in body should be at least 2 chars long"#,
            r#"<nil>: Invalid value: "": "v" must validate all the schemas (allOf). None validated"#,
        ]
    );
}

#[test]
fn object_counts_stop_the_object_and_bounds_print_like_go() {
    let s = Structural::from_json(&json!({"type": "object", "properties": {
        "o": {"type": "object", "minProperties": 2, "required": ["z"],
              "properties": {"a": {"type": "integer"}}},
        "big": {"type": "integer", "maximum": 1000000},
        "f": {"type": "number", "maximum": 1000000},
        "strict": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}
    }}))
    .unwrap();
    assert_eq!(
        msgs(&validate(
            &s,
            &json!({"o": {"a": "x"}, "big": 1000001, "f": 1000000.5, "strict": {"b": 1}})
        )),
        vec![
            "big: Invalid value: 1000001: big in body should be less than or equal to 1000000",
            "f: Invalid value: 1.0000005e+06: f in body should be less than or equal to 1e+06",
            "o: Invalid value: 1: o in body should have at least 2 properties",
            r#"strict: Invalid value: "b": strict.b in body is a forbidden property"#,
        ]
    );
}

#[test]
fn formats_take_part_in_the_type_check() {
    let s = Structural::from_json(&json!({"type": "object", "properties": {
        "n": {"type": "integer", "format": "int32"},
        "d": {"type": "string", "format": "date"},
        "q": {"type": "string", "format": "quantity"},
        "c": {"type": "string", "format": "colour"}
    }}))
    .unwrap();
    assert_eq!(
        msgs(&validate(
            &s,
            &json!({"n": 1.5, "d": 3, "q": "lots", "c": 3})
        )),
        vec![
            r#"c: Invalid value: "integer": c in body must be of type string: "integer""#,
            r#"d: Invalid value: "int64": d in body must be of type date: "int64""#,
            r#"n: Invalid value: "double": n in body must be of type int32: "double""#,
            r#"q: Invalid value: "lots": q in body must be of type quantity: "lots""#,
        ]
    );
    assert!(validate(
        &s,
        &json!({"n": 7, "d": "2024-02-29", "q": "1Gi", "c": "red"})
    )
    .is_empty());
}

#[test]
fn list_sets_and_maps_compare_like_go() {
    let s = Structural::from_json(&json!({"type": "object", "properties": {
        "nums": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "number"}},
        "objs": {"type": "array", "x-kubernetes-list-type": "set",
                 "items": {"type": "object", "x-kubernetes-map-type": "atomic",
                           "x-kubernetes-preserve-unknown-fields": true}},
        "m": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
              "items": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}},
        "one": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
                "items": {"type": "object", "nullable": true, "properties": {"a": {"type": "string"}}}}
    }}))
    .unwrap();
    assert_eq!(
        msgs(&validate(
            &s,
            &json!({
                "nums": [1, 1.0, 2, 2, 2],
                "objs": [{"x": 1, "y": 2}, {"y": 2, "x": 1}],
                "m": [{"a": "x", "b": 1}, {"a": "x"}, {"b": 1, "a": "x"}],
                "one": [null, {}, {"a": "k"}],
                "bad": 1
            })
        )),
        vec![
            "nums[3]: Duplicate value: 2",
            r#"objs[1]: Duplicate value: map[string]interface {}{"x":1, "y":2}"#,
            r#"m[2]: Duplicate value: map[string]interface {}{"a":"x", "b":1}"#,
            "one[1]: Duplicate value: map[string]interface {}{}",
        ]
    );
    assert_eq!(
        msgs(&validate(&s, &json!({"m": [{"a": "x", "b": 1}, "str"]}))),
        vec![
            r#"m.1: Invalid value: "string": m.1 in body must be of type object: "string""#,
            r#"m[1]: Invalid value: "str": must be an object for an array of list-type map"#,
        ]
    );
}

#[test]
fn scale_paths_hold_int32_replicas() {
    let scale = json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                       "labelSelectorPath": ".status.selector"});
    assert!(validate_scale(&scale, &json!({"spec": {"replicas": 3}})).is_empty());
    assert_eq!(
        msgs(&validate_scale(
            &scale,
            &json!({"spec": {"replicas": -1}, "status": {"replicas": "x", "selector": {"a": 1}}})
        )),
        vec![
            ".spec.replicas: Invalid value: -1: should be a non-negative integer",
            ".status.replicas: Invalid value: 0: .status.replicas accessor error: x is of the type string, expected int64",
            r#".status.selector: Invalid value: "": .status.selector accessor error: map[a:1] is of the type map[string]interface {}, expected string"#,
        ]
    );
    assert_eq!(
        msgs(&validate_scale(
            &scale,
            &json!({"spec": {"replicas": 3000000000i64}})
        )),
        vec![
            ".spec.replicas: Invalid value: 3000000000: should be less than or equal to 2147483647"
        ]
    );
}

#[test]
fn root_map_values_keep_kube_openapi_names() {
    let s = Structural::from_json(
        &json!({"type": "object", "additionalProperties": {"type": "integer"}}),
    )
    .unwrap();
    assert_eq!(
        msgs(&validate(&s, &json!({"a": "x"}))),
        vec![r#"a: Invalid value: "string": .a in body must be of type integer: "string""#]
    );
    // A nullable field with an enum still has to list null, as in kube.
    let s = Structural::from_json(&json!({"type": "object", "properties": {
        "e": {"type": "string", "nullable": true, "enum": ["a"]}}}))
    .unwrap();
    assert_eq!(
        msgs(&validate(&s, &json!({"e": null}))),
        vec![r#"e: Unsupported value: null: supported values: "a""#]
    );
}

#[test]
fn updates_ratchet_unchanged_values() {
    // Stored before `image` got its pattern and `ports` their rules.
    let old = cr(
        json!({"image": "Old_Image", "ports": [{"name": "a", "port": "80"}, {"name": "b"}],
                        "labels": {"x": "1", "y": "2", "z": "3"}}),
    );
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"touched": "yes"});
    assert!(validate_update(&widget(), &new, &old).is_empty());
    assert_eq!(validate(&widget(), &new).len(), 3);
    // A changed value is validated; list-map items correlate by key.
    new["spec"]["ports"] = json!([{"name": "b", "port": "x"}, {"name": "a", "port": "80"}]);
    new["spec"]["image"] = json!("New_Image");
    assert_eq!(
        msgs(&validate_update(&widget(), &new, &old)),
        vec![
            r#"spec.image: Invalid value: "New_Image": spec.image in body should match '^[a-z]+$'"#,
            r#"spec.ports.0.port: Invalid value: "string": spec.ports.0.port in body must be of type integer: "string""#,
        ]
    );
    let validator = SchemaValidator::new(widget());
    assert_eq!(validator.validate_update(&new, &old).len(), 2);
}

// ---------------------------------------------------------------------------
// Pruning and defaulting.

#[test]
fn pruning_removes_unknown_fields_and_reports_them() {
    let mut v = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "whatever": 1},
        "top": 1,
        "spec": {
            "image": "a", "extra": {"x": 1},
            "ports": [{"name": "a", "junk": true}],
            "labels": {"k": "v"},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"any": 1}},
            "free": {"anything": [1], "known": {"a": "x", "b": "y"}}
        },
        "status": {"ready": true, "gone": 1}
    });
    let pruned = prune(&widget(), &mut v);
    assert_eq!(
        pruned,
        vec![
            "spec.extra",
            "spec.free.known.b",
            "spec.ports[0].junk",
            "status.gone",
            "top"
        ]
    );
    assert_eq!(
        v,
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "whatever": 1},
            "spec": {
                "image": "a", "ports": [{"name": "a"}], "labels": {"k": "v"},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"any": 1}},
                "free": {"anything": [1], "known": {"a": "x"}}
            },
            "status": {"ready": true}
        })
    );
    assert!(prune(&widget(), &mut v).is_empty());
    assert_eq!(
        unknown_field_message(&pruned[0]),
        r#"unknown field "spec.extra""#
    );
}

#[test]
fn embedded_resources_keep_type_and_object_meta() {
    let s = Structural::from_json(&json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"inner": {"type": "object",
            "x-kubernetes-embedded-resource": true,
            "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}}}))
    .unwrap();
    let mut v = json!({"spec": {"inner": {"apiVersion": "v1", "kind": "X", "metadata": {"name": "n"},
                                          "spec": {"a": "1", "b": 2}, "other": 3}}});
    assert_eq!(
        prune(&s, &mut v),
        vec!["spec.inner.other", "spec.inner.spec.b"]
    );
    assert_eq!(
        v,
        json!({"spec": {"inner": {"apiVersion": "v1", "kind": "X", "metadata": {"name": "n"}, "spec": {"a": "1"}}}})
    );
}

#[test]
fn defaulting_fills_list_map_items() {
    let mut v = cr(json!({"image": "a", "ports": [{"name": "x"}]}));
    default(&widget(), &mut v);
    assert_eq!(v["spec"]["replicas"], json!(1));
    assert_eq!(v["spec"]["ports"][0]["protocol"], json!("TCP"));
}

// ---------------------------------------------------------------------------
// CRD validation.

#[test]
fn valid_crd_has_no_errors() {
    assert_eq!(
        msgs(&validate_crd(&crd(widget_schema()), None)),
        Vec::<String>::new()
    );
}

#[test]
fn crd_name_must_be_plural_dot_group() {
    let mut c = crd(widget_schema());
    c["metadata"]["name"] = json!("foo.example.com");
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            r#"metadata.name: Invalid value: "foo.example.com": must be spec.names.plural+"."+spec.group"#
        ]
    );
    c["metadata"]["name"] = json!("");
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec!["metadata.name: Required value: name or generateName is required"]
    );
}

#[test]
fn crd_group_and_scope() {
    let mut c = crd(widget_schema());
    c["metadata"]["name"] = json!("widgets.example");
    c["spec"]["group"] = json!("example");
    c["spec"]["scope"] = json!("Global");
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#,
            r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#,
        ]
    );
}

#[test]
fn crd_names() {
    let mut c = crd(widget_schema());
    c["spec"]["names"] = json!({"plural": "widgets", "singular": "", "kind": "Bad_Kind",
                                "listKind": "Bad_Kind", "shortNames": ["W"]});
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(m[0], "spec.names.singular: Required value");
    assert!(m[1].starts_with(r#"spec.names.kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 label"#), "{}", m[1]);
    assert!(
        m[2].starts_with(r#"spec.names.listKind: Invalid value: "Bad_Kind": may have mixed case"#)
    );
    assert!(m[3].starts_with(r#"spec.names.shortNames[0]: Invalid value: "W": a DNS-1035 label"#));
    assert_eq!(
        m[4],
        r#"spec.names.listKind: Invalid value: "Bad_Kind": kind and listKind may not be the same"#
    );
    assert_eq!(m.len(), 5);
}

#[test]
fn crd_versions() {
    let c = crd_with_versions(json!([
        {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": widget_schema()}},
        {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": widget_schema()}}
    ]));
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(m.len(), 2);
    assert!(
        m[0].starts_with("spec.versions: Invalid value: ")
            && m[0].ends_with(": must contain unique version names")
    );
    assert!(m[1].ends_with(": must have exactly one version marked as storage version"));
    let c = crd_with_versions(json!([]));
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(m, vec!["spec.versions: Invalid value: []interface {}{}: must have exactly one version marked as storage version"]);
    let c = crd_with_versions(json!([{"name": "V1", "served": true, "storage": true}]));
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(
        m[0],
        "spec.versions[0].schema.openAPIV3Schema: Required value"
    );
    assert!(m[1].starts_with(r#"spec.versions[0].name: Invalid value: "V1": a DNS-1035 label"#));
}

#[test]
fn structural_errors_are_reported_where_the_schema_is() {
    let bad = json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}});
    // One schema for all versions is validated once, as spec.validation.
    assert_eq!(
        msgs(&validate_crd(&crd(bad.clone()), None)),
        vec!["spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"]
    );
    assert_eq!(
        schema_field_path(&crd(bad.clone()), 0),
        "spec.validation.openAPIV3Schema"
    );
    let c = crd_with_versions(json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": bad}},
        {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": widget_schema()}}
    ]));
    assert_eq!(
        schema_field_path(&c, 1),
        "spec.versions[1].schema.openAPIV3Schema"
    );
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec!["spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"]
    );
}

#[test]
fn structural_family() {
    let m = msgs(&validate_crd(
        &crd(json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "spec": {"type": "object",
                     "properties": {"a": {"type": "string"}},
                     "anyOf": [{"type": "object", "properties": {"b": {"description": "x"}}}]},
            "list": {"type": "array"},
            "e": {"type": "object", "x-kubernetes-embedded-resource": true}
        }})),
        None,
    ));
    assert_eq!(
        m,
        vec![
            "spec.validation.openAPIV3Schema.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            "spec.validation.openAPIV3Schema.properties[list].items: Required value: must be specified",
            "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            "spec.validation.openAPIV3Schema.properties[spec].anyOf[0].properties[b].description: Forbidden: must be empty to be structural",
            "spec.validation.openAPIV3Schema.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
        ]
    );
    // Completeness is checked for the junctors of the root, as in kube.
    let m = msgs(&validate_crd(
        &crd(
            json!({"type": "object", "properties": {"spec": {"type": "object"}},
                    "oneOf": [{"required": ["spec"]}, {"properties": {"status": {"required": ["a"]}}}]}),
        ),
        None,
    ));
    assert_eq!(
        m,
        vec!["spec.validation.openAPIV3Schema.properties[status]: Required value: because it is defined in spec.validation.openAPIV3Schema.oneOf[1].properties[status]"]
    );
    let m = msgs(&validate_crd(
        &crd(json!({"type": "array", "items": {"type": "string"}})),
        None,
    ));
    assert_eq!(
        m,
        vec![
            r#"spec.validation.openAPIV3Schema.type: Invalid value: "array": must be object at the root"#
        ]
    );
    let m = msgs(&validate_crd(&crd(json!({"properties": {}})), None));
    assert_eq!(
        m,
        vec!["spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root"]
    );
}

#[test]
fn int_or_string_patterns_are_structural() {
    let c = crd(json!({"type": "object", "properties": {
        "a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "b": {"x-kubernetes-int-or-string": true,
              "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]},
        "c": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}
    }}));
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec!["spec.validation.openAPIV3Schema.properties[c].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"]
    );
}

#[test]
fn list_map_keys_must_be_scalar_and_required() {
    let c = crd(json!({"type": "object", "properties": {
        "m": {"type": "array", "x-kubernetes-list-type": "map",
              "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "n": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "o", "z"],
              "items": {"type": "object", "required": ["o"], "properties": {
                  "k": {"type": "string"}, "o": {"type": "object"}}}},
        "s": {"type": "array", "x-kubernetes-list-type": "sorted", "items": {"type": "string"}},
        "t": {"type": "string", "x-kubernetes-list-type": "set"}
    }}));
    let p = "spec.validation.openAPIV3Schema.properties";
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            format!("{p}[m].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"),
            format!(r#"{p}[n].items.properties[o].type: Invalid value: "object": must be a scalar type if parent array's x-kubernetes-list-type is map"#),
            format!(r#"{p}[n].x-kubernetes-list-map-keys: Invalid value: []string{{"k", "o", "z"}}: entries must all be names of item properties"#),
            format!("{p}[n].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"),
            format!(r#"{p}[s].x-kubernetes-list-type: Unsupported value: "sorted": supported values: "atomic", "set", "map""#),
            format!(r#"{p}[t].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified"#),
        ]
    );
}

#[test]
fn schema_constructs_kube_forbids() {
    let c = crd(json!({"type": "object", "properties": {
        "a": {"type": "string", "uniqueItems": true},
        "b": {"type": "null"},
        "c": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "d": {"type": "thing"},
        "metadata": {"type": "object", "default": {}},
        "r": {"type": "object", "x-kubernetes-validations": [{"rule": ""}, {"rule": "self.x", "reason": "Nope"}]}
    }}));
    let p = "spec.validation.openAPIV3Schema.properties";
    let m = msgs(&validate_crd(&c, None));
    for want in [
        format!("{p}[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
        format!("{p}[b].type: Forbidden: type cannot be set to null, use nullable as an alternative"),
        format!("{p}[c].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"),
        format!(r#"{p}[d].type: Unsupported value: "thing": supported values: "array", "boolean", "integer", "number", "object", "string""#),
        format!("{p}[metadata].default: Forbidden: must not be set in top-level metadata"),
        format!("{p}[r].x-kubernetes-validations[0].rule: Required value: rule is not specified"),
        format!(r#"{p}[r].x-kubernetes-validations[1].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#),
    ] {
        assert!(m.contains(&want), "missing {want}\nin {m:#?}");
    }
}

#[test]
fn defaults_must_validate_and_be_pruned() {
    let c = crd(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "default": "one"},
            "obj": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}}
        }}}}),
    );
    let p = "spec.validation.openAPIV3Schema.properties[spec].properties";
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            format!("{p}[obj].default: Invalid value: map[string]interface {{}}{{\"a\":\"x\", \"b\":1}}: must not have unknown fields"),
            format!(r#"{p}[replicas].default: Invalid value: "string":  in body must be of type integer: "string""#),
        ]
    );
}

#[test]
fn subresources_columns_and_selectable_fields() {
    let mut c = crd(widget_schema());
    c["spec"]["versions"][0]["subresources"] = json!({"status": {}, "scale": {
        "specReplicasPath": ".replicas", "statusReplicasPath": "status.replicas", "labelSelectorPath": ".x"}});
    c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "", "type": "float", "jsonPath": ".spec.replicas", "format": "percent"},
        {"name": "Age", "type": "date", "jsonPath": ""}
    ]);
    c["spec"]["versions"][0]["selectableFields"] = json!([
        {"jsonPath": ".spec.mode"}, {"jsonPath": ".spec.mode"}, {"jsonPath": ".spec.labels"},
        {"jsonPath": ".spec.missing"}, {"jsonPath": ".metadata.name"}, {"jsonPath": ""}
    ]);
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(
        m,
        vec![
            r#"spec.subresources.scale.specReplicasPath: Invalid value: ".replicas": should be a json path under .spec"#,
            r#"spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a simple json path starting with ."#,
            r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".x": should be a json path under either .spec or .status"#,
            "spec.additionalPrinterColumns[0].name: Required value",
            r#"spec.additionalPrinterColumns[0].type: Invalid value: "float": must be one of boolean,date,integer,number,string"#,
            r#"spec.additionalPrinterColumns[0].format: Invalid value: "percent": must be one of byte,date,date-time,double,float,int32,int64,password"#,
            "spec.additionalPrinterColumns[1].JSONPath: Required value",
            r#"spec.selectableFields[1].jsonPath: Duplicate value: ".spec.mode""#,
            r#"spec.selectableFields[2].jsonPath: Invalid value: ".spec.labels": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
            r#"spec.selectableFields[3].jsonPath: Invalid value: ".spec.missing": is an invalid path: does not refer to a valid field"#,
            r#"spec.selectableFields[4].jsonPath: Invalid value: ".metadata.name": is an invalid path: does not refer to a valid field"#,
            "spec.selectableFields[5].jsonPath: Required value",
        ]
    );
}

#[test]
fn conversion_strategies() {
    let mut c = crd(widget_schema());
    c["spec"]["conversion"] = json!({"strategy": "Webhook"});
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
            "spec.conversion.conversionReviewVersions: Required value",
        ]
    );
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://x", "service": {"name": "s", "namespace": "n"}},
        "conversionReviewVersions": ["v2", "v2"]}});
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            "spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required",
            r#"spec.conversion.conversionReviewVersions[1]: Invalid value: "v2": duplicate version"#,
            r#"spec.conversion.conversionReviewVersions: Invalid value: []string{"v2", "v2"}: must include at least one of v1, v1beta1"#,
        ]
    );
    c["spec"]["conversion"] =
        json!({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}});
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec!["spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook"]
    );
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "http://u:p@x/convert?a=1#f"}, "conversionReviewVersions": ["v1"]}});
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "u:p": user information is not permitted in the URL"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "f": fragments are not permitted in the URL"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "a=1": query parameters are not permitted in the URL"#,
        ]
    );
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"service": {"name": "", "namespace": "ns", "port": 0, "path": "/a//B"}},
        "conversionReviewVersions": ["v1"]}});
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(m[0], "spec.conversion.webhookClientConfig.service.name: Required value: service name is required");
    assert_eq!(m[1], "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive");
    assert_eq!(
        m[2],
        r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/a//B": segment[1] may not be empty"#
    );
    assert!(m[3].starts_with(r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/a//B": segment[2]: a lowercase RFC 1123 subdomain"#));
    assert_eq!(m.len(), 4);
    c["spec"]["conversion"] = json!({"strategy": "Magic"});
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            r#"spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", "Webhook""#
        ]
    );
}

#[test]
fn updates_keep_identity_and_stored_versions() {
    let mut old = crd(widget_schema());
    old["status"] = json!({"storedVersions": ["v1"],
                           "conditions": [{"type": "Established", "status": "True"}]});
    let mut new = old.clone();
    new["spec"]["group"] = json!("other.com");
    new["spec"]["scope"] = json!("Cluster");
    new["metadata"]["name"] = json!("widgets.other.com");
    new["spec"]["versions"][0]["name"] = json!("v2");
    let m = msgs(&validate_crd(&new, Some(&old)));
    assert_eq!(
        m,
        vec![
            r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
            r#"spec.group: Invalid value: "other.com": field is immutable"#,
            r#"status.storedVersions: Invalid value: []string{"v1"}: must have the storage version v2"#,
            r#"status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions"#,
        ]
    );
    let mut fine = old.clone();
    fine["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["extra"] =
        json!({"type": "string"});
    assert!(validate_crd(&fine, Some(&old)).is_empty());
}

#[test]
fn preserve_unknown_fields_must_be_false() {
    let mut c = crd(widget_schema());
    c["spec"]["preserveUnknownFields"] = json!(true);
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema",
            "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ]
    );
    // Stored CRDs that already preserve unknown fields may keep doing so,
    // and keep their non-structural schema.
    let mut plain = crd(json!({"type": "object", "properties": {"spec": {"properties": {}}}}));
    plain["spec"]["preserveUnknownFields"] = json!(true);
    assert!(validate_crd(&plain, Some(&plain)).is_empty());
    plain["spec"]["preserveUnknownFields"] = json!(false);
    assert_eq!(
        msgs(&validate_crd(&plain, Some(&plain))),
        vec!["spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"]
    );
}

#[test]
fn more_schema_rules() {
    let mut c = crd(json!({"type": "object", "nullable": true, "properties": {
        "p": {"type": "string", "pattern": "(a"},
        "q": {"type": "string", "pattern": "[a"},
        "mt": {"type": "object", "x-kubernetes-map-type": "sometimes"},
        "set": {"type": "array", "x-kubernetes-list-type": "set",
                "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                          "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}}},
        "pk": {"type": "string", "x-kubernetes-preserve-unknown-fields": false},
        "r": {"type": "object", "x-kubernetes-validations": [
            {"rule": "a\nb"}, {"rule": "x", "message": " "}, {"rule": "x", "messageExpression": " "},
            {"rule": "x", "fieldPath": ".nope"}]},
        "n": {"type": "object", "anyOf": [{"x-kubernetes-int-or-string": true}]}
    }}));
    c["spec"]["versions"][0]["deprecationWarning"] = json!("old");
    let p = "spec.validation.openAPIV3Schema";
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(
        m,
        vec![
            r#"spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions"#.to_string(),
            format!("{p}.nullable: Forbidden: nullable cannot be true at the root"),
            format!("{p}.properties[n].anyOf[0].x-kubernetes-int-or-string: Forbidden: must be false to be structural"),
            format!("{p}.properties[p].pattern: Invalid value: \"(a\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `(a`"),
            format!("{p}.properties[q].pattern: Invalid value: \"[a\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ]: `[a`"),
            format!(r#"{p}.properties[mt].x-kubernetes-map-type: Unsupported value: "sometimes": supported values: "atomic", "granular""#),
            format!("{p}.properties[pk].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"),
            format!("{p}.properties[r].x-kubernetes-validations[0].message: Required value: message must be specified if rule contains line breaks"),
            format!(r#"{p}.properties[r].x-kubernetes-validations[1].message: Invalid value: " ": must be non-empty if specified"#),
            format!("{p}.properties[r].x-kubernetes-validations[2].messageExpression: Required value: messageExpression must be non-empty if specified"),
            format!(r#"{p}.properties[r].x-kubernetes-validations[3].fieldPath: Invalid value: ".nope": must be a valid path"#),
            format!(r#"{p}.properties[set].items.x-kubernetes-list-type: Invalid value: "map": must be atomic as item of a list with x-kubernetes-list-type=set"#),
        ]
    );
}

#[test]
fn old_self_needs_correlatable_nodes() {
    let c = crd(json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "object",
            "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}},
        "mlist": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
            "items": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}},
                      "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}},
        "s": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self != 'oldSelf'", "optionalOldSelf": true},
            {"rule": "oldSelf.hasValue()", "optionalOldSelf": true}]}
    }}));
    let p = "spec.validation.openAPIV3Schema.properties";
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            format!(r#"{p}[list].items.x-kubernetes-validations[0].rule: Invalid value: "self.a == oldSelf.a": oldSelf cannot be used on the uncorrelatable portion of the schema within {p}[list]"#),
            format!("{p}[s].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"),
        ]
    );
}

#[test]
fn status_subresource_restricts_the_root() {
    let mut c = crd(
        json!({"type": "object", "minProperties": 1, "properties": {"status": {"type": "object"}}}),
    );
    c["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    let m = msgs(&validate_crd(&c, None));
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with(
            "spec.validation.openAPIV3Schema: Invalid value: map[string]interface {}{"
        ),
        "{}",
        m[0]
    );
    assert!(m[0].ends_with(
        "fields are allowed at the root of the schema if the status subresource is enabled"
    ));
}

#[test]
fn protected_groups_need_api_approval() {
    let mut c = crd(widget_schema());
    c["metadata"]["name"] = json!("widgets.x.k8s.io");
    c["spec"]["group"] = json!("x.k8s.io");
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#
        ]
    );
    c["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "yes"});
    assert_eq!(
        msgs(&validate_crd(&c, None)),
        vec![
            r#"metadata.annotations[api-approved.kubernetes.io]: Invalid value: "yes": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111"#
        ]
    );
    // Unchanged on update: accepted as it was.
    assert!(validate_crd(&c, Some(&c)).is_empty());
    for ok in [
        "https://github.com/kubernetes/kubernetes/pull/78458",
        "unapproved, testing",
    ] {
        c["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": ok});
        assert!(validate_crd(&c, None).is_empty(), "{ok}");
    }
}

#[test]
fn updates_do_not_tighten_checks_on_stored_crds() {
    let loose = json!({"type": "object", "properties": {
        "t": {"type": "thing"},
        "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}},
        "d": {"type": "object", "default": {"junk": 1}}
    }});
    let c = crd(loose);
    assert_eq!(
        validate_crd(&c, None).len(),
        3,
        "{:#?}",
        msgs(&validate_crd(&c, None))
    );
    assert_eq!(msgs(&validate_crd(&c, Some(&c))), Vec::<String>::new());
}

#[test]
fn rules_are_walked_for_cel() {
    let s = Structural::from_json(&json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "min must not exceed max",
             "messageExpression": "'bad'", "reason": "FieldValueInvalid", "fieldPath": ".min"}],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}}}}))
    .unwrap();
    let nodes = validation_rules(&s);
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].path, "spec");
    assert_eq!(
        nodes[0].rules[0].reason.as_deref(),
        Some("FieldValueInvalid")
    );
    assert_eq!(nodes[0].rules[0].message_expression, "'bad'");
}

// ---------------------------------------------------------------------------
// Properties.

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e6..1.0e6f64).prop_map(Value::from),
        "[a-z]{0,6}".prop_map(Value::String),
        prop_oneof![
            Just("apiVersion"),
            Just("kind"),
            Just("metadata"),
            Just("spec")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-c]".prop_map(String::from),
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("metadata".to_string()),
                    Just("spec".to_string()),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Schema-shaped JSON: the keywords kube knows, randomly combined.
fn schema_value() -> impl Strategy<Value = Value> {
    let leaf = (
        prop_oneof![
            Just(""),
            Just("object"),
            Just("array"),
            Just("string"),
            Just("integer"),
            Just("number"),
            Just("boolean")
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(json_value()),
        prop::option::of(0i64..4),
        prop::option::of(prop_oneof![Just("set"), Just("map"), Just("atomic")]),
        prop::option::of(prop_oneof![
            Just("date-time"),
            Just("uuid"),
            Just("byte"),
            Just("cidr")
        ]),
    )
        .prop_map(
            |(t, nullable, preserve, embedded, default, n, list, format)| {
                let mut m = serde_json::Map::new();
                if !t.is_empty() {
                    m.insert("type".into(), json!(t));
                }
                if nullable {
                    m.insert("nullable".into(), json!(true));
                }
                if preserve {
                    m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
                }
                if embedded {
                    m.insert("x-kubernetes-embedded-resource".into(), json!(true));
                }
                if let Some(d) = default {
                    m.insert("default".into(), d);
                }
                if let Some(n) = n {
                    m.insert("maxItems".into(), json!(n));
                    m.insert("minLength".into(), json!(n));
                    m.insert("maxProperties".into(), json!(n));
                    m.insert("minimum".into(), json!(n));
                    m.insert("multipleOf".into(), json!(n as f64 + 0.5));
                }
                if let Some(l) = list {
                    m.insert("x-kubernetes-list-type".into(), json!(l));
                    m.insert("x-kubernetes-list-map-keys".into(), json!(["a"]));
                }
                if let Some(f) = format {
                    m.insert("format".into(), json!(f));
                }
                Value::Object(m)
            },
        );
    leaf.prop_recursive(4, 32, 4, |inner| {
        (
            inner.clone(),
            prop::collection::btree_map("[a-c]|spec|metadata", inner.clone(), 0..4),
            prop::option::of(inner.clone()),
            prop::option::of(inner.clone()),
            prop::collection::vec(inner, 0..2),
            any::<u8>(),
        )
            .prop_map(|(base, props, items, ap, junctors, pick)| {
                let mut m = base.as_object().cloned().unwrap_or_default();
                if !props.is_empty() {
                    m.insert(
                        "properties".into(),
                        Value::Object(props.into_iter().collect()),
                    );
                }
                if let Some(i) = items {
                    m.insert("items".into(), i);
                }
                if let Some(a) = ap {
                    m.insert("additionalProperties".into(), a);
                }
                if !junctors.is_empty() {
                    let k = ["allOf", "anyOf", "oneOf"][usize::from(pick % 3)];
                    m.insert(k.into(), Value::Array(junctors.clone()));
                    if pick % 5 == 0 {
                        m.insert("not".into(), junctors[0].clone());
                    }
                }
                if pick % 7 == 0 {
                    m.insert("required".into(), json!(["a", "spec"]));
                }
                if pick % 11 == 0 {
                    m.insert("enum".into(), json!(["a", 1, null]));
                }
                if pick % 13 == 0 {
                    m.insert("additionalProperties".into(), json!(pick % 2 == 0));
                }
                Value::Object(m)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn schema_operations_never_panic(schema in schema_value(), value in json_value()) {
        if let Ok(s) = Structural::from_json(&schema) {
            let _ = validate(&s, &value);
            let _ = validate_update(&s, &value, &json!({"spec": value.clone()}));
            prop_assert!(validate_update(&s, &value, &value).iter().all(|c| !c.message.contains(" in body ")));
            let _ = validate_structural("openAPIV3Schema", &s);
            let _ = validation_rules(&s);
            let mut v = value.clone();
            default(&s, &mut v);
            let mut pruned = v.clone();
            prune(&s, &mut pruned);
            let mut s2 = s.clone();
            prune_defaults(&mut s2);
        }
        let _ = validate_crd(&crd(schema.clone()), None);
        let _ = validate_crd(&crd(schema), Some(&crd(json!({"type": "object"}))));
    }

    /// The validator walks the structural schema itself; it must answer
    /// exactly as the OpenAPI form kube validates with (`ToKubeOpenAPI`).
    #[test]
    fn structural_walk_answers_as_the_openapi_form(schema in schema_value(), value in json_value(), old in json_value()) {
        if let Ok(s) = Structural::from_json(&schema) {
            let props = s.to_props();
            let as_props = |old: Option<&Value>| {
                let mut out = validate_props_update(&props, &value, old);
                super::listtype::list_types(&s, &value, "", &mut out);
                super::objectmeta::embedded_meta(&s, &value, "", true, &mut out);
                msgs(&out)
            };
            prop_assert_eq!(msgs(&validate(&s, &value)), as_props(None));
            prop_assert_eq!(msgs(&validate_update(&s, &value, &old)), as_props(Some(&old)));
            let v = SchemaValidator::new(s.clone());
            prop_assert_eq!(msgs(&v.validate(&value)), as_props(None));
        }
    }

    #[test]
    fn defaulting_is_idempotent(schema in schema_value(), value in json_value()) {
        if let Ok(s) = Structural::from_json(&schema) {
            let mut once = value.clone();
            default(&s, &mut once);
            let mut twice = once.clone();
            default(&s, &mut twice);
            prop_assert_eq!(once, twice);
        }
    }

    #[test]
    fn pruning_is_idempotent(schema in schema_value(), value in json_value()) {
        if let Ok(s) = Structural::from_json(&schema) {
            let mut once = value.clone();
            prune(&s, &mut once);
            let mut twice = once.clone();
            let again = prune(&s, &mut twice);
            prop_assert!(again.is_empty(), "second prune removed {:?}", again);
            prop_assert_eq!(once, twice);
        }
    }

    #[test]
    fn formats_and_go_printing_never_panic(s in any::<String>(), f in any::<f64>()) {
        for format in ["date", "date-time", "uuid", "uuid4", "email", "hostname", "ipv4", "ipv6",
                       "cidr", "mac", "byte", "duration", "uri", "isbn", "creditcard", "quantity",
                       "k8s-short-name", "k8s-long-name", "hexcolor", "rgbcolor", "ssn"] {
            let schema = Structural::from_json(&json!({"type": "string", "format": format, "pattern": s.clone()}));
            if let Ok(schema) = schema {
                let _ = validate(&schema, &Value::String(s.clone()));
            }
        }
        if let Ok(schema) = Structural::from_json(&json!({"type": "object", "properties": {
            "a": {"type": "object", "additionalProperties": {"type": "string"}}}})) {
            let _ = valid_field_path(&s, &schema, true);
        }
        let printed = go_float(f);
        if f.is_finite() {
            let back: f64 = printed.parse().unwrap_or(f64::NAN);
            prop_assert_eq!(back, f, "{} printed as {}", f, printed);
        }
    }

    #[test]
    fn arbitrary_crds_never_panic(value in json_value(), other in json_value()) {
        let _ = validate_crd(&value, None);
        let _ = validate_crd(&value, Some(&other));
        let scale = json!({"specReplicasPath": ".spec", "statusReplicasPath": ".a.b", "labelSelectorPath": ".kind"});
        let _ = validate_scale(&scale, &value);
        let mut c = crd(json!({"type": "object"}));
        c["spec"]["versions"][0]["schema"] = json!({"openAPIV3Schema": value.clone()});
        c["spec"]["versions"][0]["subresources"] = value.clone();
        c["spec"]["conversion"] = other;
        let _ = validate_crd(&c, None);
    }
}
