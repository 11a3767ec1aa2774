//! Type checking of ValidatingAdmissionPolicies, reported in
//! `status.typeChecking` as kube's policy status controller reports it
//! (`pkg/admission/plugin/policy/validating/typechecking.go`).
//!
//! For each kind the policy's `matchConstraints` name exactly (no
//! wildcards, at most ten, sorted by group, version and kind), every
//! `spec.validations[i].expression` and `messageExpression` is run through
//! the CEL type checker with `object` and `oldObject` typed from the
//! kind's schema, `params` from the `paramKind`'s schema, `variables`
//! with the types of the policy's variables, and `request`,
//! `namespaceObject` and `authorizer` of kube's types (see [`env`] for
//! what kube 1.35 leaves out). kube checks nothing else (not the variables
//! themselves, the audit annotations or the match conditions). Each
//! warning is, per kind with errors, `<group>/<version>, Kind=<kind>: `,
//! cel-go's issues and a newline, the kinds joined by newlines.
//!
//! A leader-elected controller writes `status.observedGeneration` and
//! `status.typeChecking` whenever a policy's generation moves.

use apimachinery::read::Freshness;
use apimachinery::schema::{Shape, TypeRef};
use futures_util::FutureExt;
use k8s_cel::check::{Env, Object, Type};
use k8s_cel::Program;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::backend::Backend;
use crate::controllers::{Context, Controller, Next, Source};
use crate::registry::{Registry, Row};

/// kube's `maxTypesToCheck`.
const MAX_TYPES: usize = 10;

/// The kinds a policy's `matchConstraints` name exactly, by group-version,
/// with their rows (whose schemas the expressions are checked against), in
/// kube's order: group, version, kind.
fn kinds(policy: &Value, registry: &Registry) -> Vec<(String, Row)> {
    let mut out: Vec<(String, Row)> = Vec::new();
    let rules = policy
        .pointer("/spec/matchConstraints/resourceRules")
        .and_then(Value::as_array);
    for rule in rules.into_iter().flatten() {
        let list = |k: &str| -> Vec<&str> {
            let mut l: Vec<&str> = rule
                .get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            l.sort_unstable();
            l
        };
        let (groups, versions, resources) =
            (list("apiGroups"), list("apiVersions"), list("resources"));
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    if [*g, *v, *r].contains(&"*") || r.contains('/') {
                        continue;
                    }
                    let Some(res) = registry.lookup(g, v, r) else {
                        continue;
                    };
                    if res.schema().is_none() {
                        continue;
                    }
                    let gv = format!("{g}/{v}");
                    if !out.iter().any(|(o, k)| *o == gv && k.kind == res.kind) {
                        out.push((gv, res));
                    }
                    if out.len() == MAX_TYPES {
                        return sorted(out);
                    }
                }
            }
        }
    }
    sorted(out)
}

fn sorted(mut kinds: Vec<(String, Row)>) -> Vec<(String, Row)> {
    kinds.sort_by(|(_, a), (_, b)| {
        (&*a.group, &*a.version, &*a.kind).cmp(&(&*b.group, &*b.version, &*b.kind))
    });
    kinds
}

/// The structural JSON schema of `t`, its `$ref`s inlined, for the
/// checker (which types it as kube's `SchemaDeclType` does). A definition
/// met again inside itself, and anything the checker could not know the
/// shape of, becomes `dyn`.
fn structural(t: TypeRef<'_>, stack: &mut Vec<String>) -> Value {
    let any = || json!({"x-kubernetes-int-or-string": true});
    let name = t.name().map(str::to_owned);
    if let Some(n) = &name {
        if stack.contains(n) {
            return any();
        }
        stack.push(n.clone());
    }
    let out = match t.shape() {
        Shape::Object => {
            let mut props = Map::new();
            for f in t.fields() {
                props.insert(f.name.to_owned(), structural(f.ty, stack));
            }
            json!({"type": "object", "properties": props})
        }
        Shape::Map => match t.values() {
            Some(v) => json!({"type": "object", "additionalProperties": structural(v, stack)}),
            None => any(),
        },
        Shape::Array => match t.items() {
            Some(i) => json!({"type": "array", "items": structural(i, stack)}),
            None => any(),
        },
        Shape::String => match t.format() {
            Some(f) => json!({"type": "string", "format": f}),
            None => json!({"type": "string"}),
        },
        Shape::Integer => json!({"type": "integer"}),
        Shape::Number => json!({"type": "number"}),
        Shape::Boolean => json!({"type": "boolean"}),
        Shape::IntOrString | Shape::Quantity | Shape::Untyped => any(),
    };
    if name.is_some() {
        stack.pop();
    }
    out
}

