//! An operator written with kube-runtime (the kube crate's `runtime`
//! feature, the version the workspace locks) against two replicas behind
//! HAProxy (issue 33), run in-process with a client at the load balancer.
//!
//! The controller reconciles `Gizmo`s (a CRD from the kube derive, with a
//! status subresource): through `kube::runtime::finalizer` it writes a
//! ConfigMap `<name>-data` it owns (server-side apply, ownerReference to
//! the Gizmo) holding the token of the Secret labelled for the Gizmo, and
//! the Gizmo's status by server-side apply on the status subresource; on
//! deletion the finalizer's cleanup leaves a `<name>-deleted` ConfigMap.
//! `.owns(ConfigMap)` brings back a deleted ConfigMap, `.watches(Secret)`
//! follows a changed token.
//!
//! Each replica is restarted in place in turn while Gizmos are created:
//! the controller goes on reconciling, and relists at most a little. Every
//! outcome is read with kubectl.

use e2e::cluster::Cluster;
use e2e::operator::{
    assert_no_relist_storm, delete_with_cleanup, get_json, wait_watched, ListCounter,
};
use e2e::{eventually, Server};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "ops-kube";
const SETTLE: Duration = Duration::from_secs(30);
const MANAGER: &str = "gizmo-operator";
const FINALIZER: &str = "ops.example.com/cleanup";
/// The label that ties a Secret to the Gizmo it feeds.
const GIZMO_LABEL: &str = "ops.example.com/gizmo";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "ops.example.com",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus"
)]
pub struct GizmoSpec {
    size: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct GizmoStatus {
    phase: String,
    config_map: String,
    token: String,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

struct Ctx {
    client: Client,
    reconciles: AtomicUsize,
    errors: AtomicUsize,
}

/// The token of the Secret `<gizmo>-input`, if it exists (a GET: the
/// test counts LISTs).
async fn token_for(secrets: &Api<Secret>, gizmo: &str) -> Result<String, Error> {
    let secret = secrets.get_opt(&format!("{gizmo}-input")).await?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get("token").cloned())
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default())
}

async fn apply(g: Arc<Gizmo>, ctx: &Ctx) -> Result<Action, Error> {
    let ns = g.namespace().unwrap_or_default();
    let name = g.name_any();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let token = token_for(&secrets, &name).await?;
    let owner = g
        .controller_owner_ref(&())
        .expect("a stored Gizmo has a uid");
    let cm_name = format!("{name}-data");
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": cm_name, "ownerReferences": [owner]},
        "data": {"size": g.spec.size.to_string(), "token": token},
    });
    let params = PatchParams::apply(MANAGER).force();
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    cms.patch(&cm_name, &params, &Patch::Apply(&cm)).await?;
    let status = json!({
        "apiVersion": "ops.example.com/v1", "kind": "Gizmo",
        "status": {"phase": "Ready", "configMap": cm_name, "token": token},
    });
    let gizmos: Api<Gizmo> = Api::namespaced(ctx.client.clone(), &ns);
    gizmos
        .patch_status(&name, &params, &Patch::Apply(&status))
        .await?;
    Ok(Action::await_change())
}

async fn cleanup(g: Arc<Gizmo>, ctx: &Ctx) -> Result<Action, Error> {
    let ns = g.namespace().unwrap_or_default();
    let trace = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{}-deleted", g.name_any())},
        "data": {"gizmo": g.name_any()},
    });
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let name = format!("{}-deleted", g.name_any());
    cms.patch(&name, &PatchParams::apply(MANAGER), &Patch::Apply(&trace))
        .await?;
    Ok(Action::await_change())
}

async fn reconcile(g: Arc<Gizmo>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let ns = g.namespace().unwrap_or_default();
    let gizmos: Api<Gizmo> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&gizmos, FINALIZER, g, |event| async {
        match event {
            Event::Apply(g) => apply(g, &ctx).await,
            Event::Cleanup(g) => cleanup(g, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

fn error_policy(_g: Arc<Gizmo>, _e: &Error, ctx: Arc<Ctx>) -> Action {
    // Requests fail while a replica restarts: try again soon.
    ctx.errors.fetch_add(1, Ordering::SeqCst);
    Action::requeue(Duration::from_millis(300))
}

/// Starts the controller on its own task; it stops with the runtime.
fn start_controller(client: Client) -> Arc<Ctx> {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        reconciles: AtomicUsize::new(0),
        errors: AtomicUsize::new(0),
    });
    let gizmos: Api<Gizmo> = Api::namespaced(client.clone(), NS);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client, NS);
    let controller = Controller::new(gizmos, watcher::Config::default())
        .owns(cms, watcher::Config::default())
        .watches(secrets, watcher::Config::default(), |s: Secret| {
            let ns = s.namespace().unwrap_or_default();
            s.labels()
                .get(GIZMO_LABEL)
                .map(|g| ObjectRef::new(g).within(&ns))
        })
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| futures_util::future::ready(()));
    tokio::spawn(controller);
    ctx
}

/// `kubectl get -o json` of one named object in `NS`, if it exists.
fn get(k: &Server, args: &[&str]) -> Option<Value> {
    get_json(k, NS, args)
}

fn gizmo(name: &str, size: i32) -> String {
    format!(
        "apiVersion: ops.example.com/v1\nkind: Gizmo\nmetadata: {{name: {name}, namespace: {NS}}}\nspec: {{size: {size}}}\n"
    )
}

