//! kubectl's read paths against the real server: `get` in every output
//! form, selectors, chunking, NotFound, `get all`, watch, and the discovery
//! commands (`explain`, `api-resources`, `api-versions`, `version`,
//! `get --raw`).

use e2e::{stderr, stdout, Server};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Five ConfigMaps in namespace `reads`: c1 and c2 labelled app=web, the
/// others app=db.
const FIVE: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: reads
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: reads, labels: {app: web}}
data: {k: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c2, namespace: reads, labels: {app: web}}
data: {k: "2"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c3, namespace: reads, labels: {app: db}}
data: {k: "3"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c4, namespace: reads, labels: {app: db}}
data: {k: "4"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c5, namespace: reads, labels: {app: db}}
data: {k: "5"}
"#;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
"#;

async fn server_with_five() -> Server {
    let s = Server::start().await;
    let out = s.kubectl_stdin_ok(&["create", "-f", "-"], FIVE);
    assert!(out.contains("namespace/reads created"), "{out}");
    for i in 1..=5 {
        assert!(out.contains(&format!("configmap/c{i} created")), "{out}");
    }
    s
}

/// Non-empty lines of `text`, trimmed, sorted.
fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    v.sort();
    v
}

fn names(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn get_json_single_and_list() {
    let s = server_with_five().await;
    let one = s.get_json(&["configmap", "c3", "-n", "reads"]);
    assert_eq!(one["kind"], "ConfigMap", "{one}");
    assert_eq!(one["apiVersion"], "v1");
    assert_eq!(one["metadata"]["name"], "c3");
    assert_eq!(one["metadata"]["namespace"], "reads");
    assert_eq!(one["metadata"]["labels"]["app"], "db");
    assert_eq!(one["data"]["k"], "3");
    assert!(
        one["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{one}"
    );
    assert!(
        one["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok()),
        "{one}"
    );
    assert!(one["metadata"]["creationTimestamp"].is_string(), "{one}");

    let list = s.get_json(&["configmaps", "-n", "reads"]);
    assert_eq!(list["kind"], "List", "{list}");
    assert_eq!(names(&list), ["c1", "c2", "c3", "c4", "c5"]);
    for item in list["items"].as_array().into_iter().flatten() {
        assert_eq!(item["kind"], "ConfigMap", "{item}");
        assert_eq!(item["apiVersion"], "v1", "{item}");
    }
}

#[tokio::test]
async fn get_yaml_name_and_table() {
    let s = server_with_five().await;
    let yaml = s.kubectl_ok(&["get", "configmap", "c1", "-n", "reads", "-o", "yaml"]);
    for want in [
        "apiVersion: v1\n",
        "kind: ConfigMap\n",
        "  name: c1\n",
        "  namespace: reads\n",
        "    app: web\n",
        "  k: \"1\"\n",
        "  resourceVersion: \"",
        "  uid: ",
    ] {
        assert!(yaml.contains(want), "missing {want:?} in:\n{yaml}");
    }

    let names = s.kubectl_ok(&["get", "configmaps", "-n", "reads", "-o", "name"]);
    assert_eq!(
        sorted_lines(&names),
        [
            "configmap/c1",
            "configmap/c2",
            "configmap/c3",
            "configmap/c4",
            "configmap/c5"
        ]
    );

    // The default output is the server's Table: one row per object, in
    // name order (the columns are checked in table_columns_per_kind).
    let table = s.kubectl_ok(&["get", "configmaps", "-n", "reads"]);
    let rows: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(rows, ["c1", "c2", "c3", "c4", "c5"], "{table}");
    assert!(table.starts_with("NAME "), "{table}");
}

/// Column headers of a kubectl table.
fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// Kinds kube prints without a printer of their own (Roles) get kube's
/// default Table: NAME and CREATED AT.
#[tokio::test(flavor = "multi_thread")]
async fn table_default_columns() {
    let s = server_with_five().await;
    s.kubectl_ok(&[
        "create",
        "role",
        "reader",
        "--verb=get",
        "--resource=pods",
        "-n",
        "reads",
    ]);
    let roles = s.kubectl_ok(&["get", "roles", "-n", "reads"]);
    assert_eq!(header(&roles), ["NAME", "CREATED AT"], "{roles}");
    let names: Vec<&str> = roles
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["reader"], "{roles}");
}

/// kube-apiserver prints each built-in kind with its own columns
/// (pkg/printers/internalversion); the generic NAME / CREATED AT table is
/// for kinds without a printer.
#[tokio::test]
async fn table_columns_per_kind() {
    let s = server_with_five().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], DEPLOYMENT);

    let cms = s.kubectl_ok(&["get", "configmaps", "-n", "reads"]);
    assert_eq!(header(&cms), ["NAME", "DATA", "AGE"], "{cms}");
    let row: Vec<&str> = cms
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.get(..2), Some(&["c1", "1"][..]), "{cms}");

    let deploys = s.kubectl_ok(&["get", "deployments"]);
    assert_eq!(
        header(&deploys),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{deploys}"
    );

    let svcs = s.kubectl_ok(&["get", "services"]);
    assert_eq!(
        header(&svcs),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{svcs}"
    );

    let nss = s.kubectl_ok(&["get", "namespaces"]);
    assert_eq!(header(&nss), ["NAME", "STATUS", "AGE"], "{nss}");
    let reads: Vec<&str> = nss
        .lines()
        .find(|l| l.starts_with("reads "))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(reads.get(..2), Some(&["reads", "Active"][..]), "{nss}");

    // Watch tables carry the same columns.
    let mut watch = Lines::spawn(s.kubectl_cmd(&[
        "get",
        "configmaps",
        "-n",
        "reads",
        "-w",
        "--output-watch-events",
    ]));
    watch.wait_for("ADDED", "c5");
    let seen = std::mem::take(&mut watch.seen);
    drop(watch);
    assert_eq!(
        header(&seen[0]),
        ["EVENT", "NAME", "DATA", "AGE"],
        "{seen:#?}"
    );
}

