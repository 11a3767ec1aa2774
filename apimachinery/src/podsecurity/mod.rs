//! The Pod Security Standards as kube's `k8s.io/pod-security-admission`
//! encodes them: the namespace labels that choose a level and version for
//! each mode (`enforce`, `audit`, `warn`), the checks of the `baseline` and
//! `restricted` levels in every policy version, and the wording of their
//! results. Pure: a pod is read by reference as JSON (`metadata`, `spec`),
//! nothing is copied; the admission plugin (apiserver
//! `admission::plugins::podsecurity`) brings the namespace and the pods.

mod checks;
#[cfg(test)]
mod tests;

use crate::validation::invalid;
use crate::StatusCause;
use serde_json::{Map, Value};
use std::fmt;

pub use checks::{Check, VersionedCheck, CHECKS};

/// The label prefix, and the prefix of the audit annotations.
pub const PREFIX: &str = "pod-security.kubernetes.io/";
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// Audit annotation keys (under [`PREFIX`]).
pub const ANNOTATION_ENFORCE_POLICY: &str = "pod-security.kubernetes.io/enforce-policy";
pub const ANNOTATION_AUDIT_VIOLATIONS: &str = "pod-security.kubernetes.io/audit-violations";
pub const ANNOTATION_ERROR: &str = "pod-security.kubernetes.io/error";

/// A Pod Security Standards level, least strict first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// kube's `ParseLevel`: an unknown value is an error (and the caller
    /// decides what to fall back to).
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy version: `latest` or `v1.<minor>` (kube has only major 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    V1(u32),
}

impl Version {
    /// kube's `ParseVersion`: `latest`, or `v1.` and a minor without a
    /// leading zero.
    pub fn parse(s: &str) -> Option<Version> {
        if s == "latest" {
            return Some(Version::Latest);
        }
        let minor = s.strip_prefix("v1.")?;
        let well_formed = !minor.is_empty()
            && minor.bytes().all(|b| b.is_ascii_digit())
            && (minor == "0" || !minor.starts_with('0'));
        if !well_formed {
            return None;
        }
        minor.parse().ok().map(Version::V1)
    }

    /// The minor whose checks apply, for a server whose newest policy
    /// version is `v1.<max>`: `latest` and anything newer are `max`.
    pub fn effective_minor(self, max: u32) -> u32 {
        match self {
            Version::Latest => max,
            Version::V1(m) => m.min(max),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(m) => write!(f, "v1.{m}"),
        }
    }
}

/// A level at a version, shown as kube shows it: `restricted:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED_LATEST: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// A namespace's policy: what is enforced, audited and warned about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// kube's defaults without an admission configuration: every mode
    /// `privileged:latest`.
    fn default() -> Policy {
        Policy {
            enforce: LevelVersion::PRIVILEGED_LATEST,
            audit: LevelVersion::PRIVILEGED_LATEST,
            warn: LevelVersion::PRIVILEGED_LATEST,
        }
    }
}

impl Policy {
    /// All three modes privileged: nothing to check.
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }
}

const LEVEL_ERROR: &str = "must be one of privileged, baseline, restricted";
const VERSION_ERROR: &str = "must be \"latest\" or \"v1.x\"";

/// kube's `PolicyToEvaluate`: the policy a namespace's labels choose, with
/// `defaults` for modes they leave out, and a `field.Invalid` cause per bad
/// label. A policy is always returned: a bad enforce level means
/// `restricted` (fail closed), a bad audit or warn level `privileged`, a
/// bad version `latest`. When the enforce level is set and stricter than
/// the warn level, and no warn level is set, warn follows enforce (and its
/// version, unless a warn version is set).
pub fn policy_from_labels(
    labels: Option<&Map<String, Value>>,
    defaults: Policy,
) -> (Policy, Vec<StatusCause>) {
    let mut p = defaults;
    let mut errors = Vec::new();
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        return (p, errors);
    };
    let get = |k: &str| labels.get(k).map(|v| v.as_str().unwrap_or(""));
    // In kube's order: enforce, its version, audit, its version, warn, its
    // version (the errors come out in that order).
    let enforce_level = label_level(get(ENFORCE_LABEL), ENFORCE_LABEL, &mut errors);
    if let Some(l) = enforce_level {
        p.enforce.level = l.unwrap_or(Level::Restricted);
    }
    if let Some(v) = label_version(
        get(ENFORCE_VERSION_LABEL),
        ENFORCE_VERSION_LABEL,
        &mut errors,
    ) {
        p.enforce.version = v;
    }
    if let Some(l) = label_level(get(AUDIT_LABEL), AUDIT_LABEL, &mut errors) {
        p.audit.level = l.unwrap_or(Level::Privileged);
    }
    if let Some(v) = label_version(get(AUDIT_VERSION_LABEL), AUDIT_VERSION_LABEL, &mut errors) {
        p.audit.version = v;
    }
    let warn_level = label_level(get(WARN_LABEL), WARN_LABEL, &mut errors);
    if let Some(l) = warn_level {
        p.warn.level = l.unwrap_or(Level::Privileged);
    }
    let warn_version = get(WARN_VERSION_LABEL);
    if let Some(v) = label_version(warn_version, WARN_VERSION_LABEL, &mut errors) {
        p.warn.version = v;
    }
    let has_enforce_level = matches!(enforce_level, Some(Some(_)));
    if warn_level.is_none() && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if warn_version.is_none() {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errors)
}

