//! CronJobs (batch/v1): `SetDefaults_CronJob` (and the pod template
//! defaults of its job template), `ValidateCronJobCreate`/`Update` and
//! kube's printer.
//!
//! Not implemented: checking `timeZone` against the time zone database
//! (only empty and `Local` are refused), the schedule's `TZ=` location,
//! the job template's metadata and pod failure policy defaults.

use serde_json::Value;

use super::cron;
use super::job::{validate_job_spec, SELECTOR_DESCRIPTION};
use crate::kinds::common::{default_field, existing_mut, object_mut};
use crate::kinds::core::podspec_defaults::default_str;
use crate::kinds::core::workload::{self, container_images, container_names, default_template};
use crate::kinds::print::{since, Column, PrintContext, AGE, NAME};
use crate::kinds::KindRules;
use crate::status::StatusCause;
use crate::validation::{
    invalid, invalid_json, invalid_rendered, nonnegative, not_supported, not_supported_rendered,
    required,
};

const POD_SPEC: &str = "/spec/jobTemplate/spec/template/spec";

pub static RULES: KindRules = KindRules {
    defaults: Some(defaults),
    prepare_create: None,
    prepare_create_as: None,
    prepare_update: None,
    validate: Some(validate),
    validate_status: None,
    columns: &[
        NAME,
        Column {
            name: "Schedule",
            type_: "string",
            format: "",
            description: "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            priority: 0,
            cell: |o, _| Value::String(crate::kinds::print::str_at(o, "/spec/schedule", "").into()),
        },
        Column {
            name: "Timezone",
            type_: "string",
            format: "",
            description: "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
            priority: 0,
            cell: |o, _| {
                Value::String(crate::kinds::print::str_at(o, "/spec/timeZone", "<none>").into())
            },
        },
        Column {
            name: "Suspend",
            type_: "boolean",
            format: "",
            description: "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
            priority: 0,
            cell: suspend_cell,
        },
        Column {
            name: "Active",
            type_: "integer",
            format: "",
            description: "A list of pointers to currently running jobs.",
            priority: 0,
            cell: |o, _| Value::from(crate::kinds::print::count_at(o, "/status/active")),
        },
        Column {
            name: "Last Schedule",
            type_: "string",
            format: "",
            description: "Information when was the last time the job was successfully scheduled.",
            priority: 0,
            cell: last_schedule_cell,
        },
        AGE,
        Column {
            name: "Containers",
            type_: "string",
            format: "",
            description: workload::CONTAINERS_DESCRIPTION,
            priority: 1,
            cell: |o, _| container_names(o, POD_SPEC),
        },
        Column {
            name: "Images",
            type_: "string",
            format: "",
            description: workload::IMAGES_DESCRIPTION,
            priority: 1,
            cell: |o, _| container_images(o, POD_SPEC),
        },
        Column {
            name: "Selector",
            type_: "string",
            format: "",
            description: SELECTOR_DESCRIPTION,
            priority: 1,
            cell: |o, _| workload::selector_cell(o, "/spec/jobTemplate/spec/selector"),
        },
    ],
};

fn suspend_cell(obj: &Value, _: &PrintContext) -> Value {
    let s = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    Value::String(s.into())
}

fn last_schedule_cell(obj: &Value, ctx: &PrintContext) -> Value {
    match obj
        .pointer("/status/lastScheduleTime")
        .filter(|t| !t.is_null())
    {
        None => Value::String("<none>".into()),
        Some(t) => Value::String(since(Some(t), ctx)),
    }
}

fn defaults(obj: &mut Value) {
    let Some(spec) = obj.as_object_mut().and_then(|o| object_mut(o, "spec")) else {
        return;
    };
    default_str(spec, "concurrencyPolicy", "Allow");
    default_field(spec, "suspend", Value::Bool(false));
    default_field(spec, "successfulJobsHistoryLimit", Value::from(3));
    default_field(spec, "failedJobsHistoryLimit", Value::from(1));
    if let Some(js) = existing_mut(spec, "jobTemplate").and_then(|t| existing_mut(t, "spec")) {
        default_template(js, "template");
    }
}

