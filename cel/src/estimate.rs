//! Static cost estimates, the check Kubernetes makes when a CRD is written.
//!
//! The estimate walks the parsed expression and bounds, for every node, the
//! cost of evaluating it and the size of its result: the length of a string
//! (in bytes), or the number of elements of a list or entries of a map.
//! Sizes come from [`SizeHints`]: the caller knows the schema
//! (`maxLength`, `maxItems`, `maxProperties`) and records it by path:
//!
//! * `self`, `self.spec.containers`: a variable and fields below it;
//! * `self.spec.containers[*]`: an element of that list (or a value of that
//!   map), which is what a comprehension's variable is bound to;
//! * `oldSelf...` paths fall back to the hints of the same `self...` paths.
//!
//! Any path without a hint is assumed to be as large as a request can make
//! it: a string of [`MAX_REQUEST_SIZE_BYTES`] bytes, or a collection of
//! `MAX_REQUEST_SIZE_BYTES / 3` elements (each at least `""` or `{}` and a
//! comma), like Kubernetes' worst case for unbounded schemas.
//!
//! Costs follow cel-go's model in outline: 1 per variable, field selection
//! and function call; list and map literals 10 and 30; string work 0.1 per
//! byte (with `contains`/`matches` costed as the product of the sizes, as
//! cel-go estimates them); list work 1 per element; a comprehension costs its
//! range, plus its loop condition and step once per element. It differs from
//! cel-go in the details: there are no types, so every size is the one its
//! path's hint (or the default) gives, whatever it is used as; `&&`, `||` and
//! `?:` are charged both sides; results of most functions are assumed as
//! large as their largest argument. The estimate is an upper bound in the
//! same order of magnitude as cel-go's, not the same number.
//!
//! What stays with the caller, as in Kubernetes: a rule on the items of a
//! list (or values of a map) runs once per item, so the CRD code multiplies
//! the rule's estimate by the largest number of items before comparing the
//! sum over the CRD with [`crate::STATIC_ESTIMATED_CRD_COST_LIMIT`].

use std::collections::HashMap;
use std::fmt;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::cost::MAX_REQUEST_SIZE_BYTES;

/// The largest sizes data can have, by path (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeHints {
    paths: HashMap<String, u64>,
    default_string: u64,
    default_collection: u64,
}

impl Default for SizeHints {
    fn default() -> Self {
        SizeHints {
            paths: HashMap::new(),
            default_string: MAX_REQUEST_SIZE_BYTES,
            default_collection: MAX_REQUEST_SIZE_BYTES / 3,
        }
    }
}

impl SizeHints {
    /// No hints: everything as large as a request allows.
    pub fn new() -> SizeHints {
        SizeHints::default()
    }

    /// Records that what `path` names is at most `max` long.
    pub fn with(mut self, path: &str, max: u64) -> SizeHints {
        self.set(path, max);
        self
    }

    /// Records that what `path` names is at most `max` long.
    pub fn set(&mut self, path: &str, max: u64) {
        self.paths.insert(path.to_owned(), max);
    }

    /// The hint for `path`, if any. `oldSelf` has the schema of `self`, so
    /// an `oldSelf...` path without a hint of its own takes the hint of the
    /// same `self...` path.
    pub fn get(&self, path: &str) -> Option<u64> {
        self.paths.get(path).copied().or_else(|| {
            let rest = path.strip_prefix("oldSelf")?;
            self.paths.get(&format!("self{rest}")).copied()
        })
    }
}

/// An estimated cost range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostEstimate {
    /// The least the expression can cost.
    pub min: u64,
    /// The most the expression can cost.
    pub max: u64,
}

impl CostEstimate {
    /// Checks the estimate against `limit` (e.g.
    /// [`crate::STATIC_ESTIMATED_COST_LIMIT`]), failing with Kubernetes'
    /// message: `estimated rule cost exceeds budget by factor of 2.5x`, or
    /// `... of more than 100x`.
    pub fn check(&self, limit: u64) -> Result<(), CostExceeded> {
        if self.max <= limit {
            return Ok(());
        }
        Err(CostExceeded {
            estimate: self.max,
            limit,
        })
    }
}

