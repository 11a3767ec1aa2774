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
