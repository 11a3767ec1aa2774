//! The walk over a parsed expression: cel-go's `checker.go`, on the base
//! crate's AST (macros already expanded into comprehensions).

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, SourceInfo};

use super::overloads::{lookup, type_ident, Function, Overload};
use super::types::{assignable, assignable_list, most_general, substitute, Mapping, Type};
use super::Env;

/// One problem found, at an expression.
#[derive(Debug, Clone)]
pub(crate) struct Issue {
    /// Where in the source (a char or byte offset, as the parser counts).
    pub offset: Option<u32>,
    pub message: String,
}

/// How a call was resolved: the function (namespaced ones by their full
/// name, `sets.contains`) and the overloads it may run, as cel-go's
/// reference map records them for its cost estimator.
#[derive(Debug, Clone)]
pub(crate) struct CallRef {
    pub function: String,
    /// Whether the call's target is a namespace (`sets.`, `optional.`),
    /// not a value.
    pub namespaced: bool,
    pub overloads: Vec<&'static Overload>,
}

/// A checked expression: its type, the type of every node (by id) and the
/// resolution of every call to a function the checker knows.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub output: Type,
    pub types: HashMap<u64, Type>,
    pub calls: HashMap<u64, CallRef>,
}

pub(crate) struct Checker<'a> {
    env: &'a Env,
    info: &'a SourceInfo,
    /// Comprehension variables in scope, innermost last.
    scopes: Vec<(String, Type)>,
    mapping: Mapping,
    free: usize,
    /// The offset of the nearest located ancestor, for nodes the rewrites
    /// added without one.
    here: Option<u32>,
    /// How many `format` calls enclose the node (their list literals may
    /// mix types).
    in_format: usize,
    types: HashMap<u64, Type>,
    calls: HashMap<u64, CallRef>,
    pub issues: Vec<Issue>,
}

/// kube's functions that take lists of mixed types.
const MIXED_LITERAL_FUNCTIONS: &[&str] = &["format"];

