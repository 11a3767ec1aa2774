//! The Kubernetes CEL libraries, registered on the one environment.
//!
//! From the base crate: the standard library and macros, optional values,
//! and cel-go's strings extension (`charAt`, `indexOf`, `lastIndexOf`,
//! `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`, `trim`,
//! `join`, `reverse`, `format`, `strings.quote`) and lists extension
//! (`slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`,
//! `lists.range`).
//!
//! Here, each in its module: Kubernetes' lists, sets, regex, URLs,
//! quantities, IPs and CIDRs, formats and semver libraries, and the
//! `cel.bind` and two-variable comprehension macros.

use cel::objects::Opaque;
use cel::{DeclarationError, Env};

pub(crate) mod authz;
pub(crate) mod comprehensions;
pub(crate) mod format;
pub(crate) mod ip;
pub(crate) mod jsonpatch;
pub(crate) mod lists;
pub(crate) mod quantity;
pub(crate) mod regex;
pub(crate) mod semver;
pub(crate) mod sets;
pub(crate) mod url;

/// Registers everything on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    for name in [
        "net.IP",
        "net.CIDR",
        "kubernetes.URL",
        "kubernetes.Quantity",
        "kubernetes.Semver",
        "kubernetes.NamedFormat",
    ] {
        env.add_type(cel::common::types::Type::new_opaque_type(name))?;
    }
    crate::instrument::register(env)?;
    comprehensions::register(env)?;
    lists::register(env)?;
    sets::register(env)?;
    regex::register(env)?;
    url::register(env)?;
    quantity::register(env)?;
    ip::register(env)?;
    jsonpatch::register(env)?;
    format::register(env)?;
    semver::register(env)?;
    authz::register(env)?;
    Ok(())
}

/// The string form of a library value, used for its JSON form.
pub(crate) fn opaque_to_string(o: &dyn Opaque) -> Option<String> {
    if let Some(q) = o.downcast_ref::<quantity::Quantity>() {
        return Some(q.to_string());
    }
    if let Some(v) = o.downcast_ref::<ip::Ip>() {
        return Some(v.to_string());
    }
    if let Some(v) = o.downcast_ref::<ip::Cidr>() {
        return Some(v.to_string());
    }
    if let Some(v) = o.downcast_ref::<url::Url>() {
        return Some(v.to_string());
    }
    if let Some(v) = o.downcast_ref::<semver::Semver>() {
        return Some(v.to_string());
    }
    None
}

/// The order of two library values of the same comparable type
/// (quantities, semvers).
pub(crate) fn compare_opaque(a: &cel::Value, b: &cel::Value) -> Option<std::cmp::Ordering> {
    let (cel::Value::Opaque(a), cel::Value::Opaque(b)) = (a, b) else {
        return None;
    };
    if let (Some(x), Some(y)) = (
        a.downcast_ref::<quantity::Quantity>(),
        b.downcast_ref::<quantity::Quantity>(),
    ) {
        return Some(x.cmp_value(y));
    }
    if let (Some(x), Some(y)) = (
        a.downcast_ref::<semver::Semver>(),
        b.downcast_ref::<semver::Semver>(),
    ) {
        return Some(x.precedence(y));
    }
    None
}

#[cfg(test)]
pub(crate) mod testing {
    //! Evaluates expressions for the libraries' tests.

    use crate::{Bindings, EvalError, Program};
    use cel::Value;

    pub(crate) fn eval(expr: &str) -> Result<Value, EvalError> {
        Program::compile(expr)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .evaluate(&Bindings::new())
            .map(|e| e.value)
    }

    /// Asserts each expression evaluates to `true`, and that the type
    /// checker accepts it as a `bool` (kube compiles every one of these
    /// examples; the checker must not refuse what kube accepts).
    pub(crate) fn assert_true(exprs: &[&str]) {
        for expr in exprs {
            assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
        }
        let refused: Vec<String> = exprs.iter().filter_map(|e| refusal(e)).collect();
        assert!(refused.is_empty(), "{}", refused.join("\n"));
    }

    /// Asserts each expression evaluates to `true`, for the examples kube
    /// refuses when it compiles them (cel-go's documentation has them; kube
    /// does not declare the overload, or refuses the mixed list literal).
    pub(crate) fn assert_true_unchecked(exprs: &[&str]) {
        for expr in exprs {
            assert_eq!(eval(expr), Ok(Value::Bool(true)), "{expr}");
            assert!(refusal(expr).is_some(), "the checker accepts {expr}");
        }
    }

    /// Why the type checker refuses `expr` (with no variables) as an
    /// expression that may be a `bool`, if it does.
    fn refusal(expr: &str) -> Option<String> {
        match Program::compile(expr)
            .ok()?
            .check(&crate::check::Env::new())
        {
            Ok(t) if t.may_be(&crate::check::Type::Bool) => None,
            Ok(t) => Some(format!("{expr}: {t}")),
            Err(e) => Some(format!("{expr}: {e}")),
        }
    }

    /// Asserts each expression fails with an error containing the text.
    pub(crate) fn assert_error(cases: &[(&str, &str)]) {
        for (expr, want) in cases {
            match eval(expr) {
                Err(e) => assert!(e.to_string().contains(want), "{expr}: {e} lacks {want}"),
                Ok(v) => panic!("{expr}: expected an error, got {v:?}"),
            }
        }
    }
}
