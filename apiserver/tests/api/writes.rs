//! Update semantics: generation, /status, /scale, the three patch types,
//! immutable fields, deletion (preconditions, finalizers, collections).

use crate::common::{configmap, deployment, labelled_configmap, names, pod, rv, Api};
use axum::http::StatusCode;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const PODS: &str = "/api/v1/namespaces/default/pods";

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const SMP: &str = "application/strategic-merge-patch+json";

fn generation(v: &Value) -> i64 {
    v["metadata"]["generation"].as_i64().unwrap_or(-1)
}

#[tokio::test]
async fn deployment_generation_follows_spec_changes() {
    let api = Api::new("generation").await;
    let d = api.create(DEPLOYS, &deployment("web", 1)).await;
    assert_eq!(generation(&d), 1);
    assert!(d.get("status").is_none() || d["status"] == json!({}), "{d}");
    let path = format!("{DEPLOYS}/web");

    let mut spec_change = d.clone();
    spec_change["spec"]["replicas"] = json!(3);
    let d2 = api.put(&path, &spec_change).await;
    assert_eq!(d2.code, StatusCode::OK, "{}", d2.body);
    assert_eq!(generation(&d2.body), 2);

    let mut label_change = d2.body.clone();
    label_change["metadata"]["labels"]["tier"] = json!("front");
    let d3 = api.put(&path, &label_change).await;
    assert_eq!(d3.code, StatusCode::OK);
    assert_eq!(generation(&d3.body), 2);
    assert_eq!(d3.body["metadata"]["labels"]["tier"], "front");
    assert_ne!(d3.rv(), d2.rv());

    // A client cannot set generation.
    let mut forged = d3.body.clone();
    forged["metadata"]["generation"] = json!(42);
    let d4 = api.put(&path, &forged).await;
    assert_eq!(generation(&d4.body), 2);

    // A spec patch bumps it too.
    let d5 = api
        .patch(&path, MERGE, &json!({"spec": {"paused": true}}))
        .await;
    assert_eq!(generation(&d5.body), 3);
}

