//! Table-driven tests of the checker, with kube's error strings (from
//! kube's `apiextensions-apiserver/pkg/apiserver/schema/cel` tests where
//! they have them).

use super::*;
use crate::Program;
use serde_json::json;

fn schema() -> serde_json::Value {
    json!({"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "name": {"type": "string"},
        "enabled": {"type": "boolean"},
        "ios": {"x-kubernetes-int-or-string": true},
        "when": {"type": "string", "format": "date-time"},
        "dur": {"type": "string", "format": "duration"},
        "raw": {"type": "string", "format": "byte"},
        "list": {"type": "array", "items": {"type": "integer"}},
        "names": {"type": "array", "items": {"type": "string"}},
        "m": {"type": "object", "additionalProperties": {"type": "number"}},
        "obj": {"type": "object", "properties": {"a": {"type": "string"}, "namespace": {"type": "string"}}},
        "objs": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}}}},
        "withUnknown": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "integer"}}},
        "anyval": {"x-kubernetes-preserve-unknown-fields": true},
        "embedded": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
        "dashed-name": {"type": "string"},
    }})
}

fn env() -> Env {
    Env::for_schema_rule(&schema(), true, false).expect("a CEL type")
}

fn check_with(env: &Env, expr: &str) -> Result<Type, String> {
    Program::compile(expr)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .check(env)
        .map_err(|e| e.to_string())
}

#[test]
fn kube_errors_with_position_and_snippet() {
    let env = env();
    assert_eq!(
        check_with(&env, "self.nosuchfield > 0").unwrap_err(),
        "compilation failed: ERROR: <input>:1:5: undefined field 'nosuchfield'\n | self.nosuchfield > 0\n | ....^"
    );
    assert_eq!(
        check_with(&env, "self.replicas == 'x'").unwrap_err(),
        "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(int, string)'\n | self.replicas == 'x'\n | ..............^"
    );
    // Columns count characters; a wide character gets a wide dot.
    assert_eq!(
        check_with(&env, "'é' == 1").unwrap_err(),
        "compilation failed: ERROR: <input>:1:5: found no matching overload for '_==_' applied to '(string, int)'\n | 'é' == 1\n | .\u{ff0e}..^"
    );
    // Several errors, in source order, on their lines.
    assert_eq!(
        check_with(&env, "self.a > 0 &&\n  self.b").unwrap_err(),
        "compilation failed: ERROR: <input>:1:5: undefined field 'a'\n | self.a > 0 &&\n | ....^\nERROR: <input>:2:7: undefined field 'b'\n |   self.b\n | ......^"
    );
}

