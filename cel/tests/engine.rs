//! The engine as its users see it: compile, bind, evaluate, convert, cost.

use std::sync::Arc;

use k8s_cel::{
    cel_to_json, check, Bindings, Budget, CostEstimate, EvalError, Program, Value, PER_CALL_LIMIT,
    STATIC_ESTIMATED_COST_LIMIT,
};
use serde_json::json;

fn eval(expr: &str, vars: &Bindings) -> Result<Value, EvalError> {
    Program::compile(expr)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
        .evaluate(vars)
        .map(|e| e.value)
}

fn truth(expr: &str, vars: &Bindings) {
    assert_eq!(eval(expr, vars), Ok(Value::Bool(true)), "{expr}");
}

#[test]
fn compile_errors_read_like_kubernetes() {
    let e = Program::compile("self.x ==").unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("compilation failed: ERROR: <input>:1:"),
        "{text}"
    );
    assert!(e.detail().starts_with("ERROR: <input>:1:"), "{e:?}");
    assert!(Program::compile("1 + ").is_err());
    assert!(Program::compile("'unterminated").is_err());
    assert!(Program::compile(&"a".repeat(k8s_cel::MAX_EXPRESSION_LENGTH + 1)).is_err());
}

#[test]
fn programs_are_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Program>();
    assert_send_sync::<Bindings>();
    let program = Arc::new(Program::compile("self.n * 2").unwrap());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let program = Arc::clone(&program);
            std::thread::spawn(move || {
                let vars = Bindings::new().with_json("self", &json!({"n": i}));
                program.evaluate(&vars).unwrap().value
            })
        })
        .collect();
    let results: Vec<Value> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        results,
        vec![Value::Int(0), Value::Int(2), Value::Int(4), Value::Int(6)]
    );
}

#[test]
fn rules_see_self_and_old_self() {
    let vars = Bindings::new()
        .with_json(
            "self",
            &json!({"replicas": 3, "ratio": 0.5, "name": "web", "tags": ["a", "b"]}),
        )
        .with_json(
            "oldSelf",
            &json!({"replicas": 2, "ratio": 1.0, "name": "web", "tags": []}),
        );
    truth("self.replicas > oldSelf.replicas", &vars);
    truth("self.ratio < oldSelf.ratio", &vars);
    truth("self.name == oldSelf.name", &vars);
    truth(
        "type(self.replicas) == int && type(self.ratio) == double",
        &vars,
    );
    // JSON `1.0` reaches CEL as the double 1.0, equal to the int 1.
    truth("oldSelf.ratio == 1", &vars);
    truth("has(self.tags) && !has(self.missing)", &vars);
    truth(
        "self.tags.all(t, t.size() == 1) && self.tags.exists(t, t == 'b')",
        &vars,
    );
    truth("self.tags.exists_one(t, t == 'a')", &vars);
    truth("self.tags.map(t, t + '!') == ['a!', 'b!']", &vars);
    truth("self.tags.filter(t, t != 'a') == ['b']", &vars);
    truth("self.?missing.orValue(5) == 5", &vars);
    let message = |expr: &str| eval(expr, &vars).unwrap_err().to_string();
    assert_eq!(message("self.missing == 1"), "no such key: missing");
    assert_eq!(message("nope"), "undeclared reference to 'nope'");
    assert_eq!(message("1 / 0"), "division by zero");
    assert_eq!(message("1 % 0"), "modulus by zero");
    assert_eq!(message("9223372036854775807 + 1"), "integer overflow");
    assert_eq!(
        message("quantity('1.5').asInteger()"),
        "cannot convert value to integer"
    );
    assert!(
        message("1 + 'a'").contains("no matching overload"),
        "{}",
        message("1 + 'a'")
    );
}

