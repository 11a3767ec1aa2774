//! Fault tests on a whole deployment on loopback (`e2e::cluster`): a static
//! 3-member etcd cluster, 3 replicas pointed at every member, and HAProxy
//! health-checking `/readyz` in front. Clients talk HTTP through HAProxy.
//!
//! - A replica killed (SIGKILL) under watching clients: every watch resumes
//!   through HAProxy on another replica from its last resourceVersion, and
//!   each watcher's events equal etcd's history: no gap, no duplicate.
//! - One etcd member stopped (the leader): writes and reads go on.
//! - Every etcd member stopped: requests fail fast with a 503/504 Status,
//!   /readyz fails, /livez stays up; when etcd returns, everything recovers
//!   and every acknowledged write is there.
//! - Concurrent read-modify-write clients on one object through different
//!   replicas: no lost update.

use e2e::cluster::Cluster;
use e2e::watch::{self, Line, OpenError, Seen};
use e2e::{http_request, HttpResponse};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAMESPACE: &str = "faults";
/// Longest any single request may take before the test calls it a hang.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);
/// How long a condition may take to settle (recovery, delivery).
const SETTLE: Duration = Duration::from_secs(45);

fn collection() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps")
}

/// One request with a deadline: a hang fails the test.
async fn send(addr: &str, method: &str, path: &str, body: Option<&Value>) -> HttpResponse {
    try_send(addr, method, path, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {path} through {addr}: {e}"))
}

/// One request with a deadline; a connection failure is an `Err`.
async fn try_send(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<HttpResponse> {
    let bytes = body.map(|b| serde_json::to_vec(b).expect("body"));
    let headers: &[(&str, &str)] = if bytes.is_some() {
        &[("Content-Type", "application/json")]
    } else {
        &[]
    };
    let call = http_request(addr, method, path, headers, bytes.as_deref().unwrap_or(b""));
    match tokio::time::timeout(REQUEST_DEADLINE, call).await {
        Ok(r) => r,
        Err(_) => panic!("{method} {path} through {addr} hung for {REQUEST_DEADLINE:?}"),
    }
}

fn json_of(resp: &HttpResponse) -> Value {
    serde_json::from_slice(&resp.body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", resp.status, resp.text()))
}

fn revision_of(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

fn config_map(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": data,
    })
}

async fn create_namespace(addr: &str) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let resp = send(addr, "POST", "/api/v1/namespaces", Some(&ns)).await;
    assert_eq!(resp.status, 201, "{}", resp.text());
}

/// Creates `name` through `addr` until the outcome is known: its revision
/// when this call created it, `None` when an earlier attempt whose answer
/// was lost did (409). Failures a load balancer produces while a replica
/// dies (refused or cut connections, 502, 503) are retried.
async fn create_until_known(addr: &str, name: &str) -> Option<i64> {
    let deadline = Instant::now() + SETTLE;
    let body = config_map(name, json!({"name": name}));
    loop {
        match try_send(addr, "POST", &collection(), Some(&body)).await {
            Ok(r) if r.status == 201 => return Some(revision_of(&json_of(&r))),
            Ok(r) if r.status == 409 => return None,
            Ok(r) if matches!(r.status, 502..=504) => {}
            Ok(r) => panic!("create {name}: {} {}", r.status, r.text()),
            Err(_) => {}
        }
        assert!(Instant::now() < deadline, "create {name} never succeeded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A consistent list of the collection through `addr` (must succeed).
async fn list(addr: &str) -> Value {
    let resp = send(addr, "GET", &collection(), None).await;
    assert_eq!(resp.status, 200, "list: {}", resp.text());
    json_of(&resp)
}

fn item_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().expect("name").to_string())
        .collect();
    names.sort();
    names
}

/// What one watching client received over all its connections.
#[derive(Debug, Default)]
struct Watcher {
    events: Vec<Seen>,
    /// The newest resourceVersion received (event or bookmark).
    last: i64,
    /// Streams that ended and were opened again from `last`.
    resumed: usize,
    errors: Vec<Value>,
}

/// Watches the collection through `addr` from `start` until it has seen
/// `until` (once known): on every end of the stream (its replica died) or
/// refused open, it watches again from the last resourceVersion it saw,
/// as client-go's reflector does. `progress` mirrors `last`; `opened`
/// counts watchers whose first watch is open.
async fn follow(
    addr: String,
    start: i64,
    mut until: tokio::sync::watch::Receiver<Option<i64>>,
    progress: Arc<AtomicI64>,
    opened: Arc<AtomicUsize>,
) -> Watcher {
    let mut w = Watcher {
        last: start,
        ..Watcher::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let done = |w: &Watcher, until: &Option<i64>| until.is_some_and(|u| w.last >= u);
    let mut opened_before = false;
    while !done(&w, &until.borrow()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watcher never caught up: {w:?}"
        );
        let path = format!(
            "{}?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds=300",
            collection(),
            w.last
        );
        let attempt = tokio::time::timeout(REQUEST_DEADLINE, watch::open(&addr, &path)).await;
        let mut rx = match attempt {
            Ok(Ok(rx)) => rx,
            // No replica reachable for a moment: HAProxy's 502/503, or a
            // cut connection.
            Ok(Err(OpenError::Io(_)))
            | Ok(Err(OpenError::Status {
                status: 502..=504, ..
            })) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Ok(Err(e)) => panic!("watch from {}: {e}", w.last),
            Err(_) => panic!("a watch through {addr} did not answer"),
        };
        if opened_before {
            w.resumed += 1;
        } else {
            opened.fetch_add(1, Ordering::Release);
        }
        opened_before = true;
        loop {
            let line = tokio::select! {
                line = rx.recv() => line,
                _ = until.changed() => {
                    if done(&w, &until.borrow()) { break } else { continue }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            };
            match line {
                Some(Line::Event(seen)) => {
                    w.last = w.last.max(seen.revision);
                    w.events.push(seen);
                }
                Some(Line::Bookmark(rv)) => w.last = w.last.max(rv),
                Some(Line::Error(status)) => w.errors.push(status),
                None => break,
            }
            progress.store(w.last, Ordering::Release);
            if done(&w, &until.borrow()) {
                break;
            }
        }
        assert!(w.errors.is_empty(), "watch errors: {:?}", w.errors);
    }
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_resume_on_another_replica_when_one_is_killed() {
    const WATCHERS: usize = 6;
    const WRITES: usize = 150;
    let mut c = Cluster::start(3, &[]).await;
    let lb = c.addr().to_string();
    create_namespace(&lb).await;
    let start = revision_of(&list(&lb).await);

    // With nothing else going through HAProxy, round robin gives each
    // replica WATCHERS / 3 of them.
    let (target_tx, target_rx) = tokio::sync::watch::channel(None);
    let mut watchers = Vec::new();
    let mut progress = Vec::new();
    let opened = Arc::new(AtomicUsize::new(0));
    for _ in 0..WATCHERS {
        let p = Arc::new(AtomicI64::new(start));
        progress.push(Arc::clone(&p));
        let follower = follow(lb.clone(), start, target_rx.clone(), p, Arc::clone(&opened));
        watchers.push(tokio::spawn(follower));
    }
    e2e::eventually("every watch to open", SETTLE, || {
        (opened.load(Ordering::Acquire) == WATCHERS).then_some(())
    })
    .await;
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let writer = {
        let lb = lb.clone();
        let acknowledged = Arc::clone(&acknowledged);
        tokio::spawn(async move {
            for i in 0..WRITES {
                create_until_known(&lb, &format!("cm-{i}")).await;
                acknowledged.fetch_add(1, Ordering::Release);
            }
            // The last write must have a known revision: the watchers'
            // target.
            let mut k = 0;
            loop {
                if let Some(rv) = create_until_known(&lb, &format!("last-{k}")).await {
                    return rv;
                }
                k += 1;
            }
        })
    };

    // Kill a replica mid-stream, once every watcher is receiving events.
    e2e::eventually("every watcher to receive events", SETTLE, || {
        let first = start + 30;
        (acknowledged.load(Ordering::Acquire) >= 40
            && progress.iter().all(|p| p.load(Ordering::Acquire) >= first))
        .then_some(())
    })
    .await;
    c.replicas[0].kill();

    let target = writer.await.expect("writer");
    target_tx.send(Some(target)).expect("watchers listen");
    let mut results = Vec::new();
    for w in watchers {
        results.push(w.await.expect("watcher"));
    }
    let key = format!("{}/configmaps/{NAMESPACE}/", c.prefix);
    let history = watch::etcd_history(
        &c.etcd.endpoints(),
        &key,
        start,
        target,
        Duration::from_secs(30),
    )
    .await;
    assert!(
        history.len() > WRITES,
        "etcd history after {start}: {history:?}"
    );
    let resumed = results.iter().filter(|w| w.resumed > 0).count();
    assert!(
        resumed >= WATCHERS / 3,
        "{resumed} watches resumed, but {} were on the killed replica",
        WATCHERS / 3
    );
    for (i, w) in results.iter().enumerate() {
        assert_eq!(
            w.events, history,
            "watcher {i} (resumed {} times) against etcd's history",
            w.resumed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_reads_continue_when_one_etcd_member_stops() {
    let mut c = Cluster::start(3, &[]).await;
    let lb = c.addr().to_string();
    create_namespace(&lb).await;

    // A writer and readers go on while the leader goes away.
    let failures = Arc::new(std::sync::Mutex::new(Vec::<Failure>::new()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let progress = Arc::new(AtomicUsize::new(0));
    let writer = {
        let lb = lb.clone();
        let failures = Arc::clone(&failures);
        let stop = stop_rx.clone();
        let progress = Arc::clone(&progress);
        tokio::spawn(async move {
            let mut written = Vec::new();
            let mut i = 0;
            while !*stop.borrow() {
                let name = format!("cm-{i}");
                i += 1;
                let body = config_map(&name, json!({"i": i.to_string()}));
                let sent = Instant::now();
                let resp = send(&lb, "POST", &collection(), Some(&body)).await;
                if resp.status != 201 {
                    let what = format!("create {name}");
                    failures
                        .lock()
                        .expect("failures")
                        .push(Failure::new(what, sent, true, resp));
                    continue;
                }
                let rv = revision_of(&json_of(&resp));
                // Read it back at once, through the next replica.
                let sent = Instant::now();
                let get = send(&lb, "GET", &format!("{}/{name}", collection()), None).await;
                if get.status != 200 || revision_of(&json_of(&get)) != rv {
                    let what = format!("get {name} (written at {rv})");
                    failures
                        .lock()
                        .expect("failures")
                        .push(Failure::new(what, sent, false, get));
                }
                written.push(name);
                progress.fetch_add(1, Ordering::Release);
            }
            written
        })
    };
    let lists = {
        let lb = lb.clone();
        let failures = Arc::clone(&failures);
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while !*stop.borrow() {
                let sent = Instant::now();
                let resp = send(&lb, "GET", &collection(), None).await;
                if resp.status != 200 {
                    let what = "list".to_string();
                    failures
                        .lock()
                        .expect("failures")
                        .push(Failure::new(what, sent, false, resp));
                }
                n += 1;
            }
            n
        })
    };

    let leader = c.etcd.leader().await.expect("an etcd leader");
    let before = progress.load(Ordering::Acquire);
    let stopping = Instant::now();
    c.etcd.stop(leader);
    // The two remaining members elect a leader and serve.
    for i in (0..3).filter(|&i| i != leader) {
        let endpoint = c.etcd.endpoint(i);
        e2e::eventually_async("the remaining members to serve", SETTLE, || {
            let endpoint = endpoint.clone();
            async move { e2e::cluster::linearizable_read(&endpoint).await }
        })
        .await;
    }
    let settled = Instant::now();
    // Traffic goes on through the election and after it.
    e2e::eventually("40 more writes after the stop", SETTLE, || {
        (progress.load(Ordering::Acquire) >= before + 40).then_some(())
    })
    .await;
    stop_tx.send(true).expect("stop");
    let written = writer.await.expect("writer");
    let lists = lists.await.expect("lists");
    // Reads never fail. A write sent before the election was over may end
    // with an unknown outcome (etcd: leader changed, server stopped, or a
    // proposal the old leader dropped, timed out seconds later), which the
    // client must see as a retryable Status; any other failure, or one of a
    // request sent after the election, is a bug.
    let failures = failures.lock().expect("failures").clone();
    let tolerated = |f: &Failure| {
        f.write && matches!(f.status, 503 | 504) && f.status_body && f.sent <= settled
    };
    let report: Vec<String> = failures
        .iter()
        .map(|f| {
            let sent = f.sent.saturating_duration_since(stopping);
            format!("{} sent at +{sent:?}: {} {}", f.what, f.status, f.body)
        })
        .collect();
    assert!(
        failures.iter().all(tolerated) && failures.len() <= 2,
        "requests failed after stopping etcd leader m{leader} ({lists} lists, \
         election over after {:?}): {report:#?}\n{}",
        settled.duration_since(stopping),
        c.logs()
    );
    let names = item_names(&list(&lb).await);
    for name in &written {
        assert!(names.contains(name), "{name} is missing");
    }
}

/// A request that failed while traffic should have gone on.
#[derive(Debug, Clone)]
struct Failure {
    what: String,
    /// When the request was sent.
    sent: Instant,
    write: bool,
    status: u16,
    /// The body is a Kubernetes Status of the same code.
    status_body: bool,
    body: String,
}

impl Failure {
    fn new(what: String, sent: Instant, write: bool, resp: HttpResponse) -> Failure {
        let status_body = serde_json::from_slice::<Value>(&resp.body)
            .is_ok_and(|v| v["kind"] == "Status" && v["code"] == resp.status);
        Failure {
            what,
            sent,
            write,
            status: resp.status,
            status_body,
            body: resp.text(),
        }
    }
}

/// A Status body of a 503 or 504.
fn assert_unavailable_status(what: &str, resp: &HttpResponse) {
    assert!(
        matches!(resp.status, 503 | 504),
        "{what}: {} {}",
        resp.status,
        resp.text()
    );
    let status = json_of(resp);
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    assert_eq!(status["code"], resp.status, "{what}: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_outage_fails_fast_and_recovers_without_losing_writes() {
    // A short etcd timeout; the request timeout well above it.
    let mut c = Cluster::start(3, &["--etcd-request-timeout=2", "--request-timeout=20s"]).await;
    let lb = c.addr().to_string();
    create_namespace(&lb).await;
    let mut acknowledged = Vec::new();
    for i in 0..20 {
        let name = format!("before-{i}");
        let resp = send(
            &lb,
            "POST",
            &collection(),
            Some(&config_map(&name, json!({}))),
        )
        .await;
        assert_eq!(resp.status, 201, "{}", resp.text());
        acknowledged.push(name);
    }

    // A client writes through the load balancer all along: before, during
    // and after the outage. Each create is acknowledged (201) or refused:
    // 503/504 from a replica or from HAProxy with every replica out (the
    // harness's HAProxy keeps a marked-down replica's sessions, so a request
    // in flight gets the replica's own answer); a 502 or a cut connection
    // stays tolerated here only for a connection the network broke.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let acked = Arc::new(AtomicUsize::new(0));
    let writer = {
        let lb = lb.clone();
        let acked = Arc::clone(&acked);
        tokio::spawn(async move {
            let mut written = Vec::new();
            let mut refused = 0;
            let mut i = 0;
            while !*stop_rx.borrow() {
                let name = format!("w-{i}");
                i += 1;
                let body = config_map(&name, json!({}));
                // A connection HAProxy cuts is an unknown outcome too.
                let Ok(resp) = try_send(&lb, "POST", &collection(), Some(&body)).await else {
                    refused += 1;
                    continue;
                };
                match resp.status {
                    201 => {
                        written.push(name);
                        acked.fetch_add(1, Ordering::Release);
                    }
                    502..=504 => refused += 1,
                    other => return Err(format!("create {name}: {other} {}", resp.text())),
                }
            }
            Ok((written, refused))
        })
    };
    e2e::eventually("writes before the outage", SETTLE, || {
        (acked.load(Ordering::Acquire) >= 10).then_some(())
    })
    .await;

    for i in 0..3 {
        c.etcd.stop(i);
    }

    // Each replica answers every verb fast with a Status; none hangs.
    let bound = Duration::from_secs(8);
    let mut calls = Vec::new();
    for (r, replica) in c.replicas.iter().enumerate() {
        let item = |name: &str| format!("{}/{name}", collection());
        let update = config_map("before-1", json!({"x": "y"}));
        let new = config_map(&format!("during-{r}"), json!({}));
        for (method, path, body) in [
            ("GET", item("before-0"), None),
            ("GET", collection(), None),
            ("POST", collection(), Some(new)),
            ("PUT", item("before-1"), Some(update)),
            ("DELETE", item("before-2"), None),
            // A watch from now needs etcd's revision.
            (
                "GET",
                format!("{}?watch=1&timeoutSeconds=5", collection()),
                None,
            ),
        ] {
            let addr = replica.addr().to_string();
            calls.push(tokio::spawn(async move {
                let began = Instant::now();
                let resp = send(&addr, method, &path, body.as_ref()).await;
                let what = format!("{method} {path} on replica {r} with etcd down");
                (what, resp, began.elapsed())
            }));
        }
    }
    for call in calls {
        let (what, resp, took) = call.await.expect("call");
        assert_unavailable_status(&what, &resp);
        assert!(took < bound, "{what} took {took:?}");
    }
    for replica in &c.replicas {
        let addr = replica.addr();
        // Not ready (the load balancer drains it), but alive.
        e2e::eventually_async("/readyz to fail", SETTLE, || async move {
            let r = http_request(addr, "GET", "/readyz", &[], b"").await.ok()?;
            (r.status != 200).then_some(())
        })
        .await;
        let began = Instant::now();
        let livez = send(addr, "GET", "/livez", None).await;
        assert_eq!(livez.status, 200, "/livez: {}", livez.text());
        assert!(began.elapsed() < Duration::from_secs(1), "/livez was slow");
    }
    // Through the load balancer: an error, fast (with every replica out of
    // rotation, HAProxy answers 503 itself).
    let began = Instant::now();
    let resp = send(&lb, "GET", &collection(), None).await;
    assert!(matches!(resp.status, 503 | 504), "{}", resp.text());
    assert!(began.elapsed() < bound);

    // etcd comes back: every replica recovers by itself.
    for i in 0..3 {
        c.etcd.spawn(i);
    }
    for i in 0..3 {
        c.etcd.wait_healthy(i).await;
    }
    for replica in &c.replicas {
        let addr = replica.addr();
        e2e::eventually_async("/readyz to recover", SETTLE, || async move {
            let r = http_request(addr, "GET", "/readyz", &[], b"").await.ok()?;
            (r.status == 200).then_some(())
        })
        .await;
    }
    // Every acknowledged write is there, on every replica; new writes work.
    for (r, replica) in c.replicas.iter().enumerate() {
        let names = item_names(&list(replica.addr()).await);
        for name in &acknowledged {
            assert!(
                names.contains(name),
                "{name} missing on replica {r}: {names:?}"
            );
        }
    }
    // HAProxy puts the replicas back in rotation at its next checks.
    e2e::eventually_async("the load balancer to route again", SETTLE, || {
        let lb = lb.clone();
        async move {
            let r = http_request(&lb, "GET", "/readyz", &[], b"").await.ok()?;
            (r.status == 200).then_some(())
        }
    })
    .await;
    for i in 0..6 {
        let name = format!("after-{i}");
        let resp = send(
            &lb,
            "POST",
            &collection(),
            Some(&config_map(&name, json!({}))),
        )
        .await;
        assert_eq!(resp.status, 201, "{}", resp.text());
        acknowledged.push(name);
    }
    let recovered = acked.load(Ordering::Acquire);
    e2e::eventually("the writer to write again", SETTLE, || {
        let again = acked.load(Ordering::Acquire) >= recovered + 10;
        (again || writer.is_finished()).then_some(())
    })
    .await;
    let _ = stop_tx.send(true);
    let (written, refused) = match writer.await.expect("writer") {
        Ok(done) => done,
        Err(e) => panic!("{e}\n{}", c.logs()),
    };
    assert!(refused > 0, "the writer never saw the outage");
    acknowledged.extend(written);
    let names = item_names(&list(&lb).await);
    for name in &acknowledged {
        assert!(names.contains(name), "{name} missing after recovery");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_read_modify_write_loses_no_update() {
    const CLIENTS: usize = 4;
    const UPDATES: usize = 12;
    let c = Cluster::start(3, &[]).await;
    let lb = c.addr().to_string();
    create_namespace(&lb).await;
    let item = format!("{}/counter", collection());
    let resp = send(
        &lb,
        "POST",
        &collection(),
        Some(&config_map("counter", json!({"count": "0"}))),
    )
    .await;
    assert_eq!(resp.status, 201, "{}", resp.text());

    // Each client reads, increments and writes back with the read's
    // resourceVersion as precondition, retrying on 409. Round robin sends
    // consecutive requests to different replicas.
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let lb = lb.clone();
        let item = item.clone();
        clients.push(tokio::spawn(async move {
            let mut conflicts = 0;
            let mut done = 0;
            while done < UPDATES {
                let got = send(&lb, "GET", &item, None).await;
                assert_eq!(got.status, 200, "{}", got.text());
                let mut object = json_of(&got);
                let count: usize = object["data"]["count"]
                    .as_str()
                    .and_then(|c| c.parse().ok())
                    .expect("count");
                object["data"]["count"] = json!((count + 1).to_string());
                let put = send(&lb, "PUT", &item, Some(&object)).await;
                match put.status {
                    200 => done += 1,
                    409 => conflicts += 1,
                    other => panic!("update: {other} {}", put.text()),
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for client in clients {
        conflicts += client.await.expect("client");
    }
    let got = send(&lb, "GET", &item, None).await;
    let count = json_of(&got)["data"]["count"].clone();
    assert_eq!(
        count,
        json!((CLIENTS * UPDATES).to_string()),
        "{CLIENTS} clients x {UPDATES} updates ({conflicts} conflicts)"
    );
    // Exactly one etcd write per successful update, none hidden.
    let mut etcd = etcd_client::Client::connect(c.etcd.endpoints(), None)
        .await
        .expect("etcd");
    let key = format!("{}/configmaps/{NAMESPACE}/counter", c.prefix);
    let resp = etcd.get(key.as_str(), None).await.expect("etcd get");
    let kv = resp.kvs().first().expect("counter in etcd");
    assert_eq!(kv.version() as usize, 1 + CLIENTS * UPDATES);
}