fn secret(gizmo: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {gizmo}-input, namespace: {NS}, labels: {{{GIZMO_LABEL}: {gizmo}}}}}\nstringData: {{token: {token}}}\n"
    )
}

/// Waits until Gizmo `name` is reconciled with `token`: its owned
/// ConfigMap holds it and its status says so. Returns the ConfigMap.
async fn reconciled(k: &Server, name: &str, token: &str) -> Value {
    let cm_name = format!("{name}-data");
    let cm = eventually(
        &format!("ConfigMap {cm_name} with token {token:?}"),
        SETTLE,
        || get(k, &["configmap", &cm_name]).filter(|cm| cm["data"]["token"] == token),
    )
    .await;
    let g = eventually(&format!("status of gizmo {name}"), SETTLE, || {
        get(k, &["gizmo", name]).filter(|g| g["status"]["token"] == token)
    })
    .await;
    assert_eq!(g["status"]["phase"], "Ready", "{g}");
    assert_eq!(g["status"]["configMap"], cm_name.as_str(), "{g}");
    let owner = &cm["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], g["metadata"]["uid"], "{cm}");
    assert_eq!(owner["controller"], true, "{cm}");
    assert!(
        g["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER)),
        "the finalizer on {g}"
    );
    cm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_controller_reconciles_through_replica_restarts() {
    let mut c = Cluster::start(2, &[]).await;
    {
        let k = &c.replicas[1];
        let crd = serde_json::to_string(&Gizmo::crd()).expect("crd");
        k.kubectl_stdin_ok(&["apply", "-f", "-"], &crd);
        k.kubectl_ok(&["create", "namespace", NS]);
        eventually("the Gizmo CRD to be served", SETTLE, || {
            k.kubectl(&["get", "gizmos", "-n", NS])
                .status
                .success()
                .then_some(())
        })
        .await;
    }
    let url = format!("http://{}", c.addr()).parse().expect("lb url");
    let client = Client::try_from(kube::Config::new(url)).expect("kube client");
    let ctx = start_controller(client.clone());

    // Reconcile: finalizer, owned ConfigMap, status by server-side apply.
    let k = &c.replicas[1];
    k.kubectl_stdin_ok(&["apply", "-f", "-"], &secret("g1", "alpha"));
    k.kubectl_stdin_ok(&["apply", "-f", "-"], &gizmo("g1", 3));
    let cm = reconciled(k, "g1", "alpha").await;
    assert_eq!(cm["data"]["size"], "3", "{cm}");
    let g1 = k.get_json(&["gizmo", "g1", "-n", NS, "--show-managed-fields"]);
    let status_owner = g1["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .find(|m| m["subresource"] == "status")
        .unwrap_or_else(|| panic!("no status entry in {g1}"));
    assert_eq!(status_owner["manager"], MANAGER, "{g1}");
    assert_eq!(status_owner["operation"], "Apply", "{g1}");

    // watches(Secret): a new token reaches the ConfigMap and the status.
    k.kubectl_stdin_ok(&["apply", "-f", "-"], &secret("g1", "beta"));
    reconciled(k, "g1", "beta").await;
    // owns(ConfigMap): a deleted ConfigMap comes back (a new one).
    let old_uid = cm["metadata"]["uid"].clone();
    k.kubectl_ok(&["delete", "configmap", "g1-data", "-n", NS]);
    let back = eventually("g1-data to come back", SETTLE, || {
        get(k, &["configmap", "g1-data"]).filter(|cm| cm["metadata"]["uid"] != old_uid)
    })
    .await;
    assert_eq!(back["data"]["token"], "beta", "{back}");

    // Each replica restarted in place in turn while Gizmos are created
    // through the load balancer: the controller goes on, without a
    // relist storm.
    let resources = ["gizmos", "configmaps", "secrets"];
    let lists = ListCounter::snapshot(&c.replicas, &resources).await;
    let gizmos: Api<Gizmo> = Api::namespaced(client.clone(), NS);
    for (i, name) in [(0, "g2"), (1, "g3")] {
        let create = async {
            let g = Gizmo::new(name, GizmoSpec { size: 5 });
            // A request that meets the dying replica fails; try again.
            for _ in 0..50 {
                match gizmos.create(&PostParams::default(), &g).await {
                    Ok(_) => return,
                    Err(kube::Error::Api(e)) if e.code == 409 => return,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
            panic!("cannot create {name}");
        };
        tokio::join!(c.replicas[i].restart(), create);
        reconciled(&c.replicas[1 - i], name, "").await;
    }
    for resource in resources {
        wait_watched(&c.replicas, resource, 1, SETTLE).await;
    }
    let lists = lists.since(&c.replicas, &[0, 1]).await;
    assert_no_relist_storm(&lists, String::new);

    // Deletion: the finalizer holds g1 until the cleanup ran, then the
    // garbage collector removes the owned ConfigMap.
    let k = &c.replicas[1];
    delete_with_cleanup(k, NS, ("gizmo", "g1", "gizmo"), "g2", SETTLE).await;
    eprintln!(
        "{} reconciles, {} failed",
        ctx.reconciles.load(Ordering::SeqCst),
        ctx.errors.load(Ordering::SeqCst)
    );
}