#[test]
fn typed_helpers() {
    let vars = Bindings::new().with_json("object", &json!({"metadata": {"name": "x"}}));
    let rule = Program::compile("object.metadata.name == 'x'").unwrap();
    assert_eq!(rule.eval_bool(&vars), Ok(true));
    let not_bool = Program::compile("object.metadata.name").unwrap();
    assert!(matches!(
        not_bool.eval_bool(&vars),
        Err(EvalError::WrongType { want: "bool", .. })
    ));
    assert_eq!(not_bool.eval_string(&vars).unwrap(), "x");
    let mutation = Program::compile(
        "{'spec': {'replicas': 3, 'labels': object.metadata}, 'list': [1.5, null]}",
    )
    .unwrap();
    assert_eq!(
        mutation.eval_json(&vars).unwrap(),
        json!({"list": [1.5, null], "spec": {"labels": {"name": "x"}, "replicas": 3}})
    );
    let q = Program::compile("quantity('100Mi')").unwrap();
    assert_eq!(q.eval_json(&vars).unwrap(), json!("100Mi"));
    let none = Program::compile("optional.none()").unwrap();
    assert_eq!(none.eval_json(&vars).unwrap(), json!(null));
    assert_eq!(cel_to_json(&Value::Int(1)).unwrap(), json!(1));
}

#[test]
fn strings_extension_examples() {
    let vars = Bindings::new();
    for expr in [
        "'hello'.charAt(1) == 'e'",
        "'hello mellow'.indexOf('ello') == 1",
        "'hello mellow'.indexOf('ello', 6) == 7",
        "'hello mellow'.lastIndexOf('ello') == 7",
        "'TacoCat'.lowerAscii() == 'tacocat'",
        "'TacoCÆt Xii'.upperAscii() == 'TACOCÆT XII'",
        "'hello hello'.replace('he', 'we') == 'wello wello'",
        "'hello hello'.replace('he', 'we', 1) == 'wello hello'",
        "'hello hello hello'.split(' ') == ['hello', 'hello', 'hello']",
        "'hello hello hello'.split(' ', 2) == ['hello', 'hello hello']",
        "'tacocat'.substring(4) == 'cat'",
        "'tacocat'.substring(0, 4) == 'taco'",
        "'  \\ttrim\\n    '.trim() == 'trim'",
        "['hello', 'mellow'].join() == 'hellomellow'",
        "['hello', 'mellow'].join(' ') == 'hello mellow'",
        "strings.quote('single-quote with \"double quote\"') == '\"single-quote with \\\\\"double quote\\\\\"\"'",
        "'gums'.reverse() == 'smug'",
        "[3, 1, 2].sort() == [1, 2, 3]",
        "lists.range(3) == [0, 1, 2]",
    ] {
        truth(expr, &vars);
    }
}

#[test]
fn runtime_cost_is_limited_per_call() {
    let vars = Bindings::new().with_json("self", &json!((0..2000).collect::<Vec<_>>()));
    let cheap = Program::compile("self.all(x, x >= 0)").unwrap();
    let cost = cheap.evaluate(&vars).unwrap().cost;
    assert!(cost >= 2000, "{cost}");
    let nested = Program::compile("self.all(x, self.all(y, x + y >= 0))").unwrap();
    let started = std::time::Instant::now();
    assert_eq!(nested.evaluate(&vars), Err(EvalError::CostLimitExceeded));
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(
        nested.evaluate(&vars).unwrap_err().to_string(),
        "operation cancelled: actual cost limit exceeded"
    );
    // A limit error inside `||` is not absorbed by the other side.
    let absorbed =
        Program::compile("self.map(x, self.filter(y, y > x)).size() > 0 || true").unwrap();
    assert_eq!(absorbed.evaluate(&vars), Err(EvalError::CostLimitExceeded));
    assert_eq!(
        cheap.evaluate_with_limit(&vars, 10),
        Err(EvalError::CostLimitExceeded)
    );
    assert!(PER_CALL_LIMIT > cost);
}

#[test]
fn string_work_is_charged() {
    let vars = Bindings::new().with_json("self", &json!("x".repeat(100_000)));
    let cost = |expr: &str| {
        Program::compile(expr)
            .unwrap()
            .evaluate(&vars)
            .unwrap()
            .cost
    };
    assert!(cost("self.contains('y')") >= 10_000);
    assert!(cost("self.matches('^x+$')") >= 10_000);
    assert!(cost("self.lowerAscii() == self") >= 10_000);
    assert!(cost("size(self) > 0") < 10);
    assert!(cost("self.split('x').size() > 0") >= 10_000);
    assert!(cost("self.replace('x', 'y') != ''") >= 10_000);
    assert!(cost("url('https://a/' + self).getHost() == 'a'") >= 10_000);
    assert!(cost("isQuantity(self)") >= 10_000);
}

