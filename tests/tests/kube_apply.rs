//! Server-side apply from a library client nobody here wrote: the `kube`
//! crate's `Patch::Apply` creates a Deployment, re-applies it with a change,
//! and the managedFields read back name the manager and the Apply operation.

use e2e::Server;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::json;

fn client(server: &Server) -> Client {
    let url = server.url.parse().expect("server url");
    Client::try_from(kube::Config::new(url)).expect("kube client")
}

fn deployment(replicas: i32) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kube-applied", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_patch_apply_records_the_manager() {
    let server = Server::start().await;
    let api: Api<Deployment> = Api::namespaced(client(&server), "default");
    let params = PatchParams::apply("kube-rs-e2e");

    let created = api
        .patch("kube-applied", &params, &Patch::Apply(deployment(2)))
        .await
        .expect("apply creates the deployment");
    assert_eq!(created.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let first_rv = created.metadata.resource_version.clone();

    // The same configuration again is a no-op: the resourceVersion stays.
    let again = api
        .patch("kube-applied", &params, &Patch::Apply(deployment(2)))
        .await
        .expect("re-apply");
    assert_eq!(again.metadata.resource_version, first_rv);

    let changed = api
        .patch("kube-applied", &params, &Patch::Apply(deployment(3)))
        .await
        .expect("apply with a change");
    assert_eq!(changed.spec.as_ref().and_then(|s| s.replicas), Some(3));
    assert_ne!(changed.metadata.resource_version, first_rv);

    let read = api.get("kube-applied").await.expect("get");
    let entries = read.metadata.managed_fields.unwrap_or_default();
    let mine: Vec<_> = entries
        .iter()
        .filter(|e| e.manager.as_deref() == Some("kube-rs-e2e"))
        .collect();
    assert_eq!(mine.len(), 1, "one entry per manager: {entries:?}");
    assert_eq!(mine[0].operation.as_deref(), Some("Apply"));
    assert_eq!(mine[0].api_version.as_deref(), Some("apps/v1"));
    let fields = serde_json::to_value(&mine[0].fields_v1).expect("fieldsV1");
    let replicas = fields.pointer("/f:spec/f:replicas");
    assert!(
        replicas.is_some(),
        "the applier owns spec.replicas: {fields}"
    );
    let container = fields.pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"web\"}");
    assert!(
        container.is_some(),
        "containers are keyed by name: {fields}"
    );

    // A second manager changing replicas conflicts (409) unless forced.
    let other = PatchParams::apply("kube-rs-other");
    let err = api
        .patch("kube-applied", &other, &Patch::Apply(deployment(5)))
        .await
        .expect_err("conflict");
    match err {
        kube::Error::Api(resp) => {
            assert_eq!(resp.code, 409, "{resp:?}");
            assert!(
                resp.message.contains("conflict with \"kube-rs-e2e\""),
                "{resp:?}"
            );
        }
        other => panic!("unexpected error: {other}"),
    }
    let forced = api
        .patch("kube-applied", &other.force(), &Patch::Apply(deployment(5)))
        .await
        .expect("forced apply");
    assert_eq!(forced.spec.as_ref().and_then(|s| s.replicas), Some(5));
}
