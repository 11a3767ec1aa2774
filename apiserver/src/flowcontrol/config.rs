//! The APF configuration as read from stored objects: FlowSchemas in
//! matching order, PriorityLevelConfigurations with their concurrency
//! limits (kube's formulas), and the classification of one request (kube's
//! `rule.go`). Pure: no I/O, no locks.

use apimachinery::auth::{RequestInfo, UserInfo};
use serde_json::Value;
use std::collections::BTreeMap;

/// The default queue shape of a `Queue` level (kube's defaults).
const DEFAULT_QUEUES: usize = 64;
const DEFAULT_HAND_SIZE: usize = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: usize = 50;
const DEFAULT_SHARES: f64 = 30.0;
/// A level's widest request, as a fraction of its nominal limit.
const MAX_SEATS_FRACTION: f64 = 0.15;

use crate::object::strings as strs;

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// kube's `containsString`: the wildcard counts only as the sole entry.
fn contains(list: &[String], x: &str, wildcard: &str) -> bool {
    (list.len() == 1 && list[0] == wildcard) || list.iter().any(|y| y == x)
}

#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

impl Subject {
    fn parse(v: &Value) -> Option<Subject> {
        match text(v, "/kind") {
            "User" => Some(Subject::User(text(v, "/user/name").into())),
            "Group" => Some(Subject::Group(text(v, "/group/name").into())),
            "ServiceAccount" => Some(Subject::ServiceAccount {
                namespace: text(v, "/serviceAccount/namespace").into(),
                name: text(v, "/serviceAccount/name").into(),
            }),
            _ => None,
        }
    }