/// The CEL type of a kind's objects (kube's `SchemaDeclType(s, true)`).
fn object_type(t: TypeRef<'_>, name: &str) -> Type {
    k8s_cel::check::schema_type_of(&structural(t, &mut Vec::new()), true, name).unwrap_or(Type::Dyn)
}

/// The `paramKind`'s type, if it names a kind with a schema.
fn params_type(policy: &Value, registry: &Registry) -> Option<Type> {
    let pk = policy.pointer("/spec/paramKind")?;
    let api_version = pk.get("apiVersion")?.as_str()?;
    let kind = pk.get("kind")?.as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let row = registry.by_kind(group, version, kind)?;
    Some(object_type(row.schema()?, kind))
}

/// The environment of one matched kind, as kube 1.35's type checker
/// builds it (`buildEnvSet`): `object` and `oldObject` of the kind's type,
/// `request` and `namespaceObject` of kube's hand-made types, `params`
/// only when the `paramKind`'s schema resolved (kube 1.35 leaves it
/// undeclared otherwise), `authorizer` (but not
/// `authorizer.requestResource`, which that environment does not
/// declare), and `variables` typed by compiling the policy's variables in
/// order (a variable that does not compile is `dyn`; objects and
/// optionals are `dyn` there too, as kube carries only scalars, lists and
/// maps into `variables`).
fn env(policy: &Value, object: Type, params: Option<&Type>) -> Env {
    let mut base = Env::new()
        .with_variable("object", object.clone())
        .with_variable("oldObject", object)
        .with_variable("request", Type::admission_request())
        .with_variable("namespaceObject", Type::namespace_object())
        .with_variable(
            "authorizer",
            Type::named("kubernetes.authorization.Authorizer"),
        );
    if let Some(p) = params {
        base = base.with_variable("params", p.clone());
    }
    let mut fields = BTreeMap::new();
    let declared = |fields: &BTreeMap<String, Type>| {
        base.clone().with_variable(
            "variables",
            Type::Object(Arc::new(Object {
                name: "kubernetes.variables".into(),
                fields: fields.clone(),
            })),
        )
    };
    let vars = policy.pointer("/spec/variables").and_then(Value::as_array);
    for v in vars.into_iter().flatten() {
        let (Some(name), Some(expr)) = (
            v.get("name").and_then(Value::as_str),
            v.get("expression").and_then(Value::as_str),
        ) else {
            continue;
        };
        let t = Program::compile(expr)
            .ok()
            .and_then(|p| p.check(&declared(&fields)).ok())
            .map_or(Type::Dyn, |t| t.as_variable_field());
        fields.insert(name.to_owned(), t);
    }
    declared(&fields)
}

/// The expressions of a policy kube checks, with their field paths.
fn expressions(policy: &Value) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let validations = policy
        .pointer("/spec/validations")
        .and_then(Value::as_array);
    for (i, v) in validations.into_iter().flatten().enumerate() {
        for field in ["expression", "messageExpression"] {
            if let Some(e) = v
                .get(field)
                .and_then(Value::as_str)
                .filter(|e| !e.is_empty())
            {
                out.push((format!("spec.validations[{i}].{field}"), e));
            }
        }
    }
    out
}

/// cel-go's issues for `source` in `env`, if any (a syntax error too).
fn issues(source: &str, env: &Env) -> Option<String> {
    let err = match Program::compile(source) {
        Ok(p) => p.check(env).err()?,
        Err(e) => e,
    };
    Some(err.detail().to_owned())
}

