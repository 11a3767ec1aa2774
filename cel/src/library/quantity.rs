//! Kubernetes' quantity library: `quantity(<string>)`, `isQuantity`, and on
//! a quantity `sign`, `isGreaterThan`, `isLessThan`, `compareTo`, `add` and
//! `sub` (a quantity or an int), `mul`, `div` and `divInt` (by an int),
//! `asInteger`, `isInteger`, `asApproximateFloat`. Two quantities are equal when their values are
//! (`quantity('1k') == quantity('1000')`).
//!
//! A quantity is held exactly as `mantissa × 10^exponent` with a 128-bit
//! mantissa: binary suffixes multiply the mantissa by powers of 1024, so
//! every valid quantity whose digits fit is exact. (Kubernetes keeps
//! arbitrary precision; a quantity with more than about 38 significant
//! digits is refused here.) A parsed quantity prints as written; a computed
//! one in a plain form (`70000`, `1500m`, `15e-10`), not always the
//! canonical form Kubernetes would choose.

use std::cmp::Ordering;
use std::fmt;

use cel::common::types::{Type, INT_TYPE, STRING_TYPE};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::native::{err, native, opaque, string, wrap};

const TYPE_NAME: &str = "kubernetes.Quantity";

/// Kubernetes' message for a string that is not a quantity.
const FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

fn quantity_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// An exact quantity: `mantissa × 10^exponent`.
#[derive(Debug, Clone)]
pub(crate) struct Quantity {
    mantissa: i128,
    exponent: i32,
    /// How it was written, if it was parsed.
    written: Option<String>,
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_value(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(w) = &self.written {
            return f.write_str(w);
        }
        let (m, e) = normalize(self.mantissa, self.exponent);
        if e >= 0 {
            if let Some(v) = pow10(e as u32).and_then(|p| m.checked_mul(p)) {
                return write!(f, "{v}");
            }
            return write!(f, "{m}e{e}");
        }
        for (floor, suffix) in [(-3, "m"), (-6, "u"), (-9, "n")] {
            if e >= floor {
                let scaled = m * pow10((e - floor) as u32).unwrap_or(1);
                return write!(f, "{scaled}{suffix}");
            }
        }
        write!(f, "{m}e{e}")
    }
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// Strips trailing decimal zeros off the mantissa.
fn normalize(mut m: i128, mut e: i32) -> (i128, i32) {
    if m == 0 {
        return (0, 0);
    }
    while m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    (m, e)
}

impl Quantity {
    pub(crate) fn parse(s: &str) -> Option<Quantity> {
        let (negative, body) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let number_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return None;
        }
        let mut mantissa: i128 = 0;
        for d in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa
                .checked_mul(10)?
                .checked_add(i128::from(d - b'0'))?;
        }
        let mut exponent = -(fraction.len() as i32);
        match suffix {
            "" => {}
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let power = "KMGTPE".find(&suffix[..1])? as u32 + 1;
                mantissa = mantissa.checked_mul(1024i128.checked_pow(power)?)?;
            }
            "n" => exponent -= 9,
            "u" => exponent -= 6,
            "m" => exponent -= 3,
            "k" => exponent += 3,
            "M" => exponent += 6,
            "G" => exponent += 9,
            "T" => exponent += 12,
            "P" => exponent += 15,
            "E" => exponent += 18,
            _ => {
                let digits = suffix.strip_prefix(['e', 'E'])?;
                let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
                if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let n: i32 = digits.parse().ok()?;
                exponent = exponent.checked_add(n)?;
            }
        }
        if negative {
            mantissa = -mantissa;
        }
        Some(Quantity {
            mantissa,
            exponent,
            written: Some(s.to_owned()),
        })
    }

    fn computed(mantissa: i128, exponent: i32) -> Quantity {
        Quantity {
            mantissa,
            exponent,
            written: None,
        }
    }

    /// Both mantissas at the smaller exponent, if they fit.
    fn aligned(&self, other: &Quantity) -> Option<(i128, i128, i32)> {
        let (a, ea) = normalize(self.mantissa, self.exponent);
        let (b, eb) = normalize(other.mantissa, other.exponent);
        let e = ea.min(eb);
        let scale = |m: i128, from: i32| {
            pow10(u32::try_from(from - e).ok()?).and_then(|p| m.checked_mul(p))
        };
        Some((scale(a, ea)?, scale(b, eb)?, e))
    }

    pub(crate) fn cmp_value(&self, other: &Quantity) -> Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            // Too far apart to align exactly: the magnitudes differ hugely.
            None => self.as_f64().total_cmp(&other.as_f64()),
        }
    }

    fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }

    fn as_i64(&self) -> Option<i64> {
        let (m, e) = normalize(self.mantissa, self.exponent);
        if e < 0 {
            return None;
        }
        i64::try_from(m.checked_mul(pow10(e as u32)?)?).ok()
    }

    fn sign(&self) -> i64 {
        self.mantissa.signum() as i64
    }
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let q = quantity_type;
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        native!(parse),
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        native!(is_quantity),
    )?;
    env.add_member_overload("sign", "quantity_sign", q(), vec![], native!(sign))?;
    env.add_member_overload(
        "isInteger",
        "quantity_is_integer",
        q(),
        vec![],
        native!(is_integer),
    )?;
    env.add_member_overload(
        "asInteger",
        "quantity_as_integer",
        q(),
        vec![],
        native!(as_integer),
    )?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_approximate_float",
        q(),
        vec![],
        native!(as_float),
    )?;
    env.add_member_overload(
        "compareTo",
        "quantity_compare_to",
        q(),
        vec![q()],
        native!(compare_to),
    )?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_greater",
        q(),
        vec![q()],
        native!(greater),
    )?;
    env.add_member_overload("isLessThan", "quantity_less", q(), vec![q()], native!(less))?;
    env.add_member_overload("mul", "quantity_mul_int", q(), vec![INT_TYPE], native!(mul))?;
    env.add_member_overload("div", "quantity_div_int", q(), vec![INT_TYPE], native!(div))?;
    env.add_member_overload(
        "divInt",
        "quantity_div_int_truncated",
        q(),
        vec![INT_TYPE],
        native!(div_int),
    )?;
    for (name, id, f) in [
        ("add", "quantity_add", native!(add)),
        ("sub", "quantity_sub", native!(sub)),
    ] {
        env.add_member_overload(name, id, q(), vec![q()], f)?;
        env.add_member_overload(name, &format!("{id}_int"), q(), vec![INT_TYPE], f)?;
    }
    Ok(())
}

