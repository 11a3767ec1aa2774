//! `apiextensions.k8s.io/v1` `JSONSchemaProps` as it is written in a CRD, and
//! the structural form kube-apiserver derives from it (`schema.Structural`).
//!
//! `JSONSchemaProps` keeps everything a CRD author may write, including the
//! constructs a structural schema forbids (`$ref`, `patternProperties`, array
//! `items`...), so that CRD validation can point at them. [`Structural`] is
//! the split form: the generic part (type, nullable, default, properties,
//! items, additionalProperties), the `x-kubernetes-*` extensions, and the
//! value validations, whose logical junctors (`allOf`, `anyOf`, `oneOf`,
//! `not`) hold [`NestedValueValidation`]s that may not introduce types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One node of an OpenAPI v3 schema as a CRD carries it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JSONSchemaProps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, rename = "$schema", skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(default, rename = "$ref", skip_serializing_if = "Option::is_none")]
    pub ref_: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub description: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        rename = "type",
        skip_serializing_if = "String::is_empty"
    )]
    pub type_: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub format: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub title: String,
    /// `default`; JSON `null` is kept as `Some(Value::Null)`.
    #[serde(
        default,
        deserialize_with = "some_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Value>,
    #[serde(
        default,
        serialize_with = "go_float64",
        skip_serializing_if = "Option::is_none"
    )]
    pub maximum: Option<f64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_false"
    )]
    pub exclusive_maximum: bool,
    #[serde(
        default,
        serialize_with = "go_float64",
        skip_serializing_if = "Option::is_none"
    )]
    pub minimum: Option<f64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_false"
    )]
    pub exclusive_minimum: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_false"
    )]
    pub unique_items: bool,
    #[serde(
        default,
        serialize_with = "go_float64",
        skip_serializing_if = "Option::is_none"
    )]
    pub multiple_of: Option<f64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        rename = "enum",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub enum_: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_properties: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_properties: Option<i64>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub required: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<SchemaOrArray>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub all_of: Vec<JSONSchemaProps>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub one_of: Vec<JSONSchemaProps>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub any_of: Vec<JSONSchemaProps>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not: Option<Box<JSONSchemaProps>>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub properties: BTreeMap<String, JSONSchemaProps>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_properties: Option<SchemaOrBool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub pattern_properties: BTreeMap<String, JSONSchemaProps>,
    /// Dependencies are forbidden in CRDs; kept loosely typed to report them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_items: Option<SchemaOrBool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub definitions: BTreeMap<String, JSONSchemaProps>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_docs: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_false"
    )]
    pub nullable: bool,
    #[serde(
        default,
        rename = "x-kubernetes-preserve-unknown-fields",
        skip_serializing_if = "Option::is_none"
    )]
    pub x_preserve_unknown_fields: Option<bool>,
    #[serde(
        default,
        deserialize_with = "null_default",
        rename = "x-kubernetes-embedded-resource",
        skip_serializing_if = "is_false"
    )]
    pub x_embedded_resource: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        rename = "x-kubernetes-int-or-string",
        skip_serializing_if = "is_false"
    )]
    pub x_int_or_string: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        rename = "x-kubernetes-list-map-keys",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub x_list_map_keys: Vec<String>,
    #[serde(
        default,
        rename = "x-kubernetes-list-type",
        skip_serializing_if = "Option::is_none"
    )]
    pub x_list_type: Option<String>,
    #[serde(
        default,
        rename = "x-kubernetes-map-type",
        skip_serializing_if = "Option::is_none"
    )]
    pub x_map_type: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        rename = "x-kubernetes-validations",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub x_validations: Vec<ValidationRule>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Go writes integral float64s without a fraction (`0`, not `0.0`).
fn go_float64<S: serde::Serializer>(v: &Option<f64>, ser: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => ser.serialize_i64(*f as i64),
        Some(f) => ser.serialize_f64(*f),
        None => ser.serialize_none(),
    }
}

/// Go decodes `null` into the zero value; so do we.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// Keeps an explicit JSON `null` as `Some(Null)` (serde would map it to None).
fn some_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `additionalProperties` / `additionalItems`: a boolean or a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SchemaOrBool {
    Bool(bool),
    Schema(Box<JSONSchemaProps>),
}

/// `items`: one schema, or (forbidden in CRDs) a list of schemas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SchemaOrArray {
    Schema(Box<JSONSchemaProps>),
    Array(Vec<JSONSchemaProps>),
}