#[tokio::test]
async fn status_and_main_resource_are_separate() {
    let api = Api::new("status").await;
    let d = api.create(DEPLOYS, &deployment("web", 1)).await;
    let path = format!("{DEPLOYS}/web");

    // /status changes status only.
    let mut s = d.clone();
    s["status"] = json!({"replicas": 1, "readyReplicas": 1, "observedGeneration": 1});
    s["spec"]["replicas"] = json!(7);
    s["metadata"]["labels"]["sneaky"] = json!("yes");
    let r = api.put(&format!("{path}/status"), &s).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"]["readyReplicas"], 1);
    assert_eq!(r.body["spec"]["replicas"], 1);
    assert!(
        r.body["metadata"]["labels"].get("sneaky").is_none(),
        "{}",
        r.body
    );
    assert_eq!(generation(&r.body), 1);
    let after_status = api.must_get(&path).await;
    assert_eq!(after_status, r.body);

    // GET /status returns the whole object.
    assert_eq!(api.must_get(&format!("{path}/status")).await, after_status);

    // The main resource ignores status.
    let mut m = after_status.clone();
    m["status"] = json!({"replicas": 99});
    m["spec"]["replicas"] = json!(2);
    let r = api.put(&path, &m).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 2);
    assert_eq!(r.body["status"], after_status["status"]);

    // A status patch.
    let r = api
        .patch(
            &format!("{path}/status"),
            MERGE,
            &json!({"status": {"replicas": 2, "readyReplicas": 2}, "spec": {"replicas": 5}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"]["readyReplicas"], 2);
    assert_eq!(r.body["spec"]["replicas"], 2);
    // kube's status validation: ready replicas never exceed replicas.
    let r = api
        .patch(
            &format!("{path}/status"),
            MERGE,
            &json!({"status": {"readyReplicas": 3}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);

    // A stale status write conflicts and changes nothing.
    let current = api.must_get(&path).await;
    let r = api.put(&format!("{path}/status"), &s).await;
    assert_eq!(r.code, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(api.must_get(&path).await, current);
}

#[tokio::test]
async fn scale_subresource() {
    let api = Api::new("scale").await;
    let d = api.create(DEPLOYS, &deployment("web", 2)).await;
    let path = format!("{DEPLOYS}/web/scale");

    let s = api.must_get(&path).await;
    assert_eq!(s["kind"], "Scale");
    assert_eq!(s["apiVersion"], "autoscaling/v1");
    assert_eq!(s["metadata"]["name"], "web");
    assert_eq!(s["metadata"]["namespace"], "default");
    assert_eq!(s["metadata"]["uid"], d["metadata"]["uid"]);
    assert_eq!(
        s["metadata"]["resourceVersion"],
        d["metadata"]["resourceVersion"]
    );
    assert_eq!(s["spec"]["replicas"], 2);
    assert_eq!(s["status"]["replicas"], 0);
    assert_eq!(s["status"]["selector"], "app=web");

    let mut put = s.clone();
    put["spec"]["replicas"] = json!(5);
    let r = api.put(&path, &put).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "Scale");
    assert_eq!(r.body["spec"]["replicas"], 5);
    let d2 = api.must_get(&format!("{DEPLOYS}/web")).await;
    assert_eq!(d2["spec"]["replicas"], 5);
    assert_eq!(generation(&d2), 2);

    // The old Scale's resourceVersion is a precondition.
    let r = api.put(&path, &put).await;
    assert_eq!(r.code, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(api.must_get(&format!("{DEPLOYS}/web")).await, d2);

    let r = api
        .patch(&path, MERGE, &json!({"spec": {"replicas": 1}}))
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], 1);
    assert_eq!(
        api.must_get(&format!("{DEPLOYS}/web")).await["spec"]["replicas"],
        1
    );

    // A negative count is invalid and changes nothing.
    let before = api.must_get(&format!("{DEPLOYS}/web")).await;
    let r = api
        .patch(&path, MERGE, &json!({"spec": {"replicas": -1}}))
        .await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.replicas");
    assert_eq!(api.must_get(&format!("{DEPLOYS}/web")).await, before);

    // No /scale on a kind without it; no Scale of a missing object.
    let r = api.get(&format!("{CMS}/x/scale")).await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
    let r = api.get(&format!("{DEPLOYS}/nope/scale")).await;
    assert_eq!(
        r.status(),
        (404, "NotFound", "deployments.apps \"nope\" not found")
    );
}

#[tokio::test]
async fn json_patch() {
    let api = Api::new("jsonpatch").await;
    api.create(CMS, &configmap("x", &[("a", "1"), ("b", "2")]))
        .await;
    let path = format!("{CMS}/x");
    let r = api
        .patch(
            &path,
            JSON_PATCH,
            &json!([
                {"op": "test", "path": "/data/a", "value": "1"},
                {"op": "replace", "path": "/data/a", "value": "10"},
                {"op": "remove", "path": "/data/b"},
                {"op": "add", "path": "/data/c", "value": "3"},
                {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}
            ]),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["data"], json!({"a": "10", "c": "3"}));
    assert_eq!(r.body["metadata"]["labels"], json!({"x": "y"}));
    let stored = api.must_get(&path).await;
    assert_eq!(stored, r.body);

    // A failing test op: 422, nothing changes.
    let r = api
        .patch(
            &path,
            JSON_PATCH,
            &json!([
                {"op": "test", "path": "/data/a", "value": "wrong"},
                {"op": "replace", "path": "/data/a", "value": "11"}
            ]),
        )
        .await;
    // kube's NewGenericServerResponse(422, ...) from patch.go: the generic
    // message and no group, kind or name. (kube passes
    // isUnexpectedResponse=false, so it carries no causes either; this
    // server adds an UnexpectedServerResponse cause, see the report.)
    let generic = |r: &crate::common::Resp| {
        assert_eq!(
            r.status(),
            (
                422,
                "Invalid",
                "the server rejected our request due to an error in our request"
            )
        );
        for k in ["group", "kind", "name"] {
            assert!(r.body["details"].get(k).is_none(), "{}", r.body);
        }
    };
    generic(&r);
    assert_eq!(r.code.as_u16(), 422);
    assert_eq!(api.must_get(&path).await, stored);

    // Removing a missing path: the same.
    let r = api
        .patch(
            &path,
            JSON_PATCH,
            &json!([{"op": "remove", "path": "/data/zzz"}]),
        )
        .await;
    generic(&r);
    assert_eq!(api.must_get(&path).await, stored);

    // A patch that is not a JSON patch document: 400.
    let r = api.patch(&path, JSON_PATCH, &json!({"op": "add"})).await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    );
    assert_eq!(api.must_get(&path).await, stored);
    let r = api
        .call(
            "PATCH",
            &path,
            &[("content-type", JSON_PATCH)],
            "[{\"op\": ",
        )
        .await;
    assert_eq!(
        r.status(),
        (400, "BadRequest", "unexpected end of JSON input")
    );
    assert_eq!(api.must_get(&path).await, stored);
}

#[tokio::test]
async fn merge_patch() {
    let api = Api::new("mergepatch").await;
    api.create(CMS, &configmap("x", &[("a", "1"), ("b", "2")]))
        .await;
    let path = format!("{CMS}/x");
    let r = api
        .patch(&path, MERGE, &json!({"data": {"a": "10", "b": null, "c": "3"}, "metadata": {"annotations": {"n": "v"}}}))
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["data"], json!({"a": "10", "c": "3"}));
    assert_eq!(r.body["metadata"]["annotations"], json!({"n": "v"}));
    assert_eq!(api.must_get(&path).await, r.body);

    // Malformed merge and strategic merge patches: 400 in Go's words.
    let before = r.body.clone();
    let r = api
        .call("PATCH", &path, &[("content-type", MERGE)], "{bad")
        .await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "error decoding patch: invalid character 'b' looking for beginning of object key string"
        )
    );
    let r = api
        .call("PATCH", &path, &[("content-type", SMP)], "{bad")
        .await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "invalid character 'b' looking for beginning of object key string"
        )
    );
    assert_eq!(api.must_get(&path).await, before);

    // A patch may not rename the object.
    let r = api
        .patch(&path, MERGE, &json!({"metadata": {"name": "other"}}))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(api.must_get(&path).await, before);
    assert_eq!(
        api.get(&format!("{CMS}/other")).await.code,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let api = Api::new("smp").await;
    api.create(DEPLOYS, &deployment("web", 1)).await;
    let path = format!("{DEPLOYS}/web");

    let r = api
        .patch(
            &path,
            SMP,
            &json!({"spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:1.28"},
                {"name": "extra", "image": "redis:7"}
            ]}}}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    let containers = &r.body["spec"]["template"]["spec"]["containers"];
    let pairs: Vec<(String, String)> = containers
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_string(),
                        c["image"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut sorted = pairs.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("extra".to_string(), "redis:7".to_string()),
            ("sidecar".to_string(), "busybox:1.36".to_string()),
            ("web".to_string(), "nginx:1.28".to_string()),
        ],
        "{containers}"
    );
    assert_eq!(generation(&r.body), 2);

    // The same patch as a merge patch replaces the list.
    let r2 = api
        .patch(
            &path,
            MERGE,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x:1"}]}}}}),
        )
        .await;
    assert_eq!(r2.code, StatusCode::OK, "{}", r2.body);
    // (with kube's container defaults filled in again)
    assert_eq!(
        r2.body["spec"]["template"]["spec"]["containers"],
        json!([{"name": "only", "image": "x:1", "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"}])
    );

    // $patch: delete removes one element by its key.
    api.patch(
        &path,
        SMP,
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}
        ]}}}}),
    )
    .await;
    let r3 = api
        .patch(
            &path,
            SMP,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "only", "$patch": "delete"}]}}}}),
        )
        .await;
    assert_eq!(r3.code, StatusCode::OK, "{}", r3.body);
    let names: Vec<&str> = r3.body["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(!names.contains(&"only"), "{names:?}");
    assert!(names.contains(&"a") && names.contains(&"b"), "{names:?}");
    assert_eq!(api.must_get(&path).await, r3.body);
}

