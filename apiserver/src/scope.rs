//! What a request is about, once routed: the resolved resource, the names
//! from the path, the query, the negotiated output, the user, and the
//! request's warnings and audit slot. Admission plugins, authorization
//! checks and the response writers read it; it names the backend and
//! nothing above it, so they need not know the server's state.

use crate::backend::Backend;
use crate::error::ApiError;
use crate::registry::{Row, Subresource};
use apimachinery::auth::UserInfo;
use apimachinery::media::Negotiated;
use apimachinery::query::Query;
use axum::http::{header, HeaderMap};
use std::sync::Arc;

/// What a request is about (see the module's comment).
pub struct RequestScope {
    /// The store, registry and key layout the request reads and writes.
    pub backend: Arc<Backend>,
    pub res: Row,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<Subresource>,
    pub query: Query,
    pub out: Negotiated,
    pub pretty: bool,
    pub headers: HeaderMap,
    /// The user the request runs as (the chain's `Identity`).
    pub user: Arc<UserInfo>,
    /// Warnings admission added, sent as `Warning` headers.
    pub warnings: std::sync::Mutex<Vec<String>>,
    /// The request's audit record, when the audit layer runs (admission
    /// adds its audit annotations there).
    pub audit: Option<crate::audit::AuditSlot>,
}

impl RequestScope {
    /// Adds a `Warning` header to the response.
    pub fn warn(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
    }

    /// Adds an annotation to the request's audit events (kube's
    /// `audit.AddAuditAnnotation`); nothing when auditing is off.
    pub fn audit_annotate(&self, key: &str, value: &str) {
        if let Some(slot) = &self.audit {
            slot.annotate(key, value);
        }
    }

    /// The warnings added so far, taken for the response headers.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The object name from the URL (verbs on one object only).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// The etcd key of the addressed object.
    pub fn key(&self) -> String {
        self.backend
            .key(&self.res, self.namespace.as_deref(), self.name())
    }

    pub fn key_for(&self, name: &str) -> String {
        self.backend.key(&self.res, self.namespace.as_deref(), name)
    }

    pub fn collection_prefix(&self) -> String {
        self.backend
            .collection_prefix(&self.res, self.namespace.as_deref())
    }

    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn user_agent(&self) -> &str {
        self.header(header::USER_AGENT).unwrap_or("")
    }

    pub fn subresource_name(&self) -> Option<&'static str> {
        self.subresource.as_ref().map(|s| s.name())
    }

    pub fn storage_err(&self, e: watchcache::StorageError) -> ApiError {
        ApiError::storage(e, &self.res, self.name())
    }
}
