//! Kubernetes' regex library: `<string>.find(<regex>)` (the first match, or
//! `''`) and `<string>.findAll(<regex>[, <limit>])` (the matches, at most
//! `limit` of them when it is not negative). Patterns are RE2 syntax, which
//! the `regex` crate shares.

use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::cost::{charge, tenth};
use crate::native::{err, native, string, string_list};

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        native!(find),
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        native!(find_all),
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        native!(find_all_n),
    )?;
    Ok(())
}

/// Compiles `pattern`, charging for the work the match will do over `text`.
pub(crate) fn compile(
    function: &str,
    text: &str,
    pattern: &str,
) -> Result<regex::Regex, ExecutionError> {
    charge(tenth(text.len()).saturating_mul(tenth(pattern.len()).max(1)))?;
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| err(function, format!("error parsing regexp: {e}")))
}

fn find(args: &[Value]) -> Result<Value, ExecutionError> {
    let text = string("find", &args[0])?;
    let re = compile("find", text, string("find", &args[1])?)?;
    Ok(Value::String(
        re.find(text)
            .map(|m| m.as_str().to_owned())
            .unwrap_or_default()
            .into(),
    ))
}

fn find_all_limited(args: &[Value], limit: i64) -> Result<Value, ExecutionError> {
    let text = string("findAll", &args[0])?;
    let re = compile("findAll", text, string("findAll", &args[1])?)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    Ok(string_list(
        re.find_iter(text)
            .take(limit)
            .map(|m| m.as_str().to_owned()),
    ))
}

fn find_all(args: &[Value]) -> Result<Value, ExecutionError> {
    find_all_limited(args, -1)
}

fn find_all_n(args: &[Value]) -> Result<Value, ExecutionError> {
    match args[2] {
        Value::Int(n) => find_all_limited(args, n),
        _ => Err(err("findAll", "limit must be an int")),
    }
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_error, assert_true};

    #[test]
    fn documented_examples() {
        assert_true(&[
            "'abc 123'.find('[0-9]+') == '123'",
            "'abc 123'.find('xyz') == ''",
            "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
            "'123 abc 456'.findAll('[0-9]+', 0) == []",
            "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
            "'123 abc 456'.findAll('[0-9]+', -1) == ['123', '456']",
            "'123 abc 456'.findAll('xyz') == []",
            "'abc'.matches('^[a-c]+$')",
        ]);
        assert_error(&[("'abc'.find('[')", "error parsing regexp")]);
    }
}