/// An estimate over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostExceeded {
    /// The estimated maximum cost.
    pub estimate: u64,
    /// The limit it passed.
    pub limit: u64,
}

impl fmt::Display for CostExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let factor = self.estimate as f64 / self.limit.max(1) as f64;
        if factor > 100.0 {
            write!(
                f,
                "estimated rule cost exceeds budget by factor of more than 100x"
            )
        } else {
            write!(
                f,
                "estimated rule cost exceeds budget by factor of {factor:.1}x"
            )
        }
    }
}

impl std::error::Error for CostExceeded {}

/// What is known of a node: its cost range, the most its size can be, and
/// the path of the data it is, if it is data.
struct Node {
    min: u64,
    max: u64,
    size: u64,
    path: Option<String>,
}

impl Node {
    fn new(cost: u64, size: u64) -> Node {
        Node {
            min: cost,
            max: cost,
            size,
            path: None,
        }
    }
}

pub(crate) fn estimate(e: &IdedExpr, hints: &SizeHints) -> CostEstimate {
    let mut scope = Vec::new();
    let n = Estimator { hints }.node(e, &mut scope);
    CostEstimate {
        min: n.min,
        max: n.max,
    }
}

struct Estimator<'h> {
    hints: &'h SizeHints,
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

fn tenth(n: u64) -> u64 {
    n.div_ceil(10)
}