/// `status.typeChecking.expressionWarnings` for a policy.
pub fn warnings(policy: &Value, registry: &Registry) -> Vec<Value> {
    let params = params_type(policy, registry);
    let envs: Vec<(String, Env)> = kinds(policy, registry)
        .into_iter()
        .filter_map(|(gv, row)| {
            let object = object_type(row.schema()?, &row.kind);
            let env = env(policy, object, params.as_ref());
            Some((format!("{gv}, Kind={}", row.kind), env))
        })
        .collect();
    let mut out = Vec::new();
    for (field_ref, source) in expressions(policy) {
        let per_kind: Vec<String> = envs
            .iter()
            .filter_map(|(gvk, env)| Some(format!("{gvk}: {}\n", issues(source, env)?)))
            .collect();
        if !per_kind.is_empty() {
            out.push(json!({"fieldRef": field_ref, "warning": per_kind.join("\n")}));
        }
    }
    out
}

async fn reconcile(backend: &Backend, name: String) -> Result<Next, String> {
    let res = backend
        .registry
        .lookup(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
        )
        .ok_or("validatingadmissionpolicies missing from the registry")?;
    let key = backend.key(&res, None, &name);
    let Some(current) = backend
        .store
        .get(&key, Freshness::MostRecent)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(Next::Done);
    };
    let policy = current.value();
    let generation = policy
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(0));
    let status = json!({
        "observedGeneration": generation,
        "typeChecking": {"expressionWarnings": warnings(policy, &backend.registry)},
    });
    let mut want = status.clone();
    if want["typeChecking"]["expressionWarnings"]
        .as_array()
        .is_some_and(Vec::is_empty)
    {
        want["typeChecking"] = json!({});
    }
    let have = policy.get("status");
    let same = have.and_then(|s| s.get("observedGeneration")) == want.get("observedGeneration")
        && have.and_then(|s| s.get("typeChecking")) == want.get("typeChecking");
    if same {
        return Ok(Next::Done);
    }
    let mut updated = policy.clone();
    let conditions = have.and_then(|s| s.get("conditions")).cloned();
    updated["status"] = want;
    if let Some(c) = conditions {
        updated["status"]["conditions"] = c;
    }
    if let Some(m) = updated.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    match backend.store.update(&key, &updated, current.revision).await {
        Ok(_) => Ok(Next::Done),
        // Changed under us: the event brings it back.
        Err(watchcache::StorageError::Conflict { .. }) => Ok(Next::Done),
        Err(e) => Err(e.to_string()),
    }
}

