//! MutatingAdmissionPolicy's typed literals. Its `applyConfiguration`
//! expressions build objects as `Object{spec: Object.spec{replicas: 3}}`,
//! and its `jsonPatch` expressions patches as
//! `JSONPatch{op: "add", path: "/x", value: 1}`. Kubernetes types these
//! from the resource's schema; here they have no schema, so every such
//! literal (type `Object`, `Object.<field>...` or `JSONPatch`) is rewritten
//! into the map literal with the same fields (`?field` included), which
//! [`crate::cel_to_json`] turns into the JSON the policy means.

use cel::common::ast::{
    EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};

use crate::instrument::children_mut;

fn is_schemaless(type_name: &str) -> bool {
    let name = type_name.strip_prefix('.').unwrap_or(type_name);
    name == "Object" || name.starts_with("Object.") || name == "JSONPatch"
}

/// Rewrites the typed literals under `e` into maps; `next_id` numbers the
/// new key nodes.
pub(crate) fn rewrite(e: &mut IdedExpr, next_id: &mut u64) {
    if let Expr::Struct(s) = &mut e.expr {
        if is_schemaless(&s.type_name) {
            let entries = std::mem::take(&mut s.entries)
                .into_iter()
                .map(|entry| match entry.expr {
                    EntryExpr::StructField(f) => {
                        *next_id += 1;
                        let key = IdedExpr {
                            id: *next_id,
                            expr: Expr::Literal(LiteralValue::String(f.field.into())),
                        };
                        IdedEntryExpr {
                            id: entry.id,
                            expr: EntryExpr::MapEntry(MapEntryExpr {
                                key,
                                value: f.value,
                                optional: f.optional,
                            }),
                        }
                    }
                    other => IdedEntryExpr {
                        id: entry.id,
                        expr: other,
                    },
                })
                .collect();
            e.expr = Expr::Map(MapExpr { entries });
        }
    }
    for child in children_mut(e) {
        rewrite(child, next_id);
    }
}
