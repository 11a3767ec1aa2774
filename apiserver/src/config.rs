//! Command-line configuration. On the top floor with the composition root
//! (`lib.rs`), which reads it: it may name the modules whose settings it
//! parses (the allocator's port range, the aggregator's proxy identity);
//! the floors below take the settings they use, not the `Config`.

use crate::aggregator::ProxyIdentity;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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

    /// Per-resource etcd servers overrides, comma separated. The individual
    /// override format: group/resource#servers, where servers are URLs,
    /// semicolon separated (the core group is empty), e.g.
    /// "/events#http://etcd4:2379;http://etcd5:2379,coordination.k8s.io/leases#http://etcd6:2379".
    /// Each resource listed lives on that etcd cluster; custom resources
    /// may be listed too (by group/resource).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = crate::clusters::parse_override,
        env = "APISERVER_ETCD_SERVERS_OVERRIDES"
    )]
    pub etcd_servers_overrides: Vec<crate::clusters::EtcdOverride>,

    /// Address to serve plain HTTP on, for local development and tests:
    /// every request there runs as a cluster admin, so only loopback
    /// addresses are accepted.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Address of the secure (TLS, authenticated) port; `off` disables it.
    #[arg(long, default_value = "0.0.0.0:6443", value_parser = parse_secure_listen)]
    pub secure_listen: SecureListen,

    /// Serving certificate (PEM, chain allowed). Without it (and the key),
    /// the server makes a private CA and a certificate under --data-dir/pki
    /// on first start and reuses them.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,

    /// Private key of --tls-cert-file (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,

    /// Extra names (DNS or IP) for the generated serving certificate.
    #[arg(long, value_delimiter = ',')]
    pub tls_san: Vec<String>,

    /// CA bundle that client certificates are verified against (CN = user,
    /// O = groups). Default: the generated CA, when the server made one.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,

    /// Static bearer tokens, CSV: token,user,uid,"group1,group2".
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,

    /// Private key (PEM; RSA or P-256, PKCS#8 or PKCS#1) that signs
    /// service-account tokens. Default: one made under --data-dir/pki.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,

    /// PEM files of public (or private) keys that verify service-account
    /// tokens; repeatable. Default: the signing key's.
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,

    /// The `iss` of service-account tokens, and the audience the API
    /// accepts.
    #[arg(long, default_value = crate::auth::serviceaccount::DEFAULT_ISSUER)]
    pub service_account_issuer: String,

    /// Requests without credentials on the secure port run as
    /// system:anonymous, for health, version and discovery paths only.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,

    /// Where the embedded etcd keeps its data.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,

    /// The media type built-in objects are written to etcd in (kube's
    /// --storage-media-type): protobuf, kube's default, or JSON. Custom
    /// resources, CRDs and APIServices are JSON either way, and values of
    /// either type are read whatever this says.
    #[arg(
        long,
        value_enum,
        default_value = "application/vnd.kubernetes.protobuf"
    )]
    pub storage_media_type: crate::storage_format::MediaType,

    /// At start-up, move objects an earlier version of this server stored
    /// under `<group>/<resource>` keys to kube's keys (see
    /// storage_migration.rs); costs one keys-only read per moved resource
    /// once nothing is left to move.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub migrate_storage_layout: bool,

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

    /// CIDR of Service cluster IPs. The `kubernetes` Service takes the
    /// first address; the rest are handed out to Services.
    #[arg(long, default_value = "10.96.0.0/12")]
    pub service_cluster_ip_range: ipnet::IpNet,

    /// Ports handed out as Service NodePorts (`30000-32767`).
    #[arg(long, default_value = "30000-32767", value_parser = crate::allocator::parse_port_range)]
    pub service_node_port_range: std::ops::RangeInclusive<u16>,

    /// The address this replica is published at in the `default/kubernetes`
    /// Endpoints and EndpointSlice (with the secure port). Default: the
    /// secure listener's own address when it names one (a loopback one
    /// included, unlike kube), else the address of the host's default
    /// route, else 127.0.0.1.
    #[arg(long)]
    pub advertise_address: Option<std::net::IpAddr>,

    /// How the `kubernetes` Service's endpoints are kept: `lease` (each
    /// replica renews a lease under `<prefix>/masterleases/`; the endpoints
    /// list the live ones) or `none` (not kept).
    #[arg(long, value_enum, default_value_t = EndpointReconcilerType::Lease)]
    pub endpoint_reconciler_type: EndpointReconcilerType,

    /// TTL of a replica's endpoint lease, renewed every two thirds of it:
    /// a replica that dies leaves the `kubernetes` endpoints within it.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub endpoint_reconciler_lease_ttl: Duration,

    /// How often the ClusterIP and NodePort repair loops go over every
    /// Service and allocation (kube: 3 minutes).
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub allocation_repair_interval: Duration,

    /// How often the quota controller recounts every ResourceQuota's
    /// usage (kube-controller-manager's flag; kube: 5 minutes).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub resource_quota_sync_period: Duration,

    /// Admission plugins to enable besides kube's default set, by kube's
    /// names (comma-separated; order does not matter: plugins run in
    /// kube's order).
    #[arg(long, value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,

    /// Admission plugins to turn off, default ones included.
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,

    /// How long Events live after their last write.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub event_ttl: Duration,

    /// How often etcd is compacted (`0` turns compaction off). Replicas
    /// coordinate through etcd: one compaction per interval in all.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub etcd_compaction_interval: Duration,

    /// API Priority and Fairness: classify requests by FlowSchema and
    /// queue them fairly within their priority level's seats (the two
    /// max-inflight limits together). `false`: the max-inflight budgets.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_priority_and_fairness: bool,

    /// Most watches one user may have open at once; one more is answered
    /// 429. `0` (the default): no bound, as kube-apiserver has none, so
    /// one identity running many informers is never refused.
    #[arg(long, default_value_t = 0)]
    pub max_watches_per_user: usize,

    /// Most non-mutating requests served at once (long-running ones such as
    /// watches not counted); past it: 429. `0`: no limit.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,

    /// Most mutating requests served at once; past it: 429. `0`: no limit.
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,

    /// Longest a non-long-running request may take before it is answered
    /// 504.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// After SIGTERM, how long the server keeps serving (with /readyz
    /// failing) before it stops accepting connections.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay_duration: Duration,

    /// After the shutdown delay, how long in-flight requests may take to
    /// finish before the process exits anyway.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    /// Log line format on stderr: `text`, or `json` (one object per line).
    /// Which lines: `RUST_LOG` (default `info`).
    #[arg(long, value_enum, default_value_t = crate::telemetry::LogFormat::Text)]
    pub log_format: crate::telemetry::LogFormat,

    /// OTLP/gRPC collector to export request and etcd spans to (e.g.
    /// `http://127.0.0.1:4317`). Unset: no spans are exported.
    #[arg(long)]
    pub tracing_endpoint: Option<String>,

    /// How many of a million new traces are sampled when exporting (traces
    /// a caller sampled through `traceparent` always are).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub tracing_sampling_rate_per_million: u32,

    /// Authorization modes, in the order they are asked (comma-separated):
    /// `RBAC`, `AlwaysAllow`. Members of system:masters are always allowed.
    #[arg(long, value_delimiter = ',', default_value = "RBAC")]
    pub authorization_mode: Vec<String>,

    /// An EncryptionConfiguration (apiserver.config.k8s.io/v1, YAML or
    /// JSON): which resources are encrypted at rest, with which providers
    /// and keys. Without it nothing is encrypted.
    #[arg(long)]
    pub encryption_provider_config: Option<PathBuf>,

    /// The audit policy (audit.k8s.io/v1 Policy, YAML): which requests are
    /// recorded at which level. Auditing needs it and --audit-log-path.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,

    /// Where audit events go, one JSON line each (`-`: standard output).
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,

    /// Size in megabytes past which the audit log is rotated (0: 100).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u64,

    /// Rotated audit log files kept (0: all).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: usize,

    /// Client certificate (PEM) the aggregator presents to extension API
    /// servers. Default: one made under --data-dir/pki by a front-proxy CA
    /// of its own, for `front-proxy-client`.
    #[arg(long)]
    pub proxy_client_cert_file: Option<PathBuf>,

    /// Private key of --proxy-client-cert-file (PEM).
    #[arg(long)]
    pub proxy_client_key_file: Option<PathBuf>,

    /// CA bundle of the front-proxy client certificates extension servers
    /// should trust, published in kube-system/extension-apiserver-authentication.
    /// Default: the generated front-proxy CA.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Common names a front-proxy client certificate may carry (empty: any
    /// signed by --requestheader-client-ca-file). Default, with the
    /// generated front-proxy PKI: `front-proxy-client`.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,

    /// Headers naming the user (kube's suggestion: X-Remote-User).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub requestheader_username_headers: Vec<String>,

    /// Headers naming the user's UID (kube's suggestion: X-Remote-Uid).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Uid")]
    pub requestheader_uid_headers: Vec<String>,

    /// Headers naming the user's groups (kube's suggestion: X-Remote-Group).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub requestheader_group_headers: Vec<String>,

    /// Header prefixes naming the user's extra attributes (kube's
    /// suggestion: X-Remote-Extra-).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,
}

