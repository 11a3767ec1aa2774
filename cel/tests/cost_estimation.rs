//! Static cost estimates against kube's expected numbers: the cases of
//! apiextensions-apiserver's `TestCostEstimation`
//! (`pkg/apiserver/schema/cel/compilation_test.go`, kube 1.35), each a
//! schema, a rule on it, and the estimated maximum cost kube computes with
//! the schema unbounded and with its limits set.

use k8s_cel::check::Env;
use k8s_cel::Program;
use serde_json::{json, Value};

/// The schema of one element type, as the kube test names them.
fn item(t: &str) -> Value {
    match t {
        "duration" | "date" | "date-time" => json!({"type": "string", "format": t}),
        "int-or-string" => json!({"x-kubernetes-int-or-string": true}),
        other => json!({"type": other}),
    }
}

fn set(mut v: Value, key: &str, max: Option<u64>) -> Value {
    if let Some(m) = max {
        v[key] = json!(m);
    }
    v
}

fn array(t: &str) -> impl Fn(Option<u64>) -> Value + '_ {
    move |max| set(json!({"type": "array", "items": item(t)}), "maxItems", max)
}

fn array_of_arrays(t: &str) -> impl Fn(Option<u64>) -> Value + '_ {
    move |max| {
        set(
            json!({"type": "array", "items": {"type": "array", "items": {"type": t}}}),
            "maxItems",
            max,
        )
    }
}

fn object_for_map() -> Value {
    json!({"type": "object", "required": ["required"], "properties": {
        "required": {"type": "string"}, "optional": {"type": "string"}}})
}

fn object_array(max: Option<u64>) -> Value {
    set(
        json!({"type": "array", "items": object_for_map()}),
        "maxItems",
        max,
    )
}

fn map_array(t: &str) -> impl Fn(Option<u64>) -> Value + '_ {
    move |max| {
        set(
            json!({"type": "array", "items": {"type": "object", "additionalProperties": {"type": t}}}),
            "maxItems",
            max,
        )
    }
}

fn map(t: &str) -> impl Fn(Option<u64>) -> Value + '_ {
    move |max| {
        set(
            json!({"type": "object", "additionalProperties": item(t)}),
            "maxProperties",
            max,
        )
    }
}

fn map_of(values: Value) -> impl Fn(Option<u64>) -> Value {
    move |max| {
        set(
            json!({"type": "object", "additionalProperties": values.clone()}),
            "maxProperties",
            max,
        )
    }
}

fn string(max: Option<u64>) -> Value {
    set(json!({"type": "string"}), "maxLength", max)
}

fn bytes(max: Option<u64>) -> Value {
    set(
        json!({"type": "string", "format": "byte"}),
        "maxLength",
        max,
    )
}

fn nested_spec(max: Option<u64>) -> Value {
    let s = json!({"type": "object", "additionalProperties": string(max)});
    set(s, "maxProperties", max)
}

fn all_max_nested(max: Option<u64>) -> Value {
    let inner = set(object_for_map(), "maxProperties", max);
    let middle = set(
        json!({"type": "object", "additionalProperties": inner}),
        "maxProperties",
        max,
    );
    set(json!({"type": "array", "items": middle}), "maxItems", max)
}

fn one_max_nested(max: Option<u64>) -> Value {
    let middle = set(
        json!({"type": "object", "additionalProperties": object_for_map()}),
        "maxProperties",
        max,
    );
    json!({"type": "array", "items": middle})
}

fn strings_joined(max: Option<u64>) -> Value {
    set(
        json!({"type": "array", "items": string(max)}),
        "maxItems",
        max,
    )
}

fn replace_object(max: Option<u64>) -> Value {
    json!({"type": "object", "properties": {
        "str": string(max), "before": string(Some(2)), "after": string(Some(4))}})
}

fn split_object(max: Option<u64>) -> Value {
    json!({"type": "object", "properties": {"str": string(max), "separator": string(max)}})
}

fn enum_string(max: Option<u64>) -> Value {
    set(
        json!({"type": "string", "enum": ["A", "B", "C", "LongValue"]}),
        "maxLength",
        max,
    )
}

fn int_or_string(max: Option<u64>) -> Value {
    set(
        json!({"x-kubernetes-int-or-string": true}),
        "maxLength",
        max,
    )
}

