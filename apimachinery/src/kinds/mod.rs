//! What each built-in kind does beyond its schema, kept in one place per
//! kind: kube's defaults (`SetDefaults_*`), its registry strategy
//! (`PrepareForCreate`/`PrepareForUpdate`), its semantic validation
//! (`Validate*`) and its Table printer columns.
//!
//! Every kind has one [`KindRules`] value, in the file of its group
//! (`apps/deployment.rs` holds everything about Deployments). The server's
//! registry row points at it; the generic write path and the Table encoder
//! call the functions it holds, so no handler code is per kind.
//!
//! The order on a write is kube's: defaults (kube applies them when it
//! decodes the body, so also after a patch is applied), then the strategy's
//! prepare step, then validation. All functions are pure and take the JSON
//! object as the client sees it (`apiVersion`/`kind` of the served version).

use serde_json::Value;

use crate::status::StatusCause;

pub mod common;
pub mod print;

pub mod admissionregistration;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod certificates;
pub mod coordination;
pub mod core;
pub mod discovery;
pub mod events;
pub mod flowcontrol;
pub mod networking;
pub mod policy;
pub mod rbac;
pub mod scheduling;
pub mod storage;

/// Fills in what the client left out (kube's `SetDefaults_*`). Never
/// overrides a value the client set.
pub type Defaults = fn(&mut Value);
/// The strategy's `PrepareForCreate`: resets or initialises what a client
/// may not set on create (status, derived fields).
pub type PrepareCreate = fn(&mut Value);
/// The strategy's `PrepareForUpdate`: gets the new object and the stored one.
pub type PrepareUpdate = fn(&mut Value, &Value);
/// The part of `PrepareForCreate` that reads the request's user (a
/// CertificateSigningRequest records who asked).
pub type PrepareCreateAs = fn(&mut Value, &crate::auth::UserInfo);
/// Validation: the causes of a 422 Invalid (none: valid). `old` is `None` on
/// create and the stored object on update.
pub type Validate = fn(&Value, Option<&Value>) -> Vec<StatusCause>;

/// A part of an object written through a subresource of its own (kube's
/// `/approval`, `/finalize`, `/ephemeralcontainers`, `/resize`): reading it
/// answers the whole object; a write changes the part only.
#[derive(Debug)]
pub struct Part {
    pub name: &'static str,
    /// Its discovery verbs (`get`, `patch`, `update`, or a subset).
    pub verbs: &'static [&'static str],
    /// Copies the part from the request's object (second argument) into a
    /// copy of the stored one (first).
    pub take: fn(&mut Value, &Value),
    /// Validation of the result, `old` being the stored object.
    pub validate: Option<Validate>,
}

/// How a built-in kind served in more than one version moves between them
/// (kube's scheme conversions): objects are stored in `storage_version`
/// and every served version converts to and from it. `convert` is pure: it
/// gets an object in any served version and the wanted `apiVersion`, and
/// returns the object in that version (defaults of the storage version
/// applied when converting to it, as kube's decoder applies them).
#[derive(Debug)]
pub struct Conversion {
    /// The `apiVersion` objects are stored in (`autoscaling/v2`).
    pub storage_version: &'static str,
    pub convert: fn(&Value, &str) -> Value,
}

/// Everything a kind does beyond its schema. `KindRules::NONE` is the value
/// of a kind that has no rules of its own.
#[derive(Debug)]
pub struct KindRules {
    pub defaults: Option<Defaults>,
    pub prepare_create: Option<PrepareCreate>,
    pub prepare_create_as: Option<PrepareCreateAs>,
    pub prepare_update: Option<PrepareUpdate>,
    /// Validation of writes to the object itself (create, update, patch,
    /// apply).
    pub validate: Option<Validate>,
    /// Validation of writes to the `status` subresource (kube's
    /// `ValidateStatusUpdate`); `old` is always `Some`.
    pub validate_status: Option<Validate>,
    /// Table columns, the `Name` column first, as kube's printer for the
    /// kind defines them; empty: kube's default (Name, Created At).
    pub columns: &'static [print::Column],
}

impl KindRules {
    pub const NONE: KindRules = KindRules {
        defaults: None,
        prepare_create: None,
        prepare_create_as: None,
        prepare_update: None,
        validate: None,
        validate_status: None,
        columns: &[],
    };
}