/// One `x-kubernetes-validations` entry (a CEL rule, evaluated elsewhere).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidationRule {
    #[serde(default, deserialize_with = "null_default")]
    pub rule: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub message_expression: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub field_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional_old_self: Option<bool>,
}

// ---------------------------------------------------------------------------
// Structural form.

/// The `x-kubernetes-*` extensions of a structural node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extensions {
    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub int_or_string: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
    pub validations: Vec<ValidationRule>,
}

impl Extensions {
    fn of(p: &JSONSchemaProps) -> Extensions {
        Extensions {
            preserve_unknown_fields: p.x_preserve_unknown_fields == Some(true),
            embedded_resource: p.x_embedded_resource,
            int_or_string: p.x_int_or_string,
            list_type: p.x_list_type.clone(),
            list_map_keys: p.x_list_map_keys.clone(),
            map_type: p.x_map_type.clone(),
            validations: p.x_validations.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        *self == Extensions::default()
    }
}

/// The value validations of a node (everything that restricts values without
/// giving them a shape).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueValidation {
    pub format: String,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: String,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub enum_: Vec<Value>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    pub all_of: Vec<NestedValueValidation>,
    pub one_of: Vec<NestedValueValidation>,
    pub any_of: Vec<NestedValueValidation>,
    pub not: Option<Box<NestedValueValidation>>,
}

impl ValueValidation {
    fn is_empty(&self) -> bool {
        *self == ValueValidation::default()
    }
}

/// What a node under a logical junctor may not specify, kept so that the
/// structural check can name it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForbiddenGenerics {
    pub type_: String,
    pub title: String,
    pub description: String,
    pub nullable: bool,
    pub default: Option<Value>,
    pub additional_properties: bool,
}

/// A value validation under `allOf`/`anyOf`/`oneOf`/`not`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NestedValueValidation {
    pub value_validation: ValueValidation,
    pub items: Option<Box<NestedValueValidation>>,
    pub properties: BTreeMap<String, NestedValueValidation>,
    pub additional_properties: Option<Box<NestedValueValidation>>,
    pub forbidden_generics: ForbiddenGenerics,
    pub forbidden_extensions: Extensions,
    /// The original node, used to validate values against it.
    pub props: Box<JSONSchemaProps>,
}

/// `additionalProperties` of a structural node.
#[derive(Debug, Clone, PartialEq)]
pub enum AdditionalProperties {
    Bool(bool),
    Schema(Box<Structural>),
}

impl AdditionalProperties {
    /// The schema, if any (`true` and `false` have none).
    pub fn schema(&self) -> Option<&Structural> {
        match self {
            AdditionalProperties::Schema(s) => Some(s),
            AdditionalProperties::Bool(_) => None,
        }
    }
}

/// A structural schema node (kube's `schema.Structural`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Structural {
    pub type_: String,
    pub title: String,
    pub description: String,
    pub nullable: bool,
    pub default: Option<Value>,
    pub properties: BTreeMap<String, Structural>,
    pub items: Option<Box<Structural>>,
    pub additional_properties: Option<AdditionalProperties>,
    pub extensions: Extensions,
    pub value_validation: Option<ValueValidation>,
}

impl Structural {
    /// Parses a schema from JSON and converts it (kube's `NewStructural`).
    pub fn from_json(v: &Value) -> Result<Structural, String> {
        let props: JSONSchemaProps =
            serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        Structural::new(&props)
    }

    /// kube's `NewStructural`: fails on what a structural schema cannot
    /// express at all (`$ref`, array `items`, `patternProperties`...).
    pub fn new(p: &JSONSchemaProps) -> Result<Structural, String> {
        check_convertible(p)?;
        let items = match p.items.as_ref() {
            None => None,
            Some(SchemaOrArray::Schema(s)) => Some(Box::new(Structural::new(s)?)),
            Some(SchemaOrArray::Array(_)) => {
                return Err("items must be a schema object and not an array".into())
            }
        };
        let additional_properties = match p.additional_properties.as_ref() {
            None => None,
            Some(SchemaOrBool::Bool(b)) => Some(AdditionalProperties::Bool(*b)),
            Some(SchemaOrBool::Schema(s)) => {
                Some(AdditionalProperties::Schema(Box::new(Structural::new(s)?)))
            }
        };
        let mut properties = BTreeMap::new();
        for (k, v) in &p.properties {
            properties.insert(k.clone(), Structural::new(v)?);
        }
        let vv = value_validation(p)?;
        Ok(Structural {
            type_: p.type_.clone(),
            title: p.title.clone(),
            description: p.description.clone(),
            nullable: p.nullable,
            default: p.default.clone().filter(|d| !d.is_null()),
            properties,
            items,
            additional_properties,
            extensions: Extensions::of(p),
            value_validation: if vv.is_empty() { None } else { Some(vv) },
        })
    }

