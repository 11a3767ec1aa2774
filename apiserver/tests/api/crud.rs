//! Create, get, list, update and delete of ConfigMaps; the NotFound,
//! AlreadyExists and Conflict answers; namespaces that are missing or
//! terminating; namespace deletion.

use crate::common::{configmap, names, Api};
use axum::http::StatusCode;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn configmap_create_get_list_update_delete() {
    let api = Api::new("crud").await;
    let created = api.create(CMS, &configmap("x", &[("a", "1")])).await;
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["data"], json!({"a": "1"}));
    let uid = created["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(uid.len(), 36, "uid is a UUID: {created}");
    assert!(created["metadata"]["creationTimestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let rv1: i64 = crate::common::rv(&created)
        .parse()
        .expect("numeric resourceVersion");
    assert!(rv1 > 0);

    let got = api.must_get(&format!("{CMS}/x")).await;
    assert_eq!(got, created, "GET returns what create returned");

    let list = api.must_get(CMS).await;
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(names(&list), ["x"]);
    let list_rv: i64 = crate::common::rv(&list).parse().expect("list rv");
    assert!(list_rv >= rv1);

    let mut changed = got.clone();
    changed["data"] = json!({"a": "2"});
    let r = api.put(&format!("{CMS}/x"), &changed).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["data"], json!({"a": "2"}));
    let rv2: i64 = r.rv().parse().expect("rv");
    assert!(rv2 > rv1);
    assert_eq!(r.body["metadata"]["uid"], uid.as_str());
    assert_eq!(
        r.body["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );

    // A PUT that changes nothing does not write.
    let same = api.put(&format!("{CMS}/x"), &r.body).await;
    assert_eq!(same.code, StatusCode::OK);
    assert_eq!(same.rv(), rv2.to_string());

    let del = api.delete(&format!("{CMS}/x")).await;
    assert_eq!(del.code, StatusCode::OK, "{}", del.body);
    assert_eq!(
        del.body,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": "x", "kind": "configmaps", "uid": uid}
        })
    );

    let gone = api.get(&format!("{CMS}/x")).await;
    assert_eq!(
        gone.body,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "configmaps \"x\" not found",
            "reason": "NotFound",
            "details": {"name": "x", "kind": "configmaps"},
            "code": 404
        })
    );
    assert_eq!(gone.code, StatusCode::NOT_FOUND);
    assert_eq!(names(&api.must_get(CMS).await), Vec::<String>::new());
}

#[tokio::test]
async fn create_existing_is_already_exists_and_changes_nothing() {
    let api = Api::new("exists").await;
    let first = api.create(CMS, &configmap("x", &[("a", "1")])).await;
    let r = api.post(CMS, &configmap("x", &[("a", "other")])).await;
    assert_eq!(
        r.status(),
        (409, "AlreadyExists", "configmaps \"x\" already exists")
    );
    assert_eq!(
        r.body["details"],
        json!({"name": "x", "kind": "configmaps"})
    );
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, first);

    // The same for a group resource: the message names resource.group.
    let d = api
        .create(
            "/apis/apps/v1/namespaces/default/deployments",
            &crate::common::deployment("web", 1),
        )
        .await;
    let r = api
        .post(
            "/apis/apps/v1/namespaces/default/deployments",
            &crate::common::deployment("web", 5),
        )
        .await;
    assert_eq!(
        r.status(),
        (
            409,
            "AlreadyExists",
            "deployments.apps \"web\" already exists"
        )
    );
    assert_eq!(r.body["details"]["group"], "apps");
    assert_eq!(
        api.must_get("/apis/apps/v1/namespaces/default/deployments/web")
            .await,
        d
    );
}

