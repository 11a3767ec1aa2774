//! Macros the base crate lacks: `cel.bind(name, value, body)` (cel-go's
//! bindings extension) and cel-go's two-variable comprehensions,
//! `all(k, v, p)`, `exists(k, v, p)`, `existsOne(k, v, p)` (also spelled
//! `exists_one`), `transformList(k, v, [filter,] e)`,
//! `transformMap(k, v, [filter,] e)` and `transformMapEntry(k, v, [filter,]
//! e)`. Over a list `k` is the index, over a map the key.
//!
//! The base interpreter binds one variable per iteration, so a two-variable
//! comprehension iterates over `@k8s_pairs(target)`, a list of `[k, v]`
//! pairs (a map's in key order), binding `k` and `v` from each pair with
//! `cel.bind`. The expansions keep the shapes of the standard macros, so
//! the base crate's optimisations and error rules apply alike.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{
    operators, CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue,
};
use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::cost::charge;
use crate::native::{err, list, native};

const PAIRS: &str = "@k8s_pairs";
const TO_MAP: &str = "@k8s_entries_to_map";
const MERGE: &str = "@k8s_merge_maps";
const PAIR: &str = "@k8s_pair";
const RESULT: &str = "@result";

type Expansion = Result<Option<IdedExpr>, ParseError>;

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(PAIRS, "k8s_pairs", vec![DYN_TYPE], native!(pairs))?;
    env.add_overload(
        TO_MAP,
        "k8s_entries_to_map",
        vec![LIST_TYPE],
        native!(entries_to_map),
    )?;
    env.add_overload(
        MERGE,
        "k8s_merge_maps",
        vec![LIST_TYPE],
        native!(merge_maps),
    )?;
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    env.add_macro(Macro::receiver("all", 3, |h, t, a| {
        two_var(h, t, a, Kind::All)
    }))?;
    env.add_macro(Macro::receiver("exists", 3, |h, t, a| {
        two_var(h, t, a, Kind::Exists)
    }))?;
    env.add_macro(Macro::receiver("existsOne", 3, |h, t, a| {
        two_var(h, t, a, Kind::ExistsOne)
    }))?;
    env.add_macro(Macro::receiver("exists_one", 3, |h, t, a| {
        two_var(h, t, a, Kind::ExistsOne)
    }))?;
    for n in [3, 4] {
        env.add_macro(Macro::receiver("transformList", n, |h, t, a| {
            two_var(h, t, a, Kind::List)
        }))?;
        env.add_macro(Macro::receiver("transformMap", n, |h, t, a| {
            two_var(h, t, a, Kind::Map)
        }))?;
        env.add_macro(Macro::receiver("transformMapEntry", n, |h, t, a| {
            two_var(h, t, a, Kind::MapEntry)
        }))?;
    }
    Ok(())
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_owned(),
        target: None,
        args,
    }))
}

fn literal(h: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

fn list_of(h: &mut MacroExprHelper<'_>, elements: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::List(ListExpr::new(elements)))
}

#[allow(clippy::too_many_arguments)]
fn comprehension(
    h: &mut MacroExprHelper<'_>,
    iter_range: IdedExpr,
    iter_var: &str,
    accu_var: &str,
    accu_init: IdedExpr,
    loop_cond: IdedExpr,
    loop_step: IdedExpr,
    result: IdedExpr,
) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range,
        iter_var: iter_var.to_owned(),
        iter_var2: None,
        accu_var: accu_var.to_owned(),
        accu_init,
        loop_cond,
        loop_step,
        result,
    })))
}

/// `body` with `name` bound to `value`: a comprehension over nothing whose
/// accumulator is the binding.
fn bind(h: &mut MacroExprHelper<'_>, name: &str, value: IdedExpr, body: IdedExpr) -> IdedExpr {
    let range = list_of(h, Vec::new());
    let cond = literal(h, LiteralValue::Boolean(false.into()));
    let step = ident(h, name);
    comprehension(h, range, "#unused", name, value, cond, step, body)
}

fn simple_name(
    h: &mut MacroExprHelper<'_>,
    e: &IdedExpr,
    what: &str,
) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, format!("{what} must be a simple name"))),
    }
}