/// The estimated maximum cost of `rule` on `schema` (not a resource root,
/// as in kube's test).
fn cost(schema: &Value, rule: &str) -> u64 {
    let env = Env::for_schema_rule(schema, false, false).expect("a CEL type");
    let program = Program::compile(rule).expect("compiles");
    let (t, cost) = program.check_cost(&env).expect("checks");
    assert_eq!(t.to_string(), "bool", "{rule}");
    cost.max
}

/// kube's `costLimit` in the test: what an O(n²) rule on an unbounded
/// list must exceed.
const EXCEEDS: u64 = 100_000_000;

/// Expected cost: exactly, at least (exceeds), or not checked (kube's 0).
#[derive(Clone, Copy, Debug)]
enum Want {
    Is(u64),
    AtLeast(u64),
    Any,
}

struct Case {
    name: &'static str,
    schema: Box<dyn Fn(Option<u64>) -> Value>,
    rule: &'static str,
    unbounded: Want,
    max: u64,
    bounded: Want,
}

fn case(
    name: &'static str,
    schema: impl Fn(Option<u64>) -> Value + 'static,
    rule: &'static str,
    unbounded: Want,
    max: u64,
    bounded: Want,
) -> Case {
    Case {
        name,
        schema: Box::new(schema),
        rule,
        unbounded,
        max,
        bounded,
    }
}