impl<'a> Checker<'a> {
    pub fn new(env: &'a Env, info: &'a SourceInfo) -> Checker<'a> {
        Checker {
            env,
            info,
            scopes: Vec::new(),
            mapping: Mapping::default(),
            free: 0,
            here: None,
            in_format: 0,
            types: HashMap::new(),
            calls: HashMap::new(),
            issues: Vec::new(),
        }
    }

    /// The type of `e` and of its nodes, type parameters left free
    /// becoming `dyn`.
    pub fn check_root(&mut self, e: &IdedExpr) -> Checked {
        let t = self.check(e);
        let output = substitute(&self.mapping, &t, true);
        let types = std::mem::take(&mut self.types)
            .into_iter()
            .map(|(id, t)| (id, substitute(&self.mapping, &t, true)))
            .collect();
        Checked {
            output,
            types,
            calls: std::mem::take(&mut self.calls),
        }
    }

    fn offset(&self, id: u64) -> Option<u32> {
        self.info.offset_for(id).map(|(s, _)| s).or(self.here)
    }

    fn error(&mut self, id: u64, message: String) {
        let offset = self.offset(id);
        self.issues.push(Issue { offset, message });
    }

    fn fresh(&mut self) -> Type {
        let t = Type::param(&format!("_var{}", self.free));
        self.free += 1;
        t
    }

    fn sub(&self, t: &Type) -> Type {
        substitute(&self.mapping, t, false)
    }

    fn check(&mut self, e: &IdedExpr) -> Type {
        let saved = self.here;
        if let Some((start, _)) = self.info.offset_for(e.id) {
            self.here = Some(start);
        }
        let t = self.check_kind(e);
        self.here = saved;
        self.types.insert(e.id, t.clone());
        t
    }

    fn check_kind(&mut self, e: &IdedExpr) -> Type {
        match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Type::Bool,
                LiteralValue::Bytes(_) => Type::Bytes,
                LiteralValue::Double(_) => Type::Double,
                LiteralValue::Int(_) => Type::Int,
                LiteralValue::Null => Type::Null,
                LiteralValue::String(_) => Type::String,
                LiteralValue::UInt(_) => Type::Uint,
            },
            Expr::Ident(name) => self.check_ident(e.id, name),
            Expr::Select(s) => {
                if !s.test {
                    if let Some(t) = self.qualified(e) {
                        return t;
                    }
                }
                let t = self.check_select_field(e.id, &s.operand, &s.field, false);
                if s.test {
                    Type::Bool
                } else {
                    self.sub(&t)
                }
            }
            Expr::Call(call) => self.check_call(e, call),
            Expr::List(l) => {
                let mut elem: Option<Type> = None;
                let mut first: Option<Type> = None;
                for (i, x) in l.elements.iter().enumerate() {
                    let mut t = self.check(x);
                    if l.optional_indices.contains(&i) {
                        t = self.unwrap_optional_entry(x.id, t);
                    }
                    self.homogeneous(x.id, &mut first, &t);
                    elem = Some(self.join(elem, t));
                }
                let elem = elem.unwrap_or_else(|| self.fresh());
                Type::list(elem)
            }
            Expr::Map(m) => {
                let (mut key, mut value) = (None, None);
                let (mut first_key, mut first_value) = (None, None);
                for entry in &m.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            let k = self.check(&me.key);
                            self.homogeneous(me.key.id, &mut first_key, &k);
                            key = Some(self.join(key, k));
                            let mut v = self.check(&me.value);
                            if me.optional {
                                v = self.unwrap_optional_entry(me.value.id, v);
                            }
                            self.homogeneous(me.value.id, &mut first_value, &v);
                            value = Some(self.join(value, v));
                        }
                        EntryExpr::StructField(f) => {
                            self.check(&f.value);
                        }
                    }
                }
                match (key, value) {
                    (Some(k), Some(v)) => Type::map(k, v),
                    _ => {
                        let (k, v) = (self.fresh(), self.fresh());
                        Type::map(k, v)
                    }
                }
            }
            Expr::Struct(s) => {
                // Typed literals of schemas this crate does not model:
                // their fields are checked, the result is `dyn`.
                for entry in &s.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => {
                            self.check(&f.value);
                        }
                        EntryExpr::MapEntry(me) => {
                            self.check(&me.key);
                            self.check(&me.value);
                        }
                    }
                }
                Type::Dyn
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let accu = self.check(&c.accu_init);
                let range = self.sub(&range);
                let (var, var2) = match &range {
                    Type::List(elem) => match c.iter_var2 {
                        Some(_) => (Type::Int, (**elem).clone()),
                        None => ((**elem).clone(), Type::Dyn),
                    },
                    Type::Map(k, v) => ((**k).clone(), (**v).clone()),
                    Type::Dyn | Type::Error | Type::Param(_) => {
                        assignable(&mut self.mapping, &Type::Dyn, &range);
                        (Type::Dyn, Type::Dyn)
                    }
                    other => {
                        self.error(
                            c.iter_range.id,
                            format!(
                                "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                            ),
                        );
                        (Type::Error, Type::Error)
                    }
                };
                self.scopes.push((c.accu_var.clone(), accu.clone()));
                let depth = self.scopes.len();
                self.scopes.push((c.iter_var.clone(), var));
                if let Some(v2) = &c.iter_var2 {
                    self.scopes.push((v2.clone(), var2));
                }
                let cond = self.check(&c.loop_cond);
                self.assert_type(c.loop_cond.id, &Type::Bool, &cond);
                let step = self.check(&c.loop_step);
                self.assert_type(c.loop_step.id, &accu, &step);
                self.scopes.truncate(depth);
                let result = self.check(&c.result);
                self.scopes.truncate(depth - 1);
                self.sub(&result)
            }
            Expr::Unspecified => Type::Dyn,
        }
    }

    fn lookup_var(&self, name: &str) -> Option<Type> {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Some(t.clone());
        }
        self.env.variable(name).cloned()
    }

    fn check_ident(&mut self, id: u64, name: &str) -> Type {
        if let Some(t) = self.lookup_var(name) {
            return t;
        }
        if let Some(t) = type_ident(name) {
            return t;
        }
        if name.starts_with('@') || name.starts_with('#') {
            // A name the macros of this crate bind; nothing to report.
            return Type::Dyn;
        }
        self.error(
            id,
            format!("undeclared reference to '{name}' (in container '')"),
        );
        Type::Error
    }

    /// `a.b.c` as a qualified name, if it names a variable or type.
    fn qualified(&mut self, e: &IdedExpr) -> Option<Type> {
        let name = qualified_name(e)?;
        if !name.contains('.') {
            return None;
        }
        if let Some(t) = self.lookup_var(&name) {
            return Some(t);
        }
        type_ident(&name)
    }

    fn check_select_field(
        &mut self,
        id: u64,
        operand: &IdedExpr,
        field: &str,
        optional: bool,
    ) -> Type {
        let operand_type = self.check(operand);
        let operand_type = self.sub(&operand_type);
        let (target, is_opt) = match operand_type.unwrap_optional() {
            Some(inner) => (inner.clone(), true),
            None => (operand_type, false),
        };
        let result = match &target {
            Type::Map(_, v) => (**v).clone(),
            Type::Object(o) => {
                let found = o.fields.get(field).or_else(|| {
                    super::types::escape(field)
                        .filter(|escaped| escaped != field)
                        .and_then(|escaped| o.fields.get(&escaped))
                });
                match found {
                    Some(t) => t.clone(),
                    None => {
                        self.error(id, format!("undefined field '{field}'"));
                        Type::Error
                    }
                }
            }
            Type::Param(_) => {
                assignable(&mut self.mapping, &Type::Dyn, &target);
                Type::Dyn
            }
            Type::Dyn | Type::Error => Type::Dyn,
            // kube's library types made with `cel.ObjectType` are structs
            // to cel-go, but no type provider knows them.
            Type::Opaque(name, p)
                if p.is_empty() && super::overloads::is_unresolved_struct(name) =>
            {
                self.error(id, format!("unexpected failed resolution of '{name}'"));
                Type::Error
            }
            other => {
                self.error(
                    id,
                    format!("type '{other}' does not support field selection"),
                );
                Type::Dyn
            }
        };
        if is_opt || optional {
            Type::optional(result)
        } else {
            result
        }
    }

    fn check_call(&mut self, e: &IdedExpr, call: &cel::common::ast::CallExpr) -> Type {
        let name = call.func_name.as_str();
        if name == "_?._" && call.target.is_none() && call.args.len() == 2 {
            if let Expr::Literal(LiteralValue::String(field)) = &call.args[1].expr {
                let t = self.check_select_field(e.id, &call.args[0], field, true);
                return self.sub(&t);
            }
        }
        let format = MIXED_LITERAL_FUNCTIONS.contains(&name);
        if format {
            self.in_format += 1;
        }
        let result = self.check_call_inner(e, call);
        if format {
            self.in_format -= 1;
        }
        result
    }

    fn check_call_inner(&mut self, e: &IdedExpr, call: &cel::common::ast::CallExpr) -> Type {
        let name = call.func_name.as_str();
        // `authorizer.requestResource`, which this crate's parser makes a
        // call (see `library::authz::rewrite`): kube's variable of that
        // name where the environment declares it, else a field selection
        // on `authorizer` as cel-go checks one.
        if name == "requestResource" && call.args.is_empty() {
            if let Some(target) = &call.target {
                let declared = qualified_name(target)
                    .and_then(|q| self.lookup_var(&format!("{q}.requestResource")));
                if let Some(t) = declared {
                    return t;
                }
                let t = self.check_select_field(e.id, target, "requestResource", false);
                return self.sub(&t);
            }
        }
        // A namespaced function: `optional.of(x)`, `sets.contains(a, b)`.
        if let Some(target) = &call.target {
            if let Some(prefix) = qualified_name(target) {
                let root = prefix.split('.').next().unwrap_or_default();
                let full = format!("{prefix}.{name}");
                let namespace = crate::instrument::NAMESPACES.contains(&root) || root == "cel";
                if self.lookup_var(root).is_none() && (namespace || lookup(&full).is_some()) {
                    let args = self.check_args(&call.args);
                    return match lookup(&full) {
                        Some(f) => {
                            let t = self.resolve(e.id, &full, f, None, args);
                            if let Some(c) = self.calls.get_mut(&e.id) {
                                c.namespaced = true;
                            }
                            t
                        }
                        // A namespace this checker does not know.
                        None => Type::Dyn,
                    };
                }
            }
        }
        if name == "_&&_" || name == "_||_" {
            for a in &call.args {
                let t = self.check(a);
                if !assignable(&mut self.mapping, &t, &Type::Bool) {
                    let t = substitute(&self.mapping, &t, true);
                    self.error(a.id, format!("expected type 'bool' but found '{t}'"));
                }
            }
            return Type::Bool;
        }
        let target = call.target.as_ref().map(|t| self.check(t));
        let args = self.check_args(&call.args);
        if name.starts_with('@') && name != "@in" && name != "@not_strictly_false" {
            // The expansions of this crate's macros.
            return Type::Dyn;
        }
        match lookup(name) {
            Some(f) => self.resolve(e.id, name, f, target, args),
            // A function the checker does not know is not an error here.
            None => Type::Dyn,
        }
    }

    fn check_args(&mut self, args: &[IdedExpr]) -> Vec<Type> {
        args.iter().map(|a| self.check(a)).collect()
    }

    fn resolve(
        &mut self,
        id: u64,
        name: &str,
        f: &'static Function,
        target: Option<Type>,
        args: Vec<Type>,
    ) -> Type {
        let member = target.is_some();
        let mut all: Vec<Type> = Vec::with_capacity(args.len() + 1);
        all.extend(target);
        all.extend(args);
        let mut result: Option<Type> = None;
        let mut matched: Vec<&'static Overload> = Vec::new();
        for o in &f.overloads {
            if o.member != member {
                continue;
            }
            let mut fresh = HashMap::new();
            let params: Vec<Type> = o
                .params
                .iter()
                .map(|p| self.instantiate(p, &mut fresh))
                .collect();
            let ret = self.instantiate(&o.result, &mut fresh);
            if assignable_list(&mut self.mapping, &params, &all) {
                matched.push(o);
                let ret = self.sub(&ret);
                result = Some(match result {
                    None => ret,
                    Some(prev) if matches!(prev, Type::Dyn) || prev == ret => prev,
                    Some(_) => Type::Dyn,
                });
            }
        }
        if !matched.is_empty() {
            self.calls.insert(
                id,
                CallRef {
                    function: name.to_owned(),
                    namespaced: false,
                    overloads: matched,
                },
            );
        }
        if let Some(r) = result {
            return r;
        }
        if f.lenient {
            return Type::Dyn;
        }
        let shown: Vec<String> = all
            .iter()
            .map(|t| substitute(&self.mapping, t, true).to_string())
            .collect();
        let signature = if member {
            format!("{}.({})", shown[0], shown[1..].join(", "))
        } else {
            format!("({})", shown.join(", "))
        };
        self.error(
            id,
            format!("found no matching overload for '{name}' applied to '{signature}'"),
        );
        Type::Error
    }

    /// A declaration's type with its parameters renamed to fresh ones.
    fn instantiate(&mut self, t: &Type, fresh: &mut HashMap<Arc<str>, Type>) -> Type {
        match t {
            Type::Param(n) => {
                if let Some(v) = fresh.get(n) {
                    return v.clone();
                }
                let v = self.fresh();
                fresh.insert(n.clone(), v.clone());
                v
            }
            Type::List(e) => Type::list(self.instantiate(e, fresh)),
            Type::Map(k, v) => {
                let k = self.instantiate(k, fresh);
                Type::map(k, self.instantiate(v, fresh))
            }
            Type::Opaque(n, p) => {
                Type::Opaque(n, p.iter().map(|x| self.instantiate(x, fresh)).collect())
            }
            Type::Type(Some(x)) => Type::Type(Some(Box::new(self.instantiate(x, fresh)))),
            other => other.clone(),
        }
    }

    fn unwrap_optional_entry(&mut self, id: u64, t: Type) -> Type {
        let t = self.sub(&t);
        match t.unwrap_optional() {
            Some(inner) => inner.clone(),
            None => {
                if !t.is_dyn_or_error() {
                    self.error(
                        id,
                        format!(
                            "expected type '{}' but found '{t}'",
                            Type::optional(t.clone())
                        ),
                    );
                }
                t
            }
        }
    }

    /// The common type of a literal's elements so far and the next one:
    /// the more general if they unify, else `dyn`.
    fn join(&mut self, prev: Option<Type>, next: Type) -> Type {
        match prev {
            None => next,
            Some(p) => {
                if assignable(&mut self.mapping, &p, &next) {
                    most_general(&p, &next)
                } else {
                    Type::Dyn
                }
            }
        }
    }

    /// kube's homogeneous aggregate literal rule (outside `format`): every
    /// element of a list or map literal has the type of the first. Only
    /// reported where both types are fully known.
    fn homogeneous(&mut self, id: u64, first: &mut Option<Type>, t: &Type) {
        let t = substitute(&self.mapping, t, true);
        match first {
            None => *first = Some(t),
            Some(f) => {
                if self.in_format == 0 && f.is_concrete() && t.is_concrete() && !same_type(f, &t) {
                    let f = f.clone();
                    self.error(id, format!("expected type '{f}' but found '{t}'"));
                }
            }
        }
    }

    fn assert_type(&mut self, id: u64, want: &Type, got: &Type) {
        if !assignable(&mut self.mapping, want, got) {
            let want = substitute(&self.mapping, want, true);
            let got = substitute(&self.mapping, got, true);
            self.error(id, format!("expected type '{want}' but found '{got}'"));
        }
    }
}

fn same_type(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Object(x), Type::Object(y)) => x.name == y.name,
        _ => a == b,
    }
}

/// The dotted name `e` spells (`a.b.c`), if it is an identifier or
/// selections on one.
fn qualified_name(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        Expr::Select(s) if !s.test => {
            let mut prefix = qualified_name(&s.operand)?;
            prefix.push('.');
            prefix.push_str(&s.field);
            Some(prefix)
        }
        _ => None,
    }
}