fn validate(obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut out = Vec::new();
    if old.is_none() {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if name.len() > 52 {
            out.push(invalid(
                "metadata.name",
                name,
                "must be no more than 52 characters",
            ));
        }
    }
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let schedule = spec.get("schedule").and_then(Value::as_str).unwrap_or("");
    if schedule.is_empty() {
        out.push(required("spec.schedule", ""));
    } else {
        if let Some(e) = cron::parse_error(schedule) {
            out.push(invalid("spec.schedule", schedule, &e));
        }
        if schedule.contains("TZ") {
            out.push(invalid(
                "spec.schedule",
                schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    nonnegative(
        "spec.startingDeadlineSeconds",
        spec.get("startingDeadlineSeconds"),
        &mut out,
    );
    match spec
        .get("concurrencyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "Allow" | "Forbid" | "Replace" => {}
        "" => out.push(required("spec.concurrencyPolicy", "")),
        other => out.push(not_supported(
            "spec.concurrencyPolicy",
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    let js = spec.pointer("/jobTemplate/spec").unwrap_or(&Value::Null);
    validate_job_spec(js, "spec.jobTemplate.spec", &mut out);
    if let Some(sel) = js.get("selector").filter(|s| !s.is_null()) {
        out.push(invalid_rendered(
            "spec.jobTemplate.spec.selector",
            &workload::go_label_selector(sel),
            "`selector` will be auto-generated",
        ));
    }
    if js.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        out.push(not_supported_rendered(
            "spec.jobTemplate.spec.manualSelector",
            "true",
            &["nil", "false"],
        ));
    }
    for f in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        nonnegative(&format!("spec.{f}"), spec.get(f), &mut out);
    }
    if let Some(tz) = spec.get("timeZone").and_then(Value::as_str) {
        if tz.is_empty() {
            out.push(invalid_json(
                "spec.timeZone",
                &Value::String(String::new()),
                "timeZone must be nil or non-empty string",
            ));
        } else if tz.eq_ignore_ascii_case("Local") {
            out.push(invalid(
                "spec.timeZone",
                tz,
                "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::cause_to_string;
    use serde_json::json;

    fn cronjob() -> Value {
        json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/1 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "hello", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
    }

    #[test]
    fn defaults_keep_client_values() {
        let mut c = cronjob();
        c["spec"]["suspend"] = json!(true);
        defaults(&mut c);
        let spec = &c["spec"];
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], true);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);
        let ps = &spec["jobTemplate"]["spec"]["template"]["spec"];
        assert_eq!(ps["restartPolicy"], "OnFailure");
        assert_eq!(ps["dnsPolicy"], "ClusterFirst");
        // Job defaults do not reach the template.
        assert!(spec["jobTemplate"]["spec"].get("backoffLimit").is_none());
        let mut again = c.clone();
        defaults(&mut again);
        assert_eq!(again, c);
        assert!(validate(&c, None).is_empty(), "{:?}", validate(&c, None));
    }

    #[test]
    fn messages() {
        let mut c = cronjob();
        c["metadata"]["name"] = json!("x".repeat(53));
        c["spec"]["schedule"] = json!("61 * * * *");
        c["spec"]["concurrencyPolicy"] = json!("Sometimes");
        c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        defaults(&mut c);
        let errs: Vec<String> = validate(&c, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec![
            format!("metadata.name: Invalid value: \"{}\": must be no more than 52 characters", "x".repeat(53)),
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61".into(),
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"".into(),
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"".into(),
        ]);
        let mut tz = cronjob();
        tz["spec"]["schedule"] = json!("CRON_TZ=UTC 0 * * * *");
        defaults(&mut tz);
        let errs: Vec<String> = validate(&tz, None).iter().map(cause_to_string).collect();
        assert_eq!(errs, vec!["spec.schedule: Invalid value: \"CRON_TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"]);
    }

    #[test]
    fn columns() {
        let mut c = cronjob();
        defaults(&mut c);
        c["status"] =
            json!({"active": [{"name": "j"}], "lastScheduleTime": "2024-01-01T00:00:00Z"});
        let t0 = crate::kinds::print::parse_time("2024-01-01T00:00:00Z").unwrap();
        let ctx = PrintContext { now: t0 + 60 };
        let cells: Vec<Value> = RULES
            .columns
            .iter()
            .map(|col| (col.cell)(&c, &ctx))
            .collect();
        assert_eq!(
            cells[1..6],
            [
                json!("*/1 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("60s")
            ]
        );
        assert_eq!(cells[7..], [json!("hello"), json!("busybox"), json!("")]);
    }
}
