//! RFC 3339 timestamps (UTC) and Go duration strings, as metav1.Time,
//! metav1.MicroTime and metav1.Duration write them in JSON.

/// Unix seconds of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the years
/// Go's RFC 3339 JSON encoding accepts.
const MIN_SECONDS: i64 = -62_167_219_200;
const MAX_SECONDS: i64 = 253_402_300_799;

/// Unix seconds of Go's zero time.Time (0001-01-01T00:00:00Z).
pub(crate) const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) -> days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats Unix `seconds` (+ `nanos`, already normalized to 0..1e9) as
/// `2006-01-02T15:04:05Z`, or with `micros` as `2006-01-02T15:04:05.000000Z`.
/// `None` when the year is outside 0000-9999.
pub(crate) fn format_rfc3339(seconds: i64, nanos: u32, micros: bool) -> Option<String> {
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return None;
    }
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if micros {
        out.push_str(&format!(".{:06}", nanos / 1000));
    }
    out.push('Z');
    Some(out)
}

/// Normalizes (seconds, nanos) like Go's time.Unix: nanos into 0..1e9.
pub(crate) fn normalize(seconds: i64, nanos: i64) -> Option<(i64, u32)> {
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let s = i64::try_from(total.div_euclid(1_000_000_000)).ok()?;
    let n = u32::try_from(total.rem_euclid(1_000_000_000)).ok()?;
    Some((s, n))
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u32, |acc, &b| {
        acc.checked_mul(10)?.checked_add(u32::from(b - b'0'))
    })
}

/// Parses an RFC 3339 timestamp (`2006-01-02T15:04:05[.frac](Z|±07:00)`)
/// into Unix (seconds, nanos).
pub(crate) fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let hour = digits(&b[11..13])?;
    let min = digits(&b[14..16])?;
    let sec = digits(&b[17..19])?;
    if !(1..=12).contains(&month) || hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let mdays = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day == 0 || day > mdays[(month - 1) as usize] {
        return None;
    }
    let mut rest = &b[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        nanos = digits(&frac[..n])? * 10u32.pow(9 - n as u32);
        rest = &frac[n..];
    }
    let offset: i64 = match rest {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let oh = digits(&[*h1, *h2])?;
            let om = digits(&[*m1, *m2])?;
            if oh > 23 || om > 59 {
                return None;
            }
            let o = i64::from(oh * 3600 + om * 60);
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec) - offset;
    Some((secs, nanos))
}

/// Formats nanoseconds like Go's time.Duration.String: `1h0m0s`, `1.5s`,
/// `300ms`, `2µs`, `0s`.
pub(crate) fn format_duration(d: i64) -> String {
    let neg = d < 0;
    let mut u = d.unsigned_abs();
    // Built right to left.
    let mut buf: Vec<char> = Vec::with_capacity(32);
    fn frac(buf: &mut Vec<char>, v: u64, prec: u32) -> u64 {
        let mut v = v;
        let mut printed = false;
        for _ in 0..prec {
            let digit = v % 10;
            printed = printed || digit != 0;
            if printed {
                buf.push(char::from(b'0' + digit as u8));
            }
            v /= 10;
        }
        if printed {
            buf.push('.');
        }
        v
    }
    fn int(buf: &mut Vec<char>, v: u64) {
        let mut v = v;
        loop {
            buf.push(char::from(b'0' + (v % 10) as u8));
            v /= 10;
            if v == 0 {
                break;
            }
        }
    }
    if u < 1_000_000_000 {
        if u == 0 {
            return "0s".to_string();
        }
        buf.push('s');
        let prec = if u < 1_000 {
            buf.push('n');
            0
        } else if u < 1_000_000 {
            buf.push('µ');
            3
        } else {
            buf.push('m');
            6
        };
        u = frac(&mut buf, u, prec);
        int(&mut buf, u);
    } else {
        buf.push('s');
        u = frac(&mut buf, u, 9);
        int(&mut buf, u % 60);
        u /= 60;
        if u > 0 {
            buf.push('m');
            int(&mut buf, u % 60);
            u /= 60;
            if u > 0 {
                buf.push('h');
                int(&mut buf, u);
            }
        }
    }
    if neg {
        buf.push('-');
    }
    buf.iter().rev().collect()
}

/// Parses a Go duration string (`1h2m3.5s`, `-1.5h`, `300ms`, `0`) into
/// nanoseconds, like Go's time.ParseDuration.
pub(crate) fn parse_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                a.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(after.len(), |(i, _)| i);
        let (unit, after) = after.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let mut v: u128 = 0;
        for b in int_part.bytes() {
            v = v.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
            if v > u128::from(u64::MAX) {
                return None;
            }
        }
        let mut value = v.checked_mul(scale)?;
        let mut div: u128 = 1;
        let mut f: u128 = 0;
        for b in frac_part.bytes() {
            if div >= 1_000_000_000_000_000_000 {
                break;
            }
            f = f * 10 + u128::from(b - b'0');
            div *= 10;
        }
        value = value.checked_add(f * scale / div)?;
        total = total.checked_add(value)?;
        if total > 1u128 << 63 {
            return None;
        }
        rest = after;
    }
    if neg {
        i64::try_from(-(total as i128)).ok()
    } else {
        i64::try_from(total).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(format_rfc3339(0, 0, false).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339(1_136_214_245, 123_456_789, true).unwrap(),
            "2006-01-02T15:04:05.123456Z"
        );
        assert_eq!(
            format_rfc3339(GO_ZERO_TIME_SECONDS, 0, false).unwrap(),
            "0001-01-01T00:00:00Z"
        );
        assert_eq!(
            format_rfc3339(951_782_400, 0, false).unwrap(),
            "2000-02-29T00:00:00Z"
        );
        assert!(format_rfc3339(MAX_SECONDS + 1, 0, false).is_none());
        assert!(format_rfc3339(MIN_SECONDS - 1, 0, false).is_none());
        assert_eq!(
            parse_rfc3339("2006-01-02T15:04:05Z"),
            Some((1_136_214_245, 0))
        );
        assert_eq!(
            parse_rfc3339("2006-01-02T16:04:05.5+01:00"),
            Some((1_136_214_245, 500_000_000))
        );
        assert_eq!(parse_rfc3339("2006-02-30T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2006-01-02 15:04:05Z"), None);
        for s in [MIN_SECONDS, -1, 0, 86_399, 1_700_000_000, MAX_SECONDS] {
            let f = format_rfc3339(s, 0, false).unwrap();
            assert_eq!(parse_rfc3339(&f), Some((s, 0)), "{f}");
        }
    }

    #[test]
    fn go_durations() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (1_500_000_000, "1.5s"),
            (60_000_000_000, "1m0s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_723_000_000_000, "1h2m3s"),
            (-90_000_000_000, "-1m30s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (i64::MAX, "2562047h47m16.854775807s"),
        ];
        for &(d, s) in cases {
            assert_eq!(format_duration(d), s);
            assert_eq!(parse_duration(s), Some(d), "{s}");
        }
        assert_eq!(parse_duration("1.5h"), Some(5_400_000_000_000));
        assert_eq!(parse_duration("10us"), Some(10_000));
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("1"), None);
        assert_eq!(parse_duration("1x"), None);
        assert_eq!(parse_duration("3000000h"), None);
    }
}
