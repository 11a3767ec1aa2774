//! `apiserver-bench`: the load tool of issue 6. It starts a real etcd and the
//! real server, and measures each figure next to its physical limit in the
//! same run (the same etcd, the same keys and values, driven directly), so
//! that a noisy machine moves both sides together.
//!
//! Phases, in the order they run: `writes` (creates and updates vs raw etcd
//! transactions), `reads` (GET and LIST vs raw etcd ranges), `watch`
//! (fan-out delivery latency vs one raw etcd watcher on the same writes),
//! `memory` (RSS per cached byte and per idle watcher) and startup (start to
//! `/readyz` with objects in etcd), the last two on servers of their own, and
//! `crds` (N large CRDs on two replicas: create → served, discovery and
//! OpenAPI latency, RSS per CRD, custom-resource vs ConfigMap throughput), on
//! two servers of its own, and `storage` (etcd bytes per object and create
//! throughput with protobuf against JSON values), on two servers of its own,
//! and `overload` (open-loop creates at 1×–5× the sustainable rate as a
//! user APF does not exempt: 429s, admitted p99, RSS), on servers of its
//! own, and `clusters` (Events on an etcd of their own), and
//! `instructions` (callgrind's count per GET and per create; not in the
//! smoke run).

pub mod admission;
pub mod client;
pub mod clusters;
pub mod crds;
pub mod fixture;
pub mod gc;
pub mod instructions;
pub mod load;
pub mod memory;
pub mod overload;
pub mod plot;
pub mod procs;
pub mod reads;
pub mod report;
pub mod stats;
pub mod storage;
pub mod watch;
pub mod writes;

use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("http: {0}")]
    Http(String),
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("{0}")]
    Setup(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Benchmarks of the API server against the physical limit (raw etcd),
/// measured side by side in one run. Prints one markdown table and writes it
/// into BENCHMARKS.md.
#[derive(Debug, Parser)]
#[command(name = "apiserver-bench")]
pub struct Args {
    /// A seconds-long run with tiny sizes, for CI. Fails only when a phase
    /// produced no numbers or had errors, never on slowness. Writes no file
    /// unless --out is given.
    #[arg(long, conflicts_with = "full")]
    pub smoke: bool,
    /// The sizes: LIST of 10,000 and 100,000 objects, 1,000
    /// watchers × 100 writes/s, 10,000 × 10/s and 1,000 × 500/s, 100,000 objects for memory
    /// and startup. Takes several minutes.
    #[arg(long)]
    pub full: bool,
    /// Seconds each write and GET measurement runs.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Write concurrencies, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub concurrency: Option<Vec<usize>>,
    /// Requests in flight for the GET measurements.
    #[arg(long)]
    pub read_concurrency: Option<usize>,
    /// The fixed GET rate the latency budget is judged at (per second).
    #[arg(long)]
    pub get_rate: Option<f64>,
    /// Object counts for LIST, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub list_objects: Option<Vec<u64>>,
    /// Times each LIST is repeated.
    #[arg(long)]
    pub list_repeats: Option<usize>,
    /// Watch fan-out shapes `WATCHERSxWRITES_PER_SEC`, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub watch: Option<Vec<WatchShape>>,
    /// Seconds of writes in each watch shape.
    #[arg(long)]
    pub watch_duration: Option<f64>,
    /// Objects in etcd for the memory and startup phases.
    #[arg(long)]
    pub objects: Option<u64>,
    /// Objects of the memory phase's 1 KiB case (start-up, RSS and the
    /// consistent LIST of 3 in ten of them): 1,000,000 with --full,
    /// 100,000 by default, 1,000 with --smoke.
    #[arg(long)]
    pub kib_objects: Option<u64>,
    /// Idle watchers opened for the per-watcher memory figure.
    #[arg(long)]
    pub idle_watchers: Option<usize>,
    /// CRDs installed in the crds phase.
    #[arg(long)]
    pub crds: Option<usize>,
    /// Objects in the garbage collector's graph (gc phase).
    #[arg(long)]
    pub gc_objects: Option<u64>,
    /// Dependents of each owner deleted in the gc phase.
    #[arg(long)]
    pub gc_dependents: Option<u64>,
    /// Creates measured per configuration in the admission phase.
    #[arg(long)]
    pub admission_creates: Option<usize>,
    /// Phases to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub phases: Option<Vec<Phase>>,
    /// The etcd binary (default: $TEST_ETCD_BIN, /usr/bin/etcd, etcd on PATH).
    #[arg(long)]
    pub etcd_bin: Option<PathBuf>,
    /// The server binary (default: `apiserver` next to this binary).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// An extra flag for every server started, e.g.
    /// `--server-arg=--watch-cache=false`; repeatable.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Directory for etcd's data and the logs (default: the temp dir). Its
    /// filesystem decides fsync cost: it is named in the report.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Where to write the table (default: BENCHMARKS.md at the workspace
    /// root; the smoke run writes nothing unless this is given).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the table only.
    #[arg(long)]
    pub no_write: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    Writes,
    Reads,
    Watch,
    /// Memory and startup (they share their servers and objects).
    Memory,
    /// CRDs on two replicas.
    Crds,
    /// Garbage collection of large owners in a large graph.
    Gc,
    /// What a policy and a webhook add to a create.
    Admission,
    /// etcd bytes per object and write throughput, protobuf against JSON
    /// storage.
    Storage,
    /// Open-loop creates past the sustainable rate, as a non-exempt user.
    Overload,
    /// Events on an etcd of their own beside ConfigMaps on the main one.
    Clusters,
    /// Instructions per GET and per create, counted by callgrind (not in
    /// the smoke run).
    Instructions,
}

/// `W` watchers while `R` objects are written per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchShape {
    pub watchers: usize,
    pub rate: f64,
}

