//! Every CEL expression the repository's tests write (CRD rules, admission
//! policies, webhook match conditions), run through the type checker: kube
//! compiles each of them, so the checker must accept each of them. (The
//! libraries' examples are checked by their own tests' helper,
//! `library::testing::assert_true`.)
//!
//! Expressions are checked as kube declares their variables: a CRD rule's
//! `self`/`oldSelf` typed from its schema where the test has a small one
//! (copied below), else `dyn`; admission expressions as kube compiles them
//! (`plugin/cel/compile.go`): `object`, `oldObject`, `params` and
//! `variables` as `dyn` (kube's types for them depend on the matched
//! kind), `request` and `namespaceObject` of kube's types, `authorizer`
//! and `authorizer.requestResource` of its authorizer types. Expressions
//! a test writes to see them refused (`object.spec ==`) are not here.

use k8s_cel::check::{Env, Type};
use k8s_cel::Program;
use serde_json::{json, Value};

/// How an expression's variables are declared.
enum Scope {
    /// No variables.
    Closed,
    /// A CRD rule with `self` and `oldSelf` as `dyn`.
    Rule,
    /// A CRD rule on the given schema node (`resource_root`,
    /// `optionalOldSelf`).
    Schema(Value, bool, bool),
    /// A ValidatingAdmissionPolicy, MutatingAdmissionPolicy or webhook
    /// match condition expression.
    Admission,
}

