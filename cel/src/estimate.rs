//! Static cost estimates from types: the check Kubernetes makes when a CRD
//! is written, with cel-go's numbers.
//!
//! [`crate::Program::check_cost`] type-checks an expression and walks the
//! checked tree as cel-go's estimator (`checker/cost.go`) does, with the
//! estimators kube plugs into it:
//!
//! * every node gets a cost range and, where it is a string, bytes, list or
//!   map, a size range: exact for literals, derived for concatenations and
//!   function results, and for data from the *path* it was reached by
//!   (`self.spec.ports`, then `@items`, `@values`, `@keys` through indexing
//!   and comprehensions), looked up in the schema's [`Sizes`] as kube's CRD
//!   size estimator does (`maxLength` × 4, `maxItems`, `maxProperties`, or
//!   what a 3 MiB request can hold given the smallest serialized element);
//!   scalars are size 1, anything else is unknown (up to `u64::MAX`);
//! * costs are cel-go's: 1 per variable, field selection on a map or
//!   object, and O(1) call; 0 per literal; list, map and message literals
//!   10, 30, 40; string work 0.1 per character (`contains` the product of
//!   the two sizes, `matches` the string times a quarter of the pattern);
//!   `&&`/`||` the sum of both sides at most and the left side at least;
//!   `?:` the condition and the dearer branch; a comprehension its range,
//!   init and result, plus its condition and step once per element;
//!   `cel.bind` its (empty) range, value and body;
//! * the libraries' own estimates, as kube's `library.CostEstimator` and
//!   cel-go's lists and sets extensions give them (`isSorted`, `sum`,
//!   `join`, `split`, `replace`, `find`, IPs, CIDRs, quantities,
//!   authorization checks at 350000 each...).
//!
//! Two-variable comprehensions, which this crate expands into pairs and
//! bindings, are costed as cel-go costs its native ones; the map-building
//! ones (`transformMap`, `transformMapEntry`) only approximately.
//!
//! What stays with the caller, as in Kubernetes: a rule on the items of a
//! list (or values of a map) runs once per item, so the CRD code multiplies
//! the rule's estimate by the most times its node can occur before
//! comparing it with [`crate::STATIC_ESTIMATED_COST_LIMIT`], and the sum
//! over the CRD with [`crate::STATIC_ESTIMATED_CRD_COST_LIMIT`].

use std::collections::HashMap;
use std::fmt;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::check::checker::{CallRef, Checked};
use crate::check::overloads::{Overload, CIDR, FORMAT, IP, QUANTITY, SEMVER, URL};
use crate::check::{Sizes, Type};

/// An estimated cost range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CostEstimate {
    /// The least the expression can cost.
    pub min: u64,
    /// The most the expression can cost.
    pub max: u64,
}

impl CostEstimate {
    fn fixed(c: u64) -> CostEstimate {
        CostEstimate { min: c, max: c }
    }