impl FromStr for WatchShape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (w, r) = s
            .split_once('x')
            .ok_or_else(|| format!("{s:?}: expected WATCHERSxWRITES_PER_SEC, e.g. 1000x100"))?;
        let watchers = w.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
        let rate: f64 = r.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
        if watchers == 0 || rate <= 0.0 {
            return Err(format!("{s:?}: watchers and rate must be positive"));
        }
        Ok(WatchShape { watchers, rate })
    }
}

/// The sizes of one run, from the tier (smoke, default, full) and the flags.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tier: &'static str,
    pub duration: Duration,
    pub concurrency: Vec<usize>,
    pub read_concurrency: usize,
    pub get_rate: f64,
    pub list_objects: Vec<u64>,
    pub list_repeats: usize,
    pub watch: Vec<WatchShape>,
    pub watch_duration: Duration,
    pub objects: u64,
    pub kib_objects: u64,
    pub idle_watchers: usize,
    pub crds: usize,
    pub gc_objects: u64,
    pub gc_dependents: u64,
    pub admission_creates: usize,
    pub phases: Vec<Phase>,
}

impl Plan {
    pub fn from_args(a: &Args) -> Plan {
        let shape = |watchers, rate| WatchShape { watchers, rate };
        let base = if a.smoke {
            Plan {
                tier: "smoke",
                duration: Duration::from_secs(1),
                concurrency: vec![1, 4],
                read_concurrency: 8,
                get_rate: 200.0,
                list_objects: vec![300],
                list_repeats: 2,
                watch: vec![shape(10, 20.0)],
                watch_duration: Duration::from_secs(2),
                objects: 300,
                kib_objects: 1_000,
                idle_watchers: 20,
                crds: 10,
                gc_objects: 600,
                gc_dependents: 200,
                admission_creates: 50,
                phases: Vec::new(),
            }
        } else if a.full {
            Plan {
                tier: "full",
                duration: Duration::from_secs(10),
                concurrency: vec![1, 16, 64],
                read_concurrency: 64,
                get_rate: 5_000.0,
                list_objects: vec![10_000, 100_000],
                list_repeats: 5,
                watch: vec![
                    shape(1_000, 100.0),
                    shape(10_000, 10.0),
                    shape(1_000, 500.0),
                ],
                watch_duration: Duration::from_secs(10),
                objects: 100_000,
                kib_objects: 1_000_000,
                // Enough that the second half's growth (about 2,000 ×
                // 1–4 KiB over HTTP/2) stands out of the RSS noise of a
                // server holding 100,000 objects.
                idle_watchers: 4_000,
                // Crossplane's scale (issue 31).
                crds: 5_000,
                gc_objects: 100_000,
                gc_dependents: 10_000,
                admission_creates: 3_000,
                phases: Vec::new(),
            }
        } else {
            Plan {
                tier: "default",
                duration: Duration::from_secs(5),
                concurrency: vec![1, 16, 64],
                read_concurrency: 64,
                get_rate: 5_000.0,
                list_objects: vec![10_000],
                list_repeats: 5,
                watch: vec![shape(100, 100.0), shape(1_000, 10.0), shape(100, 500.0)],
                watch_duration: Duration::from_secs(10),
                objects: 10_000,
                kib_objects: 100_000,
                idle_watchers: 1_000,
                crds: 200,
                gc_objects: 30_000,
                gc_dependents: 10_000,
                admission_creates: 3_000,
                phases: Vec::new(),
            }
        };
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.1));
        Plan {
            tier: base.tier,
            duration: a.duration.map_or(base.duration, secs),
            concurrency: a.concurrency.clone().unwrap_or(base.concurrency),
            read_concurrency: a.read_concurrency.unwrap_or(base.read_concurrency).max(1),
            get_rate: a.get_rate.unwrap_or(base.get_rate),
            list_objects: a.list_objects.clone().unwrap_or(base.list_objects),
            list_repeats: a.list_repeats.unwrap_or(base.list_repeats).max(1),
            watch: a.watch.clone().unwrap_or(base.watch),
            watch_duration: a.watch_duration.map_or(base.watch_duration, secs),
            objects: a.objects.unwrap_or(base.objects).max(1),
            kib_objects: a.kib_objects.unwrap_or(base.kib_objects).max(10),
            // Two halves of at least one each.
            idle_watchers: a.idle_watchers.unwrap_or(base.idle_watchers).max(2),
            crds: a.crds.unwrap_or(base.crds).max(1),
            gc_objects: a.gc_objects.unwrap_or(base.gc_objects).max(3),
            gc_dependents: a.gc_dependents.unwrap_or(base.gc_dependents).max(1),
            admission_creates: a
                .admission_creates
                .unwrap_or(base.admission_creates)
                .max(10),
            phases: a.phases.clone().unwrap_or_else(|| {
                vec![
                    Phase::Writes,
                    Phase::Reads,
                    Phase::Watch,
                    Phase::Memory,
                    Phase::Crds,
                    Phase::Gc,
                    Phase::Admission,
                    Phase::Storage,
                    Phase::Overload,
                    Phase::Clusters,
                    Phase::Instructions,
                ]
                .into_iter()
                // A debug server under callgrind takes minutes.
                .filter(|p| base.tier != "smoke" || *p != Phase::Instructions)
                .collect()
            }),
        }
    }

    /// The sizes in one line, for the report.
    pub fn describe(&self) -> String {
        let list = |v: &[u64]| {
            v.iter()
                .map(|n| stats::fmt_count(*n))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let shapes: Vec<String> = self
            .watch
            .iter()
            .map(|s| format!("{} × {}/s", stats::fmt_count(s.watchers as u64), s.rate))
            .collect();
        format!(
            "{} tier: {} s per write/GET measurement at write concurrency {:?}, GET at {} in flight and at {}/s; \
             LIST of {} objects × {} repeats; watch {} for {} s each; {} objects for memory and startup (and {} of 1 KiB); {} idle watchers; {} CRDs; \
             owners of {} dependents in a graph of {} objects",
            self.tier,
            self.duration.as_secs_f64(),
            self.concurrency,
            self.read_concurrency,
            stats::fmt_count(self.get_rate as u64),
            list(&self.list_objects),
            self.list_repeats,
            shapes.join(" and "),
            self.watch_duration.as_secs_f64(),
            stats::fmt_count(self.objects),
            stats::fmt_count(self.kib_objects),
            stats::fmt_count(self.idle_watchers as u64),
            stats::fmt_count(self.crds as u64),
            stats::fmt_count(self.gc_dependents),
            stats::fmt_count(self.gc_objects),
        )
    }
}

