//! cel-go's sets extension: `sets.contains`, `sets.equivalent`,
//! `sets.intersects` over lists, with CEL equality (so `1 == 1.0`).

use cel::common::types::LIST_TYPE;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::cost::charge;
use crate::native::{list, native};

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "sets.contains",
        "sets_contains",
        vec![LIST_TYPE, LIST_TYPE],
        native!(contains),
    )?;
    env.add_overload(
        "sets.equivalent",
        "sets_equivalent",
        vec![LIST_TYPE, LIST_TYPE],
        native!(equivalent),
    )?;
    env.add_overload(
        "sets.intersects",
        "sets_intersects",
        vec![LIST_TYPE, LIST_TYPE],
        native!(intersects),
    )?;
    Ok(())
}

fn lists<'a>(
    function: &str,
    args: &'a [Value],
) -> Result<(&'a [Value], &'a [Value]), ExecutionError> {
    let a = list(function, &args[0])?;
    let b = list(function, &args[1])?;
    charge((a.len() as u64).saturating_mul(b.len().max(1) as u64))?;
    Ok((a, b))
}

/// Whether every element of `b` is in `a`.
fn all_in(a: &[Value], b: &[Value]) -> bool {
    b.iter().all(|x| a.contains(x))
}

fn contains(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = lists("sets.contains", args)?;
    Ok(Value::Bool(all_in(a, b)))
}

fn equivalent(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = lists("sets.equivalent", args)?;
    Ok(Value::Bool(all_in(a, b) && all_in(b, a)))
}

fn intersects(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = lists("sets.intersects", args)?;
    Ok(Value::Bool(b.iter().any(|x| a.contains(x))))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_true, assert_true_unchecked};

    #[test]
    fn documented_examples() {
        assert_true(&[
            "sets.contains([], [])",
            "sets.contains([1], [])",
            "sets.contains([1, 2, 3, 4], [2, 3])",
            "!sets.contains([1], [2])",
            "sets.equivalent([], [])",
            "sets.equivalent([1], [1, 1])",
            "!sets.equivalent([2, 1], [1])",
            "!sets.equivalent([1], [1, 2])",
            "sets.intersects([1], [1])",
            "!sets.intersects([1], [])",
            "!sets.intersects([], [])",
            "!sets.intersects([1], [2])",
        ]);
        // cel-go's examples; kube validates homogeneous list literals
        // (`expected type 'int' but found 'double'`), so it refuses them.
        assert_true_unchecked(&[
            "sets.contains([1, 2.0, 3u], [1.0, 2u, 3])",
            "sets.equivalent([1], [1u, 1.0])",
            "sets.equivalent([1, 2, 3], [3u, 2.0, 1])",
            "sets.intersects([1], [1.0, 2])",
        ]);
    }
}