    fn add(self, o: CostEstimate) -> CostEstimate {
        CostEstimate {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    fn multiply(self, o: CostEstimate) -> CostEstimate {
        CostEstimate {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }

    fn factor(self, f: f64) -> CostEstimate {
        CostEstimate {
            min: by_factor(self.min, f),
            max: by_factor(self.max, f),
        }
    }

    fn union(self, o: CostEstimate) -> CostEstimate {
        CostEstimate {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }

    /// Checks the estimate against `limit` (e.g.
    /// [`crate::STATIC_ESTIMATED_COST_LIMIT`]).
    pub fn check(&self, limit: u64) -> Result<(), CostExceeded> {
        if self.max <= limit {
            return Ok(());
        }
        Err(CostExceeded {
            what: "estimated rule cost",
            estimate: self.max,
            limit,
        })
    }
}

/// An estimate over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostExceeded {
    /// What was estimated, as kube names it: `estimated rule cost`,
    /// `estimated messageExpression cost`, `x-kubernetes-validations
    /// estimated rule cost total for entire OpenAPIv3 schema`.
    pub what: &'static str,
    /// The estimated maximum cost.
    pub estimate: u64,
    /// The limit it passed.
    pub limit: u64,
}

impl fmt::Display for CostExceeded {
    /// kube's `getCostErrorMessage`: `estimated rule cost exceeds budget by
    /// factor of 2.5x (try simplifying the rule, ...)`; under 1.5 with six
    /// decimals (`1.200000x`), over 100 `more than 100x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let factor = self.estimate as f64 / self.limit as f64;
        let factor = if factor > 100.0 {
            "more than 100x".to_owned()
        } else if factor < 1.5 {
            format!("{factor:.6}x")
        } else {
            format!("{factor:.1}x")
        };
        write!(
            f,
            "{} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
            self.what
        )
    }
}

impl std::error::Error for CostExceeded {}

/// cel-go's `multiplyByCostFactor`: rounded up, saturating.
fn by_factor(x: u64, f: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && f > 0.0 && xf > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let c = (xf * f).ceil();
    if c >= 18446744073709551616.0 {
        u64::MAX
    } else {
        c as u64
    }
}

/// A size range: characters of a string, bytes, elements of a list,
/// entries of a map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Size {
    min: u64,
    max: u64,
}

const UNKNOWN: Size = Size {
    min: 0,
    max: u64::MAX,
};

impl Size {
    fn fixed(n: u64) -> Size {
        Size { min: n, max: n }
    }
    fn add(self, o: Size) -> Size {
        Size {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }
    fn multiply(self, o: Size) -> Size {
        Size {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }
    fn union(self, o: Size) -> Size {
        Size {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
    fn factor(self, f: f64) -> CostEstimate {
        CostEstimate {
            min: by_factor(self.min, f),
            max: by_factor(self.max, f),
        }
    }
    fn times(self, c: CostEstimate) -> CostEstimate {
        CostEstimate {
            min: self.min.saturating_mul(c.min),
            max: self.max.saturating_mul(c.max),
        }
    }
}

/// cel-go's cost constants (`common/cost.go`).
const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;
/// kube's `MaxFormatSize` and `MaxNameFormatRegexSize`.
const MAX_FORMAT_SIZE: u64 = 64;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    List,
    Map,
}

/// The sizes of a container's keys (indices) and values.
#[derive(Debug, Clone, Copy)]
struct EntrySize {
    container: Container,
    key: Size,
    val: Size,
}

impl EntrySize {
    fn union(a: Option<EntrySize>, b: Option<EntrySize>) -> Option<EntrySize> {
        let (a, b) = (a?, b?);
        Some(EntrySize {
            container: a.container,
            key: a.key.union(b.key),
            val: a.val.union(b.val),
        })
    }
}

type Path = Option<Vec<String>>;

fn append(p: Path, field: &str) -> Path {
    let mut v = p.unwrap_or_default();
    v.push(field.to_owned());
    Some(v)
}

/// A variable the walk has bound: a comprehension's, a `cel.bind`'s.
#[derive(Clone)]
struct Local {
    path: Path,
    size: Option<Size>,
    entry: Option<EntrySize>,
    /// For this crate's `@k8s_pair` variable: what its key and value are
    /// bound as.
    pair: Option<Box<(Local, Local)>>,
}

/// What a library estimator sees of an argument (cel-go's `AstNode`).
struct Node<'e> {
    path: Path,
    ty: Type,
    expr: Option<&'e IdedExpr>,
    computed: Option<Size>,
}

struct CallEstimate {
    cost: CostEstimate,
    size: Option<Size>,
}

impl CallEstimate {
    fn cost(cost: CostEstimate) -> Option<CallEstimate> {
        Some(CallEstimate { cost, size: None })
    }
    fn sized(cost: CostEstimate, size: Size) -> Option<CallEstimate> {
        Some(CallEstimate {
            cost,
            size: Some(size),
        })
    }
}

const PAIRS: &str = "@k8s_pairs";
const PAIR: &str = "@k8s_pair";

/// The cost of `e`, checked as `checked`, with data of the sizes `root`
/// gives (see the module docs).
pub(crate) fn estimate(e: &IdedExpr, checked: &Checked, root: Option<&Sizes>) -> CostEstimate {
    let mut c = Coster {
        checked,
        root,
        paths: HashMap::new(),
        locals: HashMap::new(),
        sizes: HashMap::new(),
        entries: HashMap::new(),
    };
    c.cost(e)
}

struct Coster<'a> {
    checked: &'a Checked,
    root: Option<&'a Sizes>,
    paths: HashMap<u64, Vec<String>>,
    locals: HashMap<String, Vec<Local>>,
    sizes: HashMap<u64, Size>,
    entries: HashMap<u64, EntrySize>,
}

impl Coster<'_> {
    fn ty(&self, e: &IdedExpr) -> Type {
        self.checked.types.get(&e.id).cloned().unwrap_or(Type::Dyn)
    }

    fn local(&self, name: &str) -> Option<&Local> {
        self.locals.get(name).and_then(|s| s.last())
    }

    fn push(&mut self, name: &str, l: Local) {
        self.locals.entry(name.to_owned()).or_default().push(l);
    }

    fn pop(&mut self, name: &str) {
        if let Some(s) = self.locals.get_mut(name) {
            s.pop();
        }
    }

    fn path(&self, e: &IdedExpr) -> Path {
        if let Expr::Ident(name) = &e.expr {
            if let Some(l) = self.local(name) {
                return l.path.clone();
            }
        }
        self.paths.get(&e.id).cloned()
    }

    /// kube's CRD size estimator: the path's node below the root, its
    /// `MaxElements`.
    fn estimate_size(&self, path: &Path) -> Option<Size> {
        let path = path.as_ref().filter(|p| !p.is_empty())?;
        let mut node = self.root?;
        for name in &path[1..] {
            node = match name.as_str() {
                "@items" | "@values" => node.elem.as_deref()?,
                "@keys" => node.key.as_deref()?,
                field => node.fields.get(field).or_else(|| {
                    crate::check::escape_field(field).and_then(|f| node.fields.get(&f))
                })?,
            };
        }
        Some(Size {
            min: 0,
            max: node.max_elements,
        })
    }

