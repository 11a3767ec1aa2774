//! `--etcd-servers-overrides`: resources kept on etcd clusters of their
//! own (kube-apiserver's flag, its syntax and meaning).
//!
//! Each entry is `group/resource#url;url` (the core group is empty:
//! `/events#http://e1:2379`). Entries naming the same servers (in any
//! order) share one cluster, and the clusters are numbered in the order
//! their first entry appears: `etcd-override-0`, `-1`, … as kube names
//! their health checks. A resource is kept under its storage segment
//! (`events`, `services/specs`, `example.com/widgets`), so a cluster owns
//! whole key ranges and resources sharing a segment (core and
//! events.k8s.io Events) share the cluster. Unlike kube, custom resources
//! may be moved too: a group/resource no built-in row names is taken as
//! a custom resource's (`<group>/<resource>`, the layout of its keys).
//!
//! On the backend floor: the composition root connects each cluster and
//! routes its key ranges to it (`watchcache::Routed`); health, metrics and
//! compaction read the clusters from the backend.

use crate::registry::Resource;

/// kube's message for every malformed entry.
pub const INVALID: &str = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated";

/// One `--etcd-servers-overrides` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOverride {
    pub group: String,
    pub resource: String,
    pub servers: Vec<String>,
}

/// Parses one entry (`group/resource#url;url`), as kube's
/// `ParseEtcdServersOverrides` accepts it: exactly one `#`, exactly one
/// `/` before it, no empty server.
pub fn parse_override(s: &str) -> Result<EtcdOverride, String> {
    let mut tokens = s.split('#');
    let (Some(target), Some(servers), None) = (tokens.next(), tokens.next(), tokens.next()) else {
        return Err(INVALID.to_string());
    };
    let mut parts = target.split('/');
    let (Some(group), Some(resource), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(INVALID.to_string());
    };
    let servers: Vec<String> = servers.split(';').map(str::to_string).collect();
    if servers.iter().any(String::is_empty) {
        return Err(INVALID.to_string());
    }
    Ok(EtcdOverride {
        group: group.to_string(),
        resource: resource.to_string(),
        servers,
    })
}

/// An override cluster as planned from the flag, before it is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// `etcd-override-N`: its health check's name.
    pub name: String,
    /// The servers as first given.
    pub servers: Vec<String>,
    /// The storage segments it owns (`events`, `example.com/widgets`).
    pub segments: Vec<String>,
}

/// Why the overrides cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Two entries put one key range on two clusters (e.g. `/events` and
    /// `events.k8s.io/events`, which share the `events` keys).
    #[error("--etcd-servers-overrides: {first} and {second} are stored under the same keys ({segment}) but name different servers")]
    Conflict {
        first: String,
        second: String,
        segment: String,
    },
}

/// The storage segment of `group/resource`: a built-in row's (any
/// version), else a custom resource's layout.
pub fn segment_of(builtin: &[Resource], group: &str, resource: &str) -> String {
    builtin
        .iter()
        .find(|r| r.group == group && r.plural == resource)
        .map(crate::storage_format::segment)
        .unwrap_or_else(|| {
            if group.is_empty() {
                resource.to_string()
            } else {
                format!("{group}/{resource}")
            }
        })
}

/// Groups the entries into clusters (one per distinct server set, in
/// order of first appearance, as kube numbers its checks).
pub fn plan(overrides: &[EtcdOverride], builtin: &[Resource]) -> Result<Vec<Planned>, PlanError> {
    let mut clusters: Vec<(Vec<String>, Planned)> = Vec::new();
    // segment → (entry, cluster index)
    let mut owners: Vec<(String, String, usize)> = Vec::new();
    for o in overrides {
        let mut sorted = o.servers.clone();
        sorted.sort();
        let index = match clusters.iter().position(|(s, _)| *s == sorted) {
            Some(i) => i,
            None => {
                let name = format!("etcd-override-{}", clusters.len());
                clusters.push((
                    sorted,
                    Planned {
                        name,
                        servers: o.servers.clone(),
                        segments: Vec::new(),
                    },
                ));
                clusters.len() - 1
            }
        };
        let entry = format!("{}/{}", o.group, o.resource);
        let segment = segment_of(builtin, &o.group, &o.resource);
        match owners.iter().find(|(s, _, _)| *s == segment) {
            Some((_, first, i)) if *i != index => {
                return Err(PlanError::Conflict {
                    first: first.clone(),
                    second: entry,
                    segment,
                })
            }
            Some(_) => {}
            None => {
                owners.push((segment.clone(), entry, index));
                clusters[index].1.segments.push(segment);
            }
        }
    }
    Ok(clusters.into_iter().map(|(_, p)| p).collect())
}

