//! Just enough of `resource.Quantity` for the pod rules: a quantity's value,
//! to compare requests with limits and to compute a pod's QoS class.

use serde_json::Value;

/// A quantity's value in billionths (nano units), saturating: enough
/// precision for `n` (the smallest suffix) and range for `Ei`.
pub type Nanos = i128;

const NANO: i128 = 1_000_000_000;

/// The value of a quantity string (`500m`, `1Gi`, `1.5`, `2e3`), `None`
/// when it does not parse.
pub fn parse(s: &str) -> Option<Nanos> {
    let s = s.trim();
    let (neg, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(num_end);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return None;
    }
    // Digits as an integer plus a decimal exponent.
    let mut mantissa: i128 = 0;
    let mut exp10: i32 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        if mantissa < i128::MAX / 100 {
            mantissa = mantissa * 10 + i128::from(b - b'0');
        } else {
            exp10 += 1;
        }
    }
    exp10 -= frac_part.len() as i32;
    let mut binary: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => binary = 10,
        "Mi" => binary = 20,
        "Gi" => binary = 30,
        "Ti" => binary = 40,
        "Pi" => binary = 50,
        "Ei" => binary = 60,
        e if e.starts_with(['e', 'E']) => {
            exp10 += e[1..].parse::<i32>().ok()?;
        }
        _ => return None,
    }
    // To nanos: multiply by 10^(exp10 + 9) and 2^binary.
    let mut v = mantissa.saturating_mul(1i128 << binary);
    let shift = exp10 + 9;
    if shift >= 0 {
        for _ in 0..shift.min(40) {
            v = v.saturating_mul(10);
        }
    } else {
        for _ in 0..(-shift).min(40) {
            // Round up, as kube rounds values to its scale.
            v = (v + 9) / 10;
        }
    }
    Some(if neg { -v } else { v })
}

/// The value of a quantity JSON value (a string, or a number as some
/// clients send).
pub fn of(v: &Value) -> Option<Nanos> {
    match v {
        Value::String(s) => parse(s),
        Value::Number(n) => n
            .as_i64()
            .map(|i| i128::from(i).saturating_mul(NANO))
            .or_else(|| n.as_f64().map(|f| (f * 1e9) as i128)),
        _ => None,
    }
}

/// The quantity as the client wrote it, for messages.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(parse("1"), Some(NANO));
        assert_eq!(parse("500m"), Some(NANO / 2));
        assert_eq!(parse("0.5"), Some(NANO / 2));
        assert_eq!(parse("1Ki"), Some(1024 * NANO));
        assert_eq!(parse("1k"), Some(1000 * NANO));
        assert_eq!(parse("2e3"), Some(2000 * NANO));
        assert_eq!(parse("-1"), Some(-NANO));
        assert_eq!(parse("1Gi"), parse("1024Mi"));
        assert!(parse("abc").is_none());
        assert!(parse("1x").is_none());
        assert!(parse("").is_none());
        assert!(parse(".").is_none());
    }
}
