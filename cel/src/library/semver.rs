//! Kubernetes' semver library: `semver(<string>[, <normalize>])`,
//! `isSemver(<string>[, <normalize>])`, and on a version `major`, `minor`,
//! `patch`, `compareTo`, `isGreaterThan`, `isLessThan`.
//!
//! Versions are strict Semantic Versioning 2.0.0. With `normalize` set, a
//! leading `v` is dropped, a missing minor or patch number becomes `0` and
//! leading zeros are stripped (`v01.2` reads as `1.2.0`). Ordering and
//! equality follow semver precedence: build metadata is ignored.

use std::cmp::Ordering;
use std::fmt;

use cel::common::types::{Type, BOOL_TYPE, STRING_TYPE};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::native::{err, native, opaque, string, wrap};

const TYPE_NAME: &str = "kubernetes.Semver";

fn semver_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// A semantic version.
#[derive(Debug, Clone)]
pub(crate) struct Semver(semver::Version);

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.precedence(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Semver {
    pub(crate) fn precedence(&self, other: &Semver) -> Ordering {
        let (a, b) = (&self.0, &other.0);
        (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
    }
}

/// `v1.02` → `1.2.0`: Kubernetes' lenient reading.
fn normalize(s: &str) -> String {
    let s = s.strip_prefix('v').unwrap_or(s);
    let split = s.find(['-', '+']).unwrap_or(s.len());
    let (core, rest) = s.split_at(split);
    let mut parts: Vec<String> = core
        .split('.')
        .map(|p| {
            let trimmed = p.trim_start_matches('0');
            if trimmed.is_empty() && !p.is_empty() {
                "0".to_owned()
            } else {
                trimmed.to_owned()
            }
        })
        .collect();
    while parts.len() < 3 {
        parts.push("0".to_owned());
    }
    format!("{}{rest}", parts.join("."))
}

fn parse(s: &str, lenient: bool) -> Result<Semver, String> {
    let text = if lenient { normalize(s) } else { s.to_owned() };
    semver::Version::parse(&text).map(Semver).map_err(|e| {
        let core = text.split(['-', '+']).next().unwrap_or("");
        if core.split('.').count() != 3 {
            // Kubernetes' (blang/semver's) wording for this case.
            "No Major.Minor.Patch elements found".to_owned()
        } else {
            format!("could not parse {s:?} as semver: {e}")
        }
    })
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let v = semver_type;
    env.add_overload(
        "semver",
        "string_to_semver",
        vec![STRING_TYPE],
        native!(to_semver),
    )?;
    env.add_overload(
        "semver",
        "string_to_semver_normalize",
        vec![STRING_TYPE, BOOL_TYPE],
        native!(to_semver),
    )?;
    env.add_overload(
        "isSemver",
        "is_semver_string",
        vec![STRING_TYPE],
        native!(is_semver),
    )?;
    env.add_overload(
        "isSemver",
        "is_semver_string_normalize",
        vec![STRING_TYPE, BOOL_TYPE],
        native!(is_semver),
    )?;
    env.add_member_overload("major", "semver_major", v(), vec![], native!(major))?;
    env.add_member_overload("minor", "semver_minor", v(), vec![], native!(minor))?;
    env.add_member_overload("patch", "semver_patch", v(), vec![], native!(patch))?;
    env.add_member_overload(
        "compareTo",
        "semver_compare_to",
        v(),
        vec![v()],
        native!(compare_to),
    )?;
    env.add_member_overload(
        "isGreaterThan",
        "semver_greater",
        v(),
        vec![v()],
        native!(greater),
    )?;
    env.add_member_overload("isLessThan", "semver_less", v(), vec![v()], native!(less))?;
    Ok(())
}

fn lenient(args: &[Value]) -> bool {
    matches!(args.get(1), Some(Value::Bool(true)))
}

fn to_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string("semver", &args[0])?;
    parse(s, lenient(args))
        .map(wrap)
        .map_err(|e| err("semver", e))
}

fn is_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string("isSemver", &args[0])?;
    Ok(Value::Bool(parse(s, lenient(args)).is_ok()))
}

fn the<'a>(function: &str, v: &'a Value) -> Result<&'a Semver, ExecutionError> {
    opaque::<Semver>(function, v)
}

fn number(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn major(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(number(the("major", &args[0])?.0.major))
}

fn minor(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(number(the("minor", &args[0])?.0.minor))
}

fn patch(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(number(the("patch", &args[0])?.0.patch))
}

fn ordering(function: &str, args: &[Value]) -> Result<Ordering, ExecutionError> {
    Ok(the(function, &args[0])?.precedence(the(function, &args[1])?))
}

fn compare_to(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(ordering("compareTo", args)? as i64))
}

fn greater(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        ordering("isGreaterThan", args)? == Ordering::Greater,
    ))
}

fn less(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ordering("isLessThan", args)? == Ordering::Less))
}

#[cfg(test)]
mod tests {
    use crate::library::testing::{assert_error, assert_true, assert_true_unchecked};

    #[test]
    fn documented_examples() {
        assert_true(&[
            "isSemver('1.0.0')",
            "isSemver('1.0.0-rc.1+build.5')",
            "!isSemver('v1.0')",
            "isSemver('v1.0', true)",
            "isSemver('v01.02', true)",
            "!isSemver('hello')",
            "!isSemver('1.0.0', true) == false",
            "semver('v1.0', true) == semver('1.0.0')",
            "semver('1.2.3').major() == 1",
            "semver('1.2.3').minor() == 2",
            "semver('1.2.3').patch() == 3",
            "semver('1.0.0').isGreaterThan(semver('0.1.0'))",
            "semver('0.1.0').isLessThan(semver('1.0.0'))",
            "semver('1.0.0-alpha').isLessThan(semver('1.0.0'))",
            "semver('1.0.0').compareTo(semver('0.1.0')) == 1",
            "semver('1.0.0').compareTo(semver('1.0.0')) == 0",
            "semver('0.1.0').compareTo(semver('1.0.0')) == -1",
            "semver('1.0.0+a') == semver('1.0.0+b')",
            "!isSemver('')",
            "!isSemver('v1.0.0')",
            "!isSemver(' 1.0.0')",
            "!isSemver('1. 0.0')",
            "!isSemver('1.0.0 ')",
            "!isSemver('01.01.01')",
            "!isSemver('1')",
            "!isSemver('1.1')",
            "!isSemver('', true)",
            "!isSemver(' 1.0.0', true)",
            "!isSemver('1. 0.0', true)",
            "!isSemver('1.0.0 ', true)",
            "isSemver('v1.0.0', true)",
            "isSemver('01.01.01', true)",
            "isSemver('1', true)",
            "isSemver('1.1', true)",
            "semver('v01.01', true) == semver('1.1.0')",
            "semver('1.2.3') != semver('1.0.0')",
            "!semver('1.0.0').isLessThan(semver('1.0.0'))",
            "type(semver('1.0.0')) == kubernetes.Semver",
        ]);
        // Runs here; kube declares `isSorted` only on lists of its comparable
        // primitive types, so it refuses this when it compiles it.
        assert_true_unchecked(&["[semver('1.0.0'), semver('1.2.0')].isSorted()"]);
        assert_error(&[
            ("semver('v1.0')", "No Major.Minor.Patch elements found"),
            ("semver('1.0.x')", "could not parse"),
        ]);
    }
}
