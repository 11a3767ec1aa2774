//! Jobs (batch/v1): `SetDefaults_Job`, the job strategy's generated
//! selector and labels, `ValidateJob` and kube's job printer.
//!
//! Not implemented: pod failure policy rules and success policy validation,
//! `backoffLimitPerIndex`/`maxFailedIndexes` rules, the Indexed
//! parallelism cap, `managedBy`, status validation, the update rules
//! beyond the registry's generic immutable fields (`selector`, `template`,
//! `completions`; kube lets suspended jobs change scheduling directives and
//! elastic indexed jobs change completions). The job-name label follows
//! the first generated name; a retried `generateName` collision keeps it.

use serde_json::{Map, Value};

use crate::kinds::common::{default_field, each_mut, existing_mut, object_mut};
use crate::kinds::core::podspec_defaults::default_str;
use crate::kinds::core::podspec_validation::validate_pod_template;
use crate::kinds::core::workload::{self, default_template, selector_matches, validate_selector};
use crate::kinds::print::{Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{go_string_map, invalid_rendered, nonnegative, not_supported, required};

const LEGACY_JOB_NAME: &str = "job-name";
const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: Some(prepare_create),
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(validate),
    validate_status: None,
    columns: &[
        NAME,
        Column {
            name: "Status",
            type_: "string",
            format: "",
            description: "Status of the job.",
            priority: 0,
            cell: status_cell,
        },
        Column {
            name: "Completions",
            type_: "string",
            format: "",
            description: "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
            priority: 0,
            cell: completions_cell,
        },
        Column {
            name: "Duration",
            type_: "string",
            format: "",
            description: "Time required to complete the job.",
            priority: 0,
            cell: duration_cell,
        },
        AGE,
        workload::CONTAINERS,
        workload::IMAGES,
        Column {
            name: "Selector",
            type_: "string",
            format: "",
            description: SELECTOR_DESCRIPTION,
            priority: 1,
            cell: workload::spec_selector,
        },
    ],
};

/// `JobSpec.selector`'s doc, the Selector column of jobs and cron jobs.
pub const SELECTOR_DESCRIPTION: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

/// `SetDefaults_Job` on a job's spec (also what a CronJob's job template
/// gets of it: its pod template's defaults).
fn default_job_spec(spec: &mut Map<String, Value>) {
    let unset = |s: &Map<String, Value>, k: &str| s.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), Value::from(1));
    }
    default_field(spec, "parallelism", Value::from(1));
    let per_index = !unset(spec, "backoffLimitPerIndex");
    default_field(
        spec,
        "backoffLimit",
        Value::from(if per_index { i64::from(i32::MAX) } else { 6 }),
    );
    default_str(spec, "completionMode", "NonIndexed");
    default_field(spec, "suspend", Value::Bool(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default_str(spec, "podReplacementPolicy", replacement);
    default_field(spec, "manualSelector", Value::Bool(false));
    if let Some(pfp) = existing_mut(spec, "podFailurePolicy") {
        for rule in each_mut(pfp, "rules") {
            for pattern in each_mut(rule, "onPodConditions") {
                default_str(pattern, "status", "True");
            }
        }
    }
    default_template(spec, "template");
}

fn defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(spec) = object_mut(o, "spec") {
        default_job_spec(spec);
    }
    labels_from_template(o);
}

/// The job's labels default to its template's when it has none.
fn labels_from_template(o: &mut Map<String, Value>) {
    let has_labels = o
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .is_some_and(|l| !l.is_empty());
    if has_labels {
        return;
    }
    let Some(labels) = o
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned()
    else {
        return;
    };
    if let Some(meta) = object_mut(o, "metadata") {
        meta.insert("labels".into(), labels);
    }
}

