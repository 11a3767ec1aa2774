//! The functions the checker knows, with their overloads: cel-go's
//! standard library (`common/stdlib/standard.go`), optional values, the
//! strings (v2), sets and lists (v3) extensions kube 1.35 enables, and
//! kube's libraries (`k8s.io/apiserver/pkg/cel/library`: lists, regex,
//! URLs, quantity, IP, CIDR, semver, format, authz).
//!
//! A function is *strict* when its overloads here are all kube has: a call
//! matching none is an error. A *lenient* one is typed when a call
//! matches, and `dyn` when none does (where this table may be missing an
//! overload kube has). A function not here at all is `dyn`.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::types::Type;

/// One overload: its parameters (the receiver first for a member
/// overload) and result, with type parameters named by capital letters.
#[derive(Debug)]
pub(crate) struct Overload {
    pub member: bool,
    pub params: Vec<Type>,
    pub result: Type,
}

/// A function's overloads.
#[derive(Debug, Default)]
pub(crate) struct Function {
    pub overloads: Vec<Overload>,
    pub lenient: bool,
}

pub(crate) const IP: &str = "net.IP";
pub(crate) const CIDR: &str = "net.CIDR";
pub(crate) const URL: &str = "kubernetes.URL";
pub(crate) const QUANTITY: &str = "kubernetes.Quantity";
pub(crate) const SEMVER: &str = "kubernetes.Semver";
pub(crate) const FORMAT: &str = "kubernetes.NamedFormat";
pub(crate) const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
pub(crate) const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
pub(crate) const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
pub(crate) const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
pub(crate) const DECISION: &str = "kubernetes.authorization.Decision";

const NAMED: &[&str] = &[
    IP,
    CIDR,
    URL,
    QUANTITY,
    SEMVER,
    FORMAT,
    AUTHORIZER,
    PATH_CHECK,
    GROUP_CHECK,
    RESOURCE_CHECK,
    DECISION,
];

/// Whether kube declares the named type with `cel.ObjectType` (a struct
/// to cel-go) without registering it with any type provider, so a field
/// selection on it is cel-go's `unexpected failed resolution of '...'`
/// (`net.IP` and `net.CIDR` are opaque types: no field selection).
pub(crate) fn is_unresolved_struct(name: &str) -> bool {
    [
        URL,
        QUANTITY,
        SEMVER,
        FORMAT,
        AUTHORIZER,
        PATH_CHECK,
        GROUP_CHECK,
        RESOURCE_CHECK,
        DECISION,
    ]
    .contains(&name)
}

/// Parses a type as this table spells it: `int`, `list(A)`,
/// `map(string, B)`, `optional(V)`, `net.IP`; a capital letter is a type
/// parameter.
fn ty(s: &str) -> Type {
    fn parse(s: &str) -> (Type, &str) {
        let s = s.trim_start();
        let end = s.find(['(', ')', ',']).unwrap_or(s.len());
        let (name, rest) = (s[..end].trim(), &s[end..]);
        if let Some(mut rest) = rest.strip_prefix('(') {
            let mut args = Vec::new();
            loop {
                let (t, r) = parse(rest);
                args.push(t);
                let r = r.trim_start();
                if let Some(r) = r.strip_prefix(',') {
                    rest = r;
                } else {
                    rest = r.strip_prefix(')').expect("closing bracket");
                    break;
                }
            }
            let t = match (name, args.len()) {
                ("list", 1) => Type::list(args.remove(0)),
                ("map", 2) => {
                    let k = args.remove(0);
                    Type::map(k, args.remove(0))
                }
                ("optional", 1) => Type::optional(args.remove(0)),
                ("type", 1) => Type::Type(Some(Box::new(args.remove(0)))),
                _ => panic!("unknown type {name}"),
            };
            return (t, rest);
        }
        let t = match name {
            "int" => Type::Int,
            "uint" => Type::Uint,
            "double" => Type::Double,
            "bool" => Type::Bool,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "null" => Type::Null,
            "timestamp" => Type::Timestamp,
            "duration" => Type::Duration,
            "dyn" => Type::Dyn,
            p if p.len() == 1 && p.chars().all(|c| c.is_ascii_uppercase()) => Type::param(p),
            n => Type::named(
                NAMED
                    .iter()
                    .find(|x| **x == n)
                    .unwrap_or_else(|| panic!("unknown type {n}")),
            ),
        };
        (t, rest)
    }
    let (t, rest) = parse(s);
    assert!(rest.trim().is_empty(), "trailing {rest:?} in {s:?}");
    t
}

