//! Behaviour of the etcd store beyond the conformance suite: the stored
//! bytes, unavailability, and the end of watches.

use futures_util::StreamExt;
use std::time::{Duration, Instant};
use watchcache::etcd::EtcdStore;
use watchcache::testing::conformance::{object, unique_prefix};
use watchcache::testing::TestEtcd;
use watchcache::{Storage, StorageError, WatchOptions};

#[tokio::test]
async fn stored_value_is_compact_json_in_kube_order_without_resource_version() {
    let etcd = TestEtcd::shared().await;
    let store = etcd.store().await;
    let key = format!("{}a", unique_prefix("stored"));
    let mut value = object("a", &[("app", "web")], "1");
    value["metadata"]["resourceVersion"] = "99".into();
    let created = store.create(&key, &value).await.expect("create");

    let mut client = store.client();
    let resp = client.get(key.as_str(), None).await.expect("raw get");
    let kv = &resp.kvs()[0];
    assert_eq!(kv.mod_revision(), created.revision);
    let raw = String::from_utf8(kv.value().to_vec()).expect("utf-8");
    assert_eq!(
        raw,
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"default","labels":{"app":"web"}},"data":{"value":"1"}}"#,
        "stored in kube's key order"
    );
    assert_eq!(
        created.value()["metadata"]["resourceVersion"],
        created.revision.to_string()
    );
}

#[tokio::test]
async fn corrupt_value_is_reported() {
    let etcd = TestEtcd::shared().await;
    let store = etcd.store().await;
    let prefix = unique_prefix("corrupt");
    let key = format!("{prefix}bad");
    let mut client = store.client();
    client
        .put(key.as_str(), "not json", None)
        .await
        .expect("raw put");
    match store
        .get(&key, apimachinery::read::Freshness::MostRecent)
        .await
    {
        Err(StorageError::Corrupt { key: k, .. }) => assert_eq!(k, key),
        other => panic!("corrupt get: {other:?}"),
    }
}

#[tokio::test]
async fn unreachable_etcd_is_unavailable_quickly() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let timeout = Duration::from_millis(300);
    let store = EtcdStore::connect(&[format!("http://127.0.0.1:{port}")], timeout)
        .await
        .expect("connect is lazy");
    let started = Instant::now();
    match store.revision().await {
        Err(StorageError::Unavailable(_)) => {}
        other => panic!("current_revision: {other:?}"),
    }
    match store.health().await {
        Err(StorageError::Unavailable(_)) => {}
        other => panic!("health: {other:?}"),
    }
    match store
        .create("/registry/unreachable/a", &object("a", &[], "1"))
        .await
    {
        Err(StorageError::Unavailable(_)) => {}
        other => panic!("create: {other:?}"),
    }
    match store
        .watch(
            "/registry/unreachable/",
            WatchOptions {
                after_revision: 1,
                initial_events: false,
                ..WatchOptions::default()
            },
        )
        .await
    {
        Err(StorageError::Unavailable(_)) => {}
        Err(e) => panic!("watch: {e:?}"),
        Ok(_) => panic!("watch on an unreachable etcd"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn watch_reports_loss_of_etcd() {
    let mut etcd = TestEtcd::start().await.expect("etcd");
    let store = etcd.store().await;
    let prefix = unique_prefix("loss");
    let created = store
        .create(&format!("{prefix}a"), &object("a", &[], "1"))
        .await
        .expect("create");
    let mut stream = store
        .watch(
            &prefix,
            WatchOptions {
                after_revision: created.revision,
                initial_events: false,
                ..WatchOptions::default()
            },
        )
        .await
        .expect("watch");
    etcd.stop();
    match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        Ok(Some(Err(StorageError::Unavailable(_)))) | Ok(None) => {}
        other => panic!("watch after etcd stopped: {other:?}"),
    }
}

/// etcd's count of open watchers, from its metrics on the client URL.
async fn etcd_watchers(endpoint: &str) -> i64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = endpoint.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .await
        .expect("request");
    let mut body = String::new();
    conn.read_to_string(&mut body).await.expect("metrics");
    body.lines()
        .find_map(|l| l.strip_prefix("etcd_debugging_mvcc_watcher_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as i64)
        .expect("watcher gauge")
}

#[tokio::test]
async fn dropped_watch_stops_its_etcd_watcher() {
    let etcd = TestEtcd::start().await.expect("etcd");
    let store = etcd.store().await;
    let prefix = unique_prefix("dropped");
    let options = || WatchOptions {
        after_revision: 0,
        initial_events: true,
        ..WatchOptions::default()
    };
    let first = store.watch(&prefix, options()).await.expect("watch");
    let second = store.watch(&prefix, options()).await.expect("watch");
    assert_eq!(etcd_watchers(&etcd.endpoint()).await, 2);
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    while etcd_watchers(&etcd.endpoint()).await != 1 {
        assert!(
            Instant::now() < deadline,
            "the dropped watch's etcd watcher stays"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(second);
    while etcd_watchers(&etcd.endpoint()).await != 0 {
        assert!(
            Instant::now() < deadline,
            "the dropped watch's etcd watcher stays"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