/// The strategy's `PrepareForCreate`: unless the client manages the
/// selector, the template gets the job-name and controller-uid labels and
/// the selector selects the uid. kube then re-applies the label default
/// when it reads the job back; it is applied here so that the stored job
/// already reads that way.
fn prepare_create(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let manual = o
        .get("spec")
        .and_then(|s| s.get("manualSelector"))
        .and_then(Value::as_bool)
        == Some(true);
    if manual {
        return;
    }
    let meta_str = |k: &str| {
        o.get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (name, uid) = (meta_str("name"), meta_str("uid"));
    let Some(spec) = object_mut(o, "spec") else {
        return;
    };
    if let Some(labels) = object_mut(spec, "template")
        .and_then(|t| object_mut(t, "metadata"))
        .and_then(|m| object_mut(m, "labels"))
    {
        for (key, value) in [
            (LEGACY_JOB_NAME, &name),
            (JOB_NAME, &name),
            (LEGACY_CONTROLLER_UID, &uid),
            (CONTROLLER_UID, &uid),
        ] {
            if !labels.contains_key(key) {
                labels.insert(key.into(), Value::String(value.clone()));
            }
        }
    }
    if let Some(ml) = object_mut(spec, "selector").and_then(|s| object_mut(s, "matchLabels")) {
        if !ml.contains_key(CONTROLLER_UID) {
            ml.insert(CONTROLLER_UID.into(), Value::String(uid));
        }
    }
    labels_from_template(o);
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    if !manual {
        // Jobs created before the prefixed labels existed keep passing.
        let prefixed = old.is_none_or(|o| {
            let l = o.pointer("/spec/template/metadata/labels");
            l.and_then(|l| l.get(JOB_NAME)).is_some()
                && l.and_then(|l| l.get(CONTROLLER_UID)).is_some()
        });
        validate_generated_selector(obj, prefixed, &mut out);
    }
    validate_job_spec(spec, "spec", &mut out);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => out.push(required("spec.selector", "")),
        Some(sel) => {
            if validate_selector(sel, "spec.selector", &mut out) {
                let labels = spec.pointer("/template/metadata/labels");
                if !selector_matches(sel, labels) {
                    out.push(invalid_rendered(
                        "spec.template.metadata.labels",
                        &go_string_map(labels),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    out
}

fn validate_generated_selector(obj: &Value, prefixed: bool, out: &mut Vec<StatusCause>) {
    let str_at = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (name, uid) = (str_at("/metadata/name"), str_at("/metadata/uid"));
    let labels = obj.pointer("/spec/template/metadata/labels");
    let Some(sel) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return; // the spec check reports the missing selector
    };
    let mut expect = vec![(LEGACY_CONTROLLER_UID, uid), (LEGACY_JOB_NAME, name)];
    if prefixed {
        expect.push((CONTROLLER_UID, uid));
        expect.push((JOB_NAME, name));
    }
    for (key, want) in expect {
        let field = format!("spec.template.metadata.labels[{key}]");
        match labels.and_then(|l| l.get(key)).and_then(Value::as_str) {
            None => out.push(required(&field, want)),
            Some(v) if v != want => out.push(invalid_rendered(
                &field,
                &go_string_map(labels),
                &format!("must be '{want}'"),
            )),
            _ => {}
        }
    }
    let key = if prefixed {
        CONTROLLER_UID
    } else {
        LEGACY_CONTROLLER_UID
    };
    let expected = serde_json::json!({ key: uid });
    if !selector_matches(sel, Some(&expected)) {
        out.push(invalid_rendered(
            "spec.selector",
            &workload::go_label_selector(sel),
            "`selector` not auto-generated",
        ));
    }
}

/// kube's `validateJobSpec` (without the selector, which a job template
/// may not set): counts, completion mode, the pod template and its
/// restart policy. `path` is `spec` or `spec.jobTemplate.spec`.
pub fn validate_job_spec(spec: &Value, path: &str, out: &mut Vec<StatusCause>) {
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        nonnegative(&format!("{path}.{f}"), spec.get(f), out);
    }
    if let Some(mode) = spec.get("completionMode").and_then(Value::as_str) {
        match mode {
            "NonIndexed" => {}
            "Indexed" => {
                if spec.get("completions").is_none_or(Value::is_null) {
                    out.push(required(
                        &format!("{path}.completions"),
                        "when completion mode is Indexed",
                    ));
                }
            }
            other => out.push(not_supported(
                &format!("{path}.completionMode"),
                other,
                &["NonIndexed", "Indexed"],
            )),
        }
    }
    let failure_policy = spec.get("podFailurePolicy").is_some_and(|p| !p.is_null());
    if let Some(prp) = spec.get("podReplacementPolicy").and_then(Value::as_str) {
        let field = format!("{path}.podReplacementPolicy");
        if failure_policy && prp != "Failed" {
            out.push(not_supported(&field, prp, &["Failed"]));
        } else if prp != "TerminatingOrFailed" && prp != "Failed" {
            out.push(not_supported(
                &field,
                prp,
                &["TerminatingOrFailed", "Failed"],
            ));
        }
    }
    validate_pod_template(
        spec.get("template").unwrap_or(&Value::Null),
        &format!("{path}.template"),
        out,
    );
    let rp_path = format!("{path}.template.spec.restartPolicy");
    match spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "Always" | "" => out.push(required(&rp_path, "valid values: \"OnFailure\", \"Never\"")),
        "Never" => {}
        "OnFailure" if failure_policy => out.push(crate::validation::invalid(
            &rp_path,
            "OnFailure",
            "only \"Never\" is supported when podFailurePolicy is specified",
        )),
        "OnFailure" => {}
        other => out.push(not_supported(&rp_path, other, &["OnFailure", "Never"])),
    }
}

/// Whether a job condition of `ty` is `True`.
fn has_condition(job: &Value, ty: &str) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(ty)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn status_cell(job: &Value, _: &PrintContext) -> Value {
    let deleting = job
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|d| !d.is_null());
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    Value::String(status.into())
}

fn completions_cell(job: &Value, _: &PrintContext) -> Value {
    let succeeded = crate::kinds::print::int_at(job, "/status/succeeded");
    let s = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match job.pointer("/spec/parallelism").and_then(Value::as_i64) {
            Some(p) if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    Value::String(s)
}

fn duration_cell(job: &Value, ctx: &PrintContext) -> Value {
    let time = |p: &str| {
        job.pointer(p)
            .and_then(Value::as_str)
            .and_then(crate::kinds::print::parse_time)
    };
    let s = match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => crate::duration::human(ctx.now - start),
        (Some(start), Some(end)) => crate::duration::human(end - start),
    };
    Value::String(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::cause_to_string;
    use serde_json::json;

    fn job() -> Value {
        json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {"spec": {
            "containers": [{"name": "pi", "image": "perl"}], "restartPolicy": "Never"}}}})
    }

    fn created() -> Value {
        let mut j = job();
        defaults(&mut j);
        prepare_create(&mut j);
        j
    }

    #[test]
    fn defaults_and_generated_selector() {
        let j = created();
        let spec = &j["spec"];
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["parallelism"], 1);
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["manualSelector"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        let labels = json!({"job-name": "pi", "batch.kubernetes.io/job-name": "pi",
            "controller-uid": "u1", "batch.kubernetes.io/controller-uid": "u1"});
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}})
        );
        assert_eq!(j["metadata"]["labels"], labels);
        assert!(validate(&j, None).is_empty(), "{:?}", validate(&j, None));
        let mut again = j.clone();
        defaults(&mut again);
        assert_eq!(again, j);
        // Parallel jobs keep completions unset.
        let mut p = job();
        p["spec"]["parallelism"] = json!(3);
        defaults(&mut p);
        assert!(p["spec"].get("completions").is_none());
    }

    #[test]
    fn messages() {
        let mut j = job();
        j["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("restartPolicy");
        j["spec"]["backoffLimit"] = json!(-1);
        defaults(&mut j);
        prepare_create(&mut j);
        let errs: Vec<String> = validate(&j, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
        ]);
        let mut pfp = job();
        pfp["spec"]["podFailurePolicy"] = json!({"rules": []});
        pfp["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        pfp["spec"]["podReplacementPolicy"] = json!("TerminatingOrFailed");
        defaults(&mut pfp);
        prepare_create(&mut pfp);
        let errs: Vec<String> = validate(&pfp, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
            "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
        ]);
        let mut manual = job();
        manual["spec"]["manualSelector"] = json!(true);
        defaults(&mut manual);
        prepare_create(&mut manual);
        let errs: Vec<String> = validate(&manual, None)
            .iter()
            .map(cause_to_string)
            .collect();
        assert_eq!(errs, vec!["spec.selector: Required value"]);
    }

    #[test]
    fn columns() {
        let mut j = created();
        j["status"] = json!({"succeeded": 1, "startTime": "2024-01-01T00:00:00Z",
            "completionTime": "2024-01-01T00:00:30Z",
            "conditions": [{"type": "Complete", "status": "True"}]});
        let ctx = PrintContext { now: 1_800_000_000 };
        let cells: Vec<Value> = RULES.columns.iter().map(|c| (c.cell)(&j, &ctx)).collect();
        assert_eq!(cells[1..4], [json!("Complete"), json!("1/1"), json!("30s")]);
        assert_eq!(
            cells[5..],
            [
                json!("pi"),
                json!("perl"),
                json!("batch.kubernetes.io/controller-uid=u1")
            ]
        );
        let running = json!({"spec": {"parallelism": 2}});
        assert_eq!(status_cell(&running, &ctx), json!("Running"));
        assert_eq!(completions_cell(&running, &ctx), json!("0/1 of 2"));
        assert_eq!(duration_cell(&running, &ctx), json!(""));
    }
}
