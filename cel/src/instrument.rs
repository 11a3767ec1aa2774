//! Rewrites a parsed expression so that evaluating it charges the runtime
//! cost meter (see [`crate::cost`]).
//!
//! Two hidden functions are inserted; their names start with `@`, which the
//! parser never produces, so user expressions cannot call them:
//!
//! * `@k8s_cost(x, n)` charges `n` and returns `x` (without copying);
//! * `@k8s_size(x)` charges for the size of `x` and returns `x`.
//!
//! Comprehensions keep the shapes the base crate optimises (`map`/`filter`
//! append in place; `all`/`exists` defer element errors): their loop step is
//! never wrapped. The per-iteration charge goes on the loop condition, or,
//! for an append-shaped `map`/`filter` whose condition must stay a literal,
//! on the filter guard or the appended element.

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelInt, CelList, CelMap, CelString, Kind, DYN_TYPE, INT_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use crate::cost::{charge, tenth};

pub(crate) const COST_FN: &str = "@k8s_cost";
pub(crate) const SIZE_FN: &str = "@k8s_size";

/// Functions whose work grows with the size of their operands: the
/// standard library's and the base crate's strings and lists extensions'
/// (the Kubernetes libraries charge for themselves).
const SIZED: &[&str] = &[
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "_+_",
    "_==_",
    "_!=_",
    "@in",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "reverse",
    "format",
    "quote",
    "slice",
    "flatten",
    "distinct",
    "sort",
    "@sortByAssociatedKeys",
    "string",
    "bytes",
];

/// The roots of qualified function names (`sets.contains`,
/// `strings.quote`...): a call's target spelled so is a namespace, not a
/// value, and must stay as written.
pub(crate) const NAMESPACES: &[&str] = &[
    "sets",
    "strings",
    "format",
    "ip",
    "lists",
    "optional",
    "math",
    "base64",
    "jsonpatch",
];

/// Registers the hidden functions on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        COST_FN,
        "k8s_cost_dyn_int",
        vec![DYN_TYPE, INT_TYPE],
        cost_fn,
    )?;
    env.add_overload(SIZE_FN, "k8s_size_dyn", vec![DYN_TYPE], size_fn)
}

fn cost_fn<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = args
        .get(1)
        .and_then(|n| n.downcast_ref::<CelInt>())
        .map(|n| *n.inner())
        .unwrap_or(1);
    charge(n.max(0) as u64)?;
    args.into_iter()
        .next()
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn size_fn<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let v = args
        .into_iter()
        .next()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    charge(size_cost(v.as_ref()))?;
    Ok(v)
}

/// 0.1 per character or byte, 1 per list element or map entry.
fn size_cost(v: &dyn Val) -> u64 {
    match v.get_type().kind() {
        Kind::String => v
            .downcast_ref::<CelString>()
            .map(|s| tenth(s.inner().len()))
            .unwrap_or(0),
        Kind::Bytes => cel::Value::try_from(v)
            .map(|b| match b {
                cel::Value::Bytes(b) => tenth(b.len()),
                _ => 0,
            })
            .unwrap_or(0),
        Kind::List => v
            .downcast_ref::<CelList>()
            .map(|l| l.inner().len() as u64)
            .unwrap_or(1),
        Kind::Map => v
            .downcast_ref::<CelMap>()
            .map(|m| m.inner().len() as u64)
            .unwrap_or(1),
        _ => 0,
    }
}

/// What evaluating `e` itself costs, its operands apart, as the static
/// estimate counts it (see [`crate::estimate`]): 1 per variable, field
/// selection and call, nothing for literals and the short-circuiting
/// operators, 10/30/40 for list/map/struct literals.
fn own_cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Ident(_) | Expr::Select(_) => 1,
        Expr::Call(call) => match call.func_name.as_str() {
            "_&&_" | "_||_" | "_?_:_" | "!_" | "@not_strictly_false" => 0,
            _ => 1,
        },
        Expr::List(_) => 10,
        Expr::Map(_) => 30,
        Expr::Struct(_) => 40,
        _ => 0,
    }
}

/// The cost of evaluating every node of `e` once, except the bodies of
/// comprehension loops (which charge per iteration).
pub(crate) fn once_cost(e: &IdedExpr) -> u64 {
    match &e.expr {
        Expr::Comprehension(c) => [&c.iter_range, &c.accu_init, &c.result]
            .into_iter()
            .map(once_cost)
            .fold(0, u64::saturating_add),
        _ => children(e)
            .into_iter()
            .map(once_cost)
            .fold(own_cost(e), u64::saturating_add),
    }
}

