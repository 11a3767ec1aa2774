//! The types kube gives admission expressions' fixed variables
//! (`k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`:
//! `BuildRequestType`, `BuildNamespaceType`), and how a composited
//! variable's type is carried into `variables` (`composition.go`,
//! `convertCelTypeToDeclType`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::types::{Object, Type};

fn object(name: &str, fields: &[(&str, Type)]) -> Type {
    Type::Object(Arc::new(Object {
        name: name.to_owned(),
        fields: fields
            .iter()
            .map(|(n, t)| ((*n).to_owned(), t.clone()))
            .collect::<BTreeMap<_, _>>(),
    }))
}

impl Type {
    /// `request`: kube's `kubernetes.AdmissionRequest` (no `uid`, no
    /// `object`/`oldObject`: those are variables of their own; `options`
    /// is `dyn`).
    pub fn admission_request() -> Type {
        let gvk = object(
            "kubernetes.GroupVersionKind",
            &[
                ("group", Type::String),
                ("version", Type::String),
                ("kind", Type::String),
            ],
        );
        let gvr = object(
            "kubernetes.GroupVersionResource",
            &[
                ("group", Type::String),
                ("version", Type::String),
                ("resource", Type::String),
            ],
        );
        let strings = Type::list(Type::String);
        let user = object(
            "kubernetes.UserInfo",
            &[
                ("username", Type::String),
                ("uid", Type::String),
                ("groups", strings.clone()),
                ("extra", Type::map(Type::String, strings)),
            ],
        );
        object(
            "kubernetes.AdmissionRequest",
            &[
                ("kind", gvk.clone()),
                ("resource", gvr.clone()),
                ("subResource", Type::String),
                ("requestKind", gvk),
                ("requestResource", gvr),
                ("requestSubResource", Type::String),
                ("name", Type::String),
                ("namespace", Type::String),
                ("operation", Type::String),
                ("userInfo", user),
                ("dryRun", Type::Bool),
                ("options", Type::Dyn),
            ],
        )
    }

    /// `namespaceObject`: kube's hand-made `kubernetes.Namespace`, a few
    /// of a Namespace's fields (its metadata's uid is spelled `UID`, as
    /// kube spells it, so `namespaceObject.metadata.uid` is an undefined
    /// field there too).
    pub fn namespace_object() -> Type {
        let strings = Type::list(Type::String);
        let labels = Type::map(Type::String, Type::String);
        let condition = object(
            "kubernetes.NamespaceCondition",
            &[
                ("status", Type::String),
                ("type", Type::String),
                ("lastTransitionTime", Type::Timestamp),
                ("message", Type::String),
                ("reason", Type::String),
            ],
        );
        let metadata = object(
            "kubernetes.NamespaceMetadata",
            &[
                ("name", Type::String),
                ("generateName", Type::String),
                ("namespace", Type::String),
                ("labels", labels.clone()),
                ("annotations", labels),
                ("UID", Type::String),
                ("creationTimestamp", Type::Timestamp),
                ("deletionGracePeriodSeconds", Type::Int),
                ("deletionTimestamp", Type::Timestamp),
                ("generation", Type::Int),
                ("resourceVersion", Type::String),
                ("finalizers", strings.clone()),
            ],
        );
        object(
            "kubernetes.Namespace",
            &[
                ("metadata", metadata),
                (
                    "spec",
                    object("kubernetes.NamespaceSpec", &[("finalizers", strings)]),
                ),
                (
                    "status",
                    object(
                        "kubernetes.NamespaceStatus",
                        &[
                            ("conditions", Type::list(condition)),
                            ("phase", Type::String),
                        ],
                    ),
                ),
            ],
        )
    }

    /// The type a composited variable of this type has as a field of
    /// `variables`: scalars, lists and maps keep theirs (their elements
    /// converted the same way); objects, optionals, opaque types and
    /// anything unknown become `dyn`, as kube's conversion makes them.
    pub fn as_variable_field(&self) -> Type {
        match self {
            Type::Bool
            | Type::Bytes
            | Type::Double
            | Type::Duration
            | Type::Int
            | Type::Null
            | Type::String
            | Type::Timestamp
            | Type::Uint => self.clone(),
            Type::List(e) => Type::list(e.as_variable_field()),
            Type::Map(k, v) => Type::map(k.as_variable_field(), v.as_variable_field()),
            _ => Type::Dyn,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::check::{Env, Type};
    use crate::Program;

    fn check(expr: &str) -> Result<Type, String> {
        let env = Env::new()
            .with_variable("request", Type::admission_request())
            .with_variable("namespaceObject", Type::namespace_object());
        Program::compile(expr)
            .unwrap()
            .check(&env)
            .map_err(|e| e.detail().to_owned())
    }

    #[test]
    fn request_and_namespace_fields_are_typed() {
        for ok in [
            "request.operation == 'CREATE' && request.kind.group == '' && request.dryRun == false",
            "request.userInfo.groups.exists(g, g == 'admins') && request.userInfo.extra['x'][0] != ''",
            "has(request.namespace) && request.requestResource.resource == request.resource.resource",
            "request.options.anything == 1",
            "namespaceObject.metadata.labels['team'] == 'a' && namespaceObject.status.phase == 'Active'",
            "namespaceObject.status.conditions.all(c, c.lastTransitionTime < timestamp('2030-01-01T00:00:00Z'))",
            "namespaceObject.metadata.UID != ''",
        ] {
            assert!(check(ok).is_ok(), "{ok}: {:?}", check(ok));
        }
        assert_eq!(
            check("request.nosuch").unwrap_err(),
            "ERROR: <input>:1:8: undefined field 'nosuch'\n | request.nosuch\n | .......^"
        );
        assert_eq!(
            check("request.operation == 1").unwrap_err(),
            "ERROR: <input>:1:19: found no matching overload for '_==_' applied to '(string, int)'\n | request.operation == 1\n | ..................^"
        );
        assert_eq!(
            check("request.userInfo == 1").unwrap_err(),
            "ERROR: <input>:1:18: found no matching overload for '_==_' applied to '(kubernetes.UserInfo, int)'\n | request.userInfo == 1\n | .................^"
        );
        assert_eq!(
            check("namespaceObject.metadata.uid").unwrap_err(),
            "ERROR: <input>:1:25: undefined field 'uid'\n | namespaceObject.metadata.uid\n | ........................^"
        );
    }

    #[test]
    fn variable_fields_keep_scalars_lists_and_maps_only() {
        let obj = Type::admission_request();
        assert_eq!(Type::Int.as_variable_field(), Type::Int);
        assert_eq!(obj.as_variable_field(), Type::Dyn);
        assert_eq!(
            Type::list(obj.clone()).as_variable_field(),
            Type::list(Type::Dyn)
        );
        assert_eq!(
            Type::map(Type::String, Type::list(Type::String)).as_variable_field(),
            Type::map(Type::String, Type::list(Type::String))
        );
        assert_eq!(Type::optional(Type::Int).as_variable_field(), Type::Dyn);
        assert_eq!(
            Type::named("kubernetes.Quantity").as_variable_field(),
            Type::Dyn
        );
    }
}