    fn compute_size(&mut self, e: &IdedExpr) -> Option<Size> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        if let Some(s) = expr_size(e) {
            return Some(s);
        }
        if let Some(s) = self.estimate_size(&self.path(e)) {
            self.sizes.insert(e.id, s);
            return Some(s);
        }
        if is_scalar(&self.ty(e)) {
            return Some(Size::fixed(1));
        }
        if let Expr::Ident(name) = &e.expr {
            if let Some(s) = self.local(name).and_then(|l| l.size) {
                return Some(s);
            }
        }
        None
    }

    fn size_or_unknown(&mut self, e: &IdedExpr) -> Size {
        self.compute_size(e).unwrap_or(UNKNOWN)
    }

    fn entry_size(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(s) = self.entries.get(&e.id) {
            return Some(*s);
        }
        if let Expr::Ident(name) = &e.expr {
            if let Some(s) = self.local(name).and_then(|l| l.entry) {
                return Some(s);
            }
        }
        None
    }

    fn set_size(&mut self, e: &IdedExpr, s: Option<Size>) {
        if let Some(s) = s {
            self.sizes.insert(e.id, s);
        }
    }

    fn set_entry(&mut self, e: &IdedExpr, s: Option<EntrySize>) {
        if let Some(s) = s {
            self.entries.insert(e.id, s);
        }
    }