/// A level label: absent (`None`), valid, or invalid (`Some(None)`, with
/// its error recorded).
fn label_level(
    value: Option<&str>,
    key: &str,
    errors: &mut Vec<StatusCause>,
) -> Option<Option<Level>> {
    let v = value?;
    let level = Level::parse(v);
    if level.is_none() {
        errors.push(invalid(&format!("metadata.labels[{key}]"), v, LEVEL_ERROR));
    }
    Some(level)
}

/// A version label: absent, or its version (`latest` when invalid, with
/// its error recorded).
fn label_version(value: Option<&str>, key: &str, errors: &mut Vec<StatusCause>) -> Option<Version> {
    let v = value?;
    Some(Version::parse(v).unwrap_or_else(|| {
        errors.push(invalid(
            &format!("metadata.labels[{key}]"),
            v,
            VERSION_ERROR,
        ));
        Version::Latest
    }))
}

/// What a pod fails of one check: `reason` always shows, `detail` (may be
/// empty) when one object is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: &'static str,
    pub detail: String,
}

impl Violation {
    fn new(reason: &'static str, detail: String) -> Option<Violation> {
        Some(Violation { reason, detail })
    }
}

/// The failed checks of one evaluation, in kube's order (baseline checks
/// by id, then restricted checks by id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub violations: Vec<Violation>,
}

impl Outcome {
    pub fn allowed(&self) -> bool {
        self.violations.is_empty()
    }

    /// kube's `ForbiddenReason`: the reasons, comma-separated.
    pub fn reasons(&self) -> String {
        let reasons: Vec<&str> = self.violations.iter().map(|v| v.reason).collect();
        reasons.join(", ")
    }

    /// kube's `ForbiddenDetail`: each reason with its detail in
    /// parentheses.
    pub fn details(&self) -> String {
        let mut out = String::new();
        for (i, v) in self.violations.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(v.reason);
            if !v.detail.is_empty() {
                out.push_str(" (");
                out.push_str(&v.detail);
                out.push(')');
            }
        }
        out
    }
}

/// The newest policy version a v1.35 kube-apiserver knows: `latest`, and
/// any newer version asked for, mean this one.
pub const MAX_MINOR: u32 = 35;

/// A pod (or a pod template) as the checks see it.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    pub metadata: &'a Value,
    pub spec: &'a Value,
}

impl<'a> PodView<'a> {
    /// A Pod object.
    pub fn of_pod(pod: &'a Value) -> PodView<'a> {
        PodView::of_template(pod)
    }

    /// A pod template (`{metadata, spec}`).
    pub fn of_template(template: &'a Value) -> PodView<'a> {
        PodView {
            metadata: template.get("metadata").unwrap_or(&Value::Null),
            spec: template.get("spec").unwrap_or(&Value::Null),
        }
    }
}

/// The check functions that apply at `level` and policy minor `minor`, in
/// kube's order: for restricted, the baseline checks a restricted check
/// overrides at that version are left out.
pub fn checks_for(level: Level, minor: u32) -> Vec<checks::CheckFn> {
    let at = |c: &'static Check| c.versions.iter().rev().find(|v| v.min_minor <= minor);
    let mut out = Vec::new();
    match level {
        Level::Privileged => {}
        Level::Baseline => {
            for c in CHECKS.iter().filter(|c| c.level == Level::Baseline) {
                if let Some(v) = at(c) {
                    out.push(v.check);
                }
            }
        }
        Level::Restricted => {
            let restricted: Vec<&VersionedCheck> = CHECKS
                .iter()
                .filter(|c| c.level == Level::Restricted)
                .filter_map(at)
                .collect();
            let overridden = |id: &str| restricted.iter().any(|v| v.overrides.contains(&id));
            for c in CHECKS.iter().filter(|c| c.level == Level::Baseline) {
                if overridden(c.id) {
                    continue;
                }
                if let Some(v) = at(c) {
                    out.push(v.check);
                }
            }
            out.extend(restricted.iter().map(|v| v.check));
        }
    }
    out
}

/// Evaluates a pod against a level and version (kube's `EvaluatePod` and
/// `AggregateCheckResults`), on a server whose newest policy version is
/// `v1.<max_minor>`.
pub fn evaluate(lv: LevelVersion, max_minor: u32, pod: PodView<'_>) -> Outcome {
    if lv.level == Level::Privileged {
        return Outcome::default();
    }
    let minor = lv.version.effective_minor(max_minor);
    let violations = checks_for(lv.level, minor)
        .into_iter()
        .filter_map(|check| check(pod))
        .collect();
    Outcome { violations }
}