#[test]
fn accepted() {
    let env = env();
    let cases: &[(&str, &str)] = &[
        ("self.replicas > 0", "bool"),
        (
            "self.replicas < 1.5 && self.ratio >= 1 && 1u < self.replicas",
            "bool",
        ),
        ("self.name.startsWith('a') && self.name.size() < 10", "bool"),
        ("self.list.all(x, x > 0)", "bool"),
        ("self.list.exists(x, x == 2)", "bool"),
        ("self.list.exists_one(x, x == 2)", "bool"),
        ("self.list.map(x, x * 2)", "list(int)"),
        ("self.list.map(x, x > 1, string(x))", "list(string)"),
        ("self.list.filter(x, x > 1)", "list(int)"),
        ("self.m.all(k, k.startsWith('a'))", "bool"),
        ("self.m['a']", "double"),
        ("self.m.a", "double"),
        ("has(self.name)", "bool"),
        ("has(self.m.a)", "bool"),
        ("self.?name.orValue('')", "string"),
        ("self.?name", "optional_type(string)"),
        ("self.m[?'a']", "optional_type(double)"),
        ("optional.of(1).value()", "int"),
        ("optional.none().orValue(1)", "int"),
        ("[?optional.of(1), 2]", "list(int)"),
        ("self.ios == 1 || self.ios == 'x'", "bool"),
        (
            "type(self.ios) == int ? self.ios < 5 : double(self.ios.replace('%', '')) < 0.5",
            "bool",
        ),
        ("self.when < timestamp('2020-01-01T00:00:00Z')", "bool"),
        ("self.when + duration('1h')", "timestamp"),
        ("self.when - self.when", "duration"),
        (
            "self.dur > duration('1s') && self.dur.getSeconds() > 1",
            "bool",
        ),
        ("self.raw.size()", "int"),
        ("quantity(self.name).isGreaterThan(quantity('1'))", "bool"),
        ("quantity(self.name).add(1).asInteger()", "int"),
        (
            "isQuantity(self.name) && quantity(self.name).sign() == 1",
            "bool",
        ),
        (
            "ip(self.name).family() == 4 && ip.isCanonical(self.name)",
            "bool",
        ),
        (
            "cidr('10.0.0.0/8').containsIP(self.name) && cidr('10.0.0.0/8').ip().isLoopback()",
            "bool",
        ),
        ("string(ip('1.2.3.4'))", "string"),
        ("url(self.name).getHost()", "string"),
        ("url(self.name).getQuery()", "map(string, list(string))"),
        (
            "semver(self.name).major() == 1 && semver('1.0.0').isLessThan(semver('2.0.0'))",
            "bool",
        ),
        (
            "self.name.matches('^a') && self.name.find('a') == 'a'",
            "bool",
        ),
        ("self.name.findAll('a', 2)", "list(string)"),
        ("self.list.sum()", "int"),
        ("self.list.isSorted() && self.list.indexOf(1) == 0", "bool"),
        ("self.names.max()", "string"),
        (
            "'abc'.indexOf('b') == 1 && 'abc'.lastIndexOf('b', 1) == 1",
            "bool",
        ),
        ("self.name.split(',').join('-')", "string"),
        (
            "self.name.lowerAscii().upperAscii().trim().substring(1, 2).charAt(0)",
            "string",
        ),
        (
            "self.metadata.name == 'x' && self.kind == 'X' && self.apiVersion == 'v1'",
            "bool",
        ),
        (
            "self.embedded.kind == 'X' && has(self.embedded.metadata.generateName)",
            "bool",
        ),
        ("self.withUnknown.known == 1", "bool"),
        ("has(self.withUnknown)", "bool"),
        ("cel.bind(x, self.replicas, x > 1)", "bool"),
        ("self.list.all(i, v, v > i)", "bool"),
        ("self.m.exists(k, v, v > 1.0)", "bool"),
        ("sets.contains(self.list, [1])", "bool"),
        ("'%s %d'.format(['a', 1])", "string"),
        ("dyn(self.replicas) == 'x'", "bool"),
        ("size(self.list) == 1 && self.list.size() == 1", "bool"),
        ("self.replicas in [1, 2] && 'a' in self.m", "bool"),
        (
            "int(self.name) == 1 && string(self.replicas) == '1' && uint(self.replicas) > 1u",
            "bool",
        ),
        ("self.list[0]", "int"),
        ("!(self.replicas > 1)", "bool"),
        ("self.replicas > 1 ? 'a' : 'b'", "string"),
        ("oldSelf.replicas <= self.replicas", "bool"),
        ("self.obj == oldSelf.obj && self.obj != null", "bool"),
        (
            "self.obj.namespace == '' && self.obj.__namespace__ == ''",
            "bool",
        ),
        ("self.dashed__dash__name == ''", "bool"),
        ("self.objs.all(o, o.k != '' && o.v > 0)", "bool"),
        ("self.objs.map(o, o.k)", "list(string)"),
        (
            "self.objs.exists(o, o.k == 'a') || self.objs.size() == 0",
            "bool",
        ),
        ("[1, 2] + self.list", "list(int)"),
        ("{'a': 1}", "map(string, int)"),
        ("[]", "list(dyn)"),
        ("self.list.sortBy(x, -x)[0] == 2", "bool"),
        (
            "self.names.transformList(i, v, v + string(i))",
            "list(string)",
        ),
        ("someUnknownFunction(self.replicas) == 1", "bool"),
        ("self.name.someUnknownMember()", "dyn"),
        ("math.greatest(1, 2) == 2", "bool"),
        ("self.obj.a.reverse() == ''", "bool"),
        ("[1, 2].reverse()", "list(int)"),
        ("lists.range(3)", "list(int)"),
        ("type(self) == type(oldSelf)", "bool"),
        ("timestamp(self.name).getFullYear() > 2000", "bool"),
        (
            "format.dns1123Label().validate(self.name).hasValue()",
            "bool",
        ),
        ("self.names.exists(n, n.matches('^[a-z]+$'))", "bool"),
        (
            "self.list.all(x, self.list.all(y, x <= y || y < x))",
            "bool",
        ),
    ];
    for (expr, want) in cases {
        match check_with(&env, expr) {
            Ok(t) => assert_eq!(t.to_string(), *want, "{expr}"),
            Err(e) => panic!("{expr}: {e}"),
        }
    }
}

