//! Lists: pagination, resourceVersion semantics, selectors, compaction,
//! Tables and PartialObjectMetadata.

use crate::common::{configmap, labelled_configmap, names, pod, rv, Api};
use axum::body::Body;
use axum::http::StatusCode;
use serde_json::json;
use watchcache::testing::TestEtcd;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let api = Api::new("paging").await;
    for n in ["a", "b", "c", "d", "e"] {
        api.create(CMS, &configmap(n, &[])).await;
    }
    let p1 = api.must_get(&format!("{CMS}?limit=2")).await;
    assert_eq!(names(&p1), ["a", "b"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 3);
    let token = p1["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(!token.is_empty(), "{p1}");
    let list_rv = rv(&p1);

    // A change between pages does not show up: the list is a snapshot.
    api.create(CMS, &configmap("bb", &[])).await;
    api.delete(&format!("{CMS}/e")).await;

    let p2 = api
        .must_get(&format!("{CMS}?limit=2&continue={token}"))
        .await;
    assert_eq!(names(&p2), ["c", "d"]);
    assert_eq!(p2["metadata"]["remainingItemCount"], 1);
    assert_eq!(rv(&p2), list_rv);
    let token2 = p2["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(!token2.is_empty() && token2 != token);

    let p3 = api
        .must_get(&format!("{CMS}?limit=2&continue={token2}"))
        .await;
    assert_eq!(names(&p3), ["e"]);
    assert_eq!(rv(&p3), list_rv);
    assert!(p3["metadata"].get("continue").is_none(), "{p3}");
    assert!(p3["metadata"].get("remainingItemCount").is_none(), "{p3}");

    // A fresh list sees the changes.
    assert_eq!(names(&api.must_get(CMS).await), ["a", "b", "bb", "c", "d"]);

    // limit larger than the collection: no token.
    let all = api.must_get(&format!("{CMS}?limit=50")).await;
    assert_eq!(names(&all).len(), 5);
    assert!(all["metadata"].get("continue").is_none());

    // Paging over all namespaces.
    let r = api.must_get("/api/v1/configmaps?limit=1").await;
    assert_eq!(names(&r).len(), 1);
    assert!(r["metadata"]["continue"].is_string());
}

#[tokio::test]
async fn invalid_continue_tokens() {
    let api = Api::new("badcontinue").await;
    api.create(CMS, &configmap("a", &[])).await;
    let r = api
        .get(&format!("{CMS}?limit=1&continue=not-a-token"))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["reason"], "BadRequest");
    let msg = r.body["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("invalid continue token: continue key is not valid: "),
        "{msg}"
    );

    // A token with a resourceVersion is refused.
    api.create(CMS, &configmap("b", &[])).await;
    let p1 = api.must_get(&format!("{CMS}?limit=1")).await;
    let token = p1["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let r = api
        .get(&format!("{CMS}?limit=1&continue={token}&resourceVersion=5"))
        .await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "specifying resource version is not allowed when using continue"
        )
    );
}