    /// Back to `JSONSchemaProps` (kube's `ToKubeOpenAPI`), the form value
    /// validation runs on.
    pub fn to_props(&self) -> JSONSchemaProps {
        let mut p = JSONSchemaProps {
            type_: self.type_.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            nullable: self.nullable,
            default: self.default.clone(),
            properties: self
                .properties
                .iter()
                .map(|(k, v)| (k.clone(), v.to_props()))
                .collect(),
            items: self
                .items
                .as_ref()
                .map(|i| SchemaOrArray::Schema(Box::new(i.to_props()))),
            additional_properties: self.additional_properties.as_ref().map(|a| match a {
                AdditionalProperties::Bool(b) => SchemaOrBool::Bool(*b),
                AdditionalProperties::Schema(s) => SchemaOrBool::Schema(Box::new(s.to_props())),
            }),
            x_preserve_unknown_fields: self.extensions.preserve_unknown_fields.then_some(true),
            x_embedded_resource: self.extensions.embedded_resource,
            x_int_or_string: self.extensions.int_or_string,
            x_list_type: self.extensions.list_type.clone(),
            x_list_map_keys: self.extensions.list_map_keys.clone(),
            x_map_type: self.extensions.map_type.clone(),
            x_validations: self.extensions.validations.clone(),
            ..Default::default()
        };
        if let Some(v) = &self.value_validation {
            apply_value_validation(&mut p, v);
        }
        p
    }
}

fn check_convertible(p: &JSONSchemaProps) -> Result<(), String> {
    if p.ref_.is_some() {
        return Err("$ref is not supported".into());
    }
    if !p.pattern_properties.is_empty() {
        return Err("patternProperties is not supported".into());
    }
    if !p.definitions.is_empty() {
        return Err("definitions is not supported".into());
    }
    if p.dependencies.is_some() {
        return Err("dependencies is not supported".into());
    }
    if p.additional_items.is_some() {
        return Err("additionalItems is not supported".into());
    }
    if p.id.is_some() {
        return Err("id is not supported".into());
    }
    Ok(())
}

fn value_validation(p: &JSONSchemaProps) -> Result<ValueValidation, String> {
    let nested = |v: &Vec<JSONSchemaProps>| -> Result<Vec<NestedValueValidation>, String> {
        v.iter().map(NestedValueValidation::new).collect()
    };
    Ok(ValueValidation {
        format: p.format.clone(),
        maximum: p.maximum,
        exclusive_maximum: p.exclusive_maximum,
        minimum: p.minimum,
        exclusive_minimum: p.exclusive_minimum,
        max_length: p.max_length,
        min_length: p.min_length,
        pattern: p.pattern.clone(),
        max_items: p.max_items,
        min_items: p.min_items,
        unique_items: p.unique_items,
        multiple_of: p.multiple_of,
        enum_: p.enum_.clone(),
        max_properties: p.max_properties,
        min_properties: p.min_properties,
        required: p.required.clone(),
        all_of: nested(&p.all_of)?,
        one_of: nested(&p.one_of)?,
        any_of: nested(&p.any_of)?,
        not: match &p.not {
            Some(n) => Some(Box::new(NestedValueValidation::new(n)?)),
            None => None,
        },
    })
}

fn apply_value_validation(p: &mut JSONSchemaProps, v: &ValueValidation) {
    p.format = v.format.clone();
    p.maximum = v.maximum;
    p.exclusive_maximum = v.exclusive_maximum;
    p.minimum = v.minimum;
    p.exclusive_minimum = v.exclusive_minimum;
    p.max_length = v.max_length;
    p.min_length = v.min_length;
    p.pattern = v.pattern.clone();
    p.max_items = v.max_items;
    p.min_items = v.min_items;
    p.unique_items = v.unique_items;
    p.multiple_of = v.multiple_of;
    p.enum_ = v.enum_.clone();
    p.max_properties = v.max_properties;
    p.min_properties = v.min_properties;
    p.required = v.required.clone();
    p.all_of = v.all_of.iter().map(|n| (*n.props).clone()).collect();
    p.one_of = v.one_of.iter().map(|n| (*n.props).clone()).collect();
    p.any_of = v.any_of.iter().map(|n| (*n.props).clone()).collect();
    p.not = v.not.as_ref().map(|n| n.props.clone());
}