#[tokio::test]
async fn missing_objects_are_not_found() {
    let api = Api::new("notfound").await;
    for (method, body) in [
        ("GET", None),
        ("PUT", Some(configmap("nope", &[]))),
        ("DELETE", None),
    ] {
        let r = match body {
            Some(b) => api.send_json(method, &format!("{CMS}/nope"), &b).await,
            None => {
                api.call(
                    method,
                    &format!("{CMS}/nope"),
                    &[],
                    axum::body::Body::empty(),
                )
                .await
            }
        };
        assert_eq!(
            r.status(),
            (404, "NotFound", "configmaps \"nope\" not found"),
            "{method}"
        );
    }
    // PUT did not create it (ConfigMaps do not allow create on update).
    assert_eq!(
        api.get(&format!("{CMS}/nope")).await.code,
        StatusCode::NOT_FOUND
    );
    // An unknown resource is the generic 404.
    let r = api.get("/api/v1/namespaces/default/widgets").await;
    assert_eq!(
        r.status(),
        (
            404,
            "NotFound",
            "the server could not find the requested resource"
        )
    );
}

#[tokio::test]
async fn put_with_stale_resource_version_is_a_conflict() {
    let api = Api::new("conflict").await;
    let v1 = api.create(CMS, &configmap("x", &[("a", "1")])).await;
    let mut v2 = v1.clone();
    v2["data"]["a"] = json!("2");
    let v2 = api.put(&format!("{CMS}/x"), &v2).await.body;
    assert_ne!(crate::common::rv(&v1), crate::common::rv(&v2));

    // A writer still holding v1.
    let mut stale = v1.clone();
    stale["data"]["a"] = json!("3");
    let r = api.put(&format!("{CMS}/x"), &stale).await;
    assert_eq!(
        r.status(),
        (
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );
    assert_eq!(
        r.body["details"],
        json!({"name": "x", "kind": "configmaps"})
    );
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, v2);

    // Without a resourceVersion the update is unconditional.
    let mut blind = v1.clone();
    blind["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    blind["data"]["a"] = json!("4");
    let r = api.put(&format!("{CMS}/x"), &blind).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["data"]["a"], "4");
}

#[tokio::test]
async fn put_with_other_name_or_namespace_is_a_bad_request() {
    let api = Api::new("mismatch").await;
    api.namespace("other").await;
    let stored = api.create(CMS, &configmap("x", &[("a", "1")])).await;

    let mut renamed = stored.clone();
    renamed["metadata"]["name"] = json!("y");
    let r = api.put(&format!("{CMS}/x"), &renamed).await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "the name of the object (y) does not match the name on the URL (x)"
        )
    );

    let mut moved = stored.clone();
    moved["metadata"]["namespace"] = json!("other");
    let r = api.put(&format!("{CMS}/x"), &moved).await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    );

    // The same on create.
    let mut elsewhere = configmap("z", &[]);
    elsewhere["metadata"]["namespace"] = json!("other");
    let r = api.post(CMS, &elsewhere).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.body["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    assert_eq!(
        api.get(&format!("{CMS}/z")).await.code,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api.get("/api/v1/namespaces/other/configmaps/z").await.code,
        StatusCode::NOT_FOUND
    );
    assert_eq!(api.must_get(&format!("{CMS}/x")).await, stored);
}

#[tokio::test]
async fn create_in_a_missing_namespace_is_not_found() {
    let api = Api::new("nons").await;
    let r = api
        .post("/api/v1/namespaces/nope/configmaps", &configmap("x", &[]))
        .await;
    assert_eq!(
        r.status(),
        (404, "NotFound", "namespaces \"nope\" not found")
    );
    assert_eq!(
        r.body["details"],
        json!({"name": "nope", "kind": "namespaces"})
    );
    let list = api.must_get("/api/v1/configmaps").await;
    assert!(
        !names(&list).contains(&"x".to_string()),
        "nothing was stored: {list}"
    );
}

