//! The subset of kubectl's JSONPath that CRD printer columns and selectable
//! fields use: `.a.b`, `['a.b']`, `[n]` (negative counts from the end),
//! `[*]`, `.*`, and filters `[?(@.x=="v")]` / `[?(@.x)]`.
//!
//! A path is parsed once (when a CRD is installed) into [`Path`] and then
//! evaluated against each object with [`Path::find`].

use serde_json::Value;

/// One step of a parsed path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    /// `[?(@.a.b == value)]`, or `[?(@.a.b)]` (the field exists) when
    /// `value` is `None`.
    Filter {
        path: Vec<String>,
        op: FilterOp,
        value: Option<Value>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum FilterOp {
    Exists,
    Eq,
    Ne,
}

/// A parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    steps: Vec<Step>,
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl Path {
    /// Parses `.spec.replicas`, `{.spec.replicas}` (a template with one
    /// expression) or `spec.replicas`.
    pub fn parse(text: &str) -> Result<Path, ParseError> {
        let t = text.trim();
        let t = t
            .strip_prefix('{')
            .and_then(|x| x.strip_suffix('}'))
            .unwrap_or(t);
        let t = t.strip_prefix('$').unwrap_or(t);
        let chars: Vec<char> = t.chars().collect();
        let mut i = 0;
        let mut steps = Vec::new();
        if !chars.is_empty() && chars[0] != '.' && chars[0] != '[' {
            // A bare first field (`spec.replicas`).
            let (name, next) = read_name(&chars, 0);
            steps.push(Step::Field(name));
            i = next;
        }
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    i += 1;
                    if i < chars.len() && chars[i] == '*' {
                        steps.push(Step::Wildcard);
                        i += 1;
                        continue;
                    }
                    let (name, next) = read_name(&chars, i);
                    if name.is_empty() {
                        return Err(ParseError(format!(
                            "invalid JSONPath {text:?}: empty field name"
                        )));
                    }
                    steps.push(Step::Field(name));
                    i = next;
                }
                '[' => {
                    let close = find_close(&chars, i).ok_or_else(|| {
                        ParseError(format!("invalid JSONPath {text:?}: unclosed ["))
                    })?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(parse_bracket(inner.trim(), text)?);
                    i = close + 1;
                }
                c => {
                    return Err(ParseError(format!(
                        "invalid JSONPath {text:?}: unexpected {c:?}"
                    )))
                }
            }
        }
        Ok(Path { steps })
    }

    /// Every value the path selects, in document order.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in cur {
                apply(step, v, &mut next);
            }
            cur = next;
        }
        cur
    }

    /// The JSON pointer of a path made only of field names (selectable
    /// fields and scale paths), else `None`.
    pub fn pointer(&self) -> Option<String> {
        let mut out = String::new();
        for s in &self.steps {
            match s {
                Step::Field(f) => {
                    out.push('/');
                    out.push_str(&f.replace('~', "~0").replace('/', "~1"));
                }
                _ => return None,
            }
        }
        Some(out)
    }
}

fn read_name(chars: &[char], start: usize) -> (String, usize) {
    let mut i = start;
    while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
        i += 1;
    }
    (chars[start..i].iter().collect(), i)
}

/// The index of the `]` closing the `[` at `open`, skipping quoted text.
fn find_close(chars: &[char], open: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            },
        }
    }
    None
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    if s.len() >= 2
        && ((s.starts_with('\'') && s.ends_with('\'')) || (s.starts_with('"') && s.ends_with('"')))
    {
        Some(&s[1..s.len() - 1])
    } else {
        None
    }
}

fn parse_bracket(inner: &str, text: &str) -> Result<Step, ParseError> {
    if inner == "*" {
        return Ok(Step::Wildcard);
    }
    if let Some(name) = unquote(inner) {
        return Ok(Step::Field(name.to_string()));
    }
    if let Ok(n) = inner.parse::<i64>() {
        return Ok(Step::Index(n));
    }
    if let Some(f) = inner.strip_prefix("?(").and_then(|x| x.strip_suffix(')')) {
        return parse_filter(f.trim(), text);
    }
    Err(ParseError(format!(
        "invalid JSONPath {text:?}: unsupported [{inner}]"
    )))
}