/// What every phase works with: the etcd, the main server (on `prefix`),
/// the binaries and a directory for logs.
pub struct Bench {
    pub plan: Plan,
    pub etcd: procs::Etcd,
    pub server: procs::Server,
    pub server_bin: PathBuf,
    pub server_args: Vec<String>,
    pub prefix: String,
    pub logs: PathBuf,
    /// For phases that start an etcd of their own, in `work`.
    pub etcd_bin: PathBuf,
    pub work: PathBuf,
}

impl Bench {
    /// Another server on the run's etcd, under `prefix`, logging to
    /// `<logs>/apiserver-<name>.log`.
    pub async fn start_server(&self, prefix: &str, name: &str) -> Result<procs::Server> {
        self.start_server_with(prefix, name, &[]).await
    }

    /// A server with flags besides the run's own.
    pub async fn start_server_with(
        &self,
        prefix: &str,
        name: &str,
        extra: &[&str],
    ) -> Result<procs::Server> {
        let log = self.logs.join(format!("apiserver-{name}.log"));
        let mut args = self.server_args.clone();
        args.extend(extra.iter().map(|a| a.to_string()));
        procs::Server::start(&self.server_bin, &args, &self.etcd.endpoint, prefix, &log).await
    }
}

/// Percent-encodes a query value.
pub fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_watch_shapes() {
        let s: WatchShape = "1000x100".parse().expect("shape");
        assert_eq!(s.watchers, 1000);
        assert_eq!(s.rate, 100.0);
        assert!("1000".parse::<WatchShape>().is_err());
        assert!("0x10".parse::<WatchShape>().is_err());
    }

    #[test]
    fn tiers_and_overrides() {
        let args = Args::parse_from(["apiserver-bench", "--smoke", "--duration", "3"]);
        let plan = Plan::from_args(&args);
        assert_eq!(plan.tier, "smoke");
        assert_eq!(plan.duration, Duration::from_secs(3));
        assert_eq!(plan.phases.len(), 10);
        assert!(!plan.phases.contains(&Phase::Instructions));
        assert_eq!(plan.gc_objects, 600);
        assert_eq!(plan.admission_creates, 50);
        assert_eq!(plan.crds, 10);
        let full = Plan::from_args(&Args::parse_from(["apiserver-bench", "--full"]));
        assert_eq!(full.list_objects, vec![10_000, 100_000]);
        assert_eq!(full.crds, 5_000);
        assert_eq!(full.phases.len(), 11);
        assert_eq!(full.phases.last(), Some(&Phase::Instructions));
        let only = Args::parse_from(["apiserver-bench", "--phases", "crds", "--crds", "50"]);
        let only = Plan::from_args(&only);
        assert_eq!((only.phases, only.crds), (vec![Phase::Crds], 50));
        assert!(Args::try_parse_from(["apiserver-bench", "--smoke", "--full"]).is_err());
    }

    #[test]
    fn escapes_query_values() {
        assert_eq!(query_escape("a+b/c="), "a%2Bb%2Fc%3D");
    }
}