pub(crate) fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(call) => call
            .target
            .iter()
            .map(|t| t.as_ref())
            .chain(call.args.iter())
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(s) => vec![s.operand.as_ref()],
        _ => vec![],
    }
}

/// The children of `e`, to change in place.
pub(crate) fn children_mut(e: &mut IdedExpr) -> Vec<&mut IdedExpr> {
    match &mut e.expr {
        Expr::Call(call) => call
            .target
            .iter_mut()
            .map(|t| t.as_mut())
            .chain(call.args.iter_mut())
            .collect(),
        Expr::Comprehension(c) => vec![
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ],
        Expr::List(l) => l.elements.iter_mut().collect(),
        Expr::Map(m) => entries_mut(&mut m.entries),
        Expr::Struct(s) => entries_mut(&mut s.entries),
        Expr::Select(s) => vec![s.operand.as_mut()],
        _ => vec![],
    }
}

fn entries_mut(entries: &mut [cel::common::ast::IdedEntryExpr]) -> Vec<&mut IdedExpr> {
    entries
        .iter_mut()
        .flat_map(|e| match &mut e.expr {
            EntryExpr::MapEntry(m) => vec![&mut m.key, &mut m.value],
            EntryExpr::StructField(f) => vec![&mut f.value],
        })
        .collect()
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// Rewrites expressions, numbering inserted nodes after the parser's.
pub(crate) struct Instrumenter {
    next_id: u64,
}

impl Instrumenter {
    pub(crate) fn new(root: &IdedExpr) -> Instrumenter {
        Instrumenter {
            next_id: max_id(root) + 1,
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn call(&mut self, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
        IdedExpr {
            id: self.id(),
            expr: Expr::Call(CallExpr {
                func_name: name.to_owned(),
                target: None,
                args,
            }),
        }
    }

    fn charge(&mut self, e: IdedExpr, n: u64) -> IdedExpr {
        let n = IdedExpr {
            id: self.id(),
            expr: Expr::Literal(LiteralValue::Int(CelInt::from(
                n.min(i64::MAX as u64) as i64
            ))),
        };
        self.call(COST_FN, vec![e, n])
    }

    fn sized(&mut self, e: IdedExpr) -> IdedExpr {
        match e.expr {
            // A literal's size is known and small; don't bother.
            Expr::Literal(_) => e,
            _ => self.call(SIZE_FN, vec![e]),
        }
    }

    pub(crate) fn rewrite(&mut self, e: IdedExpr) -> IdedExpr {
        let id = e.id;
        let expr = match e.expr {
            Expr::Call(mut call) => {
                call.target = call.target.map(|t| Box::new(self.rewrite(*t)));
                call.args = call.args.into_iter().map(|a| self.rewrite(a)).collect();
                if SIZED.contains(&call.func_name.as_str()) {
                    let container_only = call.func_name == "@in";
                    let namespace = matches!(
                        call.target.as_deref(),
                        Some(IdedExpr { expr: Expr::Ident(n), .. }) if NAMESPACES.contains(&n.as_str())
                    );
                    if !namespace {
                        call.target = call.target.map(|t| Box::new(self.sized(*t)));
                    }
                    let n = call.args.len();
                    call.args = call
                        .args
                        .into_iter()
                        .enumerate()
                        .map(|(i, a)| {
                            if !container_only || i + 1 == n {
                                self.sized(a)
                            } else {
                                a
                            }
                        })
                        .collect();
                }
                Expr::Call(call)
            }
            Expr::Comprehension(c) => Expr::Comprehension(Box::new(self.comprehension(*c))),
            Expr::List(mut l) => {
                l.elements = l.elements.into_iter().map(|x| self.rewrite(x)).collect();
                Expr::List(l)
            }
            Expr::Map(mut m) => {
                m.entries = m.entries.into_iter().map(|x| self.entry(x)).collect();
                Expr::Map(m)
            }
            Expr::Struct(mut s) => {
                s.entries = s.entries.into_iter().map(|x| self.entry(x)).collect();
                Expr::Struct(s)
            }
            Expr::Select(mut s) => {
                s.operand = Box::new(self.rewrite(*s.operand));
                Expr::Select(s)
            }
            other => other,
        };
        IdedExpr { id, expr }
    }

    fn entry(&mut self, mut e: cel::common::ast::IdedEntryExpr) -> cel::common::ast::IdedEntryExpr {
        e.expr = match e.expr {
            EntryExpr::MapEntry(mut m) => {
                m.key = self.rewrite(m.key);
                m.value = self.rewrite(m.value);
                EntryExpr::MapEntry(m)
            }
            EntryExpr::StructField(mut f) => {
                f.value = self.rewrite(f.value);
                EntryExpr::StructField(f)
            }
        };
        e
    }

    fn comprehension(&mut self, mut c: ComprehensionExpr) -> ComprehensionExpr {
        let per_iteration = (once_cost(&c.loop_cond) + once_cost(&c.loop_step)).max(1);
        c.iter_range = self.rewrite(c.iter_range);
        c.accu_init = self.rewrite(c.accu_init);
        c.result = self.rewrite(c.result);
        let accu = c.accu_var.clone();
        if matches!(c.loop_cond.expr, Expr::Literal(_)) && is_ident(&c.result, &accu) {
            if let Some(step) = self.append_step(c.loop_step.clone(), &accu, per_iteration) {
                c.loop_step = step;
                return c;
            }
        }
        c.loop_step = self.rewrite_step(c.loop_step, &accu);
        let cond = self.rewrite(c.loop_cond);
        c.loop_cond = self.charge(cond, per_iteration);
        c
    }

    /// A loop step keeps its top-level shape (`accu && x`, `accu || x`,
    /// `c ? accu + 1 : accu`): only its operands are rewritten.
    fn rewrite_step(&mut self, step: IdedExpr, accu: &str) -> IdedExpr {
        match step.expr {
            Expr::Call(mut call) if call.target.is_none() => {
                call.args = call
                    .args
                    .into_iter()
                    .map(|a| {
                        if is_ident(&a, accu) {
                            a
                        } else {
                            self.rewrite(a)
                        }
                    })
                    .collect();
                IdedExpr {
                    id: step.id,
                    expr: Expr::Call(call),
                }
            }
            _ => self.rewrite(step),
        }
    }

    /// `accu + [x]` or `guard ? accu + [x] : accu`, rewritten with the
    /// charge on the guard (or on `x`); `None` for any other shape.
    fn append_step(&mut self, step: IdedExpr, accu: &str, n: u64) -> Option<IdedExpr> {
        let Expr::Call(mut call) = step.expr else {
            return None;
        };
        if call.target.is_some() {
            return None;
        }
        match (call.func_name.as_str(), call.args.len()) {
            ("_?_:_", 3) if is_ident(&call.args[2], accu) => {
                let add = call.args.remove(1);
                let guard = call.args.remove(0);
                let add = self.append(add, accu, None)?;
                let guard = self.rewrite(guard);
                call.args.insert(0, self.charge(guard, n));
                call.args.insert(1, add);
            }
            ("_+_", 2) => {
                let add = IdedExpr {
                    id: step.id,
                    expr: Expr::Call(call),
                };
                return self.append(add, accu, Some(n));
            }
            _ => return None,
        }
        Some(IdedExpr {
            id: step.id,
            expr: Expr::Call(call),
        })
    }

    /// `accu + [x]` with `x` rewritten, and charged `n` if given.
    fn append(&mut self, add: IdedExpr, accu: &str, n: Option<u64>) -> Option<IdedExpr> {
        let Expr::Call(mut call) = add.expr else {
            return None;
        };
        if call.func_name != "_+_" || call.args.len() != 2 || !is_ident(&call.args[0], accu) {
            return None;
        }
        let Expr::List(mut list) = call.args.remove(1).expr else {
            return None;
        };
        list.elements = list
            .elements
            .into_iter()
            .map(|x| {
                let x = self.rewrite(x);
                match n {
                    Some(n) => self.charge(x, n),
                    None => x,
                }
            })
            .collect();
        call.args.push(IdedExpr {
            id: self.id(),
            expr: Expr::List(list),
        });
        Some(IdedExpr {
            id: add.id,
            expr: Expr::Call(call),
        })
    }
}

fn is_ident(e: &IdedExpr, name: &str) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == name)
}

pub(crate) fn max_id(e: &IdedExpr) -> u64 {
    children(e).into_iter().map(max_id).fold(e.id, u64::max)
}