/// (where it is written, its variables, the expression).
fn table() -> Vec<(&'static str, Scope, &'static str)> {
    use Scope::*;
    let crd_spec = json!({"type": "object", "properties": {
        "min": {"type": "integer", "default": 0},
        "max": {"type": "integer", "default": 10},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "floor": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    }});
    let row_memory = json!({"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "field00": {"type": "string"},
    }});
    let unit_list = json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "string"}},
    }});
    vec![
        // tests/tests/crd.rs (spec of the widgets CRD).
        ("tests/tests/crd.rs", Schema(crd_spec.clone(), false, false), "self.min <= self.max"),
        ("tests/tests/crd.rs", Schema(crd_spec.clone(), false, false), "self.max >= oldSelf.max"),
        ("tests/tests/crd.rs", Schema(crd_spec, false, false), "'max may only grow, was %d'.format([oldSelf.max])"),
        ("tests/tests/crd.rs", Schema(json!({"type": "integer"}), false, true), "!oldSelf.hasValue() || self >= oldSelf.value()"),
        // tests/tests/crd_row_memory.rs.
        ("tests/tests/crd_row_memory.rs", Schema(row_memory.clone(), false, false), "!has(self.replicas) || self.replicas <= 100"),
        ("tests/tests/crd_row_memory.rs", Schema(row_memory, false, false), "!has(self.field00) || self.field00 != 'forbidden'"),
        // tests/tests/crd_cel_check.rs: the rules it expects accepted.
        ("tests/tests/crd_cel_check.rs", Rule, "self.replicas + 1 > 0"),
        // apiserver/src/crd/tests.rs.
        ("apiserver/src/crd/tests.rs", Schema(json!({"type": "object", "properties": {"spec": {"type": "object"}}}), true, false), "has(self.spec)"),
        ("apiserver/src/crd/tests.rs", Schema(unit_list, false, false), "self.list.all(x, self.list.all(y, x == y))"),
        // cel/tests/engine.rs (rules evaluated without a schema).
        ("cel/tests/engine.rs", Rule, "self.replicas > oldSelf.replicas"),
        ("cel/tests/engine.rs", Rule, "self.ratio < oldSelf.ratio"),
        ("cel/tests/engine.rs", Rule, "self.name == oldSelf.name"),
        ("cel/tests/engine.rs", Rule, "type(self.replicas) == int && type(self.ratio) == double"),
        ("cel/tests/engine.rs", Rule, "oldSelf.ratio == 1"),
        ("cel/tests/engine.rs", Rule, "has(self.tags) && !has(self.missing)"),
        ("cel/tests/engine.rs", Rule, "self.tags.all(t, t.size() == 1) && self.tags.exists(t, t == 'b')"),
        ("cel/tests/engine.rs", Rule, "self.tags.exists_one(t, t == 'a')"),
        ("cel/tests/engine.rs", Rule, "self.tags.map(t, t + '!') == ['a!', 'b!']"),
        ("cel/tests/engine.rs", Rule, "self.tags.filter(t, t != 'a') == ['b']"),
        ("cel/tests/engine.rs", Rule, "self.?missing.orValue(5) == 5"),
        ("cel/tests/engine.rs", Rule, "self.all(x, self.all(y, x + y >= 0))"),
        ("cel/tests/engine.rs", Rule, "self.map(x, self.filter(y, y > x)).size() > 0 || true"),
        ("cel/tests/engine.rs", Rule, "self.items.all(x, self.items.all(y, x.name != y.name))"),
        ("cel/tests/engine.rs", Rule, "self.name.contains(self.other)"),
        ("cel/tests/engine.rs", Rule, "self.items.all(x, x in oldSelf.items)"),
        ("cel/tests/engine.rs", Rule, "true || self.items.all(x, x > 0)"),
        ("cel/tests/engine.rs", Rule, "self.items.all(x, x.name != oldSelf.name) && cel.bind(y, self.a, y > 1)"),
        ("cel/tests/engine.rs", Rule, "self.all(k, v, v > 0) && sets.contains(self, [1])"),
        ("cel/tests/engine.rs", Closed, "'hello'.charAt(1) == 'e'"),
        ("cel/tests/engine.rs", Closed, "'hello mellow'.indexOf('ello', 6) == 7"),
        ("cel/tests/engine.rs", Closed, "'TacoCÆt Xii'.upperAscii() == 'TACOCÆT XII'"),
        ("cel/tests/engine.rs", Closed, "'hello hello'.replace('he', 'we', 1) == 'wello hello'"),
        ("cel/tests/engine.rs", Closed, "'hello hello hello'.split(' ', 2) == ['hello', 'hello hello']"),
        ("cel/tests/engine.rs", Closed, "'tacocat'.substring(0, 4) == 'taco'"),
        ("cel/tests/engine.rs", Closed, "'  \\ttrim\\n    '.trim() == 'trim'"),
        ("cel/tests/engine.rs", Closed, "['hello', 'mellow'].join(' ') == 'hello mellow'"),
        ("cel/tests/engine.rs", Closed, "strings.quote('single-quote with \"double quote\"') == '\"single-quote with \\\\\"double quote\\\\\"\"'"),
        ("cel/tests/engine.rs", Closed, "'gums'.reverse() == 'smug'"),
        ("cel/tests/engine.rs", Closed, "[3, 1, 2].sort() == [1, 2, 3]"),
        ("cel/tests/engine.rs", Closed, "lists.range(3) == [0, 1, 2]"),
        ("cel/tests/engine.rs", Closed, "1 + 2 == 3"),
        ("cel/tests/engine.rs", Closed, "quantity('100Mi')"),
        ("cel/tests/engine.rs", Closed, "optional.none()"),
        ("cel/tests/engine.rs", Admission, "object.metadata.name == 'x'"),
        // tests/tests/admission_policy.rs.
        ("tests/tests/admission_policy.rs", Admission, "object.spec.replicas <= 5"),
        ("tests/tests/admission_policy.rs", Admission, "params.spec.max"),
        ("tests/tests/admission_policy.rs", Admission, "object.spec.replicas <= variables.max"),
        ("tests/tests/admission_policy.rs", Admission, "'at most ' + string(variables.max) + ' replicas, not ' + string(object.spec.replicas)"),
        ("tests/tests/admission_policy.rs", Admission, "request.operation != 'CREATE' || has(object.metadata.labels)"),
        ("tests/tests/admission_policy.rs", Admission, "request.operation != 'DELETE' || !has(oldObject.metadata.labels) || !('protected' in oldObject.metadata.labels)"),
        ("tests/tests/admission_policy.rs", Admission, "request.userInfo.username != '' && (!has(namespaceObject.metadata.labels) || namespaceObject.status.phase == 'Active')"),
        ("tests/tests/admission_policy.rs", Admission, "'user ' + request.userInfo.username + ' in ' + request.namespace"),
        ("tests/tests/admission_policy.rs", Admission, "request.requestResource.resource != 'deployments' || object.metadata.name != 'blocked'"),
        // tests/tests/admission_plugins.rs.
        ("tests/tests/admission_plugins.rs", Admission, "has(object.metadata.labels) && 'mutate' in object.metadata.labels"),
        ("tests/tests/admission_plugins.rs", Admission, "Object{metadata: Object.metadata{labels: {\"mutated\": \"yes\"}}}"),
        ("tests/tests/admission_plugins.rs", Admission, "[JSONPatch{op: \"add\", path: \"/data/seen-label\", value: object.metadata.labels[\"mutated\"]}]"),
        ("tests/tests/admission_plugins.rs", Admission, "[JSONPatch{op: 'replace', path: '/data/absent', value: 'x'}]"),
        ("tests/tests/admission_plugins.rs", Admission, "object.kind == 'PodExecOptions' && !('rm' in object.command)"),
        ("tests/tests/admission_plugins.rs", Admission, "has(object.metadata.annotations) && 'owner' in object.metadata.annotations"),
        ("tests/tests/admission_plugins.rs", Admission, "authorizer.requestResource.check('create').allowed()"),
        ("tests/tests/admission_plugins.rs", Admission, "authorizer.serviceAccount(object.metadata.namespace, object.metadata.annotations['owner'])\n  .group('').resource('configmaps').namespace(object.metadata.namespace)\n  .check('create').allowed()\n"),
        ("tests/tests/admission_plugins.rs", Admission, "'owner ' + object.metadata.annotations['owner'] + ' may not create configmaps'"),
        ("tests/tests/admission_plugins.rs", Admission, "object.spec.replicas < 10"),
        ("tests/tests/admission_plugins.rs", Admission, "'too many: ' + string(object.spec.replicas)"),
        ("tests/tests/admission_plugins.rs", Admission, "!has(object.data) || object.data.size() < 1"),
        // tests/tests/admission_doors.rs.
        ("tests/tests/admission_doors.rs", Admission, "request.namespace != 'shut'"),
        ("tests/tests/admission_doors.rs", Admission, "'door closed: ' + request.operation + ' ' + request.kind.kind + ' ' + request.name + (request.operation == 'DELETE' ? ' was ' + oldObject.metadata.name : ' with ' + object.kind)"),
        // tests/tests/dropin.rs.
        ("tests/tests/dropin.rs", Admission, "Object{metadata: Object.metadata{labels: {'mutated': 'yes'}}}"),
        // tests/src/bench/admission.rs.
        ("tests/src/bench/admission.rs", Admission, "object.metadata.name.size() < 64"),
        ("tests/src/bench/admission.rs", Admission, "!has(object.data) || object.data.size() < 100"),
        ("tests/src/bench/admission.rs", Admission, "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)"),
        // apiserver/src/admission/policy.rs unit tests.
        ("apiserver/src/admission/policy.rs", Admission, "object.spec.replicas"),
        ("apiserver/src/admission/policy.rs", Admission, "variables.r <= 5"),
        ("apiserver/src/admission/policy.rs", Admission, "'replicas: ' + string(variables.r)"),
        ("apiserver/src/admission/policy.rs", Admission, "object.spec.replicas > 10"),
        ("apiserver/src/admission/policy.rs", Admission, "false"),
    ]
}

