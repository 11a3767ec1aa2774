//! Bad input and content negotiation: validation (422), body size (413),
//! undecodable bodies (400), media types (415, 406), YAML and pretty output,
//! fieldValidation, dryRun, generateName.

use crate::common::{configmap, Api};
use axum::http::StatusCode;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Nothing is stored under `name` in the default namespace.
async fn absent(api: &Api, name: &str) {
    let r = api.get(&format!("{CMS}/{name}")).await;
    assert_eq!(
        r.code,
        StatusCode::NOT_FOUND,
        "{name} must not exist: {}",
        r.body
    );
}

#[tokio::test]
async fn invalid_name_is_unprocessable() {
    let api = Api::new("badname").await;
    let r = api.post(CMS, &configmap("Bad_Name", &[])).await;
    let msg = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    assert_eq!(
        r.status(),
        (
            422,
            "Invalid",
            format!("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {msg}").as_str()
        )
    );
    assert_eq!(
        r.body["details"],
        json!({
            "name": "Bad_Name",
            "kind": "ConfigMap",
            "causes": [{
                "reason": "FieldValueInvalid",
                "message": format!("Invalid value: \"Bad_Name\": {msg}"),
                "field": "metadata.name"
            }]
        })
    );
    // The list is still empty: nothing was stored under any name.
    let list = api.must_get(CMS).await;
    assert_eq!(crate::common::names(&list), Vec::<String>::new());

    // No name at all.
    let r = api
        .post(
            CMS,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        )
        .await;
    assert_eq!(r.code.as_u16(), 422);
    assert_eq!(
        r.body["message"],
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
}

#[tokio::test]
async fn invalid_labels_are_unprocessable() {
    let api = Api::new("badlabel").await;
    let mut cm = configmap("x", &[]);
    cm["metadata"]["labels"] = json!({"bad key": "v"});
    let r = api.post(CMS, &cm).await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(r.body["reason"], "Invalid");
    let causes = r.body["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0]["field"], "metadata.labels");
    assert_eq!(
        causes[0]["message"],
        "Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
    absent(&api, "x").await;

    // A bad value, on an update: the stored object stays as it was.
    let stored = api.create(CMS, &configmap("x", &[])).await;
    let mut bad = stored.clone();
    bad["metadata"]["labels"] = json!({"app": "-web"});
    let r = api.put(&format!("{CMS}/x"), &bad).await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "ConfigMap \"x\" is invalid: metadata.labels: Invalid value: \"-web\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, stored);
}

#[tokio::test]
async fn oversized_body_is_rejected() {
    let api = Api::new("toolarge").await;
    let big = "x".repeat(3 * 1024 * 1024 + 1);
    let r = api
        .post(CMS, &configmap("big", &[("k", big.as_str())]))
        .await;
    assert_eq!(
        r.status(),
        (
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728"
        )
    );
    absent(&api, "big").await;

    let stored = api.create(CMS, &configmap("x", &[])).await;
    let r = api
        .patch(
            &format!("{CMS}/x"),
            "application/merge-patch+json",
            &json!({"data": {"k": big}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, stored);
}

#[tokio::test]
async fn malformed_bodies_are_bad_requests() {
    let api = Api::new("malformed").await;
    let body = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}"#;
    let r = api
        .call("POST", CMS, &[("content-type", "application/json")], body)
        .await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\": \"v1\", \"kind\": \" ...)"
        )
    );
    absent(&api, "x").await;

    // A body of another kind.
    let r = api
        .post(
            CMS,
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    absent(&api, "x").await;

    // A field of the wrong type.
    let r = api
        .post(CMS, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 1}}))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    let msg = r.body["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
        "{msg}"
    );
    absent(&api, "x").await;
}