fn the<'a>(function: &str, v: &'a Value) -> Result<&'a Quantity, ExecutionError> {
    opaque::<Quantity>(function, v)
}

fn parse(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string("quantity", &args[0])?;
    Quantity::parse(s)
        .map(wrap)
        .ok_or_else(|| err("quantity", FORMAT_ERROR))
}

fn is_quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        Quantity::parse(string("isQuantity", &args[0])?).is_some(),
    ))
}

fn sign(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(the("sign", &args[0])?.sign()))
}

fn is_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(the("isInteger", &args[0])?.as_i64().is_some()))
}

fn as_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    the("asInteger", &args[0])?
        .as_i64()
        .map(Value::Int)
        .ok_or_else(|| err("asInteger", "cannot convert value to integer"))
}

fn as_float(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Float(the("asApproximateFloat", &args[0])?.as_f64()))
}

fn ordering(args: &[Value], function: &str) -> Result<Ordering, ExecutionError> {
    Ok(the(function, &args[0])?.cmp_value(the(function, &args[1])?))
}

fn compare_to(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(ordering(args, "compareTo")? as i64))
}

fn greater(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        ordering(args, "isGreaterThan")? == Ordering::Greater,
    ))
}

fn less(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ordering(args, "isLessThan")? == Ordering::Less))
}

fn combine(function: &str, args: &[Value], negate: bool) -> Result<Value, ExecutionError> {
    let a = the(function, &args[0])?;
    let b = match &args[1] {
        Value::Int(i) => Quantity::computed(i128::from(*i), 0),
        other => the(function, other)?.clone(),
    };
    let overflow = || err(function, "quantity overflow");
    let (x, y, e) = a.aligned(&b).ok_or_else(overflow)?;
    let y = if negate {
        y.checked_neg().ok_or_else(overflow)?
    } else {
        y
    };
    let sum = x.checked_add(y).ok_or_else(overflow)?;
    Ok(wrap(Quantity::computed(sum, e)))
}

fn add(args: &[Value]) -> Result<Value, ExecutionError> {
    combine("add", args, false)
}

fn sub(args: &[Value]) -> Result<Value, ExecutionError> {
    combine("sub", args, true)
}

fn int_arg(function: &str, v: &Value) -> Result<i128, ExecutionError> {
    match v {
        Value::Int(i) => Ok(i128::from(*i)),
        _ => Err(err(function, "expected an int")),
    }
}

fn mul(args: &[Value]) -> Result<Value, ExecutionError> {
    let q = the("mul", &args[0])?;
    let m = q
        .mantissa
        .checked_mul(int_arg("mul", &args[1])?)
        .ok_or_else(|| err("mul", "quantity overflow"))?;
    Ok(wrap(Quantity::computed(m, q.exponent)))
}

/// Divides, keeping nine more decimal places than the dividend has (down
/// to nano precision at least), rounding toward zero.
fn div(args: &[Value]) -> Result<Value, ExecutionError> {
    let q = the("div", &args[0])?;
    let d = int_arg("div", &args[1])?;
    if d == 0 {
        return Err(err("div", "division by zero"));
    }
    let (m, e) = normalize(q.mantissa, q.exponent);
    let extra = 9.max(e + 9) as u32;
    let scaled = pow10(extra)
        .and_then(|p| m.checked_mul(p))
        .ok_or_else(|| err("div", "quantity overflow"))?;
    Ok(wrap(Quantity::computed(scaled / d, e - extra as i32)))
}

