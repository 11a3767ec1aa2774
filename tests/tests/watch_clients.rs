//! Watch clients nobody here wrote: kube-runtime's `watcher` feeding a
//! `reflector` store, in list-then-watch mode and in streaming-list mode
//! (`sendInitialEvents=true`), over plain HTTP against the real binary.
//!
//! Each test starts the reflector while a writer creates, updates and
//! deletes ConfigMaps of one namespace, lets the writer finish, and then
//! requires the store to reach exactly the state of a fresh consistent list
//! (names and resourceVersions) within a deadline.

use e2e::Server;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Names the writer cycles through (so objects are created, updated and
/// deleted again and again).
const NAMES: usize = 24;
/// How long the writer keeps writing after the reflector started.
const WRITE_FOR: Duration = Duration::from_secs(5);
/// Upper bound on the writer's operations, whatever the speed.
const MAX_WRITES: usize = 3_000;
/// How long the store may take to reach the final state.
const CONVERGE_WITHIN: Duration = Duration::from_secs(30);

fn client(server: &Server) -> Client {
    let url = server.url.parse().expect("server url");
    Client::try_from(kube::Config::new(url)).expect("kube client")
}

async fn namespace(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

fn config_map(name: &str, value: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("parity".into(), (value % 2).to_string())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".into(), value.to_string())])),
        ..ConfigMap::default()
    }
}

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Creates, updates (PUT) and deletes ConfigMaps until `WRITE_FOR` has
/// passed since `since` (or `MAX_WRITES`); returns the number of writes.
async fn write_churn(api: Api<ConfigMap>, seed: u64, since: Instant) -> usize {
    let mut rng = Rng(seed);
    let mut live: Vec<Option<ConfigMap>> = vec![None; NAMES];
    let mut writes = 0;
    while writes < MAX_WRITES && since.elapsed() < WRITE_FOR {
        let slot = (rng.next() % NAMES as u64) as usize;
        let name = format!("cm-{slot}");
        let roll = rng.next();
        live[slot] = match live[slot].take() {
            None => Some(
                api.create(&PostParams::default(), &config_map(&name, roll))
                    .await
                    .expect("create"),
            ),
            Some(_) if roll % 3 == 0 => {
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete");
                None
            }
            Some(mut current) => {
                let next = config_map(&name, roll);
                current.data = next.data;
                current.metadata.labels = next.metadata.labels;
                Some(
                    api.replace(&name, &PostParams::default(), &current)
                        .await
                        .expect("replace"),
                )
            }
        };
        writes += 1;
    }
    writes
}

/// name → resourceVersion.
fn versions<'a>(objects: impl Iterator<Item = &'a ConfigMap>) -> BTreeMap<String, String> {
    objects
        .map(|cm| {
            (
                cm.metadata.name.clone().unwrap_or_default(),
                cm.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Runs a reflector with `config` over the ConfigMaps of a fresh namespace
/// while a writer churns them, then requires the store to equal a fresh
/// list. Returns the writes made and the watcher errors seen.
async fn reflector_converges(config: watcher::Config, ns: &str, seed: u64) -> (usize, Vec<String>) {
    let server = Server::start().await;
    let client = client(&server);
    namespace(&client, ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    // Some objects exist before the watcher starts (its initial state).
    for i in 0..NAMES / 2 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("pre-{i}"), i as u64),
        )
        .await
        .expect("create");
    }

    let (reader, writer) = reflector::store::<ConfigMap>();
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen_errors = errors.clone();
    let reflector = tokio::spawn(
        reflector::reflector(writer, watcher(api.clone(), config))
            .default_backoff()
            .for_each(move |event| {
                if let Err(e) = event {
                    seen_errors
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(e.to_string());
                }
                std::future::ready(())
            }),
    );

    // Writes start with the reflector, so some overlap its initial state.
    let writes = write_churn(api.clone(), seed, Instant::now()).await;
    tokio::time::timeout(CONVERGE_WITHIN, reader.wait_until_ready())
        .await
        .expect("the reflector finished its initial state in time")
        .expect("reflector writer alive");

    let fresh = api.list(&ListParams::default()).await.expect("fresh list");
    let want = versions(fresh.items.iter());
    let got = wait_for_store(&reader, &want).await;
    assert_eq!(
        got,
        want,
        "reflector store differs from a fresh list at {:?}; watcher errors: {:?}; server log:\n{}",
        fresh.metadata.resource_version,
        errors.lock().unwrap_or_else(|e| e.into_inner()),
        server.log()
    );
    reflector.abort();
    let errors = errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (writes, errors)
}

/// Polls the store until it equals `want`; returns the last state seen.
async fn wait_for_store(
    reader: &Store<ConfigMap>,
    want: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let deadline = Instant::now() + CONVERGE_WITHIN;
    loop {
        let state = reader.state();
        let got = versions(state.iter().map(|cm| &**cm));
        if &got == want || Instant::now() >= deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// List-then-watch (`resourceVersion=0` paged list, then a watch from its
/// resourceVersion). The server ends each watch after 2 s, so the watcher
/// resumes several times from the last resourceVersion it saw (the final
/// bookmark of each watch) while the writes go on.
#[tokio::test]
async fn list_then_watch_reaches_a_fresh_list() {
    let config = watcher::Config::default().timeout(2).page_size(5);
    let (writes, errors) = reflector_converges(config, "kube-listwatch", 0x9e37_79b9).await;
    assert!(writes > NAMES, "only {writes} writes");
    assert!(errors.is_empty(), "watcher errors: {errors:?}");
}

/// Streaming list: one watch with `sendInitialEvents=true`,
/// `resourceVersionMatch=NotOlderThan`, `resourceVersion=0`: ADDED for the
/// initial state, the `k8s.io/initial-events-end` bookmark, then changes.
///
/// The watch keeps kube's default lifetime (290 s): kube 2.x resumes a
/// streaming watch with `sendInitialEvents=true` again (kube-rs issue 1844,
/// fixed in kube 3), applying the new snapshot without removing objects
/// deleted meanwhile, so a short timeout would test that client bug.
#[tokio::test]
async fn streaming_list_reaches_a_fresh_list() {
    let config = watcher::Config::default().streaming_lists();
    let (writes, errors) = reflector_converges(config, "kube-streaming", 0x2545_f491).await;
    assert!(writes > NAMES, "only {writes} writes");
    assert!(errors.is_empty(), "watcher errors: {errors:?}");
}

/// Streaming list with a label selector: objects whose label changes enter
/// and leave the watcher's view (ADDED / DELETED transitions).
#[tokio::test]
async fn streaming_list_with_a_selector_reaches_a_fresh_list() {
    let server = Server::start().await;
    let client = client(&server);
    namespace(&client, "kube-selector").await;
    let api: Api<ConfigMap> = Api::namespaced(client, "kube-selector");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let config = watcher::Config::default()
        .streaming_lists()
        .labels("parity=1");
    let reflector = tokio::spawn(
        reflector::reflector(writer, watcher(api.clone(), config))
            .default_backoff()
            .for_each(|_| std::future::ready(())),
    );
    let writes = write_churn(api.clone(), 0x5851_f42d, Instant::now()).await;
    assert!(writes > NAMES, "only {writes} writes");
    let fresh = api
        .list(&ListParams::default().labels("parity=1"))
        .await
        .expect("fresh list");
    let want = versions(fresh.items.iter());
    let got = wait_for_store(&reader, &want).await;
    assert_eq!(got, want, "server log:\n{}", server.log());
    reflector.abort();
}