fn env(scope: &Scope) -> Env {
    match scope {
        Scope::Closed => Env::new(),
        Scope::Rule => Env::new()
            .with_variable("self", Type::Dyn)
            .with_variable("oldSelf", Type::Dyn),
        Scope::Schema(schema, root, optional) => {
            Env::for_schema_rule(schema, *root, *optional).expect("a schema with a CEL type")
        }
        Scope::Admission => {
            let mut env = Env::new();
            for v in ["object", "oldObject", "params", "variables"] {
                env = env.with_variable(v, Type::Dyn);
            }
            env.with_variable("request", Type::admission_request())
                .with_variable("namespaceObject", Type::namespace_object())
                .with_variable(
                    "authorizer",
                    Type::named("kubernetes.authorization.Authorizer"),
                )
                .with_variable(
                    "authorizer.requestResource",
                    Type::named("kubernetes.authorization.ResourceCheck"),
                )
        }
    }
}

/// Expressions tests write to see them refused for their cost.
const COSTLY: &[&str] = &["self.list.all(x, self.list.all(y, x == y))"];

#[test]
fn the_repositorys_expressions_pass_the_checker() {
    let mut refused = Vec::new();
    for (origin, scope, expr) in table() {
        let program = Program::compile(expr).unwrap_or_else(|e| panic!("{origin}: {expr}: {e}"));
        match program.check_cost(&env(&scope)) {
            Err(e) => refused.push(format!("{origin}: {expr}\n{e}")),
            // Rules on a schema node outside any list or map run once: kube
            // accepts them, so their estimate is within its limit.
            Ok((_, cost)) if matches!(scope, Scope::Schema(..)) && !COSTLY.contains(&expr) => {
                if let Err(e) = cost.check(k8s_cel::STATIC_ESTIMATED_COST_LIMIT) {
                    refused.push(format!("{origin}: {expr}\n{e}"));
                }
            }
            Ok(_) => {}
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n\n"));
}

#[test]
fn what_kube_refuses_is_refused() {
    // The table's test would pass with a checker that accepts everything.
    let schema = json!({"type": "object", "properties": {"max": {"type": "integer"}}});
    let rule = env(&Scope::Schema(schema, false, false));
    for expr in ["self.max == 'x'", "self.maz > 1"] {
        assert!(
            Program::compile(expr).unwrap().check(&rule).is_err(),
            "{expr}"
        );
    }
    // `request` has kube's AdmissionRequest type.
    let admission = env(&Scope::Admission);
    for expr in ["request.nosuch", "request.operation == 1"] {
        assert!(
            Program::compile(expr).unwrap().check(&admission).is_err(),
            "{expr}"
        );
    }
    // tests/tests/admission_plugins.rs wrote this audit annotation (now
    // `string(has(object.data) ? object.data.size() : 0)`); kube refuses
    // it too: cel-go's `_?_:_` is `(bool, A, A) -> A`, and `null`
    // is not assignable to `string` (only to messages, opaque types,
    // durations and timestamps), whatever `object` is.
    let expr = "has(object.data) ? string(object.data.size()) : null";
    let e = Program::compile(expr)
        .unwrap()
        .check(&env(&Scope::Admission))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("found no matching overload for '_?_:_' applied to '(bool, string, null)'"),
        "{e}"
    );
}
