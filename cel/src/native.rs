//! Glue between the base crate's overload mechanism, which works on `dyn Val`
//! borrowed values, and this crate's libraries, written against the owned
//! [`cel::Value`] enum because that is much easier to match on.
//!
//! Every library function has the shape [`Native`]; the [`native!`] macro
//! turns one into the base crate's `fn` pointer type.

use cel::common::value::{CowVal, Val};
use cel::{ExecutionError, Value};

/// A library function over owned values. For a member function the receiver
/// is `args[0]`.
pub(crate) type Native = fn(&[Value]) -> Result<Value, ExecutionError>;

/// Converts the arguments, charges 0.1 per byte of the strings among them
/// (parsing a quantity, a URL, an IP... is linear in its text), calls `f`,
/// converts the result back.
pub(crate) fn call<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    f: Native,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let values = args
        .iter()
        .map(|a| Value::try_from(a.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let text: usize = values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.len(),
            _ => 0,
        })
        .sum();
    crate::cost::charge(crate::cost::tenth(text))?;
    let out = f(&values)?;
    let boxed: Box<dyn Val> = out.try_into()?;
    Ok(CowVal::Owned(boxed))
}

/// `native!(path::to::function)` is a `cel::common::functions::Function`
/// calling that [`Native`].
macro_rules! native {
    ($f:expr) => {{
        fn wrapper<'b, 'v>(
            args: Vec<cel::common::value::CowVal<'b, 'v>>,
        ) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
            $crate::native::call(args, $f)
        }
        wrapper as cel::common::functions::Function
    }};
}
pub(crate) use native;

/// A function error carrying `message` as is.
pub(crate) fn err(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

/// The string in `v`, or a type error naming `function`.
pub(crate) fn string<'a>(function: &str, v: &'a Value) -> Result<&'a str, ExecutionError> {
    match v {
        Value::String(s) => Ok(s.as_str()),
        other => Err(err(
            function,
            format!("expected string, got {:?}", other.type_of()),
        )),
    }
}

/// The list in `v`, or a type error naming `function`.
pub(crate) fn list<'a>(function: &str, v: &'a Value) -> Result<&'a [Value], ExecutionError> {
    match v {
        Value::List(l) => Ok(l.as_slice()),
        other => Err(err(
            function,
            format!("expected list, got {:?}", other.type_of()),
        )),
    }
}

/// The opaque value of type `T` in `v`, or a type error naming `function`.
pub(crate) fn opaque<'a, T: 'static>(
    function: &str,
    v: &'a Value,
) -> Result<&'a T, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<T>().ok_or_else(|| {
            err(
                function,
                format!("unexpected argument type {}", o.runtime_type_name()),
            )
        }),
        other => Err(err(
            function,
            format!("unexpected argument type {:?}", other.type_of()),
        )),
    }
}

/// `Value::Opaque` holding `t`.
pub(crate) fn wrap<T: cel::objects::Opaque>(t: T) -> Value {
    Value::Opaque(std::sync::Arc::new(t))
}

/// A list of strings.
pub(crate) fn string_list<I: IntoIterator<Item = String>>(items: I) -> Value {
    Value::List(std::sync::Arc::new(
        items.into_iter().map(|s| Value::String(s.into())).collect(),
    ))
}

/// `optional.of(v)` or `optional.none()`.
pub(crate) fn optional(v: Option<Value>) -> Value {
    let o = match v {
        Some(v) => cel::objects::OptionalValue::of(v),
        None => cel::objects::OptionalValue::none(),
    };
    Value::Opaque(std::sync::Arc::new(o))
}
