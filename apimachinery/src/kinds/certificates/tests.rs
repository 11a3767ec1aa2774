//! kube's messages for CertificateSigningRequests, table-driven.

use super::*;

/// A P-256 PKCS#10 request made with openssl (`CN=tester`), base64 of PEM.
const REQUEST: &str = include_str!("testdata-csr.b64").trim_ascii();
/// A self-signed certificate made with openssl, base64 of PEM.
const CERTIFICATE: &str = include_str!("testdata-cert.b64").trim_ascii();

fn csr(spec: Value) -> Value {
    let mut s = json!({"request": REQUEST, "signerName": "example.com/valid-name",
                       "usages": ["key encipherment"]});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    json!({"metadata": {"name": "testcsr"}, "spec": s})
}

fn messages(causes: &[StatusCause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

#[test]
fn create_validation_matches_kube() {
    let subdomain_err = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let cases: Vec<(Value, Vec<String>)> = vec![
        (json!({}), vec![]),
        (
            json!({"request": STANDARD.encode("invalid data")}),
            vec![format!(
                "spec.request: Invalid value: \"{}\": PEM block type must be CERTIFICATE REQUEST",
                STANDARD.encode("invalid data")
            )],
        ),
        (json!({"usages": []}), vec!["spec.usages: Required value".into()]),
        (json!({"signerName": ""}), vec!["spec.signerName: Required value".into()]),
        (
            json!({"signerName": "an-invalid-signer-name"}),
            vec!["spec.signerName: Invalid value: \"an-invalid-signer-name\": must be a fully qualified domain and path of the form 'example.com/signer-name'".into()],
        ),
        (
            json!({"signerName": "example/some-signer-name"}),
            vec!["spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots".into()],
        ),
        (
            json!({"signerName": "example.com/something-"}),
            vec![format!("spec.signerName: Invalid value: \"something-\": validating label \"something-\": {subdomain_err}")],
        ),
        (
            json!({"signerName": "kubernetes.io/legacy-unknown"}),
            vec!["spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version".into()],
        ),
        (
            json!({"expirationSeconds": 60}),
            vec!["spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)".into()],
        ),
        (
            json!({"usages": ["unknown", "unknown"]}),
            vec![
                format!("spec.usages[0]: Unsupported value: \"unknown\": supported values: {}", USAGES.iter().map(|u| format!("\"{u}\"")).collect::<Vec<_>>().join(", ")),
                format!("spec.usages[1]: Unsupported value: \"unknown\": supported values: {}", USAGES.iter().map(|u| format!("\"{u}\"")).collect::<Vec<_>>().join(", ")),
                "spec.usages[1]: Duplicate value: \"unknown\"".into(),
            ],
        ),
    ];
    for (spec, want) in cases {
        let got = messages(&validate(&csr(spec.clone()), None));
        assert_eq!(got, want, "{spec}");
    }
}

#[test]
fn a_tampered_request_fails_its_signature() {
    let pem = String::from_utf8(STANDARD.decode(REQUEST.trim()).unwrap()).unwrap();
    let (_, der) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let mut bytes = der.contents.clone();
    // Flip a bit inside the subject (CN=tester -> CN=tesuer).
    let at = bytes.windows(6).position(|w| w == b"tester").unwrap();
    bytes[at + 3] ^= 1;
    let tampered = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        STANDARD.encode(&bytes)
    );
    let errs = validate(&csr(json!({"request": STANDARD.encode(tampered)})), None);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].field, "spec.request");
    assert!(errs[0].message.contains("signature"), "{}", errs[0].message);
}

fn with_conditions(types: &[&str]) -> Value {
    let mut c = csr(json!({}));
    c["status"] = json!({"conditions": types.iter().map(|t| json!({"type": t, "status": "True"})).collect::<Vec<_>>()});
    c
}

#[test]
fn conditions_status_and_approval() {
    assert_eq!(
        messages(&validate_conditions(&with_conditions(&["Approved", "Denied"]))),
        ["status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"]
    );
    assert_eq!(
        messages(&validate_conditions(&with_conditions(&[
            "Approved", "Approved"
        ]))),
        ["status.conditions[1].type: Duplicate value: \"Approved\""]
    );
    assert_eq!(
        messages(&validate_conditions(&with_conditions(&[""]))),
        ["status.conditions[0].type: Required value"]
    );
    let none = with_conditions(&[]);
    let approved = with_conditions(&["Approved"]);
    // /status may not approve, nor remove an approval.
    assert_eq!(
        messages(&validate_status(&approved, Some(&none))),
        ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
    );
    assert_eq!(
        messages(&validate_status(&none, Some(&approved))),
        ["status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""]
    );
    assert!(validate_status(&with_conditions(&["Failed"]), Some(&none)).is_empty());
    // /approval may approve, not remove, not issue.
    assert!(validate_approval(&approved, Some(&none)).is_empty());
    assert_eq!(
        messages(&validate_approval(&none, Some(&approved))),
        ["status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""]
    );
    let mut issued = approved.clone();
    issued["status"]["certificate"] = json!(CERTIFICATE.trim());
    assert_eq!(
        messages(&validate_approval(&issued, Some(&approved))),
        ["status.certificate: Forbidden: updates may not set certificate content"]
    );
    // /status issues a valid certificate once.
    assert!(validate_status(&issued, Some(&approved)).is_empty());
    let mut garbage = approved.clone();
    garbage["status"]["certificate"] = json!(STANDARD.encode("no PEM here"));
    assert_eq!(
        messages(&validate_status(&garbage, Some(&approved))),
        ["status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"]
    );
    assert_eq!(
        messages(&validate_status(&garbage, Some(&issued))),
        ["status.certificate: Forbidden: updates may not modify existing certificate content"]
    );
}

#[test]
fn condition_column() {
    let ctx = PrintContext { now: 0 };
    assert_eq!(condition(&with_conditions(&[]), &ctx), json!("Pending"));
    assert_eq!(
        condition(&with_conditions(&["Approved"]), &ctx),
        json!("Approved")
    );
    let mut issued = with_conditions(&["Approved", "Failed"]);
    issued["status"]["certificate"] = json!("x");
    assert_eq!(condition(&issued, &ctx), json!("Approved,Failed,Issued"));
    assert_eq!(
        condition(&with_conditions(&["Approved", "Denied"]), &ctx),
        json!("Denied")
    );
    assert_eq!(
        requested_duration(&csr(json!({"expirationSeconds": 3600})), &ctx),
        json!("60m")
    );
}

#[test]
fn a_request_records_its_requester() {
    let mut obj = csr(json!({"username": "mallory", "groups": ["forged"], "uid": "x"}));
    obj["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let user = crate::auth::UserInfo {
        username: "jane".into(),
        uid: "".into(),
        groups: vec!["devs".into(), "system:authenticated".into()],
        extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
    };
    (CERTIFICATE_SIGNING_REQUEST.prepare_create_as.unwrap())(&mut obj, &user);
    let spec = &obj["spec"];
    assert_eq!(spec["username"], "jane");
    assert_eq!(spec["groups"], json!(["devs", "system:authenticated"]));
    assert_eq!(spec["extra"], json!({"scopes": ["a"]}));
    assert!(spec.get("uid").is_none(), "{spec}");
    assert_eq!(obj["status"], json!({}), "a request never starts approved");
}
