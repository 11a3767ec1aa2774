//! Kubernetes' lists library: `isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf` on lists of comparable values.

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::cost::charge;
use crate::native::{err, list, native};

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "isSorted",
        "list_is_sorted",
        LIST_TYPE,
        vec![],
        native!(is_sorted),
    )?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], native!(sum))?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], native!(min))?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], native!(max))?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        native!(index_of),
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        native!(last_index_of),
    )?;
    Ok(())
}

/// The list receiver, its elements charged 1 each.
fn items<'a>(function: &str, args: &'a [Value]) -> Result<&'a [Value], ExecutionError> {
    let items = list(function, &args[0])?;
    charge(items.len() as u64)?;
    Ok(items)
}

/// The order of two elements, which must be of the same comparable type.
fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return Err(err(
            function,
            format!(
                "no such overload: elements {} and {} differ in type",
                a.type_of(),
                b.type_of()
            ),
        ));
    }
    match a {
        Value::Int(_)
        | Value::UInt(_)
        | Value::Float(_)
        | Value::String(_)
        | Value::Bool(_)
        | Value::Bytes(_)
        | Value::Duration(_)
        | Value::Timestamp(_) => a
            .partial_cmp(b)
            .ok_or_else(|| err(function, "elements are not comparable (NaN)")),
        Value::Opaque(_) => crate::library::compare_opaque(a, b).ok_or_else(|| {
            err(
                function,
                format!("no such overload: {} is not comparable", a.type_of()),
            )
        }),
        other => Err(err(
            function,
            format!("no such overload: {} is not comparable", other.type_of()),
        )),
    }
}

fn is_sorted(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = items("isSorted", args)?;
    for pair in items.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn sum(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = items("sum", args)?;
    let Some(first) = items.first() else {
        return Ok(Value::Int(0));
    };
    let overflow = || err("sum", "integer overflow");
    let mut total = first.clone();
    for item in &items[1..] {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(overflow)?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => {
                Value::Duration(a.checked_add(b).ok_or_else(overflow)?)
            }
            (a, b) => {
                return Err(err(
                    "sum",
                    format!(
                        "no such overload: cannot add {} and {}",
                        a.type_of(),
                        b.type_of()
                    ),
                ))
            }
        };
    }
    match total {
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Duration(_) => Ok(total),
        other => Err(err(
            "sum",
            format!("no such overload: cannot sum {}", other.type_of()),
        )),
    }
}

fn extreme(function: &str, args: &[Value], keep: Ordering) -> Result<Value, ExecutionError> {
    let items = items(function, args)?;
    let Some(mut best) = items.first() else {
        return Err(err(function, format!("{function} called on empty list")));
    };
    // A single element is still checked for being comparable.
    compare(function, best, best)?;
    for item in &items[1..] {
        if compare(function, item, best)? == keep {
            best = item;
        }
    }
    Ok(best.clone())
}

fn min(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

fn max(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}

// `indexOf` and `lastIndexOf` are metered by the size wrapper the
// instrumenter puts on their receiver (they share names with the strings
// extension's), so they don't charge again.
fn index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list("indexOf", &args[0])?;
    let pos = items.iter().position(|x| x == &args[1]);
    Ok(Value::Int(pos.map(|p| p as i64).unwrap_or(-1)))
}

fn last_index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list("lastIndexOf", &args[0])?;
    let pos = items.iter().rposition(|x| x == &args[1]);
    Ok(Value::Int(pos.map(|p| p as i64).unwrap_or(-1)))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_error, assert_true, assert_true_unchecked};

    #[test]
    fn documented_examples() {
        assert_true(&[
            "[1, 2, 3].isSorted()",
            "['a', 'b', 'b', 'c'].isSorted()",
            "![2.0, 1.0].isSorted()",
            "[].isSorted()",
            "[1].sum() == 1",
            "[1, 2, 3].sum() == 6",
            "[1.0, 2.0].sum() == 3.0",
            "[].sum() == 0",
            "[1u, 2u].sum() == 3u",
            "[duration('1s'), duration('2s')].sum() == duration('3s')",
            "[1, 2, 3].min() == 1",
            "[1, 2, 3].max() == 3",
            "['b', 'a', 'c'].min() == 'a'",
            "[1, 2, 2, 3].indexOf(2) == 1",
            "['a', 'b', 'b', 'c'].lastIndexOf('b') == 2",
            "[1.0].indexOf(1.1) == -1",
            "[].indexOf('string') == -1",
            "[[1], [2]].indexOf([2]) == 1",
        ]);
        // Runs here; kube declares `isSorted` only on lists of its comparable
        // primitive types, so it refuses this when it compiles it.
        assert_true_unchecked(&["[quantity('2'), quantity('1k')].isSorted()"]);
    }

    #[test]
    fn errors() {
        assert_error(&[
            ("[].min()", "min called on empty list"),
            ("[].max()", "max called on empty list"),
            ("[1, 'a'].isSorted()", "differ in type"),
            ("['a'].sum()", "cannot sum string"),
            ("[9223372036854775807, 1].sum()", "overflow"),
            ("[{}].max()", "not comparable"),
        ]);
    }
}
