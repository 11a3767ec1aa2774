//! The cache's start-up list reads the prefix in parallel key ranges at
//! one revision (issue 31): on a real etcd, the result must equal one
//! sequential range at that revision, key for key, across the split points
//! and while other clients write under the prefix.

use etcd_client::{Client, GetOptions, KeyValue};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use watchcache::cache::testing::{read_all, RangeRead};
use watchcache::testing::conformance::unique_prefix;
use watchcache::testing::TestEtcd;

/// Keys of several resources and namespaces, plus keys with bytes the
/// planner does not split on (upper case, `~`, non-ASCII, the prefix's
/// first child byte), so that they must still land in some range.
fn keys(prefix: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for resource in ["configmaps", "pods", "apiregistration.k8s.io/apiservices"] {
        for ns in ["default", "kube-system", "ns-1", "ns-2"] {
            for i in 0..40 {
                keys.push(format!("{prefix}{resource}/{ns}/obj-{i:03}"));
            }
        }
    }
    // One big namespace, which must be cut inside.
    for i in 0..300 {
        keys.push(format!("{prefix}configmaps/big/cm-{i:04}"));
    }
    for odd in [
        "Upper/x",
        "~tilde",
        "configmaps/ns-1/\u{e9}t\u{e9}",
        "a",
        "-",
        "z{",
    ] {
        keys.push(format!("{prefix}{odd}"));
    }
    keys
}

fn row(kv: &KeyValue) -> (Vec<u8>, Vec<u8>, i64, i64, i64) {
    (
        kv.key().to_vec(),
        kv.value().to_vec(),
        kv.create_revision(),
        kv.mod_revision(),
        kv.version(),
    )
}

/// One range of the whole prefix at `revision`, as etcd returns it.
async fn sequential(client: &Client, prefix: &str, revision: i64) -> Vec<KeyValue> {
    let mut kv = client.kv_client();
    let options = GetOptions::new().with_prefix().with_revision(revision);
    match kv.get(prefix, Some(options)).await {
        Ok(mut resp) => resp.take_kvs(),
        Err(e) => panic!("sequential range: {e}"),
    }
}

#[tokio::test]
async fn parallel_ranges_equal_one_range_at_the_same_revision() {
    let etcd = TestEtcd::shared().await;
    let client = match Client::connect([etcd.endpoint()], None).await {
        Ok(c) => c,
        Err(e) => panic!("connect: {e}"),
    };
    let prefix = unique_prefix("startup");
    let keys = keys(&prefix);
    let mut kv = client.kv_client();
    for (i, key) in keys.iter().enumerate() {
        if let Err(e) = kv
            .put(key.as_str(), format!("value {i} of {key}"), None)
            .await
        {
            panic!("put {key}: {e}");
        }
    }
    // Writers under the prefix during every read: updates, creations
    // between existing keys, deletions.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let mut kv = client.kv_client();
        let stop = stop.clone();
        let keys = keys.clone();
        async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let key = &keys[(n * 7919) % keys.len()];
                let _ = kv.put(key.as_str(), format!("update {n}"), None).await;
                let _ = kv.put(format!("{key}-new-{n}"), "created", None).await;
                let gone = &keys[(n * 104_729 + 3) % keys.len()];
                let _ = kv.delete(gone.as_str(), None).await;
                n += 1;
            }
            n
        }
    });
    let how = |page, range_keys| RangeRead {
        timeout: Duration::from_secs(10),
        page,
        range_keys,
    };
    for (label, how, at_latest) in [
        (
            "small ranges, pages of 7, at a given revision",
            how(7, Some(25)),
            false,
        ),
        (
            "small ranges, pages of 7, at the latest",
            how(7, Some(25)),
            true,
        ),
        ("ranges picked from the count", how(5, None), true),
        ("one range", how(7, Some(0)), true),
        ("pages larger than ranges", how(1000, Some(30)), true),
    ] {
        let wanted_revision = if at_latest {
            0
        } else {
            match kv.get(prefix.as_str(), None).await {
                Ok(resp) => resp.header().map(|h| h.revision()).unwrap_or(0),
                Err(e) => panic!("revision: {e}"),
            }
        };
        let (revision, ranges, got) =
            match read_all(&client, prefix.as_bytes(), wanted_revision, &how).await {
                Ok(read) => read,
                Err(e) => panic!("{label}: {e}"),
            };
        if wanted_revision > 0 {
            assert_eq!(revision, wanted_revision, "{label}");
        }
        let want = sequential(&client, &prefix, revision).await;
        assert!(want.len() >= keys.len() / 2, "{label}: {} keys", want.len());
        match how.range_keys {
            Some(0) => assert_eq!(ranges, 1, "{label}"),
            Some(n) => assert!(
                ranges as u64 >= want.len() as u64 / n / 2,
                "{label}: {ranges} ranges"
            ),
            None => assert!(ranges > 1, "{label}: {ranges} ranges"),
        }
        let got: Vec<_> = got.iter().map(row).collect();
        let want: Vec<_> = want.iter().map(row).collect();
        assert_eq!(got.len(), want.len(), "{label}: number of keys");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{label}: {:?}", String::from_utf8_lossy(&w.0));
        }
        // Every key is at or before the revision read: no write after it
        // leaked in.
        assert!(got.iter().all(|r| r.3 <= revision), "{label}");
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.await.unwrap_or(0);
    assert!(writes > 0, "the writer never ran");
}