/// A connected override cluster.
#[derive(Clone)]
pub struct Cluster {
    /// `etcd-override-N`.
    pub name: String,
    pub servers: Vec<String>,
    /// Full key prefixes it owns (`/registry/events/`).
    pub prefixes: Vec<String>,
    /// Its etcd store (health, counts, compaction).
    pub etcd: watchcache::etcd::EtcdStore,
    /// Its watch cache, when the cache is on.
    pub cache: Option<watchcache::Cacher>,
}

impl Cluster {
    /// Whether `key_or_prefix` is one of this cluster's.
    pub fn owns(&self, key_or_prefix: &str) -> bool {
        self.prefixes
            .iter()
            .any(|p| key_or_prefix.starts_with(p.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_as_kube_parses_them() {
        assert_eq!(
            parse_override("/events#http://e1:2379;http://e2:2379"),
            Ok(EtcdOverride {
                group: String::new(),
                resource: "events".into(),
                servers: vec!["http://e1:2379".into(), "http://e2:2379".into()],
            })
        );
        let leases = parse_override("coordination.k8s.io/leases#http://l:2379").unwrap();
        assert_eq!(
            (leases.group.as_str(), leases.resource.as_str()),
            ("coordination.k8s.io", "leases")
        );
        for bad in [
            "events#http://e:2379",
            "/events",
            "/events#a#b",
            "a/b/c#http://e:2379",
            "/events#",
            "/events#http://e:2379;",
            "/events#;http://e:2379",
        ] {
            assert_eq!(parse_override(bad), Err(INVALID.to_string()), "{bad}");
        }
    }

    fn o(gr: &str, servers: &[&str]) -> EtcdOverride {
        let (g, r) = gr.split_once('/').unwrap();
        EtcdOverride {
            group: g.into(),
            resource: r.into(),
            servers: servers.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn entries_with_the_same_servers_share_a_cluster_numbered_as_kube_does() {
        let builtin = &*crate::registry::RESOURCES;
        let planned = plan(
            &[
                o("/events", &["a", "b"]),
                o("coordination.k8s.io/leases", &["c"]),
                o("events.k8s.io/events", &["b", "a"]),
                o("example.com/widgets", &["c"]),
                o("/services", &["c"]),
            ],
            builtin,
        )
        .unwrap();
        assert_eq!(
            planned,
            vec![
                Planned {
                    name: "etcd-override-0".into(),
                    servers: vec!["a".into(), "b".into()],
                    segments: vec!["events".into()],
                },
                Planned {
                    name: "etcd-override-1".into(),
                    servers: vec!["c".into()],
                    segments: vec![
                        "leases".into(),
                        "example.com/widgets".into(),
                        "services/specs".into()
                    ],
                },
            ]
        );
    }

    #[test]
    fn one_key_range_on_two_clusters_is_refused() {
        let builtin = &*crate::registry::RESOURCES;
        let err = plan(
            &[o("/events", &["a"]), o("events.k8s.io/events", &["b"])],
            builtin,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--etcd-servers-overrides: /events and events.k8s.io/events are stored under the same keys (events) but name different servers"
        );
    }

    /// `tools/etcd_move.py` maps `group/resource` to keys with a table of
    /// its own (operators run it without the server): it must name the
    /// same key range as the server does for every stored built-in
    /// resource and for custom resources, or a move would copy the wrong
    /// keys.
    #[test]
    fn etcd_move_tool_maps_resources_as_the_server_does() {
        let tool = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/etcd_move.py");
        let mut named = vec![
            ("example.com".to_string(), "widgets".to_string()),
            ("gateway.networking.k8s.io".into(), "gateways".into()),
            ("extensions".into(), "ingresses".into()),
            (String::new(), "bananas".into()),
        ];
        let builtin = &*crate::registry::RESOURCES;
        named.extend(
            builtin
                .iter()
                .filter(|r| r.virtual_create.is_none() && r.computed.is_none())
                .map(|r| (r.group.to_string(), r.plural.to_string())),
        );
        let mut cmd = std::process::Command::new("python3");
        cmd.args([tool, "--print-prefix", "--etcd-prefix", "/registry"]);
        for (g, r) in &named {
            cmd.arg(format!("--resource={g}/{r}"));
        }
        let out = cmd.output().expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).expect("utf-8");
        let printed: Vec<&str> = printed.lines().collect();
        assert_eq!(printed.len(), named.len(), "{printed:?}");
        for ((g, r), line) in named.iter().zip(printed) {
            let want = format!("/registry/{}/", segment_of(builtin, g, r));
            assert_eq!(line, want, "{g}/{r}");
        }
    }
}
