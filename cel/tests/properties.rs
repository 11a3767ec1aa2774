//! Properties: no input makes compiling or evaluating panic, and JSON
//! survives the trip through CEL.

use k8s_cel::{cel_to_json, json_to_cel, Bindings, Program};
use proptest::prelude::*;
use serde_json::Value as Json;

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Json::from),
        ".{0,12}".prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::btree_map("[a-z]{0,6}", inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Source text made of CEL's tokens, so that much of it parses.
fn cel_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("self".to_owned()),
        Just("x".to_owned()),
        Just(".".to_owned()),
        Just("?.".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just(" + ".to_owned()),
        Just(" - ".to_owned()),
        Just(" * ".to_owned()),
        Just(" / ".to_owned()),
        Just(" % ".to_owned()),
        Just(" == ".to_owned()),
        Just(" < ".to_owned()),
        Just(" && ".to_owned()),
        Just(" || ".to_owned()),
        Just(" ? ".to_owned()),
        Just("!".to_owned()),
        Just(" in ".to_owned()),
        Just("size".to_owned()),
        Just("all".to_owned()),
        Just("exists".to_owned()),
        Just("map".to_owned()),
        Just("filter".to_owned()),
        Just("has".to_owned()),
        Just("quantity('1Ki')".to_owned()),
        Just("ip('::1')".to_owned()),
        Just("cidr('10.0.0.0/8')".to_owned()),
        Just("url('https://a/b?c=d')".to_owned()),
        Just("semver('1.2.3')".to_owned()),
        Just("format.dns1123Label()".to_owned()),
        Just("sets.contains".to_owned()),
        Just("sum".to_owned()),
        Just("min".to_owned()),
        Just("split".to_owned()),
        Just("substring".to_owned()),
        Just("findAll".to_owned()),
        Just("validate".to_owned()),
        Just("int".to_owned()),
        Just("string".to_owned()),
        Just("duration('1s')".to_owned()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<u8>().prop_map(|i| format!("{i}u")),
        Just("1.5".to_owned()),
        "'[a-z0-9 .:/-]{0,6}'",
        Just("[1, 2, 3]".to_owned()),
        Just("{'a': 1}".to_owned()),
    ];
    prop::collection::vec(token, 0..24).prop_map(|t| t.concat())
}

/// Rules calling every library parser on `s`, each true whatever `s` is.
fn library_checks() -> &'static [Program] {
    static CHECKS: std::sync::OnceLock<Vec<Program>> = std::sync::OnceLock::new();
    CHECKS.get_or_init(|| {
        [
            "isURL(s) == isURL(s)",
            "isQuantity(s) ? quantity(s) == quantity(s) : true",
            "isIP(s) ? ip(s) == ip(s) : true",
            "isCIDR(s) ? cidr(s).masked() == cidr(s).masked() : true",
            "isSemver(s, true) ? semver(s, true) == semver(s, true) : true",
            "isURL(s) ? url(s).getQuery() == url(s).getQuery() : true",
            "[format.dns1123Label(), format.qualifiedName(), format.uri(), format.byte(), \
              format.date(), format.datetime(), format.labelValue()].all(f, f.validate(s) == f.validate(s))",
            "s.find('[a-z]+') == s.find('[a-z]+')",
        ]
        .iter()
        .map(|e| Program::compile(e).unwrap())
        .collect()
    })
}

fn vars() -> Bindings {
    Bindings::new()
        .with_json(
            "self",
            &serde_json::json!({"a": [1, 2], "b": "text", "c": {"d": 1.5}}),
        )
        .with_json("x", &serde_json::json!([1, "two", null]))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn compiling_any_string_never_panics(source in ".{0,200}") {
        let _ = Program::compile(&source);
    }

    #[test]
    fn compiling_and_evaluating_token_soup_never_panics(source in cel_like()) {
        if let Ok(program) = Program::compile(&source) {
            let vars = vars();
            let _ = program.evaluate_with_limit(&vars, 100_000);
            let _ = program.eval_json(&vars);
            let schema = serde_json::json!({"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "string"}},
                "m": {"type": "object", "additionalProperties": {"type": "integer"}}}});
            if let Some(env) = k8s_cel::check::Env::for_schema_rule(&schema, true, false) {
                let _ = program.check_cost(&env);
            }
        }
    }

    #[test]
    fn library_parsers_take_any_string(s in ".{0,40}") {
        let vars = Bindings::new().with_json("s", &Json::String(s));
        for program in library_checks() {
            prop_assert_eq!(program.eval_bool(&vars), Ok(true), "{}", program.source());
        }
    }

    #[test]
    fn computed_quantities_print_in_a_form_that_parses_back(m in -1_000_000_000i64..1_000_000_000, unit in 0usize..8) {
        let suffix = ["", "m", "u", "n", "k", "Mi", "e3", "E"][unit];
        let vars = Bindings::new().with_json("s", &Json::String(format!("{m}{suffix}")));
        let sum = Program::compile("quantity(s).add(quantity('1m'))").unwrap();
        let json = sum.eval_json(&vars).unwrap();
        let round = Bindings::new().with_json("s", &Json::String(format!("{m}{suffix}"))).with_json("t", &json);
        let same = Program::compile("quantity(t) == quantity(s).add(quantity('1m'))").unwrap();
        prop_assert_eq!(same.eval_bool(&round), Ok(true), "{}", json);
    }

    #[test]
    fn json_round_trips_through_cel(doc in json()) {
        prop_assert_eq!(cel_to_json(&json_to_cel(&doc)).unwrap(), sorted(&doc));
    }

    #[test]
    fn json_round_trips_through_evaluation(doc in json()) {
        let program = Program::compile("self").unwrap();
        let vars = Bindings::new().with_json("self", &doc);
        prop_assert_eq!(program.eval_json(&vars).unwrap(), sorted(&doc));
    }
}

/// `doc` with object keys sorted, as `cel_to_json` writes them.
fn sorted(doc: &Json) -> Json {
    match doc {
        Json::Array(items) => Json::Array(items.iter().map(sorted).collect()),
        Json::Object(fields) => {
            let mut entries: Vec<_> = fields.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Json::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}