#[test]
fn costs_are_kubes() {
    use Want::*;
    let cases = vec![
        case(
            "number array with all",
            array("number"),
            "self.all(x, true)",
            Is(4718591),
            10,
            Is(32),
        ),
        case(
            "string array with all",
            array("string"),
            "self.all(x, true)",
            Is(3145727),
            20,
            Is(62),
        ),
        case(
            "boolean array with all",
            array("boolean"),
            "self.all(x, true)",
            Is(1887437),
            5,
            Is(17),
        ),
        case(
            "array of number arrays with all",
            array_of_arrays("number"),
            "self.all(x, true)",
            Is(3145727),
            100,
            Is(302),
        ),
        case(
            "array of objects with all",
            object_array,
            "self.all(x, true)",
            Is(555128),
            50,
            Is(152),
        ),
        case(
            "map of numbers with all",
            map("number"),
            "self.all(x, true)",
            Is(1348169),
            10,
            Is(32),
        ),
        case(
            "map of numbers with has",
            map("number"),
            "has(self.x)",
            Any,
            100,
            Any,
        ),
        case(
            "map of strings with all",
            map("string"),
            "self.all(x, true)",
            Is(1179647),
            3,
            Is(11),
        ),
        case(
            "map of booleans with all",
            map("boolean"),
            "self.all(x, true)",
            Is(943718),
            100,
            Is(302),
        ),
        case(
            "string with contains",
            string,
            "self.contains('test')",
            Is(314574),
            10,
            Is(5),
        ),
        case(
            "string with startsWith",
            string,
            "self.startsWith('test')",
            Is(2),
            15,
            Is(2),
        ),
        case(
            "string with endsWith",
            string,
            "self.endsWith('test')",
            Is(2),
            30,
            Is(2),
        ),
        case(
            "concat string",
            string,
            r#"size(self + "hello") > size("hello")"#,
            Is(314578),
            4,
            Is(7),
        ),
        case(
            "index of array with numbers",
            array("number"),
            "self[1] == 0.0",
            Is(2),
            5000,
            Is(2),
        ),
        case(
            "index of array with strings",
            array("string"),
            "self[1] == self[1]",
            Is(314577),
            8,
            Is(314577),
        ),
        case(
            "O(n^2) loop with numbers",
            array("number"),
            "self.all(x, self.all(y, true))",
            AtLeast(EXCEEDS),
            10,
            Is(352),
        ),
        case(
            "O(n^3) loop with numbers",
            array("number"),
            "self.all(x, self.all(y, self.all(z, true)))",
            AtLeast(EXCEEDS),
            10,
            Is(3552),
        ),
        case(
            "regex matches simple",
            string,
            r#"self.matches("x")"#,
            Is(314574),
            50,
            Is(22),
        ),
        case(
            "regex matches empty string",
            string,
            r#""".matches("(((((((((())))))))))[0-9]")"#,
            Is(7),
            10,
            Is(7),
        ),
        case(
            "regex matches empty regex",
            string,
            r#"self.matches("")"#,
            Is(1),
            100,
            Is(1),
        ),
        case(
            "map of strings with value length",
            nested_spec,
            "self.all(x, x.contains(self[x]))",
            Is(2752507),
            10,
            Is(72),
        ),
        case(
            "set array maxLength to zero",
            array("number"),
            "self[3] == 0.0",
            Is(2),
            0,
            Is(2),
        ),
        case(
            "set map maxLength to zero",
            map("number"),
            r#"self["x"] == 0.0"#,
            Is(2),
            0,
            Is(2),
        ),
        case(
            "set string maxLength to zero",
            string,
            r#"self == "x""#,
            Is(2),
            0,
            Is(1),
        ),
        case(
            "set bytes maxLength to zero",
            bytes,
            r#"self == b"x""#,
            Is(2),
            0,
            Is(1),
        ),
        case(
            "set maxLength greater than estimated maxLength",
            array("number"),
            "self.all(x, x == 0.0)",
            Is(6291454),
            3 * 1024 * 2048,
            Is(25165826),
        ),
        case(
            "nested types with root rule with all supporting maxLength",
            all_max_nested,
            r#"self.all(x, x["y"].required == "z")"#,
            Is(7340027),
            10,
            Is(72),
        ),
        case(
            "nested types with root rule with one supporting maxLength",
            one_max_nested,
            r#"self.all(x, x["y"].required == "z")"#,
            Is(7340027),
            10,
            Is(7340027),
        ),
        case(
            "int-or-string array with all",
            array("int-or-string"),
            "self.all(x, true)",
            Is(4718591),
            10,
            Is(32),
        ),
        case(
            "index of array with int-or-strings",
            array("int-or-string"),
            "self[0] == 5",
            Is(3),
            10,
            Is(3),
        ),
        case(
            "index of array with booleans",
            array("boolean"),
            "self[0] == false",
            Is(2),
            25,
            Is(2),
        ),
        case(
            "index of array of objects",
            object_array,
            "self[0] == null",
            Is(2),
            422,
            Is(2),
        ),
        case(
            "index of array of array of numbers",
            array_of_arrays("number"),
            "self[0][0] == -1.0",
            Is(3),
            51,
            Is(3),
        ),
        case(
            "array of number maps with all",
            map_array("number"),
            "self.all(x, x.y == 25.2)",
            Is(6291452),
            12,
            Is(74),
        ),
        case(
            "index of array of number maps",
            map_array("number"),
            "self[0].x > 2.0",
            Is(4),
            3000,
            Is(4),
        ),
        case(
            "duration array with all",
            array("duration"),
            "self.all(x, true)",
            Is(2359295),
            5,
            Is(17),
        ),
        case(
            "index of duration array",
            array("duration"),
            "self[0].getHours() == 2",
            Is(4),
            525,
            Is(4),
        ),
        case(
            "date array with all",
            array("date"),
            "self.all(x, true)",
            Is(725936),
            15,
            Is(47),
        ),
        case(
            "index of date array",
            array("date"),
            "self[2].getDayOfMonth() == 13",
            Is(4),
            42,
            Is(4),
        ),
        case(
            "date-time array with all",
            array("date-time"),
            "self.all(x, true)",
            Is(428963),
            25,
            Is(77),
        ),
        case(
            "index of date-time array",
            array("date-time"),
            "self[2].getMinutes() == 45",
            Is(4),
            99,
            Is(4),
        ),
        case(
            "map of int-or-strings with all",
            map("int-or-string"),
            "self.all(x, true)",
            Is(1348169),
            15,
            Is(47),
        ),
        case(
            "map of objects with all",
            map_of(object_for_map()),
            "self.all(x, true)",
            Is(428963),
            20,
            Is(62),
        ),
        case(
            "map of number maps with all",
            map_of(json!({"type": "object", "additionalProperties": {"type": "number"}})),
            "self.all(x, true)",
            Is(1179647),
            10,
            Is(32),
        ),
        case(
            "map of number arrays with all",
            map_of(json!({"type": "array", "items": {"type": "number"}})),
            "self.all(x, true)",
            Is(1179647),
            25,
            Is(77),
        ),
        case(
            "map of durations with all",
            map("duration"),
            "self.all(x, true)",
            Is(1048577),
            5,
            Is(17),
        ),
        case(
            "map of dates with all",
            map("date"),
            "self.all(x, true)",
            Is(524288),
            10,
            Is(32),
        ),
        case(
            "map of date-times with all",
            map("date-time"),
            "self.all(x, true)",
            Is(349526),
            25,
            Is(77),
        ),
        case(
            "extended library regex find",
            string,
            "self.find('[0-9]+') == ''",
            Is(629147),
            10,
            Is(11),
        ),
        case(
            "extended library join",
            strings_joined,
            "self.join(' ') == 'aa bb'",
            Is(329853068905),
            10,
            Is(43),
        ),
        case(
            "extended library isSorted",
            strings_joined,
            "self.isSorted() == true",
            Is(329854432052),
            10,
            Is(52),
        ),
        case(
            "extended library replace",
            replace_object,
            "self.str.replace(self.before, self.after) == 'does not matter'",
            Is(629154),
            4,
            Is(12),
        ),
        case(
            "extended library split",
            split_object,
            "self.str.split(self.separator) == []",
            Is(629160),
            10,
            Is(22),
        ),
        case(
            "extended library lowerAscii",
            string,
            "self.lowerAscii() == 'lower!'",
            Is(314575),
            10,
            Is(6),
        ),
        case(
            "check cost of size call",
            map("integer"),
            "oldSelf.size() == self.size()",
            Is(5),
            10,
            Is(5),
        ),
        case(
            "check cost of timestamp comparison",
            map("date-time"),
            r#"self["a"] == self["b"]"#,
            Is(8),
            7,
            Is(8),
        ),
        case(
            "check cost of duration comparison",
            map("duration"),
            r#"self["c"] == self["d"]"#,
            Is(8),
            42,
            Is(8),
        ),
        case(
            "enums with maxLength equals to the longest possible value",
            enum_string,
            "self.contains('A')",
            Is(2),
            1000,
            Is(401),
        ),
        case(
            "IntOrString type with quantity rule",
            int_or_string,
            "isQuantity(self)",
            Is(314574),
            20,
            Is(9),
        ),
    ];
    let mut failures = Vec::new();
    for c in &cases {
        for (label, max, want) in [
            ("unbounded", None, c.unbounded),
            ("bounded", Some(c.max), c.bounded),
        ] {
            let got = cost(&(c.schema)(max), c.rule);
            let ok = match want {
                Want::Is(n) => got == n,
                Want::AtLeast(n) => got >= n,
                Want::Any => true,
            };
            if !ok {
                failures.push(format!("{} ({label}): want {want:?}, got {got}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Cases of cel-go's own `checker/cost_test.go` (v0.26.0, the version kube
/// 1.35 uses) over plain declared variables: no schema, so no sizes but
/// literals' and scalars'.
#[test]
fn costs_are_cel_gos() {
    use k8s_cel::check::Type;
    let env = Env::new()
        .with_variable("timestamp1", Type::Timestamp)
        .with_variable("timestamp2", Type::Timestamp)
        .with_variable("duration1", Type::Duration)
        .with_variable("duration2", Type::Duration);
    for (expr, min, max) in [
        // A converted value's size is unknown: as long as anything.
        (
            "string(timestamp1) == string(timestamp2)",
            5,
            1844674407370955268,
        ),
        ("timestamp1 == timestamp2", 3, 3),
        ("duration1 != duration2", 3, 3),
        ("string(1)", 1, 1),
        ("((5 != 6) == (1 == 2)) == ((3 <= 4) == (9 != 9))", 7, 7),
    ] {
        let (_, cost) = Program::compile(expr).unwrap().check_cost(&env).unwrap();
        assert_eq!((cost.min, cost.max), (min, max), "{expr}");
    }
}

/// Why a CRD's `messageExpression` formats rather than concatenates a
/// converted number: a conversion's result is unbounded (as above), so
/// `'was ' + string(x)` costs as much as a string of `u64::MAX` characters
/// (kube refuses it), while `format` costs a tenth per character of its
/// format string.
#[test]
fn concatenating_a_conversion_is_unbounded() {
    let schema = json!({"type": "object", "properties": {"max": {"type": "integer"}}});
    let env = Env::for_schema_rule(&schema, false, false).unwrap();
    let cost = |expr: &str| Program::compile(expr).unwrap().check_cost(&env).unwrap().1;
    assert!(cost("'was ' + string(self.max)").max > 1 << 60);
    assert!(cost("'was %d'.format([self.max])").max < 100);
}