#[test]
fn refused() {
    let env = env();
    let cases: &[(&str, &str)] = &[
        ("has(self.nosuch)", "ERROR: <input>:1:4: undefined field 'nosuch'"),
        ("self.replicas == 1.0", "found no matching overload for '_==_' applied to '(int, double)'"),
        ("self.name + 1", "found no matching overload for '_+_' applied to '(string, int)'"),
        ("x > 1", "ERROR: <input>:1:1: undeclared reference to 'x' (in container '')"),
        ("self.replicas.foo == 1", "type 'int' does not support field selection"),
        ("self.name.startsWith(1)", "found no matching overload for 'startsWith' applied to 'string.(int)'"),
        ("size(1) == 1", "found no matching overload for 'size' applied to '(int)'"),
        ("self.replicas && true", "expected type 'bool' but found 'int'"),
        ("self.replicas.all(x, x > 0)", "expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)"),
        ("[1, 'a'].size() > 0", "ERROR: <input>:1:5: expected type 'int' but found 'string'"),
        ("self.list.all(x, x == 'a')", "found no matching overload for '_==_' applied to '(int, string)'"),
        ("self.m['a'] == 'x'", "found no matching overload for '_==_' applied to '(double, string)'"),
        ("self.obj['a'] == 'x'", "found no matching overload for '_[_]' applied to '(selfType.obj, string)'"),
        ("self.objs[0] == {'k': 'a', 'v': '1'}", "found no matching overload for '_==_'"),
        ("self.name == null", "found no matching overload for '_==_' applied to '(string, null)'"),
        ("self.when > 1", "found no matching overload for '_>_' applied to '(timestamp, int)'"),
        ("quantity('1').value == 1", "ERROR: <input>:1:14: unexpected failed resolution of 'kubernetes.Quantity'"),
        ("ip('1.2.3.4').family == 4", "type 'net.IP' does not support field selection"),
        ("quantity('1').isGreaterThan(1)", "found no matching overload for 'isGreaterThan' applied to 'kubernetes.Quantity.(int)'"),
        ("has(self.withUnknown.field1)", "undefined field 'field1'"),
        ("has(self.anyval)", "undefined field 'anyval'"),
        ("has(self.embedded.spec.x)", "undefined field 'x'"),
        ("has(self.metadata.namespace)", "undefined field 'namespace'"),
        ("self.list.map(x, x == 1 ? 'a' : 2)", "found no matching overload for '_?_:_' applied to '(bool, string, int)'"),
        ("self.list[0].startsWith('a')", "found no matching overload for 'startsWith' applied to 'int.(string)'"),
        ("[1] + ['a']", "found no matching overload for '_+_' applied to '(list(int), list(string))'"),
        ("self.list.sum() == 'a'", "found no matching overload for '_==_' applied to '(int, string)'"),
        ("self.names.sum() == 0", "found no matching overload for 'sum' applied to 'list(string).()'"),
        ("[?1]", "expected type 'optional_type(int)' but found 'int'"),
        ("nosuch.startsWith('a')", "undeclared reference to 'nosuch' (in container '')"),
    ];
    for (expr, want) in cases {
        match check_with(&env, expr) {
            Ok(t) => panic!("{expr}: accepted as {t}"),
            Err(e) => assert!(e.contains(want), "{expr}: {e} lacks {want}"),
        }
    }
}

#[test]
fn optional_old_self_and_nodes_without_type() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let env = Env::for_schema_rule(&s, false, true).unwrap();
    assert_eq!(
        check_with(&env, "oldSelf.hasValue() && oldSelf.value().a == self.a")
            .map(|t| t.to_string()),
        Ok("bool".into())
    );
    assert_eq!(
        check_with(&env, "oldSelf.a == self.a").map(|t| t.to_string()),
        Err("compilation failed: ERROR: <input>:1:11: found no matching overload for '_==_' applied to '(optional_type(int), int)'\n | oldSelf.a == self.a\n | ..........^".into())
    );
    // Not the root: no apiVersion, kind or metadata.
    assert!(check_with(&env, "self.kind == ''").is_err());
    assert!(Env::for_schema_rule(
        &json!({"x-kubernetes-preserve-unknown-fields": true}),
        false,
        false
    )
    .is_none());
    let ios =
        Env::for_schema_rule(&json!({"x-kubernetes-int-or-string": true}), false, false).unwrap();
    assert_eq!(
        check_with(&ios, "self").map(|t| t.to_string()),
        Ok("dyn".into())
    );
}

#[test]
fn declared_variables() {
    let env = Env::new()
        .with_variable("object", Type::Dyn)
        .with_variable("params", Type::map(Type::String, Type::Int));
    assert!(check_with(&env, "object.spec.replicas > params.max").is_ok());
    assert!(check_with(&env, "params.max == 'a'").is_err());
    assert!(check_with(&env, "request.name == ''")
        .unwrap_err()
        .contains("undeclared reference to 'request' (in container '')"));
}

#[test]
fn syntax_errors_print_as_cel_go_does() {
    let e = Program::compile("self.a ==").unwrap_err().to_string();
    assert!(
        e.starts_with("compilation failed: ERROR: <input>:1:10: "),
        "{e}"
    );
    assert!(e.contains("\n | self.a ==\n | .........^"), "{e}");
}
