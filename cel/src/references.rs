//! Which variables an expression reads: Kubernetes treats a CRD rule that
//! reads `oldSelf` as a transition rule, run only on updates.

use std::collections::BTreeSet;

use cel::common::ast::{Expr, IdedExpr};

use crate::instrument::{children, NAMESPACES};

/// The identifiers `e` reads that no comprehension (or `cel.bind`) inside
/// it binds, sorted; function namespaces (`sets` in `sets.contains(..)`)
/// are not variables.
pub(crate) fn free_variables(e: &IdedExpr) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    // Explicit stack of (node, names bound around it), so depth costs heap.
    let mut stack: Vec<(&IdedExpr, Vec<&str>)> = vec![(e, Vec::new())];
    while let Some((node, bound)) = stack.pop() {
        match &node.expr {
            Expr::Ident(name) => {
                if !bound.contains(&name.as_str()) && !NAMESPACES.contains(&name.as_str()) {
                    found.insert(name.clone());
                }
            }
            Expr::Comprehension(c) => {
                stack.push((&c.iter_range, bound.clone()));
                stack.push((&c.accu_init, bound.clone()));
                let mut inner = bound.clone();
                inner.push(c.iter_var.as_str());
                if let Some(v2) = &c.iter_var2 {
                    inner.push(v2.as_str());
                }
                inner.push(c.accu_var.as_str());
                for part in [&c.loop_cond, &c.loop_step, &c.result] {
                    stack.push((part, inner.clone()));
                }
            }
            _ => stack.extend(children(node).into_iter().map(|c| (c, bound.clone()))),
        }
    }
    found
}

/// One step of a [`FieldReference`]: a field name, or an index into a
/// list or map (`[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Field {
        name: String,
        /// Line and column (1-based) where the selection is, as CEL
        /// reports positions.
        line: u32,
        column: u32,
    },
    Index,
}

/// A chain of field selections on a variable, as written:
/// `object.spec.containers[0].image` is `object` then `spec`,
/// `containers`, an index, `image`. Comprehension variables are not
/// followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReference {
    pub root: String,
    pub steps: Vec<Step>,
}

/// The field references of `expression` (what a type checker would check
/// against the variables' schemas); empty when it does not parse.
pub fn field_references(expression: &str) -> Vec<FieldReference> {
    let Ok((parsed, info)) = crate::program::env()
        .parser()
        .parse_with_source_info(expression)
    else {
        return Vec::new();
    };
    let position = |id: u64| -> (u32, u32) {
        let Some((start, _)) = info.offset_for(id) else {
            return (1, 1);
        };
        let before: String = expression.chars().take(start as usize).collect();
        let line = before.matches('\n').count() as u32 + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
        (line, column)
    };
    let mut out = Vec::new();
    let mut stack = vec![&parsed];
    while let Some(node) = stack.pop() {
        // The longest chain ending here: record it and do not descend into
        // its own prefix (that would record the prefix again).
        if let Some(r) = chain(node, &position) {
            if !r.steps.is_empty() {
                out.push(r);
                // Index expressions inside the chain are still visited.
                collect_index_args(node, &mut stack);
                continue;
            }
        }
        stack.extend(children(node));
    }
    out.reverse();
    out
}

fn chain(node: &IdedExpr, position: &dyn Fn(u64) -> (u32, u32)) -> Option<FieldReference> {
    match &node.expr {
        Expr::Ident(name) => Some(FieldReference {
            root: name.clone(),
            steps: Vec::new(),
        }),
        Expr::Select(s) => {
            let mut r = chain(&s.operand, position)?;
            let (line, column) = position(node.id);
            r.steps.push(Step::Field {
                name: s.field.clone(),
                line,
                column,
            });
            Some(r)
        }
        Expr::Call(c) if c.func_name == "_[_]" && c.target.is_none() && c.args.len() == 2 => {
            let mut r = chain(&c.args[0], position)?;
            r.steps.push(Step::Index);
            Some(r)
        }
        _ => None,
    }
}

fn collect_index_args<'a>(node: &'a IdedExpr, stack: &mut Vec<&'a IdedExpr>) {
    match &node.expr {
        Expr::Select(s) => collect_index_args(&s.operand, stack),
        Expr::Call(c) if c.func_name == "_[_]" && c.args.len() == 2 => {
            stack.push(&c.args[1]);
            collect_index_args(&c.args[0], stack);
        }
        _ => {}
    }
}

#[cfg(test)]
mod field_reference_tests {
    use super::*;

    fn names(r: &FieldReference) -> Vec<String> {
        r.steps
            .iter()
            .map(|s| match s {
                Step::Field { name, .. } => name.clone(),
                Step::Index => "[]".into(),
            })
            .collect()
    }

    #[test]
    fn chains_are_found_with_positions() {
        let refs =
            field_references("object.spec.replicas > 1 && has(object.spec.containers[0].image)");
        assert_eq!(refs.len(), 2, "{refs:?}");
        assert_eq!(refs[0].root, "object");
        assert_eq!(names(&refs[0]), ["spec", "replicas"]);
        assert_eq!(names(&refs[1]), ["spec", "containers", "[]", "image"]);
        let Step::Field { line, column, .. } = &refs[0].steps[1] else {
            panic!()
        };
        assert_eq!((*line, *column), (1, 12));
        assert!(field_references("object.(").is_empty());
    }
}