/// The keys of the top-level YAML mapping, or of the mapping under
/// `parent`, in document order.
fn yaml_keys(text: &str, parent: Option<&str>) -> Vec<String> {
    let mut inside = parent.is_none();
    let indent = if parent.is_some() { "  " } else { "" };
    let mut keys = Vec::new();
    for line in text.lines() {
        if let Some(p) = parent {
            if !line.starts_with(' ') {
                inside = line == format!("{p}:");
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix(indent) {
                if !rest.starts_with(' ') && !rest.starts_with('-') {
                    if let Some((k, _)) = rest.split_once(':') {
                        keys.push(k.to_string());
                    }
                }
            }
        }
    }
    keys
}

#[tokio::test]
async fn yaml_in_and_out() {
    let api = Api::new("yaml").await;
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"1\"\n";
    let r = api
        .call("POST", CMS, &[("content-type", "application/yaml")], body)
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["data"], json!({"a": "1"}));

    let r = api
        .call(
            "GET",
            &format!("{CMS}/cfg"),
            &[("accept", "application/yaml")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.header("content-type"), Some("application/yaml"));
    let text = r.text();
    assert!(text.starts_with("apiVersion: v1\n"), "{text}");
    // kube's YAML is its JSON through sigs.k8s.io/yaml: keys sorted at
    // every level.
    for keys in [yaml_keys(&text, None), yaml_keys(&text, Some("metadata"))] {
        let mut sorted = keys.clone();
        sorted.sort();
        assert!(keys.len() >= 4, "{keys:?}");
        assert_eq!(keys, sorted, "{text}");
    }
    let parsed: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    assert!(parsed["metadata"]["resourceVersion"].is_string(), "{text}");
    assert_eq!(parsed["metadata"]["name"], "cfg");
    assert_eq!(parsed["data"]["a"], "1");

    // YAML 1.1, as kube reads it: `y` is a boolean, not a name.
    let r = api
        .call(
            "POST",
            CMS,
            &[("content-type", "application/yaml")],
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\n",
        )
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.name of type string"
    );

    // Errors stay JSON Status objects.
    let r = api
        .call(
            "GET",
            &format!("{CMS}/nope"),
            &[("accept", "application/yaml")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn unsupported_media_types() {
    let api = Api::new("media").await;
    let r = api
        .call(
            "POST",
            CMS,
            &[("content-type", "text/plain")],
            serde_json::to_vec(&configmap("x", &[])).unwrap_or_default(),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.body);
    assert_eq!(r.body["reason"], "UnsupportedMediaType");
    let msg = r.body["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"),
        "{msg}"
    );
    absent(&api, "x").await;

    // A PATCH with a non-patch type.
    let stored = api.create(CMS, &configmap("x", &[])).await;
    let r = api
        .patch(
            &format!("{CMS}/x"),
            "application/json",
            &json!({"data": {"a": "b"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", r.body);
    assert!(r.body["message"]
        .as_str()
        .unwrap_or("")
        .contains("application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"));
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, stored);

    let r = api
        .call(
            "GET",
            &format!("{CMS}/x"),
            &[("accept", "application/xml")],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
    assert_eq!(r.body["reason"], "NotAcceptable");
    let msg = r.body["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with(
            "only the following media types are accepted: application/json, application/yaml"
        ),
        "{msg}"
    );
}

#[tokio::test]
async fn pretty_output() {
    let api = Api::new("pretty").await;
    api.create(CMS, &configmap("x", &[("a", "1")])).await;
    let compact = api.get(&format!("{CMS}/x")).await;
    // Compact: one line, ended by the newline kube's encoder writes.
    let one_line = compact.text();
    assert!(
        one_line.ends_with("}\n") && !one_line.trim_end().contains('\n'),
        "{one_line}"
    );
    let pretty = api.get(&format!("{CMS}/x?pretty=true")).await;
    let text = pretty.text();
    assert!(text.starts_with("{\n  \""), "{text}");
    assert!(
        text.contains("\n  \"metadata\": {\n    \"name\": \"x\",\n"),
        "{text}"
    );
    assert!(text.ends_with("}\n"), "{text}");
    assert_eq!(pretty.body, compact.body);
    let list = api.get(&format!("{CMS}?pretty=1")).await;
    assert!(
        list.text().contains("\n  \"items\": [\n"),
        "{}",
        list.text()
    );
}

#[tokio::test]
async fn field_validation_levels() {
    let api = Api::new("fieldval").await;
    let mut cm = configmap("x", &[]);
    cm["bogus"] = json!(1);
    cm["metadata"]["alsoBogus"] = json!("y");

    let r = api
        .post(&format!("{CMS}?fieldValidation=Strict"), &cm)
        .await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"metadata.alsoBogus\", unknown field \"bogus\""
        )
    );
    absent(&api, "x").await;

    let r = api.post(&format!("{CMS}?fieldValidation=Warn"), &cm).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.body);
    let mut warnings = r.header_all("warning");
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"bogus\\\"\"",
            "299 - \"unknown field \\\"metadata.alsoBogus\\\"\""
        ]
    );
    assert!(
        r.body.get("bogus").is_none(),
        "unknown fields are dropped: {}",
        r.body
    );
    assert!(r.body["metadata"].get("alsoBogus").is_none(), "{}", r.body);
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, r.body);

    // Warn is the default.
    cm["metadata"]["name"] = json!("y");
    let r = api.post(CMS, &cm).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(r.header_all("warning").len(), 2);

    cm["metadata"]["name"] = json!("z");
    let r = api
        .post(&format!("{CMS}?fieldValidation=Ignore"), &cm)
        .await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert!(r.header_all("warning").is_empty());

    // An unknown level.
    cm["metadata"]["name"] = json!("w");
    let r = api.post(&format!("{CMS}?fieldValidation=Loud"), &cm).await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
    absent(&api, "w").await;
}