fn bind_macro(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Expansion {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let name = simple_name(h, &args[0], "cel.bind() variable")?;
    let body = args.remove(2);
    let value = args.remove(1);
    Ok(Some(bind(h, &name, value, body)))
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    All,
    Exists,
    ExistsOne,
    List,
    Map,
    MapEntry,
}

/// `e` with the two variables bound from the current pair.
fn with_pair(h: &mut MacroExprHelper<'_>, k: &str, v: &str, e: IdedExpr) -> IdedExpr {
    let element = |h: &mut MacroExprHelper<'_>, i: i64| {
        let pair = ident(h, PAIR);
        let index = literal(h, LiteralValue::Int(i.into()));
        call(h, operators::INDEX, vec![pair, index])
    };
    let value = element(h, 1);
    let inner = bind(h, v, value, e);
    let key = element(h, 0);
    bind(h, k, key, inner)
}

fn two_var(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    kind: Kind,
) -> Expansion {
    let k = simple_name(h, &args[0], "the first variable")?;
    let v = simple_name(h, &args[1], "the second variable")?;
    if k == v {
        return Err(h.new_error(args[1].id, "the two variables must differ"));
    }
    let Some(t) = target.take() else {
        return Ok(None);
    };
    let range = call(h, PAIRS, vec![t]);
    let body = args.pop().expect("the macros take three or four arguments");
    let filter = (args.len() == 3).then(|| args.pop().expect("checked"));
    let body = match kind {
        Kind::Map => {
            let key = ident(h, &k);
            list_of(h, vec![key, body])
        }
        _ => body,
    };
    let body = with_pair(h, &k, &v, body);
    let filter = filter.map(|f| with_pair(h, &k, &v, f));
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, RESULT);
    let expanded = match kind {
        Kind::All | Kind::Exists => {
            let all = kind == Kind::All;
            let init = literal(h, LiteralValue::Boolean(all.into()));
            let a = accu(h);
            let cond_arg = if all {
                a
            } else {
                call(h, operators::LOGICAL_NOT, vec![a])
            };
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![cond_arg]);
            let a = accu(h);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = call(h, op, vec![a, body]);
            let result = accu(h);
            comprehension(h, range, PAIR, RESULT, init, cond, step, result)
        }
        Kind::ExistsOne => {
            let init = literal(h, LiteralValue::Int(0.into()));
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let plus = call(h, operators::ADD, vec![a, one]);
            let a = accu(h);
            let step = call(h, operators::CONDITIONAL, vec![body, plus, a]);
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let result = call(h, operators::EQUALS, vec![a, one]);
            comprehension(h, range, PAIR, RESULT, init, cond, step, result)
        }
        Kind::List | Kind::Map | Kind::MapEntry => {
            let init = list_of(h, Vec::new());
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            let a = accu(h);
            let item = list_of(h, vec![body]);
            let mut step = call(h, operators::ADD, vec![a, item]);
            if let Some(f) = filter {
                let a = accu(h);
                step = call(h, operators::CONDITIONAL, vec![f, step, a]);
            }
            let result = accu(h);
            let list = comprehension(h, range, PAIR, RESULT, init, cond, step, result);
            match kind {
                Kind::List => list,
                Kind::Map => call(h, TO_MAP, vec![list]),
                _ => call(h, MERGE, vec![list]),
            }
        }
    };
    Ok(Some(expanded))
}

fn pairs(args: &[Value]) -> Result<Value, ExecutionError> {
    let pair = |k: Value, v: Value| Value::List(Arc::new(vec![k, v]));
    let out: Vec<Value> = match &args[0] {
        Value::List(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| pair(Value::Int(i as i64), v.clone()))
            .collect(),
        Value::Map(m) => {
            let mut entries: Vec<(&Key, &Value)> = m.map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries
                .into_iter()
                .map(|(k, v)| pair(Value::from(k.clone()), v.clone()))
                .collect()
        }
        other => {
            return Err(err(
                "comprehension",
                format!("cannot iterate over {} with two variables", other.type_of()),
            ))
        }
    };
    charge(out.len() as u64)?;
    Ok(Value::List(Arc::new(out)))
}

