//! The error type of this crate.

/// Why a protobuf body could not be decoded, or a JSON object encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The body does not start with the 4-byte `k8s\0` prefix.
    #[error("protobuf body does not start with the Kubernetes magic prefix")]
    MissingMagic,
    /// The input ended inside a value.
    #[error("truncated protobuf input")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("protobuf varint overflows 64 bits")]
    VarintOverflow,
    /// A tag with field number 0 or beyond the 29-bit range.
    #[error("illegal protobuf tag {0}")]
    IllegalTag(u64),
    /// Wire type 3, 4 (groups) or 6, 7 (undefined).
    #[error("unsupported protobuf wire type {0}")]
    UnsupportedWireType(u8),
    /// A known field arrived with a wire type its type cannot have.
    #[error("field {message}.{field}: wrong wire type {wire_type}")]
    WrongWireType {
        message: String,
        field: String,
        wire_type: u8,
    },
    /// Nested messages deeper than [`crate::MAX_DEPTH`].
    #[error("protobuf message nesting exceeds {0} levels")]
    TooDeep(usize),
    /// The message name is not in the generated table.
    #[error("unknown protobuf message {0}")]
    UnknownMessage(String),
    /// No built-in message for this group/version/kind.
    #[error("no protobuf message for {api_version}, Kind={kind}")]
    UnknownKind { api_version: String, kind: String },
    /// A value that is well-formed protobuf but has no JSON form
    /// (for example an IntOrString with an unknown type, or a time outside
    /// the years 0000-9999).
    #[error("field {field}: {reason}")]
    InvalidValue { field: String, reason: String },
    /// The JSON value does not fit the protobuf schema.
    #[error("JSON field {field}: {reason}")]
    InvalidJson { field: String, reason: String },
    /// The envelope names an encoding this crate does not handle.
    #[error("unsupported envelope {what}: {value}")]
    UnsupportedEnvelope { what: &'static str, value: String },
    /// The embedded message table could not be loaded (a build defect).
    #[error("protobuf message table: {0}")]
    Table(String),
}

impl ProtoError {
    pub(crate) fn invalid_value(field: &str, reason: impl Into<String>) -> Self {
        ProtoError::InvalidValue {
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid_json(field: &str, reason: impl Into<String>) -> Self {
        ProtoError::InvalidJson {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}