fn parse_filter(f: &str, text: &str) -> Result<Step, ParseError> {
    let bad = || {
        ParseError(format!(
            "invalid JSONPath {text:?}: unsupported filter {f:?}"
        ))
    };
    let (lhs, op, rhs) = if let Some((l, r)) = f.split_once("==") {
        (l, FilterOp::Eq, Some(r))
    } else if let Some((l, r)) = f.split_once("!=") {
        (l, FilterOp::Ne, Some(r))
    } else {
        (f, FilterOp::Exists, None)
    };
    let lhs = lhs.trim().strip_prefix('@').ok_or_else(bad)?;
    let path: Vec<String> = lhs
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if path.is_empty() {
        return Err(bad());
    }
    let value = match rhs {
        None => None,
        Some(r) => Some(match unquote(r) {
            Some(s) => Value::String(s.to_string()),
            None => serde_json::from_str::<Value>(r.trim()).map_err(|_| bad())?,
        }),
    };
    Ok(Step::Filter { path, op, value })
}

fn apply<'a>(step: &Step, v: &'a Value, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(f) => {
            if let Some(x) = v.get(f.as_str()) {
                out.push(x);
            }
        }
        Step::Index(n) => {
            if let Some(a) = v.as_array() {
                let len = a.len() as i64;
                let i = if *n < 0 { len + n } else { *n };
                if (0..len).contains(&i) {
                    out.push(&a[i as usize]);
                }
            }
        }
        Step::Wildcard => match v {
            Value::Array(a) => out.extend(a.iter()),
            Value::Object(m) => out.extend(m.values()),
            _ => {}
        },
        Step::Filter { path, op, value } => {
            let Some(items) = v.as_array() else { return };
            for item in items {
                let mut cur = Some(item);
                for p in path {
                    cur = cur.and_then(|c| c.get(p.as_str()));
                }
                let keep = match (op, cur, value) {
                    (FilterOp::Exists, c, _) => c.is_some(),
                    (FilterOp::Eq, Some(c), Some(want)) => loosely_equal(c, want),
                    (FilterOp::Ne, Some(c), Some(want)) => !loosely_equal(c, want),
                    _ => false,
                };
                if keep {
                    out.push(item);
                }
            }
        }
    }
}

/// Numbers compare by value (`1` equals `1.0`), everything else exactly.
fn loosely_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn find(path: &str, v: &Value) -> Vec<Value> {
        Path::parse(path)
            .unwrap()
            .find(v)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn fields_indexes_wildcards_and_filters() {
        let v = json!({"spec": {"replicas": 3, "a.b": "dotted"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"}]}});
        assert_eq!(find(".spec.replicas", &v), vec![json!(3)]);
        assert_eq!(find("{.spec.replicas}", &v), vec![json!(3)]);
        assert_eq!(find("spec.replicas", &v), vec![json!(3)]);
        assert_eq!(find(".spec['a.b']", &v), vec![json!("dotted")]);
        assert_eq!(find(".status.conditions[0].type", &v), vec![json!("Ready")]);
        assert_eq!(
            find(".status.conditions[-1].type", &v),
            vec![json!("Synced")]
        );
        assert_eq!(
            find(".status.conditions[*].status", &v),
            vec![json!("True"), json!("False")]
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#, &v),
            vec![json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type!='Ready')].status", &v),
            vec![json!("False")]
        );
        assert!(find(".spec.missing", &v).is_empty());
        assert!(find(".status.conditions[5]", &v).is_empty());
    }

    #[test]
    fn pointers_only_for_plain_fields() {
        assert_eq!(
            Path::parse(".spec.replicas").unwrap().pointer().as_deref(),
            Some("/spec/replicas")
        );
        assert_eq!(Path::parse(".spec.items[0]").unwrap().pointer(), None);
    }

    #[test]
    fn bad_paths_are_errors() {
        for p in [".spec[", ".spec.", ".spec[?(x)]", ".spec[abc]", ".spec..x"] {
            assert!(Path::parse(p).is_err(), "{p}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,40}") {
            if let Ok(p) = Path::parse(&s) {
                let _ = p.find(&json!({"a": [1, {"b": 2}], "c": {"d": "e"}}));
                let _ = p.pointer();
            }
        }

        #[test]
        fn plain_paths_round_trip(fields in proptest::collection::vec("[a-zA-Z][a-zA-Z0-9]{0,8}", 1..5)) {
            let text = format!(".{}", fields.join("."));
            let p = Path::parse(&text).unwrap();
            prop_assert_eq!(p.pointer().unwrap(), format!("/{}", fields.join("/")));
        }
    }
}
