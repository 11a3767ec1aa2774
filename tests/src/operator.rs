//! What the operator tests of issue 33 share: a kubeconfig at a cluster's
//! load balancer, operator processes that end with the test, and the LISTs
//! each replica served (from its `/metrics`) to bound relists after a
//! replica restart.

use crate::cluster::Cluster;
use crate::{http_request, Server};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Writes a kubeconfig whose server is the cluster's load balancer into
/// `dir` and returns its path.
pub fn lb_kubeconfig(cluster: &Cluster, dir: &Path) -> PathBuf {
    let path = dir.join("lb.kubeconfig");
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lb\n  cluster:\n    server: http://{}\ncontexts:\n- name: lb\n  context:\n    cluster: lb\n    user: lb\n    namespace: default\nusers:\n- name: lb\n  user: {{}}\ncurrent-context: lb\n",
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

/// LISTs of `resource` (any group, any code) that `server` has served
/// since it started, from `apiserver_request_total` on its `/metrics`.
pub async fn served_lists(server: &Server, resource: &str) -> u64 {
    let resp = http_request(server.addr(), "GET", "/metrics", &[], b"")
        .await
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert_eq!(resp.status, 200, "GET /metrics: {}", resp.text());
    count_lists(&resp.text(), resource)
}

/// Sums the `apiserver_request_total` series of a Prometheus text page
/// whose `verb` is LIST and `resource` is `resource`.
pub fn count_lists(page: &str, resource: &str) -> u64 {
    let verb = "verb=\"LIST\"";
    let res = format!("resource=\"{resource}\"");
    page.lines()
        .filter_map(|l| l.strip_prefix("apiserver_request_total{"))
        .filter_map(|l| l.split_once('}'))
        .filter(|(labels, _)| {
            labels.split(',').any(|p| p == verb) && labels.split(',').any(|p| p == res)
        })
        .map(|(_, value)| value.trim().parse::<f64>().expect("counter value") as u64)
        .sum()
}

/// Counts LISTs of some resources across restarts of replicas: take
/// [`ListCounter::snapshot`] right before the restarts, then
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_lists_of_the_resource() {
        let page = r#"# HELP apiserver_request_total Counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="410",component="apiserver",dry_run="",group="",resource="configmaps",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmapsx",scope="namespace",subresource="",verb="LIST",version="v1"} 9
"#;
        assert_eq!(count_lists(page, "configmaps"), 5);
        assert_eq!(count_lists(page, "secrets"), 0);
    }
}
