//! Pruning of unknown fields (kube's `pruning.PruneWithOptions`).
//!
//! Fields the schema does not specify are removed, except under
//! `x-kubernetes-preserve-unknown-fields: true` (where only the specified
//! parts are pruned further) and `apiVersion`, `kind` and `metadata` of the
//! resource root and of embedded resources (metadata is handled by the
//! object-meta coercion, not here). The removed fields' paths are returned
//! sorted, in the form `fieldValidation=Warn|Strict` reports them:
//! `spec.foo`, `spec.list[0].bar` (see [`unknown_field_message`]).

use serde_json::Value;

use super::types::Structural;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prunes `value`, a whole custom resource whose root is `schema`, and
/// returns the pruned paths, sorted.
pub fn prune(schema: &Structural, value: &mut Value) -> Vec<String> {
    let mut paths = Vec::new();
    let mut p = Pruner {
        paths: &mut paths,
        parent: String::new(),
    };
    p.prune_root(schema, value);
    paths.sort();
    paths
}

/// Prunes a value that is not a resource root (e.g. a default value).
pub(crate) fn prune_value(schema: &Structural, value: &mut Value, embedded: bool) -> Vec<String> {
    let mut paths = Vec::new();
    let mut p = Pruner {
        paths: &mut paths,
        parent: String::new(),
    };
    if embedded {
        p.prune_root(schema, value);
    } else {
        p.prune(Some(schema), value, false);
    }
    paths.sort();
    paths
}

/// `unknown field "spec.foo"`, how a pruned path is reported.
pub fn unknown_field_message(path: &str) -> String {
    format!("unknown field {}", crate::validation::go_quote(path))
}

struct Pruner<'a> {
    paths: &'a mut Vec<String>,
    parent: String,
}

impl Pruner<'_> {
    fn record(&mut self, k: &str) {
        if self.parent.is_empty() {
            self.paths.push(k.to_string());
        } else {
            self.paths.push(format!("{}.{k}", self.parent));
        }
    }

    fn push_key(&mut self, k: &str) -> usize {
        let l = self.parent.len();
        if l > 0 {
            self.parent.push('.');
        }
        self.parent.push_str(k);
        l
    }

    fn push_index(&mut self, i: usize) -> usize {
        let l = self.parent.len();
        self.parent.push_str(&format!("[{i}]"));
        l
    }

    /// The resource root: treated as an embedded resource.
    fn prune_root(&mut self, s: &Structural, v: &mut Value) {
        self.prune(Some(s), v, true);
    }

    /// `force_embedded` treats the node as `x-kubernetes-embedded-resource`
    /// (the resource root).
    fn prune(&mut self, s: Option<&Structural>, v: &mut Value, force_embedded: bool) {
        if let Some(s) = s {
            if s.extensions.preserve_unknown_fields {
                self.skip_prune(s, v, force_embedded);
                return;
            }
        }
        match v {
            Value::Object(m) => {
                let Some(s) = s else {
                    let keys: Vec<String> = m.keys().cloned().collect();
                    for k in keys {
                        self.record(&k);
                    }
                    m.clear();
                    return;
                };
                let embedded = force_embedded || s.extensions.embedded_resource;
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    if let Some(ps) = s.properties.get(&k) {
                        let l = self.push_key(&k);
                        if let Some(x) = m.get_mut(&k) {
                            self.prune(Some(ps), x, false);
                        }
                        self.parent.truncate(l);
                    } else if let Some(ap) = &s.additional_properties {
                        let l = self.push_key(&k);
                        if let Some(x) = m.get_mut(&k) {
                            self.prune(ap.schema(), x, false);
                        }
                        self.parent.truncate(l);
                    } else {
                        if !META_FIELDS.contains(&k.as_str()) || !self.parent.is_empty() {
                            self.record(&k);
                        }
                        m.remove(&k);
                    }
                }
            }
            Value::Array(a) => {
                let items = s.and_then(|s| s.items.as_deref());
                for (i, x) in a.iter_mut().enumerate() {
                    let l = self.push_index(i);
                    self.prune(items, x, false);
                    self.parent.truncate(l);
                }
            }
            _ => {}
        }
    }

    /// Under `x-kubernetes-preserve-unknown-fields`: unknown fields stay,
    /// specified ones are pruned by their schema.
    fn skip_prune(&mut self, s: &Structural, v: &mut Value, force_embedded: bool) {
        match v {
            Value::Object(m) => {
                let embedded = force_embedded || s.extensions.embedded_resource;
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    let sub = if let Some(ps) = s.properties.get(&k) {
                        Some(Some(ps))
                    } else {
                        s.additional_properties.as_ref().map(|ap| ap.schema())
                    };
                    if let Some(sub) = sub {
                        let l = self.push_key(&k);
                        if let Some(x) = m.get_mut(&k) {
                            self.prune(sub, x, false);
                        }
                        self.parent.truncate(l);
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = s.items.as_deref() {
                    for (i, x) in a.iter_mut().enumerate() {
                        let l = self.push_index(i);
                        self.skip_prune(items, x, false);
                        self.parent.truncate(l);
                    }
                }
            }
            _ => {}
        }
    }
}