#[tokio::test]
async fn patch_of_missing_or_stale_objects() {
    let api = Api::new("patchmissing").await;
    for ctype in [MERGE, SMP] {
        let r = api
            .patch(&format!("{CMS}/nope"), ctype, &json!({"data": {"a": "b"}}))
            .await;
        assert_eq!(
            r.status(),
            (404, "NotFound", "configmaps \"nope\" not found")
        );
    }
    let r = api
        .patch(
            &format!("{CMS}/nope"),
            JSON_PATCH,
            &json!([{"op": "add", "path": "/data", "value": {}}]),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
    assert_eq!(
        api.get(&format!("{CMS}/nope")).await.code,
        StatusCode::NOT_FOUND
    );

    let v1 = api.create(CMS, &configmap("x", &[("a", "1")])).await;
    let path = format!("{CMS}/x");
    let v2 = api
        .patch(&path, MERGE, &json!({"data": {"a": "2"}}))
        .await
        .body;
    let r = api
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"resourceVersion": rv(&v1)}, "data": {"a": "3"}}),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );
    assert_eq!(api.must_get(&path).await, v2);
    // The current resourceVersion passes.
    let r = api
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"resourceVersion": rv(&v2)}, "data": {"a": "3"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
}

#[tokio::test]
async fn immutable_fields() {
    let api = Api::new("immutable").await;
    let d = api.create(DEPLOYS, &deployment("web", 1)).await;
    let path = format!("{DEPLOYS}/web");
    let mut changed = d.clone();
    changed["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
    changed["spec"]["template"]["metadata"]["labels"]["v"] = json!("2");
    let r = api.put(&path, &changed).await;
    assert_eq!(r.code.as_u16(), 422, "{}", r.body);
    assert_eq!(r.body["reason"], "Invalid");
    let msg = r.body["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("Deployment.apps \"web\" is invalid: spec.selector: Invalid value: "),
        "{msg}"
    );
    assert!(msg.ends_with(": field is immutable"), "{msg}");
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.selector");
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    assert_eq!(api.must_get(&path).await, d);

    // A PUT carrying another uid: the uid is a precondition (409).
    let cm = api.create(CMS, &configmap("x", &[])).await;
    let cm_path = format!("{CMS}/x");
    let mut other_uid = cm.clone();
    other_uid["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000001");
    let r = api.put(&cm_path, &other_uid).await;
    let uid = cm["metadata"]["uid"].as_str().unwrap_or("");
    assert_eq!(
        r.status(),
        (
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on configmaps \"x\": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000001, UID in object meta: {uid}").as_str()
        )
    );
    assert_eq!(api.must_get(&cm_path).await, cm);

    // A patch changing the uid: the field is immutable (422).
    let r = api
        .patch(
            &cm_path,
            MERGE,
            &json!({"metadata": {"uid": "00000000-0000-0000-0000-000000000001"}}),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            422,
            "Invalid",
            "ConfigMap \"x\" is invalid: metadata.uid: Invalid value: \"00000000-0000-0000-0000-000000000001\": field is immutable"
        )
    );
    assert_eq!(api.must_get(&cm_path).await, cm);

    // creationTimestamp changes are ignored.
    let mut ts = cm.clone();
    ts["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    ts["data"] = json!({"k": "v"});
    let r = api.put(&cm_path, &ts).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["metadata"]["creationTimestamp"],
        cm["metadata"]["creationTimestamp"]
    );
}

