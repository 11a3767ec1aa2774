//! The cron syntax kube accepts for a CronJob's schedule (robfig/cron's
//! standard parser: five fields or a `@descriptor`), with its error texts.

/// Why a schedule does not parse, worded as robfig/cron words it.
pub fn parse_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return Some("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // The location itself is not checked here.
        spec = spec
            .split_once(' ')
            .map_or("", |(_, rest)| rest.trim_start());
    }
    if spec.starts_with('@') {
        return descriptor_error(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    const MONTHS: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let bounds: [(u64, u64, &[&str], u64); 5] = [
        (0, 59, &[], 0),
        (0, 23, &[], 0),
        (1, 31, &[], 0),
        (1, 12, MONTHS, 1),
        (0, 6, DAYS, 0),
    ];
    for (field, (min, max, names, base)) in fields.iter().zip(bounds) {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            if let Err(e) = range(expr, min, max, names, base) {
                return Some(e);
            }
        }
    }
    None
}

fn descriptor_error(spec: &str) -> Option<String> {
    match spec {
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly" => {
            None
        }
        s if s.starts_with("@every ") => {
            let d = &s["@every ".len()..];
            if go_duration_ok(d) {
                None
            } else {
                Some(format!(
                    "failed to parse duration {s}: time: invalid duration {}",
                    crate::validation::go_quote(d)
                ))
            }
        }
        s => Some(format!("unrecognized descriptor: {s}")),
    }
}

/// A rough check of Go's `time.ParseDuration` syntax (`1h30m`, `90s`).
fn go_duration_ok(d: &str) -> bool {
    let d = d.strip_prefix(['+', '-']).unwrap_or(d);
    if d == "0" {
        return true;
    }
    let mut rest = d;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num == 0 {
            return false;
        }
        rest = &rest[num..];
        let unit = ["ns", "us", "µs", "ms", "h", "m", "s"]
            .iter()
            .find(|u| rest.starts_with(*u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

fn number(expr: &str, names: &[&str], base: u64) -> Result<u64, String> {
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(expr)) {
        return Ok(i as u64 + base);
    }
    must_parse(expr)
}

fn must_parse(expr: &str) -> Result<u64, String> {
    match expr.parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("negative number ({n}) not allowed: {expr}")),
        Ok(n) => Ok(n as u64),
        Err(e) => {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            Err(format!(
                "failed to parse int from {expr}: strconv.Atoi: parsing {}: {why}",
                crate::validation::go_quote(expr)
            ))
        }
    }
}

fn range(expr: &str, min: u64, max: u64, names: &[&str], base: u64) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_high.len() == 1;
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
        (min, max)
    } else {
        let start = number(low_high[0], names, base)?;
        let end = match low_high.len() {
            1 => start,
            2 => number(low_high[1], names, base)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse(range_and_step[1])?;
            if single {
                end = max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {expr}"
        ));
    }
    if end > max {
        return Err(format!(
            "end of range ({end}) above maximum ({max}): {expr}"
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        for ok in [
            "*/5 * * * *",
            "0 0 * * 0",
            "0 9-17 * * mon-fri",
            "30 2 1,15 JAN *",
            "@hourly",
            "@every 1h30m",
            "5/10 * * * ?",
        ] {
            assert_eq!(parse_error(ok), None, "{ok}");
        }
        for (bad, msg) in [
            ("", "empty spec string"),
            ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
            ("61 * * * *", "end of range (61) above maximum (59): 61"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ] {
            assert_eq!(parse_error(bad).as_deref(), Some(msg), "{bad}");
        }
    }
}