impl Config {
    /// The aggregator's proxy identity from the flags: the given client
    /// certificate, or the one made under `--data-dir`.
    pub fn proxy_identity(&self) -> Result<ProxyIdentity, String> {
        let read = |p: &std::path::Path| {
            std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
        };
        let (cert_pem, key_pem, generated_ca) =
            match (&self.proxy_client_cert_file, &self.proxy_client_key_file) {
                (Some(c), Some(k)) => (read(c)?, read(k)?, None),
                (None, None) => {
                    let fp = crate::auth::pki::ensure_front_proxy(&self.data_dir)?;
                    (fp.cert_pem, fp.key_pem, fp.ca_pem)
                }
                _ => {
                    return Err(
                        "--proxy-client-cert-file and --proxy-client-key-file go together".into(),
                    )
                }
            };
        let ca_pem = match &self.requestheader_client_ca_file {
            Some(f) => Some(read(f)?),
            None => generated_ca.clone(),
        };
        let allowed_names = if self.requestheader_allowed_names.is_empty()
            && self.requestheader_client_ca_file.is_none()
            && generated_ca.is_some()
        {
            vec![crate::auth::pki::FRONT_PROXY_CLIENT.to_string()]
        } else {
            self.requestheader_allowed_names.clone()
        };
        let clean = |v: &[String]| -> Vec<String> {
            v.iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        Ok(ProxyIdentity {
            cert_pem,
            key_pem,
            ca_pem,
            allowed_names,
            username_headers: clean(&self.requestheader_username_headers),
            uid_headers: clean(&self.requestheader_uid_headers),
            group_headers: clean(&self.requestheader_group_headers),
            extra_prefixes: clean(&self.requestheader_extra_headers_prefix),
        })
    }
}

/// `--endpoint-reconciler-type` (kube's `master-count` is not offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EndpointReconcilerType {
    Lease,
    None,
}