/// The leader's loop that keeps every policy's type-checking status in
/// `backend`; it runs on any context (it reads only the backend).
pub fn controller<C: Context>(backend: &Backend) -> Option<Controller<C>> {
    let res = backend.registry.lookup(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
    )?;
    Some(Controller {
        name: "validatingadmissionpolicy_status",
        sources: vec![Source {
            prefix: backend.collection_prefix(&res, None),
            key_of: crate::controllers::name_key,
        }],
        feed: None,
        reconcile: Arc::new(|ctx: Arc<C>, key| {
            async move { reconcile(ctx.backend(), key).await }.boxed()
        }),
        workers: 1,
        capacity: 10_000,
        backoff: crate::controllers::queue::Backoff::default(),
        resync: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Env {
        let schema = apimachinery::schema::builtin()
            .by_gvk("apps", "v1", "Deployment")
            .unwrap();
        let policy = json!({"spec": {"variables": [
            {"name": "r", "expression": "object.spec.replicas"},
            {"name": "big", "expression": "variables.r > 3"},
        ]}});
        env(&policy, object_type(schema, "Deployment"), None)
    }

    #[test]
    fn field_and_overload_errors_with_cel_gos_snippet() {
        let env = deployment();
        for ok in [
            "object.spec.replicas > 1 && has(object.metadata.labels)",
            "object.spec.template.spec.containers[0].image != ''",
            "object.metadata.labels['x'] == 'y'",
            "object.spec.template.spec.containers.all(c, c.resources.limits['cpu'] != '')",
            "object.kind == 'Deployment' && object.apiVersion == 'apps/v1'",
            "oldObject == null || object.spec.replicas >= oldObject.spec.replicas",
            "variables.big || variables.r < 2",
            "request.operation == 'CREATE' && request.userInfo.username != ''",
            "has(namespaceObject.metadata.labels) && namespaceObject.metadata.labels['a'] == 'b'",
            "authorizer.group('apps').resource('deployments').check('create').allowed()",
        ] {
            assert_eq!(issues(ok, &env), None, "{ok}");
        }
        assert_eq!(
            issues("object.spec.replicaz > 1", &env).unwrap(),
            "ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz > 1\n | ...........^"
        );
        assert_eq!(
            issues("object.spec.replicas == 'x'", &env).unwrap(),
            "ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.replicas == 'x'\n | .....................^"
        );
        assert_eq!(
            issues("variables.r == 'x'", &env).unwrap(),
            "ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(int, string)'\n | variables.r == 'x'\n | ............^"
        );
    }

    /// `request` and `namespaceObject` have kube's types; what kube 1.35's
    /// checker leaves undeclared is undeclared; composited variables keep
    /// only scalar, list and map types.
    #[test]
    fn kubes_declarations() {
        let env = deployment();
        let cases = [
            (
                "request.nosuch",
                "ERROR: <input>:1:8: undefined field 'nosuch'\n | request.nosuch\n | .......^",
            ),
            (
                "request.operation == 1",
                "ERROR: <input>:1:19: found no matching overload for '_==_' applied to '(string, int)'\n | request.operation == 1\n | ..................^",
            ),
            (
                "request.name == object.spec.replicas",
                "ERROR: <input>:1:14: found no matching overload for '_==_' applied to '(string, int)'\n | request.name == object.spec.replicas\n | .............^",
            ),
            (
                "namespaceObject.metadata.uid != ''",
                "ERROR: <input>:1:25: undefined field 'uid'\n | namespaceObject.metadata.uid != ''\n | ........................^",
            ),
            // No paramKind (or one whose schema did not resolve).
            (
                "params.max > 1",
                "ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.max > 1\n | ^",
            ),
            // kube's type-checking environment declares `authorizer` only.
            (
                "authorizer.requestResource.check('create').allowed()",
                "ERROR: <input>:1:11: unexpected failed resolution of 'kubernetes.authorization.Authorizer'\n | authorizer.requestResource.check('create').allowed()\n | ..........^",
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(issues(expr, &env).as_deref(), Some(want), "{expr}");
        }
        // A variable holding an object is `dyn` in `variables`.
        let schema = apimachinery::schema::builtin()
            .by_gvk("apps", "v1", "Deployment")
            .unwrap();
        let policy = json!({"spec": {"variables": [
            {"name": "spec", "expression": "object.spec"},
            {"name": "names", "expression": "object.spec.template.spec.containers.map(c, c.name)"},
        ]}});
        let env = super::env(&policy, object_type(schema, "Deployment"), None);
        assert_eq!(issues("variables.spec.nosuch == 1", &env), None);
        assert!(issues("variables.names == 1", &env)
            .unwrap()
            .contains("applied to '(list(string), int)'"));
        // A paramKind whose schema resolved: `params` of its type.
        let cm = apimachinery::schema::builtin()
            .by_gvk("", "v1", "ConfigMap")
            .unwrap();
        let params = object_type(cm, "ConfigMap");
        let env = super::env(&json!({}), Type::Dyn, Some(&params));
        assert_eq!(issues("params.data['max'] == '3'", &env), None);
        assert!(issues("params.spec", &env)
            .unwrap()
            .contains("undefined field 'spec'"));
    }

    #[test]
    fn recursive_definitions_end_in_dyn() {
        let crd = apimachinery::schema::builtin()
            .by_gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
            .unwrap();
        let env = env(
            &json!({}),
            object_type(crd, "CustomResourceDefinition"),
            None,
        );
        assert_eq!(
            issues(
                "object.spec.versions.all(v, !has(v.schema) || has(v.schema.openAPIV3Schema.properties))",
                &env
            ),
            None
        );
    }
}