    fn matches(&self, user: &UserInfo) -> bool {
        match self {
            Subject::User(n) => n == "*" || *n == user.username,
            Subject::Group(g) => g == "*" || user.groups.iter().any(|x| x == g),
            Subject::ServiceAccount { namespace, name } => {
                let Some(rest) = user.username.strip_prefix("system:serviceaccount:") else {
                    return false;
                };
                match rest.split_once(':') {
                    Some((ns, n)) => ns == namespace && (name == "*" || n == name),
                    None => false,
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    cluster_scope: bool,
    namespaces: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NonResourceRule {
    verbs: Vec<String>,
    urls: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    subjects: Vec<Subject>,
    resource_rules: Vec<ResourceRule>,
    non_resource_rules: Vec<NonResourceRule>,
}

impl Rule {
    fn parse(v: &Value) -> Rule {
        let list = |p: &str| v.get(p).and_then(Value::as_array).cloned();
        Rule {
            subjects: list("subjects")
                .unwrap_or_default()
                .iter()
                .filter_map(Subject::parse)
                .collect(),
            resource_rules: list("resourceRules")
                .unwrap_or_default()
                .iter()
                .map(|r| ResourceRule {
                    verbs: strs(r.get("verbs")),
                    groups: strs(r.get("apiGroups")),
                    resources: strs(r.get("resources")),
                    cluster_scope: r
                        .get("clusterScope")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    namespaces: strs(r.get("namespaces")),
                })
                .collect(),
            non_resource_rules: list("nonResourceRules")
                .unwrap_or_default()
                .iter()
                .map(|r| NonResourceRule {
                    verbs: strs(r.get("verbs")),
                    urls: strs(r.get("nonResourceURLs")),
                })
                .collect(),
        }
    }

    fn matches(&self, user: &UserInfo, ri: &RequestInfo) -> bool {
        if !self.subjects.iter().any(|s| s.matches(user)) {
            return false;
        }
        if ri.resource_request {
            let resource = if ri.subresource.is_empty() {
                ri.resource.clone()
            } else {
                format!("{}/{}", ri.resource, ri.subresource)
            };
            self.resource_rules.iter().any(|r| {
                contains(&r.verbs, &ri.verb, "*")
                    && contains(&r.resources, &resource, "*")
                    && contains(&r.groups, &ri.api_group, "*")
                    && if ri.namespace.is_empty() {
                        r.cluster_scope
                    } else {
                        contains(&r.namespaces, &ri.namespace, "*")
                    }
            })
        } else {
            self.non_resource_rules.iter().any(|r| {
                contains(&r.verbs, &ri.verb, "*") && r.urls.iter().any(|u| url_matches(u, &ri.path))
            })
        }
    }
}

/// kube's non-resource URL match: `*`, the exact path, or a path under
/// the rule's (with or without a trailing `*`).
fn url_matches(rule: &str, path: &str) -> bool {
    if rule == "*" || rule == path {
        return true;
    }
    let mut prefix = rule.strip_suffix('*').unwrap_or(rule).to_string();
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    path.starts_with(&prefix)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distinguisher {
    None,
    ByUser,
    ByNamespace,
}

/// One FlowSchema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub name: String,
    pub uid: String,
    pub level: String,
    pub precedence: i64,
    pub distinguisher: Distinguisher,
    rules: Vec<Rule>,
}

impl Schema {
    pub fn parse(v: &Value) -> Option<Schema> {
        let spec = v.get("spec")?;
        Some(Schema {
            name: text(v, "/metadata/name").into(),
            uid: text(v, "/metadata/uid").into(),
            level: text(spec, "/priorityLevelConfiguration/name").into(),
            precedence: spec
                .get("matchingPrecedence")
                .and_then(Value::as_i64)
                .unwrap_or(1000),
            distinguisher: match text(spec, "/distinguisherMethod/type") {
                "ByUser" => Distinguisher::ByUser,
                "ByNamespace" => Distinguisher::ByNamespace,
                _ => Distinguisher::None,
            },
            rules: spec
                .get("rules")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(Rule::parse).collect())
                .unwrap_or_default(),
        })
    }

    pub fn matches(&self, user: &UserInfo, ri: &RequestInfo) -> bool {
        self.rules.iter().any(|r| r.matches(user, ri))
    }

    pub fn distinguish(&self, user: &UserInfo, ri: &RequestInfo) -> String {
        match self.distinguisher {
            Distinguisher::None => String::new(),
            Distinguisher::ByUser => user.username.clone(),
            Distinguisher::ByNamespace => ri.namespace.clone(),
        }
    }
}

/// One PriorityLevelConfiguration's spec.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelSpec {
    pub name: String,
    pub uid: String,
    pub exempt: bool,
    pub shares: f64,
    pub lendable_percent: f64,
    /// `None`: may borrow without bound.
    pub borrowing_limit_percent: Option<f64>,
    /// `(queues, handSize, queueLengthLimit)`; `None`: Reject.
    pub queuing: Option<(usize, usize, usize)>,
}

impl LevelSpec {
    pub fn parse(v: &Value) -> Option<LevelSpec> {
        let spec = v.get("spec")?;
        let exempt = text(spec, "/type") == "Exempt";
        let part = if exempt {
            spec.get("exempt")
        } else {
            spec.get("limited")
        };
        let num = |k: &str| part.and_then(|p| p.get(k)).and_then(Value::as_f64);
        let usize_of = |p: &str, d: usize| {
            spec.pointer(p)
                .and_then(Value::as_u64)
                .map_or(d, |n| usize::try_from(n).unwrap_or(d))
        };
        let queuing =
            (!exempt && text(spec, "/limited/limitResponse/type") == "Queue").then(|| {
                (
                    usize_of("/limited/limitResponse/queuing/queues", DEFAULT_QUEUES),
                    usize_of("/limited/limitResponse/queuing/handSize", DEFAULT_HAND_SIZE),
                    usize_of(
                        "/limited/limitResponse/queuing/queueLengthLimit",
                        DEFAULT_QUEUE_LENGTH_LIMIT,
                    ),
                )
            });
        Some(LevelSpec {
            name: text(v, "/metadata/name").into(),
            uid: text(v, "/metadata/uid").into(),
            exempt,
            shares: num("nominalConcurrencyShares").unwrap_or(if exempt {
                0.0
            } else {
                DEFAULT_SHARES
            }),
            lendable_percent: num("lendablePercent").unwrap_or(0.0),
            borrowing_limit_percent: num("borrowingLimitPercent"),
            queuing,
        })
    }
}

/// A level's limits in seats (kube's nominalCL, minCL, maxCL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatLimits {
    pub nominal: usize,
    pub lendable: usize,
    pub borrowing: usize,
    /// The widest request the level admits (work estimates are capped).
    pub max_seats: usize,
}

impl SeatLimits {
    pub fn min(&self) -> usize {
        self.nominal - self.lendable
    }
    pub fn max(&self) -> usize {
        self.nominal + self.borrowing
    }
}

/// kube's nominal concurrency: the level's share of the server's limit,
/// rounded up; lendable and borrowing limits as rounded percentages of it.
pub fn seat_limits(spec: &LevelSpec, share_sum: f64, server_limit: usize) -> SeatLimits {
    let nominal = if share_sum > 0.0 {
        (server_limit as f64 * spec.shares / share_sum).ceil() as usize
    } else {
        0
    };
    let lendable = ((nominal as f64 * spec.lendable_percent / 100.0).round() as usize).min(nominal);
    let borrowing = match spec.borrowing_limit_percent {
        Some(p) => (nominal as f64 * p / 100.0).round() as usize,
        None => server_limit,
    };
    let hand = spec.queuing.map_or(1, |q| q.1.max(1));
    let max_seats = ((nominal as f64 * MAX_SEATS_FRACTION).ceil() as usize)
        .min(nominal / hand)
        .max(1);
    SeatLimits {
        nominal,
        lendable,
        borrowing,
        max_seats,
    }
}

/// The whole configuration: levels by name, schemas in matching order.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub levels: BTreeMap<String, LevelSpec>,
    /// Schemas whose level exists, by (matchingPrecedence, name).
    pub schemas: Vec<Schema>,
    /// Schemas naming a level that does not exist.
    pub dangling: Vec<Schema>,
}

impl Config {
    pub fn build(schemas: &[Value], levels: &[Value]) -> Config {
        let levels: BTreeMap<String, LevelSpec> = levels
            .iter()
            .filter_map(LevelSpec::parse)
            .map(|l| (l.name.clone(), l))
            .collect();
        let (mut schemas, mut dangling): (Vec<Schema>, Vec<Schema>) = schemas
            .iter()
            .filter_map(Schema::parse)
            .partition(|s| levels.contains_key(&s.level));
        schemas.sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
        dangling.sort_by(|a, b| a.name.cmp(&b.name));
        Config {
            levels,
            schemas,
            dangling,
        }
    }