    fn node<'e>(&mut self, e: &'e IdedExpr) -> Node<'e> {
        let path = self.path(e).filter(|p| {
            // Only paths from the root variables; accumulators have none.
            !matches!(
                p.first().map(String::as_str),
                Some("@result" | "__result__")
            )
        });
        Node {
            path,
            ty: self.ty(e),
            expr: Some(e),
            computed: self.compute_size(e),
        }
    }

    /// kube's `sizeEstimate`: the computed size, else the schema's.
    fn size_estimate(&self, n: &Node<'_>) -> Size {
        n.computed
            .or_else(|| self.estimate_size(&n.path))
            .unwrap_or(UNKNOWN)
    }

    /// kube's `listElementNode`: the element of a list (its first type
    /// parameter), with the list's path and `@items`.
    fn element_node(&self, list: &Node<'_>) -> Option<Node<'static>> {
        let elem = match &list.ty {
            Type::List(e) => (**e).clone(),
            Type::Map(k, _) => (**k).clone(),
            Type::Opaque(_, p) if !p.is_empty() => p[0].clone(),
            _ => return None,
        };
        Some(Node {
            path: list.path.clone().map(|p| {
                let mut p = p;
                p.push("@items".into());
                p
            }),
            ty: elem,
            expr: None,
            computed: None,
        })
    }

    fn cost(&mut self, e: &IdedExpr) -> CostEstimate {
        match &e.expr {
            Expr::Literal(_) => CostEstimate::fixed(0),
            Expr::Ident(name) => {
                let path = match self.local(name) {
                    Some(l) => l.path.clone(),
                    None => Some(vec![name.clone()]),
                };
                if let Some(p) = path {
                    self.paths.insert(e.id, p);
                }
                CostEstimate::fixed(1)
            }
            Expr::Select(s) => {
                if s.test {
                    return CostEstimate::fixed(1).add(self.cost(&s.operand));
                }
                let mut sum = self.cost(&s.operand);
                if matches!(self.ty(&s.operand), Type::Map(..) | Type::Object(_)) {
                    sum = sum.add(CostEstimate::fixed(1));
                }
                if let Some(p) = append(self.path(&s.operand), &s.field) {
                    self.paths.insert(e.id, p);
                }
                sum
            }
            Expr::Call(call) => self.cost_call(e, call),
            Expr::List(l) => {
                let mut sum = CostEstimate::default();
                let mut item = Size {
                    min: u64::MAX,
                    max: 0,
                };
                if l.elements.is_empty() {
                    item.min = 0;
                }
                for x in &l.elements {
                    sum = sum.add(self.cost(x));
                    item = item.union(self.size_or_unknown(x));
                }
                self.set_entry(
                    e,
                    Some(EntrySize {
                        container: Container::List,
                        key: Size::fixed(1),
                        val: item,
                    }),
                );
                sum.add(CostEstimate::fixed(LIST_CREATE))
            }
            Expr::Map(m) => {
                let mut sum = CostEstimate::default();
                let mut key = Size {
                    min: u64::MAX,
                    max: 0,
                };
                let mut val = key;
                if m.entries.is_empty() {
                    key.min = 0;
                    val.min = 0;
                }
                for entry in &m.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            sum = sum.add(self.cost(&me.key)).add(self.cost(&me.value));
                            key = key.union(self.size_or_unknown(&me.key));
                            val = val.union(self.size_or_unknown(&me.value));
                        }
                        EntryExpr::StructField(f) => sum = sum.add(self.cost(&f.value)),
                    }
                }
                self.set_entry(
                    e,
                    Some(EntrySize {
                        container: Container::Map,
                        key,
                        val,
                    }),
                );
                sum.add(CostEstimate::fixed(MAP_CREATE))
            }
            Expr::Struct(st) => {
                let mut sum = CostEstimate::fixed(STRUCT_CREATE);
                for entry in &st.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => sum = sum.add(self.cost(&f.value)),
                        EntryExpr::MapEntry(me) => {
                            sum = sum.add(self.cost(&me.key)).add(self.cost(&me.value))
                        }
                    }
                }
                sum
            }
            Expr::Comprehension(c) => {
                if is_bind(c) {
                    self.cost_bind(e, c)
                } else {
                    self.cost_comprehension(e, c)
                }
            }
            Expr::Unspecified => CostEstimate::default(),
        }
    }

    fn cost_bind(&mut self, e: &IdedExpr, c: &cel::common::ast::ComprehensionExpr) -> CostEstimate {
        // The bindings of this crate's two-variable comprehensions: the
        // key and value of the current pair, bound as cel-go binds its two
        // iteration variables, at no cost of their own.
        if let Some(local) = self.pair_element(&c.accu_init) {
            self.push(&c.accu_var, local);
            let sum = self.cost(&c.result);
            self.pop(&c.accu_var);
            self.copy_sizes(e, &c.result);
            return sum;
        }
        let mut sum = self.cost(&c.iter_range).add(self.cost(&c.accu_init));
        let local = self.bound_local(&c.accu_init);
        self.push(&c.accu_var, local);
        sum = sum.add(self.cost(&c.result));
        self.pop(&c.accu_var);
        self.copy_sizes(e, &c.result);
        sum
    }

    /// `@k8s_pair[0]` / `@k8s_pair[1]`: the key or value variable.
    fn pair_element(&self, init: &IdedExpr) -> Option<Local> {
        let Expr::Call(call) = &init.expr else {
            return None;
        };
        if call.func_name != "_[_]" || call.target.is_some() || call.args.len() != 2 {
            return None;
        }
        let (Expr::Ident(name), Expr::Literal(LiteralValue::Int(i))) =
            (&call.args[0].expr, &call.args[1].expr)
        else {
            return None;
        };
        if name != PAIR {
            return None;
        }
        let (key, value) = self.local(PAIR)?.pair.as_deref()?;
        Some(if *i.inner() == 0 {
            key.clone()
        } else {
            value.clone()
        })
    }

    fn bound_local(&mut self, init: &IdedExpr) -> Local {
        Local {
            path: self.path(init),
            size: self.compute_size(init),
            entry: self.entry_size(init),
            pair: None,
        }
    }

    fn copy_sizes(&mut self, dst: &IdedExpr, src: &IdedExpr) {
        let s = self.compute_size(src);
        self.set_size(dst, s);
        let en = self.entry_size(src);
        self.set_entry(dst, en);
    }

    fn iter_local(&mut self, range: &IdedExpr, part: Part) -> Local {
        let entry = self.entry_size(range);
        let container = entry.map(|e| e.container).or(match self.ty(range) {
            Type::List(_) => Some(Container::List),
            Type::Map(..) => Some(Container::Map),
            _ => None,
        });
        let list = container == Some(Container::List);
        let (size, sub) = match part {
            Part::Key => (
                entry.map(|e| e.key),
                if list { "@indices" } else { "@keys" },
            ),
            Part::Value => (
                entry.map(|e| e.val),
                if list { "@items" } else { "@values" },
            ),
            Part::Single if list => (entry.map(|e| e.val), "@items"),
            Part::Single => (entry.map(|e| e.key), "@keys"),
        };
        Local {
            path: append(self.path(range), sub),
            size,
            entry: None,
            pair: None,
        }
    }

    fn cost_comprehension(
        &mut self,
        e: &IdedExpr,
        c: &cel::common::ast::ComprehensionExpr,
    ) -> CostEstimate {
        // This crate's two-variable comprehensions range over
        // `@k8s_pairs(x)`: cost them as ranging over `x`.
        let range: &IdedExpr = match &c.iter_range.expr {
            Expr::Call(call)
                if call.func_name == PAIRS && call.target.is_none() && call.args.len() == 1 =>
            {
                &call.args[0]
            }
            _ => &c.iter_range,
        };
        let pairs = !std::ptr::eq(range, &c.iter_range);
        let mut sum = self.cost(range).add(self.cost(&c.accu_init));
        let accu = self.bound_local(&c.accu_init);
        self.push(&c.accu_var, accu);
        let iter = if pairs {
            let key = self.iter_local(range, Part::Key);
            let value = self.iter_local(range, Part::Value);
            Local {
                path: None,
                size: None,
                entry: None,
                pair: Some(Box::new((key, value))),
            }
        } else {
            self.iter_local(range, Part::Single)
        };
        self.push(&c.iter_var, iter);
        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);
        self.pop(&c.iter_var);
        sum = sum.add(self.cost(&c.result));
        self.pop(&c.accu_var);
        let count = self.size_or_unknown(range);
        sum = sum.add(count.times(step_cost.add(loop_cost)));
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                let s = self.compute_size(&c.accu_init);
                self.set_size(e, s);
            }
            Expr::List(_) | Expr::Map(_) => {
                self.set_size(e, Some(count));
                let step = self.entry_size(&c.loop_step);
                self.set_entry(e, step);
            }
            _ => {}
        }
        sum
    }
}

