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