#[test]
fn optional_old_self() {
    let mut vars = Bindings::new().with_json("self", &json!(2));
    vars.insert_optional_json("oldSelf", None);
    truth("!oldSelf.hasValue() && oldSelf.orValue(0) == 0", &vars);
    vars.insert_optional_json("oldSelf", Some(&json!(1)));
    truth("oldSelf.hasValue() && self > oldSelf.value()", &vars);
    assert!(vars.contains("oldSelf") && !vars.contains("object"));
}

#[test]
fn budgets_span_evaluations() {
    let vars = Bindings::new().with_json("self", &json!((0..1000).collect::<Vec<_>>()));
    let rule = Program::compile("self.all(x, x >= 0)").unwrap();
    let cost = rule.evaluate(&vars).unwrap().cost;
    let mut budget = Budget::new(cost * 2 + cost / 2);
    rule.evaluate_in_budget(&vars, &mut budget).unwrap();
    rule.evaluate_in_budget(&vars, &mut budget).unwrap();
    let e = rule.evaluate_in_budget(&vars, &mut budget).unwrap_err();
    assert_eq!(e, EvalError::OutOfBudget);
    assert_eq!(
        e.to_string(),
        "validation failed due to running out of cost budget, no further validation rules will be run"
    );
    assert!(budget.is_exhausted());
    assert_eq!(
        rule.evaluate_in_budget(&vars, &mut budget),
        Err(EvalError::OutOfBudget)
    );
}

#[test]
fn static_estimates_follow_the_schema() {
    let schema = |max_items: Option<u64>, max_length: Option<u64>| {
        let mut name = json!({"type": "string"});
        if let Some(m) = max_length {
            name["maxLength"] = json!(m);
        }
        let mut items = json!({"type": "array", "items": {"type": "object",
            "properties": {"name": name}}});
        if let Some(m) = max_items {
            items["maxItems"] = json!(m);
        }
        json!({"type": "object", "properties": {"items": items, "other": {"type": "string", "maxLength": 10}}})
    };
    let env =
        |items, length| check::Env::for_schema_rule(&schema(items, length), false, false).unwrap();
    let cost =
        |rule: &str, env: &check::Env| Program::compile(rule).unwrap().check_cost(env).unwrap().1;

    let rule = "self.items.all(x, x.name.size() < 10)";
    let small = cost(rule, &env(Some(100), None));
    assert!(small.max >= 100 && small.max < 1000, "{small:?}");
    assert!(small.check(STATIC_ESTIMATED_COST_LIMIT).is_ok());
    let unbounded = cost(rule, &env(None, None));
    assert!(unbounded.max > small.max * 1000, "{unbounded:?}");

    let nested = "self.items.all(x, self.items.all(y, x.name != y.name))";
    let e = cost(nested, &env(None, None))
        .check(STATIC_ESTIMATED_COST_LIMIT)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
    let bounded = cost(nested, &env(Some(1000), Some(63)));
    let e = bounded.check(1_000_000).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("estimated rule cost exceeds budget by factor of "),
        "{e}"
    );
    assert!(bounded.max < 100_000_000);

    let transition = cost(
        "self.items.all(x, x in oldSelf.items)",
        &env(Some(10), Some(10)),
    );
    assert!(transition.max < 1000, "{transition:?}");
    let constant = cost("1 + 2 == 3", &env(None, None));
    assert!(constant.max < 10, "{constant:?}");
    let short = cost("true || self.items.all(x, x.name == 'a')", &env(None, None));
    assert!(short.min < 5 && short.max > 1000, "{short:?}");
}