#[tokio::test]
async fn exact_list_reads_an_older_revision() {
    let api = Api::new("exact").await;
    let a = api.create(CMS, &configmap("a", &[("v", "1")])).await;
    let old = rv(&a);
    api.create(CMS, &configmap("b", &[])).await;
    api.patch(
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        &json!({"data": {"v": "2"}}),
    )
    .await;

    let then = api
        .must_get(&format!(
            "{CMS}?resourceVersion={old}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(names(&then), ["a"]);
    assert_eq!(then["items"][0]["data"]["v"], "1");
    assert_eq!(rv(&then), old);

    // Legacy semantics: rv with a limit is exact too.
    let paged = api
        .must_get(&format!("{CMS}?resourceVersion={old}&limit=5"))
        .await;
    assert_eq!(names(&paged), ["a"]);

    // NotOlderThan: at least that fresh.
    let now = api
        .must_get(&format!(
            "{CMS}?resourceVersion={old}&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(names(&now), ["a", "b"]);

    let r = api.get(&format!("{CMS}?resourceVersionMatch=Exact")).await;
    assert_eq!(
        r.status(),
        (
            422,
            "Invalid",
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        )
    );
    let r = api.get(&format!("{CMS}?resourceVersion=abc")).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);

    // A revision from the future: 504 Timeout with Retry-After.
    let r = api
        .get(&format!(
            "{CMS}?resourceVersion=999999999&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(r.code, StatusCode::GATEWAY_TIMEOUT, "{}", r.body);
    assert_eq!(r.body["reason"], "Timeout");
    assert_eq!(r.header("retry-after"), Some("1"));
}

#[tokio::test]
async fn label_selectors() {
    let api = Api::new("labels").await;
    api.create(
        CMS,
        &labelled_configmap("a", &[("env", "prod"), ("tier", "web")]),
    )
    .await;
    api.create(
        CMS,
        &labelled_configmap("b", &[("env", "dev"), ("tier", "web")]),
    )
    .await;
    api.create(CMS, &labelled_configmap("c", &[("env", "test")]))
        .await;
    api.create(CMS, &labelled_configmap("d", &[])).await;

    let cases: &[(&str, &[&str])] = &[
        ("env%3Dprod", &["a"]),
        ("env%3D%3Dprod", &["a"]),
        ("env!%3Dprod", &["b", "c", "d"]),
        ("env+in+(prod,dev)", &["a", "b"]),
        ("env+notin+(prod,dev)", &["c", "d"]),
        ("tier", &["a", "b"]),
        ("!tier", &["c", "d"]),
        ("tier%3Dweb,env%3Ddev", &["b"]),
    ];
    for (sel, want) in cases {
        let l = api.must_get(&format!("{CMS}?labelSelector={sel}")).await;
        assert_eq!(names(&l), *want, "labelSelector={sel}");
    }
    let r = api.get(&format!("{CMS}?labelSelector=env+in+prod")).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(r.body["reason"], "BadRequest");
}

#[tokio::test]
async fn field_selectors() {
    let api = Api::new("fields").await;
    api.create(CMS, &configmap("a", &[])).await;
    api.create(CMS, &configmap("b", &[])).await;
    let l = api
        .must_get(&format!("{CMS}?fieldSelector=metadata.name%3Db"))
        .await;
    assert_eq!(names(&l), ["b"]);
    let l = api
        .must_get(&format!("{CMS}?fieldSelector=metadata.name!%3Db"))
        .await;
    assert_eq!(names(&l), ["a"]);
    let l = api
        .must_get("/api/v1/configmaps?fieldSelector=metadata.namespace%3Ddefault")
        .await;
    assert_eq!(names(&l), ["a", "b"]);
    // A kind without field selectors of its own.
    let r = api.get(&format!("{CMS}?fieldSelector=data.k%3Dv")).await;
    assert_eq!(
        r.status(),
        (
            400,
            "BadRequest",
            "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    );

    api.create(PODS, &pod("p1", Some("node-1"))).await;
    api.create(PODS, &pod("p2", Some("node-2"))).await;
    api.create(PODS, &pod("p3", None)).await;
    let running = api
        .put(&format!("{PODS}/p2/status"), &{
            let mut p = api.must_get(&format!("{PODS}/p2")).await;
            p["status"] = json!({"phase": "Running"});
            p
        })
        .await;
    assert_eq!(running.code, StatusCode::OK, "{}", running.body);

    let l = api
        .must_get(&format!("{PODS}?fieldSelector=spec.nodeName%3Dnode-1"))
        .await;
    assert_eq!(names(&l), ["p1"]);
    let l = api
        .must_get(&format!("{PODS}?fieldSelector=spec.nodeName%3D"))
        .await;
    assert_eq!(names(&l), ["p3"]);
    let l = api
        .must_get(&format!("{PODS}?fieldSelector=status.phase%3DRunning"))
        .await;
    assert_eq!(names(&l), ["p2"]);
    let l = api
        .must_get(&format!(
            "{PODS}?fieldSelector=status.phase!%3DRunning,spec.nodeName!%3D"
        ))
        .await;
    assert_eq!(names(&l), ["p1"]);

    let r = api
        .get(&format!("{PODS}?fieldSelector=spec.bogus%3Dx"))
        .await;
    assert_eq!(
        r.status(),
        (400, "BadRequest", "field label not supported: spec.bogus")
    );
}

/// Compaction is global, so this test has an etcd of its own.
#[tokio::test]
async fn exact_list_at_a_compacted_revision_is_expired() {
    let etcd = match TestEtcd::start().await {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    let api = Api::on(&etcd, "compacted").await;
    let a = api.create(CMS, &configmap("a", &[])).await;
    let old = rv(&a);
    api.create(CMS, &configmap("b", &[])).await;
    let p1 = api.must_get(&format!("{CMS}?limit=1")).await;
    let token = p1["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let b = api.create(CMS, &configmap("c", &[])).await;
    let latest: i64 = rv(&b).parse().unwrap_or(0);
    if let Err(e) = etcd.compact(latest).await {
        panic!("compact: {e}");
    }
    // The watch cache learns of a compaction done behind its back on a timer
    // (the server's own compactor will tell it at once); make it look now.
    if let Some(cache) = &api.state.cache {
        if let Err(e) = cache.check_compaction().await {
            panic!("check_compaction: {e}");
        }
    }

    let r = api
        .get(&format!(
            "{CMS}?resourceVersion={old}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(
        r.status(),
        (
            410,
            "Expired",
            "The resourceVersion for the provided list is too old."
        )
    );
    // A continue token from before the compaction: 410 with a fresh token.
    let r = api.get(&format!("{CMS}?limit=1&continue={token}")).await;
    assert_eq!(r.code, StatusCode::GONE, "{}", r.body);
    assert_eq!(r.body["reason"], "Expired");
    assert!(r.body["metadata"]["continue"].is_string(), "{}", r.body);

    // The current state is still readable.
    assert_eq!(names(&api.must_get(CMS).await), ["a", "b", "c"]);

    // A watch from the compacted revision ends with a 410 ERROR event.
    let resp = api
        .send(
            "GET",
            &format!("{CMS}?watch=1&resourceVersion={old}"),
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let (events, _) = crate::common::read_lines(resp, 1, std::time::Duration::from_secs(10)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

#[tokio::test]
async fn table_output() {
    let api = Api::new("table").await;
    let a = api.create(CMS, &configmap("a", &[("k", "v")])).await;
    api.create(CMS, &configmap("b", &[])).await;

    let r = api
        .call("GET", CMS, &[("accept", TABLE)], Body::empty())
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    let t = &r.body;
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .map(|c| c.iter().filter_map(|d| d["name"].as_str()).collect())
        .unwrap_or_default();
    // kube's ConfigMap printer: Name, Data (the number of keys), Age.
    assert_eq!(cols, ["Name", "Data", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    // (kube declares the Data column a string and fills it with a number)
    assert_eq!(t["columnDefinitions"][1]["type"], "string");
    let rows = t["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["cells"][0], "a");
    assert_eq!(
        rows[0]["cells"][1],
        a["data"].as_object().map_or(0, |d| d.len())
    );
    assert!(
        rows[0]["cells"][2]
            .as_str()
            .is_some_and(|age| age.ends_with('s')),
        "{t}"
    );
    // The default includeObject is Metadata.
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["uid"], a["metadata"]["uid"]);
    assert!(rows[0]["object"].get("data").is_none());
    assert!(t["metadata"]["resourceVersion"].is_string());

    let r = api
        .call(
            "GET",
            &format!("{CMS}?includeObject=Object"),
            &[("accept", TABLE)],
            Body::empty(),
        )
        .await;
    assert_eq!(r.body["rows"][0]["object"], a);
    let r = api
        .call(
            "GET",
            &format!("{CMS}?includeObject=None"),
            &[("accept", TABLE)],
            Body::empty(),
        )
        .await;
    assert!(r.body["rows"][0].get("object").is_none(), "{}", r.body);
    let r = api
        .call(
            "GET",
            &format!("{CMS}?includeObject=All"),
            &[("accept", TABLE)],
            Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);

    // One object as a Table.
    let r = api
        .call(
            "GET",
            &format!("{CMS}/b"),
            &[("accept", TABLE)],
            Body::empty(),
        )
        .await;
    assert_eq!(r.body["kind"], "Table");
    assert_eq!(r.body["rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(r.body["rows"][0]["cells"][0], "b");

    // A Table with a JSON fallback when the client also accepts JSON.
    let r = api
        .call(
            "GET",
            CMS,
            &[("accept", &format!("{TABLE}, application/json"))],
            Body::empty(),
        )
        .await;
    assert_eq!(r.body["kind"], "Table");
}

#[tokio::test]
async fn partial_object_metadata() {
    let api = Api::new("pom").await;
    let a = api
        .create(CMS, &labelled_configmap("a", &[("x", "y")]))
        .await;
    let r = api
        .call(
            "GET",
            CMS,
            &[(
                "accept",
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            )],
            Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "PartialObjectMetadataList");
    assert_eq!(r.body["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(r.body["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(r.body["items"][0]["metadata"], a["metadata"]);
    assert!(r.body["items"][0].get("data").is_none());

    let r = api
        .call(
            "GET",
            &format!("{CMS}/a"),
            &[(
                "accept",
                "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            )],
            Body::empty(),
        )
        .await;
    assert_eq!(
        r.body,
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": a["metadata"]})
    );

    let r = api
        .call(
            "GET",
            &format!("{CMS}/a"),
            &[(
                "accept",
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            )],
            Body::empty(),
        )
        .await;
    assert_eq!(r.code, StatusCode::NOT_ACCEPTABLE, "{}", r.body);
}