#[tokio::test]
async fn get_with_label_and_field_selectors() {
    let s = server_with_five().await;
    let web = s.kubectl_ok(&["get", "cm", "-n", "reads", "-l", "app=web", "-o", "name"]);
    assert_eq!(sorted_lines(&web), ["configmap/c1", "configmap/c2"]);

    let not_web = s.kubectl_ok(&["get", "cm", "-n", "reads", "-l", "app!=web", "-o", "name"]);
    assert_eq!(
        sorted_lines(&not_web),
        ["configmap/c3", "configmap/c4", "configmap/c5"]
    );

    let by_name = s.kubectl_ok(&[
        "get",
        "cm",
        "-n",
        "reads",
        "--field-selector",
        "metadata.name=c4",
        "-o",
        "name",
    ]);
    assert_eq!(sorted_lines(&by_name), ["configmap/c4"]);

    // Nothing matches: kubectl says so on stderr and succeeds.
    let out = s.kubectl(&["get", "cm", "-n", "reads", "-l", "app=none"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).trim().is_empty(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("No resources found in reads namespace."),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn get_in_chunks_returns_everything() {
    let s = server_with_five().await;
    // -v=6 logs each request: the list must really be paged by 2.
    let out = s.kubectl(&[
        "get",
        "cm",
        "-n",
        "reads",
        "--chunk-size=2",
        "-o",
        "name",
        "-v=6",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        sorted_lines(&stdout(&out)),
        [
            "configmap/c1",
            "configmap/c2",
            "configmap/c3",
            "configmap/c4",
            "configmap/c5"
        ]
    );
    let log = stderr(&out);
    let pages: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("/api/v1/namespaces/reads/configmaps?") && l.contains("limit=2"))
        .collect();
    assert_eq!(pages.len(), 3, "expected 3 pages of 2:\n{log}");
    assert_eq!(
        pages.iter().filter(|l| l.contains("continue=")).count(),
        2,
        "{log}"
    );

    // The table form pages too and prints one header.
    let table = s.kubectl_ok(&["get", "cm", "-n", "reads", "--chunk-size=2"]);
    assert_eq!(table.matches("NAME").count(), 1, "{table}");
    assert_eq!(table.lines().count(), 6, "{table}");
}

#[tokio::test]
async fn get_missing_object_is_not_found() {
    let s = Server::start().await;
    let (code, err) = s.kubectl_err(&["get", "configmap", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.trim(),
        r#"Error from server (NotFound): configmaps "nope" not found"#
    );

    let (code, err) = s.kubectl_err(&["get", "deployment", "nope", "-o", "json"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(r#"Error from server (NotFound): deployments.apps "nope" not found"#),
        "{err}"
    );

    // In a namespace that does not exist, kubectl looks the namespace up
    // after the 404 and reports that instead.
    let (code, err) = s.kubectl_err(&["get", "configmap", "x", "-n", "no-such-ns"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(r#"Error from server (NotFound): namespaces "no-such-ns" not found"#),
        "{err}"
    );
}

#[tokio::test]
async fn get_all() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], DEPLOYMENT);
    let out = s.kubectl_ok(&["get", "all", "-o", "name"]);
    let lines = sorted_lines(&out);
    assert!(lines.contains(&"service/kubernetes".to_string()), "{out}");
    assert!(lines.contains(&"deployment.apps/web".to_string()), "{out}");
    // Table form: one section per kind that has objects.
    let table = s.kubectl_ok(&["get", "all"]);
    assert!(table.contains("service/kubernetes"), "{table}");
    assert!(table.contains("deployment.apps/web"), "{table}");
}

/// A ConfigMap manifest (created with `create -f`, a JSON request body).
fn configmap(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata: {data}\n")
}

/// The lines a long-running kubectl prints, read on a thread; the child is
/// killed when this is dropped (also when an assertion fails).
struct Lines {
    child: std::process::Child,
    rx: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn spawn(mut cmd: std::process::Command) -> Lines {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kubectl");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            child,
            rx,
            seen: Vec::new(),
        }
    }

    /// Reads until a line whose first two columns are `event` and `name`.
    fn wait_for(&mut self, event: &str, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = self.seen.iter().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.first() == Some(&event) && cols.get(1) == Some(&name)
            });
            if found {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(e) => panic!(
                    "no `{event} {name}` line ({e:?}); kubectl printed:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn watch_prints_added_modified_deleted() {
    let s = Server::start().await;
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("w0", "{a: b}"));
    let mut watch =
        Lines::spawn(s.kubectl_cmd(&["get", "configmaps", "-w", "--output-watch-events"]));
    // kubectl prints the initial list, then watches from its
    // resourceVersion: once w0 shows, every later change is delivered.
    watch.wait_for("ADDED", "w0");
    s.kubectl_stdin_ok(&["create", "-f", "-"], &configmap("w1", "{a: \"1\"}"));
    watch.wait_for("ADDED", "w1");
    s.kubectl_ok(&[
        "patch",
        "configmap",
        "w1",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    watch.wait_for("MODIFIED", "w1");
    s.kubectl_ok(&["delete", "configmap", "w1"]);
    watch.wait_for("DELETED", "w1");
    let seen = std::mem::take(&mut watch.seen);
    drop(watch);

    // Header first, then the events in order.
    assert!(seen[0].starts_with("EVENT "), "{seen:#?}");
    let got: Vec<(&str, &str)> = seen[1..]
        .iter()
        .map(|l| {
            let mut c = l.split_whitespace();
            (c.next().unwrap_or(""), c.next().unwrap_or(""))
        })
        .collect();
    let want = [
        ("ADDED", "w0"),
        ("ADDED", "w1"),
        ("MODIFIED", "w1"),
        ("DELETED", "w1"),
    ];
    assert_eq!(got, want, "{seen:#?}");
}

#[tokio::test]
async fn discovery_commands() {
    let s = Server::start().await;

    let resources = s.kubectl_ok(&["api-resources"]);
    let header: Vec<&str> = resources
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{resources}"
    );
    let row = |name: &str| -> Vec<String> {
        resources
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .find(|c| c.first().map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{resources}"))
    };
    assert_eq!(
        row("deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        row("configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        row("namespaces"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );

    let wide = s.kubectl_ok(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert!(
        sorted_lines(&wide).contains(&"deployments.apps".to_string()),
        "{wide}"
    );

    let versions = sorted_lines(&s.kubectl_ok(&["api-versions"]));
    for v in ["v1", "apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1"] {
        assert!(
            versions.contains(&v.to_string()),
            "{v} missing: {versions:?}"
        );
    }

    assert_eq!(s.kubectl_ok(&["get", "--raw", "/readyz"]).trim(), "ok");
    assert_eq!(s.kubectl_ok(&["get", "--raw", "/livez"]).trim(), "ok");
    let ns: Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/default"]))
            .expect("namespace json");
    assert_eq!(ns["kind"], "Namespace", "{ns}");

    let version: Value =
        serde_json::from_str(&s.kubectl_ok(&["version", "-o", "json"])).expect("version json");
    let server = &version["serverVersion"];
    assert_eq!(server["major"], "1", "{version}");
    assert!(
        server["minor"]
            .as_str()
            .is_some_and(|m| m.starts_with("35")),
        "{version}"
    );
    assert!(
        server["gitVersion"]
            .as_str()
            .is_some_and(|g| g.starts_with("v1.35.")),
        "{version}"
    );
    let text = s.kubectl_ok(&["version"]);
    assert!(text.contains("Server Version: v1.35."), "{text}");
}

#[tokio::test]
async fn explain_deployment_replicas() {
    let s = Server::start().await;
    let out = s.kubectl_ok(&["explain", "deployment.spec.replicas"]);
    for want in [
        "GROUP:      apps",
        "KIND:       Deployment",
        "VERSION:    v1",
        "FIELD: replicas <integer>",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let top = s.kubectl_ok(&["explain", "configmaps"]);
    assert!(top.contains("KIND:       ConfigMap"), "{top}");
    assert!(top.contains("  data\t<map[string]string>"), "{top}");
    assert!(top.contains("  metadata\t<ObjectMeta>"), "{top}");

    // Descriptions are deliberately not served: the upstream description
    // text is not ours to ship (see shared/k8s-api/README.md), so kubectl
    // shows the structure with empty descriptions.
}