/// Divides, keeping the whole part of the quotient.
fn div_int(args: &[Value]) -> Result<Value, ExecutionError> {
    let q = the("divInt", &args[0])?;
    let d = int_arg("divInt", &args[1])?;
    if d == 0 {
        return Err(err("divInt", "division by zero"));
    }
    let (m, e) = normalize(q.mantissa, q.exponent);
    let whole = if e >= 0 {
        pow10(e as u32)
            .and_then(|p| m.checked_mul(p))
            .ok_or_else(|| err("divInt", "quantity overflow"))?
            / d
    } else {
        m / d / pow10((-e) as u32).unwrap_or(i128::MAX)
    };
    Ok(wrap(Quantity::computed(whole, 0)))
}

#[cfg(test)]
mod tests {
    use super::Quantity;
    use crate::library::testing::{assert_error, assert_true};

    #[test]
    fn documented_examples() {
        assert_true(&[
            "quantity('50000000G').isInteger()",
            "quantity('50k').asInteger() == 50000",
            "quantity('50.703k').asApproximateFloat() == 50703.0",
            "quantity('50m').sign() == 1",
            "quantity('0').sign() == 0",
            "quantity('-50k').sign() == -1",
            "quantity('50k').isGreaterThan(quantity('100'))",
            "quantity('50k').isLessThan(quantity('100M'))",
            "quantity('1M').compareTo(quantity('1Mi')) == -1",
            "quantity('1Mi').compareTo(quantity('1M')) == 1",
            "quantity('1k').compareTo(quantity('1000')) == 0",
            "quantity('50k').add(quantity('20k')) == quantity('70k')",
            "quantity('50k').add(20) == quantity('50020')",
            "quantity('50k').sub(quantity('20k')) == quantity('30k')",
            "quantity('50k').sub(20000) == quantity('30k')",
            "quantity('1k') == quantity('1000')",
            "quantity('1.5Gi') == quantity('1536Mi')",
            "quantity('1e3') == quantity('1k')",
            "quantity('1E3') == quantity('1k')",
            "quantity('500m').isLessThan(quantity('1'))",
            "!quantity('500m').isInteger()",
            "isQuantity('1.3G')",
            "isQuantity('1.3Gi')",
            "isQuantity('10000k')",
            "isQuantity('+1')",
            "isQuantity('.5')",
            "!isQuantity('1,3G')",
            "!isQuantity('200K')",
            "!isQuantity('Three')",
            "!isQuantity('Mi')",
            "!isQuantity('')",
            "!isQuantity('1.2.3')",
            "!isQuantity('1e')",
            "!isQuantity('10Mm')",
            "quantity('200M') == quantity('0.2G') && quantity('0.2G') == quantity('200M')",
            "quantity('2000k') == quantity('2M')",
            "quantity('200M') != quantity('0.3G')",
            "quantity('50M').isLessThan(quantity('50Mi'))",
            "quantity('50k').add(quantity('20')) == quantity('50.02k')",
            "!quantity('50k').add(20).isLessThan(quantity('50020'))",
            "quantity('50k').sub(quantity('20')) == quantity('49.98k')",
            "quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger() == 20",
            "quantity('50k').mul(2) == quantity('100000')",
            "quantity('10k').div(2) == quantity('5000')",
            "quantity('10000').div(3).asApproximateFloat() > 3333.3333",
            "quantity('10000').div(3).asApproximateFloat() < 3333.3334",
            "quantity('10000').divInt(3) == quantity('3333')",
            "quantity('1500m').divInt(1) == quantity('1')",
            "!quantity('9999999999999999999999999999999999999G').isInteger()",
            "type(quantity('1')) == kubernetes.Quantity",
        ]);
        assert_error(&[
            (
                "quantity('9999999999999999999999999999999999999G').asInteger()",
                "cannot convert value to integer",
            ),
            (
                "quantity('500m').asInteger()",
                "cannot convert value to integer",
            ),
            (
                "quantity('x')",
                "quantities must match the regular expression",
            ),
        ]);
    }

    #[test]
    fn display() {
        let show = |s: &str| Quantity::parse(s).unwrap().to_string();
        assert_eq!(show("100Mi"), "100Mi");
        let sum = |a: &str, b: &str| {
            let (a, b) = (Quantity::parse(a).unwrap(), Quantity::parse(b).unwrap());
            let (x, y, e) = a.aligned(&b).unwrap();
            Quantity::computed(x + y, e).to_string()
        };
        assert_eq!(sum("50k", "20k"), "70000");
        assert_eq!(sum("1", "500m"), "1500m");
        assert_eq!(sum("1n", "1u"), "1001n");
    }
}
