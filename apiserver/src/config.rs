//! Command-line configuration.

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "apiserver",
    version,
    about = "A Kubernetes-compatible API server backed by etcd"
)]
pub struct Config {
    /// etcd client URLs, comma-separated. When empty, the server starts and
    /// supervises its own local etcd (the `etcd` binary on PATH).
    #[arg(long, value_delimiter = ',', env = "APISERVER_ETCD_SERVERS")]
    pub etcd_servers: Vec<String>,

    /// Key prefix of every object in etcd.
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,

    /// Address to serve plain HTTP on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Where the embedded etcd keeps its data.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,

    /// Timeout of a single etcd request, in seconds.
    #[arg(long, default_value_t = 10)]
    pub etcd_request_timeout: u64,

    /// Serve reads and watches from the per-replica watch cache (false:
    /// every read and watch goes to etcd).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch_cache: bool,

    /// How long the watch cache keeps recent changes for resuming watches,
    /// in seconds (at least 75, as kube-apiserver keeps).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(75..))]
    pub watch_cache_window_seconds: u64,

    /// Upper bound on the number of changes the watch cache window holds.
    #[arg(long, default_value_t = 100_000)]
    pub watch_cache_max_events: usize,

    /// Upper bound on the bytes of the objects the watch cache window refers to.
    #[arg(long, default_value_t = 256 << 20)]
    pub watch_cache_max_bytes: usize,
}
