//! Issue #34: kube type-checks a CRD's `x-kubernetes-validations` rules
//! against its schema when the CRD is written. Through kubectl: a rule
//! naming a field the schema lacks, or comparing an integer with a string,
//! is refused with 422 and kube's message (position and source snippet
//! included) and nothing is stored; a rule that checks is created, and an
//! update adding a wrong rule is refused while the CRD stays as it was.

use e2e::{eventually, Server};
use std::time::Duration;
use watchcache::testing::TestEtcd;

fn crd(rule: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: checkeds.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: checkeds, singular: checked, kind: Checked}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {{type: integer}}
              name: {{type: string, maxLength: 63}}
            x-kubernetes-validations:
            - rule: {rule:?}
"#
    )
}

const FIELD: &str =
    "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule";

fn value(rule: &str) -> String {
    format!(
        "apiextensions.ValidationRule{{Rule:{rule:?}, Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}"
    )
}

/// `kubectl apply` of `manifest` must fail with 422 and `want` in its
/// message.
fn refused(server: &Server, manifest: &str, want: &str) {
    let out = server.kubectl_stdin(&["apply", "-v=6", "-f", "-"], manifest);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {stderr}");
    assert!(stderr.contains(" 422 Unprocessable Entity"), "{stderr}");
    assert!(stderr.contains(want), "{stderr}\nlacks\n{want}");
}

#[tokio::test(flavor = "multi_thread")]
async fn crd_rules_are_type_checked_when_written() {
    let etcd = TestEtcd::shared().await;
    let server = Server::start_on(&etcd.endpoint(), &[]).await;

    let rule = "self.nosuchfield > 0";
    refused(
        &server,
        &crd(rule),
        &format!(
            "The CustomResourceDefinition \"checkeds.example.com\" is invalid: {FIELD}: Invalid value: {}: compilation failed: ERROR: <input>:1:5: undefined field 'nosuchfield'\n | self.nosuchfield > 0\n | ....^",
            value(rule)
        ),
    );
    let rule = "self.replicas == 'x'";
    refused(
        &server,
        &crd(rule),
        &format!(
            "{FIELD}: Invalid value: {}: compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(int, string)'\n | self.replicas == 'x'\n | ..............^",
            value(rule)
        ),
    );
    // Not a bool.
    refused(
        &server,
        &crd("self.replicas + 1"),
        &format!(
            "{FIELD}: Invalid value: {}: cel expression must evaluate to a bool",
            value("self.replicas + 1")
        ),
    );
    // Nothing was stored.
    let (_, err) = server.kubectl_err(&["get", "crd", "checkeds.example.com"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );

    // A rule that checks (kube's libraries, macros, cross-type numeric
    // comparison) is created and served.
    let good = "self.replicas < 10.5 && self.name.split('-').all(p, p.size() > 0) && quantity('1').isLessThan(quantity('2'))";
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &crd(good));
    eventually("crd established", Duration::from_secs(10), || {
        server
            .kubectl(&["get", "checkeds"])
            .status
            .success()
            .then_some(())
    })
    .await;

    // An update bringing a wrong rule is refused; the stored rule stays.
    refused(
        &server,
        &crd("self.name == 1"),
        "found no matching overload for '_==_' applied to '(string, int)'",
    );
    let stored = server.get_json(&["crd", "checkeds.example.com"]);
    assert_eq!(
        stored.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations/0/rule"),
        Some(&serde_json::Value::String(good.into()))
    );
    server.kubectl_ok(&["delete", "crd", "checkeds.example.com"]);
}

/// Issue #34, costs: a rule's estimated cost (cel-go's, from the schema's
/// sizes) times the most times its node can occur must stay within kube's
/// per-expression limit, and the sum over the schema within the CRD's.
/// Over raw HTTP the 422 Status carries one cause per problem, as kube
/// words and places them (kube's `validation_test.go` case "forbid
/// validation rules where cost total exceeds total limit").
#[tokio::test(flavor = "multi_thread")]
async fn crd_rule_costs_are_limited_per_rule_and_in_total() {
    let etcd = TestEtcd::shared().await;
    let server = Server::start_on(&etcd.endpoint(), &[]).await;

    // Through kubectl: an O(n²) rule over an unbounded list.
    let nested = "self.tags.all(x, self.tags.all(y, x == y))";
    let manifest = crd(nested).replace(
        "name: {type: string, maxLength: 63}",
        "name: {type: string, maxLength: 63}\n              tags: {type: array, items: {type: string}}",
    );
    refused(
        &server,
        &manifest,
        &format!("{FIELD}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
    );
    refused(
        &server,
        &manifest,
        "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x",
    );
    // Bounded, the same rule fits: 10 x 10 comparisons of 64-byte strings.
    let bounded = manifest.replace(
        "tags: {type: array, items: {type: string}}",
        "tags: {type: array, maxItems: 10, items: {type: string, maxLength: 16}}",
    );
    server.kubectl_stdin_ok(&["apply", "-f", "-"], &bounded);
    server.kubectl_ok(&["delete", "crd", "checkeds.example.com"]);

    // Over raw HTTP: a cheap rule (2001) under 100000 list items and
    // 1000 map values, and a rule under no list at all.
    let keyword = serde_json::json!([{"rule": "self.contains('keyword')"}]);
    let body = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "costlies.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "costlies", "singular": "costly", "kind": "Costly"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "list": {"type": "array", "maxItems": 100000, "items": {"type": "string",
                        "maxLength": 5000, "x-kubernetes-validations": keyword}},
                    "map": {"type": "object", "maxProperties": 1000, "additionalProperties": {
                        "type": "string", "maxLength": 5000, "x-kubernetes-validations": keyword}},
                    "field": {"type": "integer",
                        "x-kubernetes-validations": [{"rule": "self > 50 && self < 100"}]}
                }}}}]}
    });
    let resp = server
        .request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .await;
    assert_eq!(resp.status, 422, "{}", resp.text());
    let status: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(status["reason"], "Invalid");
    let causes: Vec<(String, String, String)> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (s("reason"), s("field"), s("message"))
        })
        .collect();
    let base = "spec.validation.openAPIV3Schema";
    let list = format!("{base}.properties[list].items.x-kubernetes-validations[0].rule");
    let map =
        format!("{base}.properties[map].additionalProperties.x-kubernetes-validations[0].rule");
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    let contributed = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema";
    let forbidden = |field: &str, message: String| {
        ("FieldValueForbidden".to_owned(), field.to_owned(), message)
    };
    assert_eq!(
        causes,
        [
            forbidden(&list, format!("Forbidden: estimated rule cost exceeds budget by factor of 20.0x {hint}")),
            forbidden(&list, contributed.to_owned()),
            forbidden(&map, contributed.to_owned()),
            forbidden(base, format!("Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 2.0x {hint}")),
        ],
        "{status}"
    );
    let resp = server
        .request(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/costlies.example.com",
            &[],
            b"",
        )
        .await;
    assert_eq!(resp.status, 404, "nothing is stored");
}
