//! How Go prints things in the messages we reproduce: `strconv.Quote`, the
//! JSON scanner's `quoteChar`, the `time` package's quoting, `%g` floats and
//! kube-apiserver's `summarizeData`.

use std::fmt::Write as _;

/// Whether Go's `strconv.IsPrint` holds: letters, marks, numbers,
/// punctuation, symbols and the ASCII space. Rust has no general categories,
/// so the format, separator, private-use and non-character code points are
/// listed; unassigned code points count as printable.
pub(crate) fn is_print(c: char) -> bool {
    let u = c as u32;
    if u < 0x80 {
        return (0x20..0x7f).contains(&u);
    }
    if c.is_control() || (c.is_whitespace() && c != ' ') {
        return false;
    }
    !matches!(
        u,
        0xad | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x890..=0x891
            | 0x8e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x2028..=0x202e
            | 0x2060..=0x206f
            | 0xd800..=0xdfff
            | 0xe000..=0xf8ff
            | 0xfdd0..=0xfdef
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0xfffe..=0xffff
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
            | 0xf0000..=0x10ffff
    ) && (u & 0xfffe) != 0xfffe
}

/// Go's `strconv.Quote` (also what `%q` and, for strings, `%#v` print).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_quoted_rune(&mut out, c, '"');
    }
    out.push('"');
    out
}

fn push_quoted_rune(out: &mut String, c: char, delim: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        c if c == delim => {
            out.push('\\');
            out.push(c);
        }
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if is_print(c) => out.push(c),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// The JSON scanner's `quoteChar`: how `invalid character 'x' ...` shows a
/// byte. A byte is taken as the code point of the same value.
pub(crate) fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => {
            let mut out = String::from("'");
            push_quoted_rune(&mut out, char::from(c), '"');
            out.push('\'');
            out
        }
    }
}

/// The `time` package's `quote`: printable ASCII kept (with `"` and `\`
/// escaped), every other byte as `\xNN`.
pub(crate) fn time_quote(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s {
        if !(0x20..0x80).contains(&b) {
            let _ = write!(out, "\\x{b:02x}");
        } else {
            if b == b'"' || b == b'\\' {
                out.push('\\');
            }
            out.push(char::from(b));
        }
    }
    out.push('"');
    out
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`, which is also what `%v` prints.
pub(crate) fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, like Go's -1
    // precision: `d.ddde<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    // With the shortest precision Go uses the exponent form when the
    // exponent is below -4 or at least 6.
    if !(-4..6).contains(&exp) {
        push_exponent_form(&mut out, &digits, exp);
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = (exp + 1) as usize;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}

fn push_exponent_form(out: &mut String, digits: &str, exp: i32) {
    let mut chars = digits.chars();
    if let Some(first) = chars.next() {
        out.push(first);
    }
    let rest: String = chars.collect();
    if !rest.is_empty() {
        out.push('.');
        out.push_str(&rest);
    }
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let _ = write!(out, "{:02}", exp.unsigned_abs());
}

/// kube-apiserver's `summarizeData(body, 30)`: a short excerpt of a body for
/// "the object provided is unrecognized" messages. Bodies that start with
/// `{` are shown as text, anything else as hex.
pub fn summarize_body(body: &[u8]) -> String {
    const MAX: usize = 30;
    let (head, cut) = if body.len() > MAX {
        (&body[..MAX], true)
    } else {
        (body, false)
    };
    let mut out = match body.first() {
        None => return "<empty>".into(),
        Some(b'{') => String::from_utf8_lossy(head).into_owned(),
        Some(_) => head.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        }),
    };
    if cut {
        out.push_str(" ...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_char_matches_go() {
        assert_eq!(quote_char(b'x'), "'x'");
        assert_eq!(quote_char(b'\''), "'\\''");
        assert_eq!(quote_char(b'"'), "'\"'");
        assert_eq!(quote_char(b'\\'), "'\\\\'");
        assert_eq!(quote_char(b'\n'), "'\\n'");
        assert_eq!(quote_char(0x01), "'\\x01'");
        assert_eq!(quote_char(0x7f), "'\\x7f'");
        assert_eq!(quote_char(0x85), "'\\u0085'");
        assert_eq!(quote_char(0xa0), "'\\u00a0'");
        assert_eq!(quote_char(0xff), "'ÿ'");
        assert_eq!(quote_char(0xef), "'ï'");
    }

    #[test]
    fn quote_matches_go() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("é\u{200b}"), "\"é\\u200b\"");
        assert_eq!(quote("\u{1}"), "\"\\x01\"");
    }

    #[test]
    fn time_quote_escapes_non_ascii() {
        assert_eq!(time_quote("a\"é".as_bytes()), "\"a\\\"\\xc3\\xa9\"");
    }

    #[test]
    fn floats_print_like_go() {
        assert_eq!(format_float_g(1.5), "1.5");
        assert_eq!(format_float_g(100.0), "100");
        assert_eq!(format_float_g(123456.0), "123456");
        assert_eq!(format_float_g(1e6), "1e+06");
        assert_eq!(format_float_g(1234567.0), "1.234567e+06");
        assert_eq!(format_float_g(0.0001), "0.0001");
        assert_eq!(format_float_g(0.00001), "1e-05");
        assert_eq!(format_float_g(-2.5e-10), "-2.5e-10");
        assert_eq!(format_float_g(1e21), "1e+21");
        assert_eq!(format_float_g(f64::INFINITY), "+Inf");
        assert_eq!(format_float_g(f64::NAN), "NaN");
    }

    #[test]
    fn summaries() {
        assert_eq!(summarize_body(b""), "<empty>");
        assert_eq!(summarize_body(b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(
            summarize_body(b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}"),
            "{\"apiVersion\":\"v1\",\"kind\":\"Con ..."
        );
        assert_eq!(summarize_body(b"a: b"), "613a2062");
    }
}