struct Table(HashMap<&'static str, Function>);

impl Table {
    fn add(&mut self, name: &'static str, member: bool, params: &[&str], result: &str) {
        self.0.entry(name).or_default().overloads.push(Overload {
            member,
            params: params.iter().map(|p| ty(p)).collect(),
            result: ty(result),
        });
    }
    /// A global overload.
    fn g(&mut self, name: &'static str, params: &[&str], result: &str) {
        self.add(name, false, params, result);
    }
    /// A member overload: `params[0]` is the receiver.
    fn m(&mut self, name: &'static str, params: &[&str], result: &str) {
        self.add(name, true, params, result);
    }
    fn lenient(&mut self, names: &[&'static str]) {
        for n in names {
            self.0.entry(n).or_default().lenient = true;
        }
    }
}

const COMPARABLE: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "duration",
    "timestamp",
    "string",
    "bytes",
];

fn build() -> Table {
    let mut t = Table(HashMap::new());
    standard(&mut t);
    optionals(&mut t);
    extensions(&mut t);
    kubernetes(&mut t);
    t
}

fn standard(t: &mut Table) {
    t.g("_?_:_", &["bool", "A", "A"], "A");
    // `_&&_` and `_||_` are checked by the checker itself.
    t.g("_&&_", &["bool", "bool"], "bool");
    t.g("_||_", &["bool", "bool"], "bool");
    t.g("!_", &["bool"], "bool");
    t.g("@not_strictly_false", &["bool"], "bool");
    t.g("_==_", &["A", "A"], "bool");
    t.g("_!=_", &["A", "A"], "bool");
    for (a, b, r) in [
        ("bytes", "bytes", "bytes"),
        ("double", "double", "double"),
        ("duration", "duration", "duration"),
        ("duration", "timestamp", "timestamp"),
        ("timestamp", "duration", "timestamp"),
        ("int", "int", "int"),
        ("list(A)", "list(A)", "list(A)"),
        ("string", "string", "string"),
        ("uint", "uint", "uint"),
    ] {
        t.g("_+_", &[a, b], r);
    }
    for n in ["double", "int", "uint"] {
        t.g("_/_", &[n, n], n);
        t.g("_*_", &[n, n], n);
    }
    for n in ["int", "uint"] {
        t.g("_%_", &[n, n], n);
    }
    t.g("-_", &["double"], "double");
    t.g("-_", &["int"], "int");
    for (a, b, r) in [
        ("double", "double", "double"),
        ("duration", "duration", "duration"),
        ("int", "int", "int"),
        ("timestamp", "duration", "timestamp"),
        ("timestamp", "timestamp", "duration"),
        ("uint", "uint", "uint"),
    ] {
        t.g("_-_", &[a, b], r);
    }
    // kube enables cross-type numeric comparisons.
    for op in ["_<_", "_<=_", "_>_", "_>=_"] {
        for n in ["bool", "string", "bytes", "timestamp", "duration"] {
            t.g(op, &[n, n], "bool");
        }
        for a in ["int", "uint", "double"] {
            for b in ["int", "uint", "double"] {
                t.g(op, &[a, b], "bool");
            }
        }
    }
    t.g("_[_]", &["list(A)", "int"], "A");
    t.g("_[_]", &["map(A, B)", "A"], "B");
    t.g("_[_]", &["optional(list(V))", "int"], "optional(V)");
    t.g("_[_]", &["optional(map(K, V))", "K"], "optional(V)");
    t.g("_[?_]", &["list(V)", "int"], "optional(V)");
    t.g("_[?_]", &["optional(list(V))", "int"], "optional(V)");
    t.g("_[?_]", &["map(K, V)", "K"], "optional(V)");
    t.g("_[?_]", &["optional(map(K, V))", "K"], "optional(V)");
    t.g("@in", &["A", "list(A)"], "bool");
    t.g("@in", &["A", "map(A, B)"], "bool");
    for n in ["bytes", "list(A)", "map(A, B)", "string"] {
        t.g("size", &[n], "int");
        t.m("size", &[n], "int");
    }
    t.g("type", &["A"], "type(A)");
    t.g("dyn", &["A"], "dyn");
    let conversions: &[(&'static str, &[&str])] = &[
        ("bool", &["bool", "string"]),
        ("bytes", &["bytes", "string"]),
        ("double", &["double", "int", "string", "uint"]),
        ("duration", &["duration", "string"]),
        (
            "int",
            &["int", "double", "duration", "string", "timestamp", "uint"],
        ),
        (
            "string",
            &[
                "string",
                "bool",
                "bytes",
                "double",
                "duration",
                "int",
                "timestamp",
                "uint",
                IP,
                CIDR,
            ],
        ),
        ("timestamp", &["timestamp", "int", "string"]),
        ("uint", &["uint", "double", "int", "string"]),
    ];
    for (name, froms) in conversions {
        for from in *froms {
            t.g(name, &[from], name);
        }
    }
    for n in ["contains", "endsWith", "startsWith"] {
        t.m(n, &["string", "string"], "bool");
    }
    t.g("matches", &["string", "string"], "bool");
    t.m("matches", &["string", "string"], "bool");
    for n in [
        "getFullYear",
        "getMonth",
        "getDayOfYear",
        "getDayOfMonth",
        "getDate",
        "getDayOfWeek",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
    ] {
        t.m(n, &["timestamp"], "int");
        t.m(n, &["timestamp", "string"], "int");
    }
    for n in ["getHours", "getMinutes", "getSeconds", "getMilliseconds"] {
        t.m(n, &["duration"], "int");
    }
}

fn optionals(t: &mut Table) {
    t.g("optional.of", &["V"], "optional(V)");
    t.g("optional.ofNonZeroValue", &["V"], "optional(V)");
    t.g("optional.none", &[], "optional(V)");
    t.m("value", &["optional(V)"], "V");
    t.m("hasValue", &["optional(V)"], "bool");
    t.m("or", &["optional(V)", "optional(V)"], "optional(V)");
    t.m("orValue", &["optional(V)", "V"], "V");
    t.m("first", &["list(V)"], "optional(V)");
    t.m("last", &["list(V)"], "optional(V)");
    t.g("optional.unwrap", &["list(optional(V))"], "list(V)");
    t.m("unwrapOpt", &["list(optional(V))"], "list(V)");
}

fn extensions(t: &mut Table) {
    // Strings, version 2.
    t.m("charAt", &["string", "int"], "string");
    for n in ["indexOf", "lastIndexOf"] {
        t.m(n, &["string", "string"], "int");
        t.m(n, &["string", "string", "int"], "int");
        // Kubernetes' lists library.
        t.m(n, &["list(A)", "A"], "int");
    }
    t.m("lowerAscii", &["string"], "string");
    t.m("upperAscii", &["string"], "string");
    t.m("replace", &["string", "string", "string"], "string");
    t.m("replace", &["string", "string", "string", "int"], "string");
    t.m("split", &["string", "string"], "list(string)");
    t.m("split", &["string", "string", "int"], "list(string)");
    t.m("substring", &["string", "int"], "string");
    t.m("substring", &["string", "int", "int"], "string");
    t.m("trim", &["string"], "string");
    t.m("join", &["list(string)"], "string");
    t.m("join", &["list(string)", "string"], "string");
    t.g("strings.quote", &["string"], "string");
    t.m("format", &["string", "list(dyn)"], "string");
    t.m("reverse", &["string"], "string");
    // Sets.
    for n in ["sets.contains", "sets.equivalent", "sets.intersects"] {
        t.g(n, &["list(T)", "list(T)"], "bool");
    }
    // Lists, version 3.
    t.m("slice", &["list(T)", "int", "int"], "list(T)");
    t.m("flatten", &["list(list(T))"], "list(T)");
    t.m("flatten", &["list(dyn)", "int"], "list(dyn)");
    t.g("lists.range", &["int"], "list(int)");
    t.m("distinct", &["list(T)"], "list(T)");
    t.m("reverse", &["list(T)"], "list(T)");
    t.m("sort", &["list(T)"], "list(T)");
    t.lenient(&[
        "format",
        "reverse",
        "sets.contains",
        "sets.equivalent",
        "sets.intersects",
        "slice",
        "flatten",
        "distinct",
        "sort",
    ]);
}

fn kubernetes(t: &mut Table) {
    // Lists.
    for n in COMPARABLE {
        t.m("isSorted", &[&format!("list({n})")], "bool");
        t.m("max", &[&format!("list({n})")], n);
        t.m("min", &[&format!("list({n})")], n);
    }
    for n in ["int", "uint", "double", "duration"] {
        t.m("sum", &[&format!("list({n})")], n);
    }
    // Regex.
    t.m("find", &["string", "string"], "string");
    t.m("findAll", &["string", "string"], "list(string)");
    t.m("findAll", &["string", "string", "int"], "list(string)");
    // URLs.
    t.g("url", &["string"], URL);
    for n in [
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
    ] {
        t.m(n, &[URL], "string");
    }
    t.m("getQuery", &[URL], "map(string, list(string))");
    t.g("isURL", &["string"], "bool");
    // Quantities.
    t.g("quantity", &["string"], QUANTITY);
    t.g("isQuantity", &["string"], "bool");
    t.g("sign", &[QUANTITY], "int");
    t.m("sign", &[QUANTITY], "int");
    t.lenient(&["sign"]);
    for ty in [QUANTITY, SEMVER] {
        t.m("isGreaterThan", &[ty, ty], "bool");
        t.m("isLessThan", &[ty, ty], "bool");
        t.m("compareTo", &[ty, ty], "int");
    }
    t.m("asApproximateFloat", &[QUANTITY], "double");
    t.m("asInteger", &[QUANTITY], "int");
    t.m("isInteger", &[QUANTITY], "bool");
    for n in ["add", "sub"] {
        t.m(n, &[QUANTITY, QUANTITY], QUANTITY);
        t.m(n, &[QUANTITY, "int"], QUANTITY);
    }
    // Semver.
    t.g("semver", &["string"], SEMVER);
    t.g("semver", &["string", "bool"], SEMVER);
    t.g("isSemver", &["string"], "bool");
    t.g("isSemver", &["string", "bool"], "bool");
    for n in ["major", "minor", "patch"] {
        t.m(n, &[SEMVER], "int");
    }
    // IPs and CIDRs.
    t.g("ip", &["string"], IP);
    t.m("ip", &[CIDR], IP);
    for n in [
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
    ] {
        t.m(n, &[IP], "bool");
    }
    t.m("family", &[IP], "int");
    t.g("ip.isCanonical", &["string"], "bool");
    t.g("isIP", &["string"], "bool");
    t.g("cidr", &["string"], CIDR);
    t.m("containsIP", &[CIDR, "string"], "bool");
    t.m("containsIP", &[CIDR, IP], "bool");
    t.m("containsCIDR", &[CIDR, "string"], "bool");
    t.m("containsCIDR", &[CIDR, CIDR], "bool");
    t.m("prefixLength", &[CIDR], "int");
    t.m("masked", &[CIDR], CIDR);
    t.g("isCIDR", &["string"], "bool");
    // Formats.
    t.g("format.named", &["string"], &format!("optional({FORMAT})"));
    t.m("validate", &[FORMAT, "string"], "optional(list(string))");
    for n in [
        "format.dns1123Label",
        "format.dns1123Subdomain",
        "format.dns1035Label",
        "format.qualifiedName",
        "format.dns1123LabelPrefix",
        "format.dns1123SubdomainPrefix",
        "format.dns1035LabelPrefix",
        "format.labelValue",
        "format.uri",
        "format.uuid",
        "format.byte",
        "format.date",
        "format.datetime",
    ] {
        t.g(n, &[], FORMAT);
    }
    // Authorizer.
    t.m("path", &[AUTHORIZER, "string"], PATH_CHECK);
    t.m("group", &[AUTHORIZER, "string"], GROUP_CHECK);
    t.m(
        "serviceAccount",
        &[AUTHORIZER, "string", "string"],
        AUTHORIZER,
    );
    t.m("resource", &[GROUP_CHECK, "string"], RESOURCE_CHECK);
    for n in [
        "subresource",
        "namespace",
        "name",
        "fieldSelector",
        "labelSelector",
    ] {
        t.m(n, &[RESOURCE_CHECK, "string"], RESOURCE_CHECK);
    }
    t.m("check", &[PATH_CHECK, "string"], DECISION);
    t.m("check", &[RESOURCE_CHECK, "string"], DECISION);
    t.m("errored", &[DECISION], "bool");
    t.m("allowed", &[DECISION], "bool");
    t.m("error", &[DECISION], "string");
    t.m("reason", &[DECISION], "string");
    t.lenient(&[
        "validate",
        "path",
        "group",
        "serviceAccount",
        "resource",
        "subresource",
        "namespace",
        "name",
        "fieldSelector",
        "labelSelector",
        "check",
        "errored",
        "allowed",
        "error",
        "reason",
    ]);
}

/// The function called `name`, if the checker knows it.
pub(crate) fn lookup(name: &str) -> Option<&'static Function> {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(build).0.get(name)
}

/// The type a type name denotes where it is used as a value
/// (`type(x) == int`), for the names kube declares.
pub(crate) fn type_ident(name: &str) -> Option<Type> {
    let known = matches!(
        name,
        "bool"
            | "bytes"
            | "double"
            | "int"
            | "uint"
            | "string"
            | "list"
            | "map"
            | "null_type"
            | "type"
            | "dyn"
            | "google.protobuf.Timestamp"
            | "google.protobuf.Duration"
            | "optional_type"
    ) || NAMED.contains(&name);
    known.then_some(Type::Type(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_builds() {
        assert!(lookup("size").is_some());
        assert_eq!(
            ty("map(string, list(A))").to_string(),
            "map(string, list(A))"
        );
        assert_eq!(ty("optional(net.IP)").to_string(), "optional_type(net.IP)");
    }
}
