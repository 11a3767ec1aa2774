//! Just enough of `resource.Quantity` for the pod, limit-range and quota
//! rules: a quantity's value (to compare requests with limits, to add up
//! usage) and [`Quantity`], a value with the format it was written in,
//! shown in kube's canonical form (`2000m` is `2`, `1024Mi` is `1Gi`), as
//! kube's messages and `status.used` show quantities.

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

/// How kube writes a quantity back: the family of suffix it was parsed
/// with (kube's `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `k`, `M`, `m`... or no suffix.
    #[default]
    DecimalSI,
    /// `Ki`, `Mi`, `Gi`...
    BinarySI,
    /// `1e3`.
    DecimalExponent,
}

/// A quantity: its value and the format it is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quantity {
    pub nanos: Nanos,
    pub format: Format,
}

impl Quantity {
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSI,
    };

    /// A whole number (`NewQuantity(n, DecimalSI)`).
    pub fn int(n: i64) -> Quantity {
        Quantity {
            nanos: i128::from(n) * NANO,
            format: Format::DecimalSI,
        }
    }

    /// A quantity string, with the format its suffix implies.
    pub fn parse(s: &str) -> Option<Quantity> {
        let nanos = parse(s)?;
        let t = s.trim().trim_start_matches(['-', '+']);
        let suffix = &t[t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len())..];
        let format = if suffix.ends_with('i') {
            Format::BinarySI
        } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSI
        };
        Some(Quantity { nanos, format })
    }

    /// A quantity JSON value (a string or a number).
    pub fn of(v: &Value) -> Option<Quantity> {
        match v {
            Value::String(s) => Quantity::parse(s),
            other => of(other).map(|nanos| Quantity {
                nanos,
                format: Format::DecimalSI,
            }),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// kube's `Quantity.Add`: the sum keeps this quantity's format, unless
    /// this one is zero (then it takes the other's).
    pub fn plus(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }

    /// kube's `Quantity.Sub` (the format stays).
    pub fn minus(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos),
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }

    /// Rounded up to a whole number (kube's `RoundUp(0)`).
    pub fn round_up(self) -> Quantity {
        let rem = self.nanos.rem_euclid(NANO);
        Quantity {
            nanos: if rem == 0 {
                self.nanos
            } else {
                self.nanos - rem + NANO
            },
            ..self
        }
    }

    /// The value in thousandths, rounded up (kube's `MilliValue`).
    pub fn milli_value(&self) -> i128 {
        div_ceil(self.nanos, 1_000_000)
    }

    /// The value, rounded up (kube's `Value`).
    pub fn value(&self) -> i128 {
        div_ceil(self.nanos, NANO)
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 {
        q
    } else {
        q + 1
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.nanos.cmp(&other.nanos))
    }
}

/// kube's canonical form (`Quantity.String()`): decimal quantities as an
/// integer times the largest power of 1000 that keeps it whole; binary ones
/// (from 1024 on, when whole) as an integer times the largest power of
/// 1024.
impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let mut format = self.format;
        if format == Format::BinarySI && (self.nanos.abs() < 1024 * NANO || self.nanos % NANO != 0)
        {
            format = Format::DecimalSI;
        }
        if format == Format::BinarySI {
            let mut v = self.nanos / NANO;
            let mut exp = 0;
            while v % 1024 == 0 && exp < 6 {
                v /= 1024;
                exp += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
            return write!(f, "{v}{suffix}");
        }
        // An integer mantissa and a power of ten that is a multiple of 3.
        let mut v = self.nanos;
        let mut exp: i32 = -9;
        while v % 10 == 0 {
            v /= 10;
            exp += 1;
        }
        match exp.rem_euclid(3) {
            1 => {
                v *= 10;
                exp -= 1;
            }
            2 => {
                v *= 100;
                exp -= 2;
            }
            _ => {}
        }
        if format == Format::DecimalExponent {
            return if exp == 0 {
                write!(f, "{v}")
            } else {
                write!(f, "{v}e{exp}")
            };
        }
        let suffix = match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => return write!(f, "{v}e{exp}"),
        };
        write!(f, "{v}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Quantity::parse(s).unwrap().to_string()
    }

    #[test]
    fn canonical_forms() {
        for (given, shown) in [
            ("0", "0"),
            ("0Mi", "0"),
            ("1", "1"),
            ("2000m", "2"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1500", "1500"),
            ("2000", "2k"),
            ("1G", "1G"),
            ("1000M", "1G"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("512", "512"),
            ("100Ki", "100Ki"),
            ("0.5Gi", "512Mi"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("10", "10"),
            ("100m", "100m"),
            ("-2", "-2"),
            ("1E", "1E"),
        ] {
            assert_eq!(canon(given), shown, "{given}");
        }
    }

    #[test]
    fn sums_keep_the_first_format() {
        let used = Quantity::parse("0").unwrap();
        let pod = Quantity::parse("1Gi").unwrap();
        assert_eq!(used.plus(pod).to_string(), "1Gi");
        let mem = Quantity::parse("1G").unwrap();
        assert_eq!(mem.plus(pod).to_string(), "2073741824");
        assert_eq!(Quantity::int(2).minus(Quantity::int(1)).to_string(), "1");
        assert_eq!(
            Quantity::parse("1500m").unwrap().round_up().to_string(),
            "2"
        );
        assert_eq!(Quantity::parse("1500m").unwrap().milli_value(), 1500);
        assert_eq!(Quantity::parse("1500m").unwrap().value(), 2);
    }

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
