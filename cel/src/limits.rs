//! Bounds on expression shape, so that no expression can overflow the
//! stack: the base crate's parser, its interpreter and this crate's passes
//! all recurse over the expression.
//!
//! * The parser (ANTLR-generated) uses a great deal of stack per level of
//!   bracket nesting, so [`crate::Program::compile`] parses on its own
//!   thread with a 256 MiB stack (address space reserved, not memory
//!   used), after checking that brackets nest at most
//!   [`MAX_NESTING_DEPTH`] deep.
//! * The interpreter runs on the caller's thread and recurses once or twice
//!   per level of the parsed tree (operator chains such as `a + b + c`
//!   nest too), so compiling refuses trees deeper than [`MAX_AST_DEPTH`].
//!   Optimised, that depth fits well within the 2 MiB stacks of Tokio's
//!   workers and Rust's test threads (trees 8 times deeper were measured
//!   to fit). Unoptimised (debug) builds need about ten times the stack per
//!   level, so there each evaluation runs on a scoped thread with a 64 MiB
//!   stack: slower, but the same results.

use cel::common::ast::IdedExpr;

use crate::instrument::children;

/// The most brackets (`(`, `[`, `{`) may nest.
pub const MAX_NESTING_DEPTH: usize = 32;
/// The deepest parsed expression tree accepted.
pub const MAX_AST_DEPTH: usize = 64;
/// The stack evaluations run on in debug builds.
pub(crate) const DEBUG_EVAL_STACK_BYTES: usize = 64 * 1024 * 1024;
/// The stack the parser runs on.
pub(crate) const COMPILE_STACK_BYTES: usize = 256 * 1024 * 1024;

/// How deep brackets nest in `source`, string literals aside.
pub(crate) fn bracket_depth(source: &str) -> usize {
    let bytes = source.as_bytes();
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            q @ (b'\'' | b'"') => {
                let raw = i > 0 && matches!(bytes[i - 1], b'r' | b'R');
                let triple = bytes.get(i + 1) == Some(&q) && bytes.get(i + 2) == Some(&q);
                let close: &[u8] = if triple {
                    &bytes[i..i + 3]
                } else {
                    &bytes[i..i + 1]
                };
                i += close.len();
                while i < bytes.len() && !bytes[i..].starts_with(close) {
                    i += if bytes[i] == b'\\' && !raw { 2 } else { 1 };
                }
                i += close.len();
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// The depth of the tree `e`, found without recursion.
pub(crate) fn ast_depth(e: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(e, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        stack.extend(children(node).into_iter().map(|c| (c, depth + 1)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_outside_strings_count() {
        assert_eq!(bracket_depth("a"), 0);
        assert_eq!(bracket_depth("f([{1: 2}])"), 3);
        assert_eq!(bracket_depth("'((((' + \"[[[\" + '''{{''' + r'\\(('"), 0);
        assert_eq!(bracket_depth("'\\'(' + (1)"), 1);
        assert_eq!(bracket_depth("(((("), 4);
    }
}