impl Coster<'_> {
    fn cost_call(&mut self, e: &IdedExpr, call: &cel::common::ast::CallExpr) -> CostEstimate {
        let name = call.func_name.as_str();
        if call.target.is_none() && call.args.len() == 1 {
            // `dyn(x)` only turns checking off: x and 1. This crate's
            // map-building wrappers cost what they wrap.
            match name {
                "dyn" => {
                    let c = self.cost(&call.args[0]).add(CostEstimate::fixed(1));
                    self.copy_sizes(e, &call.args[0]);
                    return c;
                }
                "@k8s_entries_to_map" | "@k8s_merge_maps" => {
                    let c = self.cost(&call.args[0]);
                    self.copy_sizes(e, &call.args[0]);
                    return c;
                }
                _ => {}
            }
        }
        let reference: Option<&CallRef> = self.checked.calls.get(&e.id);
        // A namespace (`sets.contains(...)`): the checker gives the target
        // no type, as it is no value.
        let namespace = call.target.as_ref().and_then(|t| match &t.expr {
            Expr::Ident(n) if !self.checked.types.contains_key(&t.id) => Some(n.clone()),
            _ => None,
        });
        let function = match (reference, &namespace) {
            (Some(r), _) => r.function.clone(),
            (None, Some(ns)) => format!("{ns}.{name}"),
            (None, None) => name.to_owned(),
        };
        let overloads: Vec<Option<&'static Overload>> = match reference {
            Some(r) => r.overloads.iter().map(|o| Some(*o)).collect(),
            None => vec![None],
        };
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            arg_costs.push(self.cost(a));
            args.push(self.node(a));
        }
        let mut sum = CostEstimate::default();
        let target = match (&call.target, &namespace) {
            (Some(t), None) => {
                sum = sum.add(self.cost(t));
                Some(self.node(t))
            }
            _ => None,
        };
        let mut fn_cost = CostEstimate {
            min: u64::MAX,
            max: 0,
        };
        let mut result: Option<Size> = None;
        for o in overloads {
            let kind = kind_of(&function, o, target.is_some());
            let est = self.function_cost(e, &function, kind, target.as_ref(), &args, &arg_costs);
            fn_cost = fn_cost.union(est.cost);
            if let Some(s) = est.size {
                result = Some(result.map_or(s, |r| r.union(s)));
            }
            match kind {
                Kind::IndexList | Kind::IndexMap if !call.args.is_empty() => {
                    result = self.entry_size(&call.args[0]).map(|en| en.val);
                    let sub = if kind == Kind::IndexList {
                        "@items"
                    } else {
                        "@values"
                    };
                    if let Some(p) = append(self.path(&call.args[0]), sub) {
                        self.paths.insert(e.id, p);
                    }
                }
                _ => {}
            }
            if result.is_none() {
                result = self.compute_size(e);
            }
        }
        self.set_size(e, result);
        sum.add(fn_cost)
    }

    #[allow(clippy::too_many_arguments)]
    fn function_cost(
        &mut self,
        e: &IdedExpr,
        function: &str,
        kind: Kind,
        target: Option<&Node<'_>>,
        args: &[Node<'_>],
        arg_costs: &[CostEstimate],
    ) -> CallEstimate {
        let arg_sum = arg_costs
            .iter()
            .fold(CostEstimate::default(), |a, c| a.add(*c));
        let est = self
            .extension_cost(function, kind, target, args)
            .or_else(|| self.kubernetes_cost(function, kind, target, args));
        if let Some(est) = est {
            return CallEstimate {
                cost: est.cost.add(arg_sum),
                size: est.size,
            };
        }
        let size = |n: &Node<'_>| n.computed.unwrap_or(UNKNOWN);
        let with_args = |c: CostEstimate| CallEstimate {
            cost: c.add(arg_sum),
            size: None,
        };
        match kind {
            Kind::FormatString if target.is_some() => {
                return with_args(size(target.unwrap()).factor(STRING_TRAVERSAL));
            }
            Kind::StringToBytes if args.len() == 1 => {
                let sz = size(&args[0]);
                return CallEstimate {
                    cost: sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    size: Some(Size {
                        min: sz.min,
                        max: sz.max.saturating_mul(4),
                    }),
                };
            }
            Kind::BytesToString if args.len() == 1 => {
                let sz = size(&args[0]);
                return CallEstimate {
                    cost: sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    size: Some(Size {
                        min: sz.min / 4,
                        max: sz.max,
                    }),
                };
            }
            Kind::QuoteString if args.len() == 1 => {
                let sz = size(&args[0]);
                return CallEstimate {
                    cost: sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    size: Some(Size {
                        min: sz.min.saturating_add(2),
                        max: sz.max.saturating_mul(2).saturating_add(2),
                    }),
                };
            }
            Kind::StartsWith if args.len() == 1 => {
                return with_args(size(&args[0]).factor(STRING_TRAVERSAL));
            }
            Kind::InList if args.len() == 2 => {
                return with_args(size(&args[1]).factor(1.0));
            }
            Kind::MatchesString if target.is_some() && args.len() == 1 => {
                let text = size(target.unwrap())
                    .add(Size::fixed(1))
                    .factor(STRING_TRAVERSAL);
                let regex = size(&args[0]).factor(REGEX_LENGTH);
                return with_args(text.multiply(regex));
            }
            Kind::ContainsString if target.is_some() && args.len() == 1 => {
                let text = size(target.unwrap()).factor(STRING_TRAVERSAL);
                let sub = size(&args[0]).factor(STRING_TRAVERSAL);
                return with_args(text.multiply(sub));
            }
            Kind::Logical if arg_costs.len() == 2 => {
                let (l, r) = (arg_costs[0], arg_costs[1]);
                return CallEstimate {
                    cost: CostEstimate {
                        min: l.min,
                        max: l.add(r).max,
                    },
                    size: None,
                };
            }
            Kind::Conditional if args.len() == 3 => {
                let sz = size(&args[1]).union(size(&args[2]));
                let entries = match (args[1].expr, args[2].expr) {
                    (Some(a), Some(b)) => EntrySize::union(self.entry_size(a), self.entry_size(b)),
                    _ => None,
                };
                self.set_entry(e, entries);
                return CallEstimate {
                    cost: arg_costs[0].add(arg_costs[1].union(arg_costs[2])),
                    size: Some(sz),
                };
            }
            Kind::AddString | Kind::AddBytes | Kind::AddList if args.len() == 2 => {
                let sz = size(&args[0]).add(size(&args[1]));
                let entries = match (args[0].expr, args[1].expr) {
                    (Some(a), Some(b)) => EntrySize::union(self.entry_size(a), self.entry_size(b)),
                    _ => None,
                };
                self.set_entry(e, entries);
                let cost = if kind == Kind::AddList {
                    CostEstimate::fixed(1)
                } else {
                    sz.factor(STRING_TRAVERSAL)
                };
                return CallEstimate {
                    cost: cost.add(arg_sum),
                    size: Some(sz),
                };
            }
            Kind::Compare if args.len() == 2 => {
                let (l, r) = (size(&args[0]), size(&args[1]));
                let smallest = l.max.min(r.max);
                let min = u64::from(smallest > 0);
                return with_args(CostEstimate { min, max: smallest }.factor(STRING_TRAVERSAL));
            }
            _ => {}
        }
        with_args(CostEstimate::fixed(1))
    }

    /// cel-go's lists and sets extensions' estimators.
    fn extension_cost(
        &self,
        function: &str,
        kind: Kind,
        target: Option<&Node<'_>>,
        args: &[Node<'_>],
    ) -> Option<CallEstimate> {
        let allocating = |factor: f64, size: Size| {
            let cost = size
                .factor(factor)
                .add(CostEstimate::fixed(1))
                .add(CostEstimate::fixed(LIST_CREATE));
            CallEstimate::sized(cost, size)
        };
        let list_target = target.filter(|t| matches!(t.ty, Type::List(_) | Type::Dyn));
        match function {
            "slice" if args.len() == 2 => {
                let sz = self.size_estimate(list_target?);
                let start = int_literal(&args[0], 0);
                let end = int_literal(&args[1], sz.max);
                allocating(1.0, Size::fixed(end.wrapping_sub(start)))
            }
            "lists.range" if target.is_none() && args.len() == 1 => {
                allocating(1.0, Size::fixed(int_literal(&args[0], u64::MAX)))
            }
            "reverse" if args.is_empty() && kind == Kind::ListReceiver => {
                allocating(1.0, self.size_estimate(list_target?))
            }
            "flatten" if args.len() <= 1 => {
                let depth = args.first().map_or(1, |a| int_literal(a, u64::MAX));
                allocating(depth as f64, self.size_estimate(list_target?))
            }
            "distinct" if args.is_empty() => {
                let sz = self.size_estimate(list_target?);
                allocating(2.0, sz.multiply(sz))
            }
            "sort" if args.is_empty() => {
                let t = list_target?;
                let sz = self.size_estimate(t);
                let factor = match &t.ty {
                    Type::List(e) if matches!(**e, Type::String | Type::Bytes) => {
                        2.0 + STRING_TRAVERSAL
                    }
                    _ => 2.0,
                };
                allocating(factor, sz.multiply(sz))
            }
            "@sortByAssociatedKeys" if !args.is_empty() => {
                let keys = args.last()?;
                let sz = self.size_estimate(keys);
                let factor = match &keys.ty {
                    Type::List(e) if matches!(**e, Type::String | Type::Bytes) => {
                        2.0 + STRING_TRAVERSAL
                    }
                    _ => 2.0,
                };
                allocating(factor, sz.multiply(sz))
            }
            "sets.contains" | "sets.intersects" | "sets.equivalent" if args.len() == 2 => {
                let factor = if function == "sets.equivalent" {
                    2.0
                } else {
                    1.0
                };
                let product = self
                    .size_estimate(&args[0])
                    .multiply(self.size_estimate(&args[1]));
                CallEstimate::cost(product.factor(factor).add(CostEstimate::fixed(1)))
            }
            _ => None,
        }
    }

    /// kube's `library.CostEstimator.EstimateCallCost`.
    fn kubernetes_cost(
        &self,
        function: &str,
        kind: Kind,
        target: Option<&Node<'_>>,
        args: &[Node<'_>],
    ) -> Option<CallEstimate> {
        let one = CostEstimate::fixed(1);
        let sz = |n: &Node<'_>| self.size_estimate(n);
        let traverse = |n: &Node<'_>| self.size_estimate(n).factor(STRING_TRAVERSAL);
        match function {
            // An authorization check: two per expression at most.
            "check" => CallEstimate::cost(CostEstimate::fixed(350_000)),
            "serviceAccount" | "path" | "group" | "resource" | "subresource" | "namespace"
            | "name" | "allowed" | "reason" | "error" | "errored" => CallEstimate::cost(one),
            "fieldSelector" | "labelSelector" if args.len() == 1 => {
                let length = sz(&args[0]);
                let parse = length.factor(STRING_TRAVERSAL);
                let requirements = length
                    .factor(0.5)
                    .factor((LIST_CREATE + STRUCT_CREATE) as f64);
                CallEstimate::cost(
                    CostEstimate::fixed(LIST_CREATE)
                        .add(parse)
                        .add(requirements),
                )
            }
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                let t = target?;
                match self.element_node(t) {
                    Some(elem) => {
                        let mut per = one;
                        if matches!(elem.ty, Type::String | Type::Bytes) {
                            per = per.add(sz(&elem).factor(STRING_TRAVERSAL));
                        }
                        CallEstimate::cost(sz(t).times(per))
                    }
                    None => CallEstimate::cost(traverse(t)),
                }
            }
            "url" | "jsonpatch.escapeKey" if args.len() == 1 => {
                let s = sz(&args[0]);
                CallEstimate::sized(s.factor(STRING_TRAVERSAL), s)
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let s = sz(target?);
                CallEstimate::sized(s.factor(STRING_TRAVERSAL), s)
            }
            "replace" if args.len() >= 2 => {
                let s = sz(target?);
                let (from, to) = (sz(&args[0]), sz(&args[1]));
                let (mut count, mut kept) = (Size::fixed(0), Size::fixed(0));
                if from.min == 0 {
                    count.max = if s.max < u64::MAX { s.max + 1 } else { s.max };
                    kept.max = s.max;
                } else if to.max <= from.min {
                    kept.max = s.max;
                } else {
                    count.max = (s.max as f64 / from.min as f64).ceil() as u64;
                }
                if from.max == 0 {
                    count.min = if s.min < u64::MAX { s.min + 1 } else { s.min };
                    kept.min = s.min;
                } else if from.max <= to.min {
                    kept.min = s.min;
                } else {
                    count.min = (s.min as f64 / from.max as f64).ceil() as u64;
                }
                let size = count.multiply(to).add(kept);
                CallEstimate::sized(s.factor(2.0 * STRING_TRAVERSAL), size)
            }
            "split" => {
                let s = sz(target?);
                let mut max = s.max;
                if let Some(Expr::Literal(LiteralValue::Int(i))) =
                    args.get(1).and_then(|a| a.expr).map(|x| &x.expr)
                {
                    max = *i.inner() as u64;
                }
                CallEstimate::sized(s.factor(2.0 * STRING_TRAVERSAL), Size { min: 0, max })
            }
            "join" => {
                let t = target?;
                let list = sz(t);
                let mut s = Size::fixed(0);
                if let Some(elem) = self.element_node(t) {
                    s = list.multiply(sz(&elem));
                }
                if let Some(sep) = args.first() {
                    let separators = Size {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    s = s.add(sz(sep).multiply(separators));
                }
                CallEstimate::sized(s.factor(STRING_TRAVERSAL), s)
            }
            "find" | "findAll" if !args.is_empty() => {
                let s = sz(target?);
                let text = s.add(Size::fixed(1)).factor(STRING_TRAVERSAL);
                let regex = sz(&args[0]).factor(REGEX_LENGTH);
                CallEstimate::sized(text.multiply(regex), Size { min: 0, max: s.max })
            }
            "cidr" | "isIP" | "isCIDR" if !args.is_empty() => {
                CallEstimate::cost(traverse(&args[0]))
            }
            "ip" if kind == Kind::CidrIp => CallEstimate::cost(one),
            "ip" if !args.is_empty() => CallEstimate::cost(traverse(&args[0])),
            "ip.isCanonical" if !args.is_empty() => {
                CallEstimate::cost(sz(&args[0]).factor(2.0 * STRING_TRAVERSAL))
            }
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => CallEstimate::cost(one),
            "containsIP" | "containsCIDR" if !args.is_empty() => {
                let ip = Size { min: 4, max: 16 };
                let mut c = ip.add(ip).factor(STRING_TRAVERSAL);
                if function == "containsCIDR" {
                    c = c.add(ip.factor(STRING_TRAVERSAL)).add(one);
                }
                if kind == Kind::StringArgument {
                    c = c.add(traverse(&args[0]));
                }
                CallEstimate::cost(c)
            }
            "quantity" | "isQuantity" | "semver" | "isSemver" if !args.is_empty() => {
                CallEstimate::cost(traverse(&args[0]))
            }
            "validate" if !args.is_empty() => CallEstimate::cost(
                traverse(&args[0]).factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH),
            ),
            "format.named" | "sign" | "asInteger" | "isInteger" | "asApproximateFloat"
            | "isGreaterThan" | "isLessThan" | "compareTo" | "add" | "sub" | "major" | "minor"
            | "patch" | "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath"
            | "getQuery" => CallEstimate::cost(one),
            "_==_" if args.len() == 2 && args[0].ty == args[1].ty => match &args[0].ty {
                Type::Opaque(n, _) if [IP, CIDR, QUANTITY, SEMVER].contains(n) => {
                    CallEstimate::cost(one)
                }
                Type::Opaque(n, _) if n.starts_with("kubernetes.authorization.") => {
                    CallEstimate::cost(one)
                }
                Type::Opaque(n, _) if *n == FORMAT => CallEstimate::cost(
                    CostEstimate {
                        min: 1,
                        max: MAX_FORMAT_SIZE,
                    }
                    .factor(STRING_TRAVERSAL),
                ),
                Type::Opaque(n, _) if *n == URL => {
                    let size = match (args[1].computed, args[1].computed) {
                        (Some(r), Some(l)) => r.union(l),
                        _ => Size::fixed(1),
                    };
                    CallEstimate::cost(
                        CostEstimate {
                            min: 1,
                            max: size.max,
                        }
                        .factor(STRING_TRAVERSAL),
                    )
                }
                _ => None,
            },
            _ => None,
        }
    }
}

/// What cel-go's estimator tells overloads apart by (its overload ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    IndexList,
    IndexMap,
    AddString,
    AddBytes,
    AddList,
    /// `==`, `!=`, and `<`... on strings and bytes.
    Compare,
    StartsWith,
    ContainsString,
    MatchesString,
    InList,
    StringToBytes,
    BytesToString,
    FormatString,
    QuoteString,
    Conditional,
    Logical,
    /// `cidr.ip()`.
    CidrIp,
    /// `containsIP`/`containsCIDR` given a string.
    StringArgument,
    /// A member call on a list (`reverse`).
    ListReceiver,
    Other,
}