    pub fn share_sum(&self) -> f64 {
        self.levels.values().map(|l| l.shares).sum()
    }

    /// The first schema matching the request.
    pub fn classify(&self, user: &UserInfo, ri: &RequestInfo) -> Option<&Schema> {
        self.schemas.iter().find(|s| s.matches(user, ri))
    }
}

/// How a request was classified.
#[derive(Debug, Clone)]
pub struct Classification {
    pub schema: String,
    pub schema_uid: String,
    pub level: String,
    pub level_uid: String,
    pub distinguisher: String,
    pub exempt: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bootstrap() -> Config {
        let with_uid = |mut v: Value| {
            let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
            v["metadata"]["uid"] = json!(format!("uid-{name}"));
            v
        };
        let fs: Vec<Value> = crate::flowcontrol_bootstrap::flow_schemas()
            .into_iter()
            .map(|b| with_uid(b.object))
            .collect();
        let pl: Vec<Value> = crate::flowcontrol_bootstrap::priority_levels()
            .into_iter()
            .map(|b| with_uid(b.object))
            .collect();
        Config::build(&fs, &pl)
    }

    fn ri(method: &str, path: &str) -> RequestInfo {
        apimachinery::auth::request_info(method, path, None).expect("request info")
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, groups.iter().map(|g| g.to_string()).collect())
    }

    #[test]
    fn bootstrap_classification() {
        let c = bootstrap();
        let of = |u: &UserInfo, r: &RequestInfo| c.classify(u, r).map(|s| s.name.clone());
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        assert_eq!(
            of(&admin, &ri("GET", "/api/v1/pods")).as_deref(),
            Some("exempt")
        );
        let alice = user("alice", &["system:authenticated"]);
        let list = ri("GET", "/api/v1/namespaces/a/configmaps");
        let s = c.classify(&alice, &list).unwrap();
        assert_eq!(
            (s.name.as_str(), s.level.as_str()),
            ("global-default", "global-default")
        );
        assert_eq!(s.distinguish(&alice, &list), "alice");
        let sa = user(
            "system:serviceaccount:kube-system:generic-garbage-collector",
            &["system:serviceaccounts", "system:authenticated"],
        );
        assert_eq!(
            of(&sa, &ri("GET", "/api/v1/pods")).as_deref(),
            Some("kube-system-service-accounts")
        );
        let anon = user("system:anonymous", &["system:unauthenticated"]);
        assert_eq!(of(&anon, &ri("GET", "/healthz")).as_deref(), Some("probes"));
        assert_eq!(
            of(&anon, &ri("GET", "/api/v1/pods")).as_deref(),
            Some("global-default")
        );
        // A user in neither group matches nothing (the filter then uses
        // catch-all, as kube does).
        assert_eq!(of(&user("nobody", &[]), &ri("GET", "/api/v1/pods")), None);
        assert!(c.dangling.is_empty());
    }

    #[test]
    fn nominal_limits_follow_kubes_shares() {
        let c = bootstrap();
        let sum = c.share_sum();
        assert_eq!(sum, 245.0);
        let limits = |n: &str| seat_limits(&c.levels[n], sum, 600);
        // ceil(600 * 5 / 245) = 13, ceil(600 * 100 / 245) = 245.
        assert_eq!(limits("catch-all").nominal, 13);
        let low = limits("workload-low");
        assert_eq!((low.nominal, low.lendable, low.min()), (245, 221, 24));
        assert_eq!(low.max_seats, 37);
        assert_eq!(limits("exempt").nominal, 0);
        assert_eq!(limits("leader-election").max_seats, 4);
    }

    #[test]
    fn rules_as_kube_matches_them() {
        assert!(url_matches("/healthz", "/healthz"));
        assert!(url_matches("/healthz", "/healthz/etcd"));
        assert!(url_matches("/apis/*", "/apis/apps"));
        assert!(!url_matches("/api", "/apis"));
        assert!(contains(&["*".into()], "x", "*"));
        assert!(!contains(&["*".into(), "y".into()], "x", "*"));
        let sa = Subject::ServiceAccount {
            namespace: "ns".into(),
            name: "*".into(),
        };
        assert!(sa.matches(&user("system:serviceaccount:ns:bob", &[])));
        assert!(!sa.matches(&user("system:serviceaccount:nsx:bob", &[])));
    }
}
