//! Storage for the API server: the `Storage` trait, the etcd store that
//! implements it, and the per-replica watch cache implementing it too.

pub mod cache;
pub mod etcd;
pub mod route;
pub mod storage;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod transform;

pub use cache::{CacheStats, Cacher, CacherConfig, Phase as CachePhase};
pub use route::{Route, Routed};
pub use storage::{
    Encoded, EventType, ListOptions, ListResult, Object, Revision, Storage, StorageError,
    WatchEvent, WatchOptions, WatchStream,
};
pub use transform::{TransformError, Transformers, ValueTransformer};