fn key(function: &str, v: &Value) -> Result<Key, ExecutionError> {
    let k: Result<Key, Value> = v.clone().try_into();
    k.map_err(|v| err(function, format!("unsupported key type {}", v.type_of())))
}

fn insert(
    function: &str,
    map: &mut HashMap<Key, Value>,
    k: Key,
    v: Value,
) -> Result<(), ExecutionError> {
    if map.contains_key(&k) {
        return Err(err(
            function,
            format!("insert failed: key {k} already exists"),
        ));
    }
    map.insert(k, v);
    Ok(())
}

fn entries_to_map(args: &[Value]) -> Result<Value, ExecutionError> {
    let mut map = HashMap::new();
    for entry in list("transformMap", &args[0])? {
        let [k, v] = list("transformMap", entry)? else {
            return Err(err("transformMap", "malformed entry"));
        };
        insert("transformMap", &mut map, key("transformMap", k)?, v.clone())?;
    }
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

fn merge_maps(args: &[Value]) -> Result<Value, ExecutionError> {
    let mut map = HashMap::new();
    for entry in list("transformMapEntry", &args[0])? {
        let Value::Map(m) = entry else {
            return Err(err(
                "transformMapEntry",
                format!("expected a map, got {}", entry.type_of()),
            ));
        };
        for (k, v) in m.map.iter() {
            insert("transformMapEntry", &mut map, k.clone(), v.clone())?;
        }
    }
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_error, assert_true};

    #[test]
    fn bind() {
        assert_true(&[
            "cel.bind(x, 1, x + 1) == 2",
            "cel.bind(a, 'x', cel.bind(b, a + 'y', b + a)) == 'xyx'",
            "cel.bind(xs, [1, 2, 3], xs.all(x, x in xs))",
            "[1, 2].map(x, cel.bind(y, x * 10, y + x)) == [11, 22]",
        ]);
    }

    #[test]
    fn two_variable_comprehensions() {
        assert_true(&[
            "[1, 2, 3].all(i, v, i < v)",
            "!{'hello': 'world', 'taco': 'taco'}.all(k, v, k != v)",
            "{'h': ['hello', 'hi'], 'j': ['joke', 'jog']}.all(k, vals, vals.all(v, v.startsWith(k)))",
            "[1, 2, 1].exists(i, v, i != 1 && v == 1)",
            "{'greeting': 'hello', 'farewell': 'goodbye'}.exists(k, v, k.startsWith('good') || v.endsWith('bye'))",
            "![1, 2, 1].existsOne(i, v, i == 1 || v == 1)",
            "[1, 2, 1].existsOne(i, v, i == 2 && v == 1)",
            "{'a': 1, 'b': 2}.exists_one(k, v, v == 2)",
            "[1, 2, 3].transformList(i, v, i > 0, v * 2) == [4, 6]",
            "[1, 2, 3].transformList(i, v, i + v) == [1, 3, 5]",
            "{'greeting': 'hello'}.transformList(k, v, k + '=' + v) == ['greeting=hello']",
            "[1, 2, 3].transformMap(i, v, v * 2) == {0: 2, 1: 4, 2: 6}",
            "{'greeting': 'hello'}.transformMap(k, v, v + '!') == {'greeting': 'hello!'}",
            "{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v) == {'b': 2}",
            "{'a': 1, 'b': 2}.transformMapEntry(k, v, {v: k}) == {1: 'a', 2: 'b'}",
            "[1, 2].transformMapEntry(i, v, i > 0, {'k' + string(v): i}) == {'k2': 1}",
            "[].all(i, v, false) && ![].exists(i, v, true)",
        ]);
        assert_error(&[
            (
                "[1, 1].transformMapEntry(i, v, {v: i})",
                "insert failed: key 1 already exists",
            ),
            ("1.all(i, v, true)", "cannot iterate over int"),
        ]);
        assert!(crate::Program::compile("[1].all(i, i, true)").is_err());
        assert!(crate::Program::compile("[1].all(i.j, v, true)").is_err());
    }
}