/// The namespace controller on `api`'s state (as `run` starts it); it
/// stops when the handle is dropped.
fn namespace_controller(api: &Api) -> AbortOnDrop {
    let c = apiserver::controllers::namespace::controller(&api.state);
    AbortOnDrop(apiserver::controllers::start(
        std::sync::Arc::clone(&api.state),
        None,
        c,
    ))
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A namespace held in Terminating by an object with a finalizer refuses new
/// content with 403; once the finalizer goes, the namespace goes.
#[tokio::test]
async fn terminating_namespace_refuses_new_content() {
    let api = Api::new("terminating").await;
    let _controller = namespace_controller(&api);
    let ns = api.namespace("closing").await;
    let coll = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut held = configmap("held", &[]);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(&coll, &held).await;

    let r = api.delete(&format!("/api/v1/namespaces/{ns}")).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "Namespace");
    assert_eq!(r.body["status"]["phase"], "Terminating");
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());

    let r = api.post(&coll, &configmap("late", &[])).await;
    assert_eq!(
        r.status(),
        (
            403,
            "Forbidden",
            "configmaps \"late\" is forbidden: unable to create new content in namespace closing because it is being terminated"
        )
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{
            "reason": "NamespaceTerminating",
            "message": "namespace closing is being terminated",
            "field": "metadata.namespace"
        }])
    );
    assert_eq!(
        api.get(&format!("{coll}/late")).await.code,
        StatusCode::NOT_FOUND
    );

    // The namespace controller marks the held object for deletion.
    let start = std::time::Instant::now();
    loop {
        let o = api.must_get(&format!("{coll}/held")).await;
        if o["metadata"]["deletionTimestamp"].is_string() {
            break;
        }
        assert!(
            start.elapsed() < crate::common::DEADLINE,
            "held never marked: {o}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let ns_obj = api.must_get(&format!("/api/v1/namespaces/{ns}")).await;
    assert_eq!(ns_obj["status"]["phase"], "Terminating");

    let r = api
        .patch(
            &format!("{coll}/held"),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    api.wait_gone(&format!("{coll}/held")).await;
    api.wait_gone(&format!("/api/v1/namespaces/{ns}")).await;
}

#[tokio::test]
async fn namespace_delete_removes_its_content_then_itself() {
    let api = Api::new("nsdelete").await;
    let _controller = namespace_controller(&api);
    let ns = api.namespace("doomed").await;
    let coll = format!("/api/v1/namespaces/{ns}/configmaps");
    api.create(&coll, &configmap("a", &[])).await;
    api.create(&coll, &configmap("b", &[])).await;
    api.create(
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        &crate::common::deployment("d", 1),
    )
    .await;
    // Someone else's content stays.
    api.create(CMS, &configmap("keep", &[])).await;

    let r = api.delete(&format!("/api/v1/namespaces/{ns}")).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["status"]["phase"], "Terminating");
    assert_eq!(r.body["spec"]["finalizers"], json!(["kubernetes"]));

    api.wait_gone(&format!("/api/v1/namespaces/{ns}")).await;
    assert_eq!(names(&api.must_get(&coll).await), Vec::<String>::new());
    assert_eq!(
        names(
            &api.must_get(&format!("/apis/apps/v1/namespaces/{ns}/deployments"))
                .await
        ),
        Vec::<String>::new()
    );
    api.must_get(&format!("{CMS}/keep")).await;

    // default, kube-system and kube-public may not be deleted.
    for n in ["default", "kube-system", "kube-public"] {
        let before = api.must_get(&format!("/api/v1/namespaces/{n}")).await;
        let r = api.delete(&format!("/api/v1/namespaces/{n}")).await;
        assert_eq!(
            r.status(),
            (
                403,
                "Forbidden",
                format!("namespaces \"{n}\" is forbidden: this namespace may not be deleted")
                    .as_str()
            )
        );
        assert_eq!(r.body["details"], json!({"name": n, "kind": "namespaces"}));
        assert_eq!(
            api.must_get(&format!("/api/v1/namespaces/{n}")).await,
            before
        );
    }

    // The system namespaces are there and a collection delete of namespaces
    // is not allowed.
    let r = api
        .call(
            "DELETE",
            "/api/v1/namespaces",
            &[],
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED);
    let all = names(&api.must_get("/api/v1/namespaces").await);
    for n in ["default", "kube-node-lease", "kube-public", "kube-system"] {
        assert!(all.contains(&n.to_string()), "{n} in {all:?}");
    }
}
