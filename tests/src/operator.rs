//! What the operator tests of issue 33 share: a kubeconfig at a cluster's
//! load balancer, operator processes that end with the test, and the LISTs
//! each replica served (from its `/metrics`) to bound relists after a
//! replica restart.

use crate::cluster::Cluster;
use crate::{http_request, Server};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Writes a kubeconfig whose server is the cluster's load balancer into
/// `dir` and returns its path. It says `insecure-skip-tls-verify`, which
/// @kubernetes/client-node 1.x demands before it talks plain HTTP (kubectl
/// and the Python client ignore it there).
pub fn lb_kubeconfig(cluster: &Cluster, dir: &Path) -> PathBuf {
    let path = dir.join("lb.kubeconfig");
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lb\n  cluster:\n    server: http://{}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: lb\n  context:\n    cluster: lb\n    user: lb\n    namespace: default\nusers:\n- name: lb\n  user: {{}}\ncurrent-context: lb\n",
        cluster.addr()
    );
    std::fs::write(&path, cfg).expect("kubeconfig");
    path
}

/// A long-running client process (an operator) with its output in a log
/// file; killed when dropped, so none outlives its test.
pub struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Spawns `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(mut cmd: Command, log: &Path) -> Process {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        Process {
            child,
            log: log.to_path_buf(),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it has exited (an operator should not).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGKILL (no clean shutdown: a crashed operator) and wait.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `/metrics` page of `server`.
async fn metrics_page(server: &Server) -> String {
    let resp = http_request(server.addr(), "GET", "/metrics", &[], b"")
        .await
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert_eq!(resp.status, 200, "GET /metrics: {}", resp.text());
    resp.text()
}

/// LISTs of `resource` (any group, any code) that `server` has served
/// since it started, from `apiserver_request_total` on its `/metrics`.
pub async fn served_lists(server: &Server, resource: &str) -> u64 {
    sum_series(
        &metrics_page(server).await,
        "apiserver_request_total",
        "LIST",
        resource,
    )
}

/// Watches of `resource` that `server` serves now
/// (`apiserver_longrunning_requests`).
pub async fn open_watches(server: &Server, resource: &str) -> u64 {
    let page = metrics_page(server).await;
    sum_series(&page, "apiserver_longrunning_requests", "WATCH", resource)
}

/// Waits until the replicas together serve at least `watchers` watches of
/// `resource`: after every replica restarted, the proof that the clients
/// watch again (so that counting their LISTs means something).
pub async fn wait_watched(replicas: &[Server], resource: &str, watchers: u64, timeout: Duration) {
    let what = format!("{watchers} watches of {resource} on the restarted replicas");
    crate::eventually_async(&what, timeout, || async {
        let mut open = 0;
        for r in replicas {
            open += open_watches(r, resource).await;
        }
        (open >= watchers).then_some(())
    })
    .await;
}

/// Sums the series of `metric` on a Prometheus text page whose `verb` and
/// `resource` labels are these.
pub fn sum_series(page: &str, metric: &str, verb: &str, resource: &str) -> u64 {
    let verb = format!("verb=\"{verb}\"");
    let res = format!("resource=\"{resource}\"");
    let prefix = format!("{metric}{{");
    page.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .filter_map(|l| l.split_once('}'))
        .filter(|(labels, _)| {
            labels.split(',').any(|p| p == verb) && labels.split(',').any(|p| p == res)
        })
        .map(|(_, value)| value.trim().parse::<f64>().expect("sample value") as u64)
        .sum()
}

/// Counts LISTs of some resources across restarts of replicas: take
/// [`ListCounter::snapshot`] right before the restarts (after the clients'
/// first LISTs, which it checks were counted), then
/// [`ListCounter::since`] (a restarted replica counts from zero again, so
/// all it reports is new).
pub struct ListCounter {
    resources: Vec<String>,
    before: Vec<Vec<u64>>,
}

impl ListCounter {
    pub async fn snapshot(replicas: &[Server], resources: &[&str]) -> ListCounter {
        let mut before = Vec::new();
        for r in replicas {
            let mut counts = Vec::new();
            for resource in resources {
                counts.push(served_lists(r, resource).await);
            }
            before.push(counts);
        }
        // The clients' first LISTs are there: the count can see a relist.
        for (k, resource) in resources.iter().enumerate() {
            let total: u64 = before.iter().map(|counts| counts[k]).sum();
            assert!(
                total > 0,
                "no LIST of {resource} counted before the restarts: the count could not see a relist"
            );
        }
        ListCounter {
            resources: resources.iter().map(|r| r.to_string()).collect(),
            before,
        }
    }

    /// LISTs of each resource served since the snapshot, by every replica,
    /// when the replicas of `restarted` were restarted in between.
    pub async fn since(&self, replicas: &[Server], restarted: &[usize]) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (k, resource) in self.resources.iter().enumerate() {
            let mut total = 0;
            for (i, r) in replicas.iter().enumerate() {
                let now = served_lists(r, resource).await;
                total += if restarted.contains(&i) {
                    now
                } else {
                    now - self.before[i][k]
                };
            }
            out.push((resource.clone(), total));
        }
        out
    }
}

/// `kubectl get <args> -n <namespace> -o json`: the object, or `None` when
/// kubectl fails (not found).
pub fn get_json(k: &Server, namespace: &str, args: &[&str]) -> Option<serde_json::Value> {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-n", namespace, "-o", "json"]);
    let out = k.kubectl(&a);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl printed JSON"))
}

/// Asserts that no resource was listed more than twice (the operator's
/// watches resumed after the restarts instead of relisting), printing the
/// counts; `log` is added to the failure message.
pub fn assert_no_relist_storm(lists: &[(String, u64)], log: impl Fn() -> String) {
    for (resource, n) in lists {
        eprintln!("{n} LISTs of {resource} across the restarts");
        assert!(
            *n <= 2,
            "{n} LISTs of {resource} after the restarts (a relist storm){}",
            log()
        );
    }
}

/// An operator's deletion in `namespace`: deletes `kind/name`, which its
/// finalizer holds until the clean-up handler wrote the ConfigMap
/// `<name>-deleted` (its `data[<trace_key>]` names the object); then the
/// garbage collector removes the owned ConfigMap `<name>-data`, while
/// `<kept>-data`, owned by another object, stays.
pub async fn delete_with_cleanup(
    k: &Server,
    namespace: &str,
    (kind, name, trace_key): (&str, &str, &str),
    kept: &str,
    settle: Duration,
) {
    k.kubectl_ok(&["delete", kind, name, "-n", namespace, "--wait=false"]);
    k.wait_gone(
        settle,
        &format!("{name} to be deleted"),
        &["get", kind, name, "-n", namespace],
    )
    .await;
    let traced = format!("{name}-deleted");
    let trace = get_json(k, namespace, &["configmap", &traced]).expect("the clean-up's trace");
    assert_eq!(trace["data"][trace_key], name, "{trace}");
    let owned = format!("{name}-data");
    k.wait_gone(
        settle,
        &format!("the garbage collector to delete {owned}"),
        &["get", "configmap", &owned, "-n", namespace],
    )
    .await;
    assert!(
        get_json(k, namespace, &["configmap", &format!("{kept}-data")]).is_some(),
        "{kept}'s ConfigMap stays"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_only_the_series_of_the_verb_and_resource() {
        let page = r#"# HELP apiserver_request_total Counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="410",component="apiserver",dry_run="",group="",resource="configmaps",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmapsx",scope="namespace",subresource="",verb="LIST",version="v1"} 9
"#;
        let lists = |resource| sum_series(page, "apiserver_request_total", "LIST", resource);
        assert_eq!(lists("configmaps"), 5);
        assert_eq!(lists("secrets"), 0);
    }
}