impl NestedValueValidation {
    /// Splits a node under a junctor into its value validation and the
    /// generics/extensions it is not allowed to carry.
    pub fn new(p: &JSONSchemaProps) -> Result<NestedValueValidation, String> {
        check_convertible(p)?;
        let items = match p.items.as_ref() {
            None => None,
            Some(SchemaOrArray::Schema(s)) => Some(Box::new(NestedValueValidation::new(s)?)),
            Some(SchemaOrArray::Array(_)) => {
                return Err("items must be a schema object and not an array".into())
            }
        };
        let mut properties = BTreeMap::new();
        for (k, v) in &p.properties {
            properties.insert(k.clone(), NestedValueValidation::new(v)?);
        }
        let additional_properties = match p.additional_properties.as_ref() {
            Some(SchemaOrBool::Schema(s)) => Some(Box::new(NestedValueValidation::new(s)?)),
            _ => None,
        };
        let ext = Extensions::of(p);
        Ok(NestedValueValidation {
            value_validation: value_validation(p)?,
            items,
            properties,
            additional_properties,
            forbidden_generics: ForbiddenGenerics {
                type_: p.type_.clone(),
                title: p.title.clone(),
                description: p.description.clone(),
                nullable: p.nullable,
                default: p.default.clone().filter(|d| !d.is_null()),
                additional_properties: p.additional_properties.is_some(),
            },
            forbidden_extensions: if ext.is_empty() {
                Extensions::default()
            } else {
                ext
            },
            props: Box::new(p.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_kube_shaped_schema() {
        let v = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["replicas"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "default": 1},
                        "port": {"x-kubernetes-int-or-string": true,
                                 "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                  "x-kubernetes-list-map-keys": ["name"],
                                  "items": {"type": "object", "required": ["name"],
                                            "properties": {"name": {"type": "string"}}}}
                    },
                    "x-kubernetes-validations": [{"rule": "self.replicas < 10", "message": "too many"}]
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        });
        let props: JSONSchemaProps = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&props).unwrap(), v);
        let s = Structural::new(&props).unwrap();
        let spec = &s.properties["spec"];
        assert_eq!(spec.extensions.validations[0].rule, "self.replicas < 10");
        assert_eq!(spec.properties["replicas"].default, Some(json!(1)));
        assert!(spec.properties["port"].extensions.int_or_string);
        assert_eq!(
            spec.properties["port"]
                .value_validation
                .as_ref()
                .unwrap()
                .any_of
                .len(),
            2
        );
        assert!(s.properties["status"].extensions.preserve_unknown_fields);
        assert_eq!(serde_json::to_value(s.to_props()).unwrap(), v);
    }

    #[test]
    fn explicit_null_default_is_kept_but_defaults_nothing() {
        let p: JSONSchemaProps =
            serde_json::from_value(json!({"type": "string", "nullable": true, "default": null}))
                .unwrap();
        assert_eq!(p.default, Some(Value::Null));
        // kube's structural form holds the default as a Go value: null is none.
        assert_eq!(Structural::new(&p).unwrap().default, None);
    }

    #[test]
    fn nulls_decode_as_zero_values_like_go() {
        let p: JSONSchemaProps = serde_json::from_value(json!({
            "type": null, "required": null, "properties": null, "enum": null,
            "nullable": null, "x-kubernetes-validations": [{"rule": "true", "message": null}]
        }))
        .unwrap();
        assert!(p.type_.is_empty() && p.required.is_empty() && p.properties.is_empty());
        assert_eq!(p.x_validations[0].message, "");
    }

    #[test]
    fn unconvertible_nodes_fail() {
        assert_eq!(
            Structural::from_json(&json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}})),
            Err("$ref is not supported".to_string())
        );
        assert!(
            Structural::from_json(&json!({"type": "array", "items": [{"type": "string"}]}))
                .is_err()
        );
    }
}
