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
}