impl Estimator<'_> {
    fn size_of(&self, path: &str) -> u64 {
        self.hints
            .get(path)
            .unwrap_or(self.hints.default_string.max(self.hints.default_collection))
    }

    fn collection(&self, n: &Node) -> u64 {
        match &n.path {
            Some(p) if self.hints.get(p).is_none() => self.hints.default_collection,
            _ => n.size,
        }
    }

    fn node(&self, e: &IdedExpr, scope: &mut Vec<(String, Option<String>)>) -> Node {
        match &e.expr {
            Expr::Literal(l) => Node::new(
                0,
                match l {
                    LiteralValue::String(s) => s.inner().len() as u64,
                    LiteralValue::Bytes(b) => b.inner().len() as u64,
                    _ => 1,
                },
            ),
            Expr::Ident(name) => {
                let path = scope
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, p)| p.clone())
                    .unwrap_or_else(|| Some(name.clone()));
                let size = path.as_deref().map(|p| self.size_of(p)).unwrap_or(1);
                Node {
                    path,
                    ..Node::new(1, size)
                }
            }
            Expr::Select(s) => {
                let operand = self.node(&s.operand, scope);
                if s.test {
                    return Node::new(add(operand.max, 1), 1).with_min(add(operand.min, 1));
                }
                let path = operand.path.map(|p| format!("{p}.{}", s.field));
                let size = path
                    .as_deref()
                    .map(|p| self.size_of(p))
                    .unwrap_or(operand.size);
                Node {
                    min: add(operand.min, 1),
                    max: add(operand.max, 1),
                    size,
                    path,
                }
            }
            Expr::List(l) => {
                let mut n = Node::new(10, l.elements.len() as u64);
                for x in &l.elements {
                    n.absorb(&self.node(x, scope));
                }
                n
            }
            Expr::Map(m) => self.entries(30, &m.entries, scope),
            Expr::Struct(s) => self.entries(40, &s.entries, scope),
            Expr::Call(call) => {
                let mut args: Vec<Node> = Vec::new();
                if let Some(t) = &call.target {
                    args.push(self.node(t, scope));
                }
                for a in &call.args {
                    args.push(self.node(a, scope));
                }
                self.call(&call.func_name, args)
            }
            Expr::Comprehension(c) => {
                let range = self.node(&c.iter_range, scope);
                let init = self.node(&c.accu_init, scope);
                let n = self.collection(&range);
                let element = range.path.as_ref().map(|p| format!("{p}[*]"));
                scope.push((c.iter_var.clone(), element.clone()));
                if let Some(v2) = &c.iter_var2 {
                    scope.push((v2.clone(), element));
                }
                scope.push((c.accu_var.clone(), None));
                let cond = self.node(&c.loop_cond, scope);
                let step = self.node(&c.loop_step, scope);
                let result = self.node(&c.result, scope);
                scope.truncate(scope.len() - if c.iter_var2.is_some() { 3 } else { 2 });
                let per_iteration = add(cond.max, step.max);
                Node {
                    min: add(range.min, add(init.min, result.min)),
                    max: add(
                        add(range.max, init.max),
                        add(mul(n, per_iteration), result.max),
                    ),
                    size: n.max(1),
                    path: None,
                }
            }
            Expr::Unspecified => Node::new(0, 1),
        }
    }

    fn entries(
        &self,
        base: u64,
        entries: &[cel::common::ast::IdedEntryExpr],
        scope: &mut Vec<(String, Option<String>)>,
    ) -> Node {
        let mut n = Node::new(base, entries.len() as u64);
        for e in entries {
            match &e.expr {
                EntryExpr::MapEntry(m) => {
                    n.absorb(&self.node(&m.key, scope));
                    n.absorb(&self.node(&m.value, scope));
                }
                EntryExpr::StructField(f) => n.absorb(&self.node(&f.value, scope)),
            }
        }
        n
    }

    /// A call's node, from its arguments' (the receiver first).
    fn call(&self, name: &str, args: Vec<Node>) -> Node {
        let sizes: Vec<u64> = args.iter().map(|a| a.size).collect();
        let s0 = sizes.first().copied().unwrap_or(1);
        let s1 = sizes.get(1).copied().unwrap_or(1);
        let largest = sizes.iter().copied().max().unwrap_or(1);
        let (cost, size) = match name {
            "_&&_" | "_||_" | "_?_:_" | "!_" | "@not_strictly_false" => (0, largest),
            "contains" | "matches" | "find" | "findAll" => (add(1, tenth(mul(s0, s1))), s0),
            "startsWith" | "endsWith" | "_==_" | "_!=_" => (add(1, tenth(s0.min(s1))), 1),
            "_+_" => (add(1, tenth(add(s0, s1))), add(s0, s1)),
            "@in" => (add(1, s1), 1),
            "_[_]" | "_[?_]" => {
                let path = args
                    .first()
                    .and_then(|a| a.path.clone())
                    .map(|p| format!("{p}[*]"));
                let size = path.as_deref().map(|p| self.size_of(p)).unwrap_or(largest);
                let mut n = Node::new(1, size);
                n.path = path;
                for a in &args {
                    n.absorb(a);
                }
                return n;
            }
            "size" | "_<_" | "_<=_" | "_>_" | "_>=_" | "_-_" | "_*_" | "_/_" | "_%_" | "-_"
            | "int" | "uint" | "double" | "bool" | "type" | "dyn" | "has" => (1, 1),
            // Work over a list: 1 per element.
            "sum" | "min" | "max" | "isSorted" | "indexOf" | "lastIndexOf" | "join"
            | "distinct" | "flatten" | "reverse" | "slice" => (add(1, s0), s0),
            "sort" | "sortBy" => (add(1, mul(s0, 64 - s0.leading_zeros() as u64)), s0),
            "sets.contains" | "sets.equivalent" | "sets.intersects" => (add(1, mul(s0, s1)), 1),
            // String work: 0.1 per byte of every argument.
            _ => (
                add(1, tenth(sizes.iter().fold(0, |a, s| add(a, *s)))),
                largest,
            ),
        };
        let mut n = Node::new(cost, size);
        for a in &args {
            n.absorb(a);
        }
        // Short-circuiting: at least the condition runs, perhaps nothing else.
        if matches!(name, "_&&_" | "_||_" | "_?_:_") {
            n.min = args.first().map(|a| a.min).unwrap_or(0);
        }
        n
    }
}

impl Node {
    fn absorb(&mut self, other: &Node) {
        self.min = add(self.min, other.min);
        self.max = add(self.max, other.max);
    }

    fn with_min(mut self, min: u64) -> Node {
        self.min = min;
        self
    }
}