fn kind_of(function: &str, o: Option<&Overload>, member: bool) -> Kind {
    let param = |i: usize| o.and_then(|o| o.params.get(i));
    let is = |i: usize, t: &Type| param(i).is_some_and(|p| p == t);
    let list = |i: usize| matches!(param(i), Some(Type::List(_)));
    match function {
        "_&&_" | "_||_" => Kind::Logical,
        "_?_:_" => Kind::Conditional,
        "_[_]" if list(0) => Kind::IndexList,
        "_[_]" if matches!(param(0), Some(Type::Map(..))) => Kind::IndexMap,
        "_+_" if is(0, &Type::String) => Kind::AddString,
        "_+_" if is(0, &Type::Bytes) => Kind::AddBytes,
        "_+_" if list(0) => Kind::AddList,
        "_==_" | "_!=_" => Kind::Compare,
        "_<_" | "_<=_" | "_>_" | "_>=_" if is(0, &Type::String) || is(0, &Type::Bytes) => {
            Kind::Compare
        }
        "startsWith" | "endsWith" if member => Kind::StartsWith,
        "contains" if member => Kind::ContainsString,
        "matches" if member => Kind::MatchesString,
        "@in" if list(1) => Kind::InList,
        "bytes" if is(0, &Type::String) => Kind::StringToBytes,
        "string" if is(0, &Type::Bytes) => Kind::BytesToString,
        "format" if member => Kind::FormatString,
        "strings.quote" => Kind::QuoteString,
        "ip" if is(0, &Type::named(CIDR)) => Kind::CidrIp,
        "containsIP" | "containsCIDR" if is(1, &Type::String) => Kind::StringArgument,
        "reverse" if member && (list(0) || o.is_none()) => Kind::ListReceiver,
        _ => Kind::Other,
    }
}