/// `--secure-listen`: an address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecureListen(pub Option<SocketAddr>);

pub fn parse_secure_listen(s: &str) -> Result<SecureListen, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(SecureListen(None));
    }
    s.parse()
        .map(|a| SecureListen(Some(a)))
        .map_err(|e| format!("want host:port or `off`: {e}"))
}

/// Parses a Go-style duration as kube-apiserver's flags take them: `90s`,
/// `5m`, `1h30m`, `500ms`, or `0`. A bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| format!("missing unit in duration {s:?}"))?;
        let (num, tail) = rest.split_at(digits);
        let value: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        total += Duration::from_secs_f64(value * scale);
        rest = tail;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn defaults() {
        let c = Config::parse_from(["apiserver"]);
        assert_eq!(c.etcd_compaction_interval, Duration::from_secs(300));
        assert_eq!(c.max_requests_inflight, 400);
        assert_eq!(c.max_mutating_requests_inflight, 200);
        assert!(c.enable_priority_and_fairness);
        assert_eq!(c.max_watches_per_user, 0);
        assert_eq!(c.request_timeout, Duration::from_secs(60));
        assert_eq!(c.shutdown_delay_duration, Duration::ZERO);
        assert_eq!(c.log_format, crate::telemetry::LogFormat::Text);
        assert_eq!(c.tracing_endpoint, None);
        let c = Config::parse_from([
            "apiserver",
            "--log-format=json",
            "--tracing-endpoint=http://127.0.0.1:4317",
            "--tracing-sampling-rate-per-million=10",
        ]);
        assert_eq!(c.log_format, crate::telemetry::LogFormat::Json);
        assert_eq!(c.tracing_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
        assert_eq!(c.tracing_sampling_rate_per_million, 10);
        assert!(Config::try_parse_from(["apiserver", "--log-format=xml"]).is_err());
        assert_eq!(c.authorization_mode, vec!["RBAC".to_string()]);
        let c = Config::parse_from(["apiserver", "--authorization-mode=RBAC,AlwaysAllow"]);
        assert_eq!(c.authorization_mode, vec!["RBAC", "AlwaysAllow"]);
        assert_eq!(
            c.secure_listen,
            SecureListen(Some("0.0.0.0:6443".parse().unwrap()))
        );
        assert!(!c.anonymous_auth);
        assert_eq!(c.endpoint_reconciler_type, EndpointReconcilerType::Lease);
        assert_eq!(c.endpoint_reconciler_lease_ttl, Duration::from_secs(15));
        assert_eq!(c.allocation_repair_interval, Duration::from_secs(180));
        assert_eq!(c.resource_quota_sync_period, Duration::from_secs(300));
        assert_eq!(c.advertise_address, None);
        let c = Config::parse_from(["apiserver", "--secure-listen=off"]);
        assert_eq!(c.secure_listen, SecureListen(None));
    }

    #[test]
    fn etcd_servers_overrides() {
        let c = Config::parse_from([
            "apiserver",
            "--etcd-servers-overrides=/events#http://e1:2379;http://e2:2379,coordination.k8s.io/leases#http://l:2379",
        ]);
        let got: Vec<_> = c
            .etcd_servers_overrides
            .iter()
            .map(|o| (o.group.as_str(), o.resource.as_str(), o.servers.len()))
            .collect();
        assert_eq!(
            got,
            vec![("", "events", 2), ("coordination.k8s.io", "leases", 1)]
        );
        let err = Config::try_parse_from(["apiserver", "--etcd-servers-overrides=events#http://e"])
            .unwrap_err()
            .to_string();
        assert!(err.contains(crate::clusters::INVALID), "{err}");
    }
}
