//! The string formats kube's Go types parse while decoding, with Go's error
//! messages: `metav1.Time` (`time.Parse(time.RFC3339, s)`), `metav1.MicroTime`
//! (`RFC3339Micro`), `[]byte` (standard base64) and `resource.Quantity`.

use super::gofmt::time_quote;

/// `time.RFC3339`.
pub(crate) const RFC3339: &str = "2006-01-02T15:04:05Z07:00";
/// `metav1.RFC3339Micro`.
pub(crate) const RFC3339_MICRO: &str = "2006-01-02T15:04:05.000000Z07:00";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Micro,
    Zone,
}

/// The chunks of the two layouts: the literal before each, the element and
/// how the layout spells it.
const TIME_CHUNKS: &[(&str, Chunk, &str)] = &[
    ("", Chunk::Year, "2006"),
    ("-", Chunk::Month, "01"),
    ("-", Chunk::Day, "02"),
    ("T", Chunk::Hour, "15"),
    (":", Chunk::Minute, "04"),
    (":", Chunk::Second, "05"),
    ("", Chunk::Micro, ".000000"),
    ("", Chunk::Zone, "Z07:00"),
];

fn digit(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

/// Go's `getnum`: one or two digits (exactly two when `fixed`).
fn getnum(b: &[u8], fixed: bool) -> Option<(i64, &[u8])> {
    if !digit(b, 0) {
        return None;
    }
    if !digit(b, 1) {
        if fixed {
            return None;
        }
        return Some((i64::from(b[0] - b'0'), &b[1..]));
    }
    Some((
        i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'),
        &b[2..],
    ))
}

/// Go's `time.atoi`: an optional sign, then only digits.
fn atoi(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut x: i64 = 0;
    for d in digits {
        x = x.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some(if neg { -x } else { x })
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `time.Parse(layout, value)` for `RFC3339` (or `RFC3339Micro` when
/// `micro`), giving Go's `ParseError` text on failure.
pub(crate) fn parse_time(value: &str, micro: bool) -> Result<(), String> {
    let layout = if micro { RFC3339_MICRO } else { RFC3339 };
    let whole = value.as_bytes();
    let bad = |elem_value: &[u8], elem_layout: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            time_quote(whole),
            time_quote(layout.as_bytes()),
            time_quote(elem_value),
            time_quote(elem_layout.as_bytes())
        )
    };
    let out_of_range =
        |what: &str| format!("parsing time {}: {what} out of range", time_quote(whole));
    let chunks: Vec<&(&str, Chunk, &str)> = TIME_CHUNKS
        .iter()
        .filter(|c| micro || c.1 != Chunk::Micro)
        .collect();
    let (mut year, mut month, mut day) = (0i64, 0i64, 0i64);
    let mut v = whole;
    for (n, &&(prefix, chunk, spelled)) in chunks.iter().enumerate() {
        match v.strip_prefix(prefix.as_bytes()) {
            Some(rest) => v = rest,
            None => {
                // Go's `skip` consumes the matching part of the literal.
                return Err(bad(v, prefix));
            }
        }
        let hold = v;
        let mut range: Option<&str> = None;
        let ok = match chunk {
            Chunk::Year => {
                if v.len() < 4 || !digit(v, 0) {
                    false
                } else {
                    let (p, rest) = v.split_at(4);
                    v = rest;
                    atoi(p).map(|y| year = y).is_some()
                }
            }
            Chunk::Month => getnum(v, true).is_some_and(|(m, rest)| {
                month = m;
                v = rest;
                if !(1..=12).contains(&m) {
                    range = Some("month");
                }
                true
            }),
            Chunk::Day => getnum(v, true).is_some_and(|(d, rest)| {
                day = d;
                v = rest;
                true
            }),
            Chunk::Hour => getnum(v, false).is_some_and(|(h, rest)| {
                v = rest;
                if !(0..24).contains(&h) {
                    range = Some("hour");
                }
                true
            }),
            Chunk::Minute => getnum(v, true).is_some_and(|(m, rest)| {
                v = rest;
                if !(0..60).contains(&m) {
                    range = Some("minute");
                }
                true
            }),
            Chunk::Second => match getnum(v, true) {
                None => false,
                Some((s, rest)) => {
                    v = rest;
                    if !(0..60).contains(&s) {
                        range = Some("second");
                    } else if v.len() >= 2 && matches!(v[0], b'.' | b',') && digit(v, 1) {
                        let next_is_micro = chunks.get(n + 1).is_some_and(|c| c.1 == Chunk::Micro);
                        if !next_is_micro {
                            let mut end = 2;
                            while digit(v, end) {
                                end += 1;
                            }
                            v = &v[end..];
                        }
                    }
                    true
                }
            },
            Chunk::Micro => {
                if v.len() < 7 || !matches!(v[0], b'.' | b',') {
                    false
                } else {
                    match atoi(&v[1..7]) {
                        None => false,
                        Some(ns) => {
                            if ns < 0 {
                                range = Some("fractional second");
                            }
                            v = &v[7..];
                            true
                        }
                    }
                }
            }
            Chunk::Zone => {
                if v.first() == Some(&b'Z') {
                    v = &v[1..];
                    true
                } else if v.len() < 6 || v[3] != b':' {
                    false
                } else {
                    let (sign, hh, mm) = (v[0], &v[1..3], &v[4..6]);
                    v = &v[6..];
                    let hr = getnum(hh, true);
                    let min = hr.and_then(|_| getnum(mm, true));
                    let (h, m) = (hr.map_or(0, |x| x.0), min.map_or(0, |x| x.0));
                    if h > 24 {
                        range = Some("time zone offset hour");
                    }
                    if m > 60 {
                        range = Some("time zone offset minute");
                    }
                    hr.is_some() && min.is_some() && matches!(sign, b'+' | b'-')
                }
            }
        };
        if let Some(what) = range {
            return Err(out_of_range(what));
        }
        if !ok {
            return Err(bad(hold, spelled));
        }
    }
    if !v.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            time_quote(whole),
            time_quote(v)
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(out_of_range("day"));
    }
    Ok(())
}

/// Decodes like Go's `base64.StdEncoding.Decode` (padded, `\r` and `\n`
/// ignored, no strictness about trailing bits); `Err(offset)` is the byte
/// of Go's `illegal base64 data at input byte <offset>`.
pub(crate) fn check_base64(s: &[u8]) -> Result<(), usize> {
    fn is_alphabet(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'+' || c == b'/'
    }
    let len = s.len();
    let mut si = 0;
    while si < len {
        let mut j = 0;
        while j < 4 {
            if si == len {
                if j == 0 {
                    return Ok(());
                }
                return Err(si - j);
            }
            let c = s[si];
            si += 1;
            if is_alphabet(c) {
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < len && (s[si] == b'\n' || s[si] == b'\r') {
                        si += 1;
                    }
                    if si == len {
                        return Err(len);
                    }
                    if s[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < len && (s[si] == b'\n' || s[si] == b'\r') {
                si += 1;
            }
            if si < len {
                return Err(si);
            }
            return Ok(());
        }
    }
    Ok(())
}

/// `resource.ErrFormatWrong`.
pub(crate) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `resource.ErrNumeric`.
pub(crate) const QUANTITY_NUMERIC: &str = "unable to parse numeric part of quantity";
/// `resource.ErrSuffix`.
pub(crate) const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";

struct QuantityParts<'a> {
    value: &'a [u8],
    num: &'a [u8],
    denom: &'a [u8],
    suffix: &'a [u8],
}

/// `parseQuantityString`.
fn quantity_parts(s: &[u8]) -> Result<QuantityParts<'_>, &'static str> {
    let end = s.len();
    let mut pos = 0;
    if matches!(s.first(), Some(b'-' | b'+')) {
        pos = 1;
    }
    let zero = QuantityParts {
        value: b"0",
        num: b"0",
        denom: b"",
        suffix: b"",
    };
    while pos < end && s[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(zero);
    }
    let start = pos;
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return Ok(QuantityParts {
            value: s,
            num: &s[start..],
            denom: b"",
            suffix: b"",
        });
    }
    let num: &[u8] = if pos == start { b"0" } else { &s[start..pos] };
    let mut denom: &[u8] = b"";
    if s[pos] == b'.' {
        pos += 1;
        let dstart = pos;
        while pos < end && s[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos >= end {
            return Ok(QuantityParts {
                value: s,
                num,
                denom: &s[dstart..],
                suffix: b"",
            });
        }
        denom = &s[dstart..pos];
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&s[pos]) {
        pos += 1;
    }
    if pos < end && matches!(s[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QUANTITY_FORMAT);
    }
    Ok(QuantityParts {
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum QuantityFormat {
    Decimal,
    Binary,
}

/// `suffixHandler.interpret`: the base-10 or base-2 exponent of a suffix.
fn quantity_suffix(suffix: &[u8]) -> Option<(QuantityFormat, i32)> {
    let decimal = match suffix {
        b"n" => Some(-9),
        b"u" => Some(-6),
        b"m" => Some(-3),
        b"" => Some(0),
        b"k" => Some(3),
        b"M" => Some(6),
        b"G" => Some(9),
        b"T" => Some(12),
        b"P" => Some(15),
        b"E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((QuantityFormat::Decimal, e));
    }
    let binary = match suffix {
        b"Ki" => Some(10),
        b"Mi" => Some(20),
        b"Gi" => Some(30),
        b"Ti" => Some(40),
        b"Pi" => Some(50),
        b"Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some((QuantityFormat::Binary, e));
    }
    if suffix.len() > 1 && matches!(suffix[0], b'e' | b'E') {
        let exp = std::str::from_utf8(&suffix[1..])
            .ok()?
            .parse::<i64>()
            .ok()?;
        // Go converts with int32(parsed).
        return Some((QuantityFormat::Decimal, exp as i32));
    }
    None
}

/// `resource.ParseQuantity`, reporting only whether and why it fails.
pub(crate) fn parse_quantity(s: &str) -> Result<(), &'static str> {
    let s = s.as_bytes();
    if s.is_empty() {
        return Err(QUANTITY_FORMAT);
    }
    if s == b"0" {
        return Ok(());
    }
    let parts = quantity_parts(s)?;
    let (format, exponent) = quantity_suffix(parts.suffix).ok_or(QUANTITY_SUFFIX)?;
    let digits = parts.num.len() as i32 + parts.denom.len() as i32;
    let (precision, mut scale, mantissa_shift) = match format {
        QuantityFormat::Decimal => (18 - digits, exponent, 0),
        QuantityFormat::Binary if parts.denom.is_empty() => (
            15 - parts.num.len() as i32 - (exponent as f32 * 3.0 / 10.0) as i32 - 1,
            0,
            exponent,
        ),
        QuantityFormat::Binary => (-1, 0, exponent),
    };
    if precision >= 0 {
        scale -= parts.denom.len() as i32;
        if scale >= -9 {
            let shifted: Vec<u8> = parts.num.iter().chain(parts.denom).copied().collect();
            let value = std::str::from_utf8(&shifted)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or(QUANTITY_NUMERIC)?;
            let fits = u32::try_from(mantissa_shift)
                .ok()
                .and_then(|sh| 1i64.checked_shl(sh))
                .and_then(|m| value.checked_mul(m))
                .is_some();
            if fits {
                return Ok(());
            }
        }
    }
    // The arbitrary-precision path (`inf.Dec.SetString`) needs a digit.
    if parts.value.iter().any(u8::is_ascii_digit) {
        Ok(())
    } else {
        Err(QUANTITY_NUMERIC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_times() {
        for ok in [
            "2024-01-02T03:04:05Z",
            "2024-01-02T03:04:05.123456789Z",
            "2024-01-02T03:04:05+05:30",
            "2024-02-29T00:00:00Z",
            "2024-01-02T3:04:05Z",
        ] {
            assert_eq!(parse_time(ok, false), Ok(()), "{ok}");
        }
        assert_eq!(parse_time("2024-01-02T03:04:05.000000Z", true), Ok(()));
    }

    #[test]
    fn time_errors_read_like_go() {
        let cases = [
            (
                "abc",
                r#"parsing time "abc" as "2006-01-02T15:04:05Z07:00": cannot parse "abc" as "2006""#,
            ),
            (
                "",
                r#"parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006""#,
            ),
            (
                "2024-01-02",
                r#"parsing time "2024-01-02" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "T""#,
            ),
            (
                "2024-1-02T00:00:00Z",
                r#"parsing time "2024-1-02T00:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse "1-02T00:00:00Z" as "01""#,
            ),
            (
                "2024-13-02T00:00:00Z",
                r#"parsing time "2024-13-02T00:00:00Z": month out of range"#,
            ),
            (
                "2023-02-29T00:00:00Z",
                r#"parsing time "2023-02-29T00:00:00Z": day out of range"#,
            ),
            (
                "2024-01-02T24:00:00Z",
                r#"parsing time "2024-01-02T24:00:00Z": hour out of range"#,
            ),
            (
                "2024-01-02T00:00:00",
                r#"parsing time "2024-01-02T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00""#,
            ),
            (
                "2024-01-02T00:00:00Zjunk",
                r#"parsing time "2024-01-02T00:00:00Zjunk": extra text: "junk""#,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse_time(input, false), Err(want.to_string()), "{input}");
        }
        assert_eq!(
            parse_time("2024-01-02T03:04:05Z", true),
            Err(r#"parsing time "2024-01-02T03:04:05Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#.to_string())
        );
        // Never panics on multi-byte input.
        assert!(parse_time("2024-01-02T00:00:00+é:00", false).is_err());
        assert!(parse_time("éééé", false).is_err());
    }

    #[test]
    fn base64_like_go() {
        assert_eq!(check_base64(b""), Ok(()));
        assert_eq!(check_base64(b"aGVsbG8="), Ok(()));
        assert_eq!(check_base64(b"aGVs\nbG8="), Ok(()));
        assert_eq!(check_base64(b"aGVsbA=="), Ok(()));
        assert_eq!(check_base64(b"aGVsbG8"), Err(4));
        assert_eq!(check_base64(b"a!=="), Err(1));
        assert_eq!(check_base64(b"aGVsbA="), Err(7));
        assert_eq!(check_base64(b"aGVsbA==x"), Err(8));
        assert_eq!(check_base64(b"a==="), Err(1));
        assert_eq!(check_base64(b"hello world"), Err(5));
    }

    #[test]
    fn quantities_like_go() {
        for ok in [
            "1",
            "0",
            "100m",
            "1.5",
            "1Gi",
            "500Mi",
            "1e3",
            "2E-2",
            "+1",
            "-1",
            ".5",
            "1.",
            "Ki",
            "12345678901234567890",
            "1e-10",
            "5n",
            "0.1Ei",
        ] {
            assert_eq!(parse_quantity(ok), Ok(()), "{ok}");
        }
        assert_eq!(parse_quantity(""), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity("abc"), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity("1gi"), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity("1 Gi"), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity("1kk"), Err(QUANTITY_SUFFIX));
        assert_eq!(parse_quantity("1e"), Err(QUANTITY_SUFFIX));
        assert_eq!(parse_quantity("e-10"), Err(QUANTITY_NUMERIC));
    }
}