#[test]
fn cost_refusals_are_worded_as_kube_words_them() {
    let e = |estimate| {
        CostEstimate {
            min: 0,
            max: estimate,
        }
        .check(10)
        .unwrap_err()
        .to_string()
    };
    assert!(
        e(12).starts_with("estimated rule cost exceeds budget by factor of 1.200000x (try"),
        "{}",
        e(12)
    );
    assert!(
        e(25).starts_with("estimated rule cost exceeds budget by factor of 2.5x (try"),
        "{}",
        e(25)
    );
    assert!(e(1001).starts_with("estimated rule cost exceeds budget by factor of more than 100x"));
    assert!(CostEstimate { min: 0, max: 10 }.check(10).is_ok());
}

#[test]
fn deep_expressions_are_refused_not_stack_overflows() {
    let vars = Bindings::new().with_json("a", &json!({}));
    for n in [8, 31, 32, 33, 63, 64, 65, 1000] {
        for (shape, source) in [
            ("parens", format!("{}1{}", "(".repeat(n), ")".repeat(n))),
            ("lists", format!("{}1{}", "[".repeat(n), "]".repeat(n))),
            ("sum", format!("1{}", " + 1".repeat(n))),
            ("methods", format!("'a'{}", ".lowerAscii()".repeat(n))),
            ("fields", format!("a{}", ".b".repeat(n))),
            ("maps", format!("[1]{}", ".map(x, [x])".repeat(n))),
            ("conditions", format!("{}1", "true ? 1 : ".repeat(n))),
            ("conjunction", format!("true{}", " && true".repeat(n))),
        ] {
            match Program::compile(&source) {
                Ok(program) => {
                    let _ = program.evaluate(&vars);
                }
                Err(e) => assert!(
                    e.to_string()
                        .starts_with("compilation failed: ERROR: <input>:"),
                    "{shape} {n}: {e}"
                ),
            }
        }
    }
    let e = Program::compile(&format!("{}1{}", "(".repeat(40), ")".repeat(40))).unwrap_err();
    assert!(
        e.to_string().contains("nests brackets more than 32 deep"),
        "{e}"
    );
    let e = Program::compile(&format!("1{}", " + 1".repeat(100))).unwrap_err();
    assert!(e.to_string().contains("more than 64 levels deep"), "{e}");
    // Realistic rules are far from the limits.
    let rule = "self.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && \
                quantity(c.resources.limits.memory).isLessThan(quantity('4Gi')) && \
                c.image.startsWith('registry.example.com/') && c.ports.all(p, p.containerPort > 1024))";
    Program::compile(rule).unwrap();
}

#[test]
fn variables_read() {
    let rule =
        Program::compile("self.items.all(x, x.name != oldSelf.name) && cel.bind(y, self.a, y > 1)")
            .unwrap();
    assert_eq!(
        rule.variables(),
        vec!["oldSelf".to_owned(), "self".to_owned()]
    );
    assert!(rule.uses_variable("oldSelf"));
    assert!(!rule.uses_variable("x") && !rule.uses_variable("y"));
    let two = Program::compile("self.all(k, v, v > 0) && sets.contains(self, [1])").unwrap();
    assert_eq!(two.variables(), vec!["self".to_owned()]);
}

#[test]
fn mutating_policy_literals_become_json() {
    let vars = Bindings::new().with_json("object", &json!({"spec": {"replicas": 1}}));
    let apply = Program::compile(
        "Object{spec: Object.spec{replicas: object.spec.replicas + 1, ?paused: optional.none(), \
         template: Object.spec.template{metadata: Object.spec.template.metadata{labels: {'a': 'b'}}}}}",
    )
    .unwrap();
    assert_eq!(
        apply.eval_json(&vars).unwrap(),
        json!({"spec": {"replicas": 2, "template": {"metadata": {"labels": {"a": "b"}}}}})
    );
    let patch = Program::compile(
        "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('k8s.io/x'), value: 'y'}]",
    )
    .unwrap();
    assert_eq!(
        patch.eval_json(&vars).unwrap(),
        json!([{"op": "add", "path": "/metadata/labels/k8s.io~1x", "value": "y"}])
    );
    assert_eq!(patch.variables(), Vec::<String>::new());
    assert!(Program::compile("Other{a: 1}")
        .unwrap()
        .evaluate(&vars)
        .is_err());
}