#[tokio::test]
async fn duplicate_fields() {
    let api = Api::new("dupes").await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"1"},"data":{"b":"2"}}"#;
    let r = api
        .call(
            "POST",
            &format!("{CMS}?fieldValidation=Strict"),
            &[("content-type", "application/json")],
            body,
        )
        .await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"data\""
        )
    );
    absent(&api, "x").await;

    let r = api
        .call("POST", CMS, &[("content-type", "application/json")], body)
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.body);
    assert_eq!(
        r.header_all("warning"),
        ["299 - \"duplicate field \\\"data\\\"\""]
    );
    assert_eq!(r.body["data"], json!({"b": "2"}), "the last value wins");
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let api = Api::new("dryrun").await;
    // Create.
    let r = api
        .post(&format!("{CMS}?dryRun=All"), &configmap("x", &[("a", "1")]))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["metadata"]["name"], "x");
    assert!(r.body["metadata"]["uid"].is_string());
    absent(&api, "x").await;

    let stored = api.create(CMS, &configmap("x", &[("a", "1")])).await;
    let path = format!("{CMS}/x");

    // A dry-run create of an existing name fails as the real one would.
    let r = api
        .post(&format!("{CMS}?dryRun=All"), &configmap("x", &[("a", "9")]))
        .await;
    assert_eq!(
        r.status(),
        (409, "AlreadyExists", "configmaps \"x\" already exists")
    );

    // Update.
    let mut changed = stored.clone();
    changed["data"]["a"] = json!("2");
    let r = api.put(&format!("{path}?dryRun=All"), &changed).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["data"]["a"], "2");
    assert_eq!(api.must_get(&path).await, stored);

    // Patch.
    let r = api
        .patch(
            &format!("{path}?dryRun=All"),
            "application/merge-patch+json",
            &json!({"data": {"a": "3"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["data"]["a"], "3");
    assert_eq!(api.must_get(&path).await, stored);

    // Delete.
    let r = api.delete(&format!("{path}?dryRun=All")).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"], "Success");
    assert_eq!(api.must_get(&path).await, stored);
    let r = api
        .delete_with(
            &path,
            &json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(api.must_get(&path).await, stored);

    // Nothing but the one real create was written.
    let list = api.must_get(CMS).await;
    assert_eq!(list["items"], json!([stored]));
}

#[tokio::test]
async fn invalid_dry_run_values() {
    let api = Api::new("baddryrun").await;
    let r = api
        .post(&format!("{CMS}?dryRun=Yes"), &configmap("x", &[]))
        .await;
    assert_eq!(
        r.status(),
        (
            422,
            "Invalid",
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Yes\"}: supported values: \"All\""
        )
    );
    assert_eq!(r.body["details"]["group"], "meta.k8s.io");
    assert_eq!(r.body["details"]["kind"], "CreateOptions");
    absent(&api, "x").await;

    let stored = api.create(CMS, &configmap("x", &[])).await;
    let r = api.delete(&format!("{CMS}/x?dryRun=Yes")).await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(r.body["details"]["kind"], "DeleteOptions");
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, stored);

    let r = api
        .patch(
            &format!("{CMS}/x?dryRun=Yes"),
            "application/merge-patch+json",
            &json!({"data": {"a": "b"}}),
        )
        .await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(r.body["details"]["kind"], "PatchOptions");
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, stored);
}

#[tokio::test]
async fn generate_name_adds_five_characters() {
    let api = Api::new("genname").await;
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}});
    let a = api.create(CMS, &body).await;
    let b = api.create(CMS, &body).await;
    for o in [&a, &b] {
        let name = o["metadata"]["name"].as_str().unwrap_or("");
        assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
        assert!(
            name[4..]
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "{name}"
        );
        assert_eq!(o["metadata"]["generateName"], "gen-");
        api.must_get(&format!("{CMS}/{name}")).await;
    }
    assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);

    // An invalid prefix is reported on metadata.generateName, then on the
    // name generated from it; nothing is stored.
    let r = api
        .post(
            CMS,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "Bad_"}}),
        )
        .await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    let fields: Vec<&str> = r.body["details"]["causes"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["field"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        fields,
        ["metadata.generateName", "metadata.name"],
        "{}",
        r.body
    );
    assert!(r.body["details"]["causes"][0]["message"]
        .as_str()
        .unwrap_or("")
        .starts_with("Invalid value: \"Bad_\": a lowercase RFC 1123 subdomain"));
    assert_eq!(crate::common::names(&api.must_get(CMS).await).len(), 2);
    // A trailing dash is fine in a prefix.
    let ok = api
        .post(
            CMS,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "ok-"}}),
        )
        .await;
    assert_eq!(ok.code, StatusCode::CREATED, "{}", ok.body);
}