#[tokio::test]
async fn delete_answers_status_or_object() {
    let api = Api::new("deleteanswer").await;
    let cm = api.create(CMS, &configmap("x", &[])).await;
    let r = api.delete(&format!("{CMS}/x")).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Success");
    assert_eq!(r.body["details"]["uid"], cm["metadata"]["uid"]);

    // An unbound pod goes at once and the answer is the pod.
    let p = api.create(PODS, &pod("p", None)).await;
    let r = api.delete(&format!("{PODS}/p")).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "Pod");
    assert_eq!(r.body["metadata"]["uid"], p["metadata"]["uid"]);
    assert_eq!(
        api.get(&format!("{PODS}/p")).await.code,
        StatusCode::NOT_FOUND
    );

    // A pod bound to a node waits for its kubelet: it is marked, not removed.
    api.create(PODS, &pod("bound", Some("node-1"))).await;
    let r = api.delete(&format!("{PODS}/bound")).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    let still = api.must_get(&format!("{PODS}/bound")).await;
    assert_eq!(still, r.body);
    // With gracePeriodSeconds=0 it goes.
    let r = api
        .delete(&format!("{PODS}/bound?gracePeriodSeconds=0"))
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    api.wait_gone(&format!("{PODS}/bound")).await;
}

#[tokio::test]
async fn delete_preconditions() {
    let api = Api::new("preconditions").await;
    let cm = api.create(CMS, &configmap("x", &[])).await;
    let path = format!("{CMS}/x");
    let uid = cm["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let current = rv(&cm);

    let r = api
        .delete_with(&path, &json!({"preconditions": {"uid": "wrong"}}))
        .await;
    assert_eq!(
        r.status(),
        (
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on configmaps \"x\": Precondition failed: UID in precondition: wrong, UID in object meta: {uid}").as_str()
        )
    );
    let r = api
        .delete_with(&path, &json!({"preconditions": {"resourceVersion": "1"}}))
        .await;
    assert_eq!(
        r.status(),
        (
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on configmaps \"x\": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {current}").as_str()
        )
    );
    assert_eq!(api.must_get(&path).await, cm);

    let r = api
        .delete_with(
            &path,
            &json!({"preconditions": {"uid": uid, "resourceVersion": current}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(api.get(&path).await.code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn finalizers_hold_deletion() {
    let api = Api::new("finalizers").await;
    let mut cm = configmap("x", &[]);
    cm["metadata"]["finalizers"] = json!(["example.com/a", "example.com/b"]);
    api.create(CMS, &cm).await;
    let path = format!("{CMS}/x");

    let r = api.delete(&path).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["kind"], "ConfigMap",
        "a pending delete answers with the object"
    );
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 0);
    let marked = api.must_get(&path).await;
    assert_eq!(marked, r.body);

    // A second delete changes nothing.
    let again = api.delete(&path).await;
    assert_eq!(again.code, StatusCode::OK);
    assert_eq!(api.must_get(&path).await, marked);

    // No new finalizers while deleting.
    let r = api
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}}),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            422,
            "Invalid",
            "ConfigMap \"x\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/c\"}"
        )
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    assert_eq!(api.must_get(&path).await, marked);

    // The deletion timestamp cannot be removed by an update.
    let mut undelete = marked.clone();
    undelete["metadata"]
        .as_object_mut()
        .map(|m| m.remove("deletionTimestamp"));
    undelete["data"] = json!({"still": "here"});
    let r = api.put(&path, &undelete).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body["metadata"]["deletionTimestamp"],
        marked["metadata"]["deletionTimestamp"]
    );

    // Removing one finalizer keeps it; removing the last deletes it.
    let r = api
        .patch(
            &path,
            MERGE,
            &json!({"metadata": {"finalizers": ["example.com/b"]}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    api.must_get(&path).await;
    let r = api
        .patch(
            &path,
            JSON_PATCH,
            &json!([{"op": "remove", "path": "/metadata/finalizers"}]),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(api.get(&path).await.code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn delete_collection_with_label_selector() {
    let api = Api::new("deletecoll").await;
    for (n, tier) in [("a", "web"), ("b", "web"), ("c", "db"), ("d", "web")] {
        api.create(CMS, &labelled_configmap(n, &[("tier", tier)]))
            .await;
    }
    let mut held = labelled_configmap("e", &[("tier", "web")]);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(CMS, &held).await;

    // Dry run first: nothing goes.
    let r = api
        .call(
            "DELETE",
            &format!("{CMS}?labelSelector=tier%3Dweb&dryRun=All"),
            &[],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(names(&api.must_get(CMS).await), ["a", "b", "c", "d", "e"]);

    let r = api
        .call(
            "DELETE",
            &format!("{CMS}?labelSelector=tier%3Dweb"),
            &[],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "ConfigMapList");
    assert_eq!(names(&r.body), ["a", "b", "d", "e"]);
    // c stays, e waits for its finalizer.
    assert_eq!(names(&api.must_get(CMS).await), ["c", "e"]);
    assert!(api.must_get(&format!("{CMS}/e")).await["metadata"]["deletionTimestamp"].is_string());
}