#[tokio::test]
async fn a_compacted_revision_is_refused() {
    let etcd = TestEtcd::start().await.unwrap_or_else(|e| panic!("{e}"));
    let client = Client::connect([etcd.endpoint()], None)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let prefix = unique_prefix("startup-compacted");
    let mut kv = client.kv_client();
    let mut first = 0;
    for i in 0..50 {
        let resp = kv
            .put(format!("{prefix}k{i:02}"), "v", None)
            .await
            .unwrap_or_else(|e| panic!("put: {e}"));
        if i == 0 {
            first = resp.header().map(|h| h.revision()).unwrap_or(0);
        }
    }
    etcd.compact(first + 10)
        .await
        .unwrap_or_else(|e| panic!("compact: {e}"));
    let how = RangeRead {
        timeout: Duration::from_secs(10),
        page: 3,
        range_keys: Some(5),
    };
    match read_all(&client, prefix.as_bytes(), first, &how).await {
        Err(watchcache::StorageError::Compacted { .. }) => {}
        other => panic!("read at a compacted revision: {:?}", other.map(|r| r.0)),
    }
}

/// Times the start-up read of a loaded etcd, as one range and in ranges:
/// `STARTUP_ETCD=http://… STARTUP_PREFIX=/registry/ cargo test --release
/// -p watchcache --features test-util --test cache_start -- --ignored`.
#[tokio::test]
#[ignore]
async fn time_reading_a_loaded_etcd() {
    let (Ok(endpoint), Ok(prefix)) = (
        std::env::var("STARTUP_ETCD"),
        std::env::var("STARTUP_PREFIX"),
    ) else {
        panic!("set STARTUP_ETCD and STARTUP_PREFIX");
    };
    let client = Client::connect([endpoint], None)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    for range_keys in [Some(0), None, Some(0), None] {
        let how = RangeRead {
            timeout: Duration::from_secs(120),
            page: 10_000,
            range_keys,
        };
        let start = std::time::Instant::now();
        let (_, ranges, kvs) = read_all(&client, prefix.as_bytes(), 0, &how)
            .await
            .unwrap_or_else(|e| panic!("read: {e}"));
        eprintln!(
            "{ranges} ranges: {} keys in {:.2} s",
            kvs.len(),
            start.elapsed().as_secs_f64()
        );
    }
}