/// cel-go's `nodeAsIntValue`: an int literal's value (0 if negative), or
/// `default`.
fn int_literal(n: &Node<'_>, default: u64) -> u64 {
    match n.expr.map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::Int(i))) => (*i.inner()).max(0) as u64,
        _ => default,
    }
}

#[derive(Clone, Copy)]
enum Part {
    Single,
    Key,
    Value,
}

/// cel-go's `isBind`: a comprehension over an empty list literal whose
/// condition is `false` and whose accumulator is not the macros'.
fn is_bind(c: &cel::common::ast::ComprehensionExpr) -> bool {
    matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
        && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
        && c.accu_var != "__result__"
        && c.accu_var != "@result"
}

/// The size of a literal, list or map literal.
fn expr_size(e: &IdedExpr) -> Option<Size> {
    let n = match &e.expr {
        Expr::Literal(l) => match l {
            LiteralValue::String(s) => s.inner().chars().count() as u64,
            LiteralValue::Bytes(b) => b.inner().len() as u64,
            _ => 1,
        },
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    };
    Some(Size::fixed(n))
}

fn is_scalar(t: &Type) -> bool {
    match t {
        Type::Bool | Type::Double | Type::Duration | Type::Int | Type::Timestamp | Type::Uint => {
            true
        }
        other => other.unwrap_optional().is_some_and(is_scalar),
    }
}
