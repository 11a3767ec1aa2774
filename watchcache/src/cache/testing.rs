//! Test support for the cache (feature `test-util`): a ready `Cacher` over
//! a real etcd (the test binary's shared one, or one of its own), as a
//! conformance `Harness`.

pub use super::ranges::{read_all, RangeRead};
use super::{Cacher, CacherConfig};
use crate::storage::{Revision, Storage};
use crate::testing::conformance::Harness;
use crate::testing::TestEtcd;
use async_trait::async_trait;
use std::time::Duration;

/// How long a cache may take to list.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings for tests: short waits and bookmarks, the default bounds.
pub fn config() -> CacherConfig {
    CacherConfig {
        not_older_than_wait: Duration::from_millis(300),
        bookmark_interval: Duration::from_millis(200),
        compaction_check_interval: Duration::from_secs(5),
        ..CacherConfig::default()
    }
}

/// A ready cache over `etcd` with `config`.
pub async fn cacher(etcd: &TestEtcd, config: CacherConfig) -> Cacher {
    let cacher = Cacher::new(etcd.store().await, config);
    assert!(
        cacher.wait_ready(READY_TIMEOUT).await,
        "cache not ready: {:?}",
        cacher.stats()
    );
    cacher
}

enum Etcd {
    Shared(&'static TestEtcd),
    Own(TestEtcd),
}

pub struct CacheHarness {
    cacher: Cacher,
    etcd: Etcd,
}

impl CacheHarness {
    pub async fn shared() -> Self {
        let etcd = TestEtcd::shared().await;
        CacheHarness {
            cacher: cacher(etcd, config()).await,
            etcd: Etcd::Shared(etcd),
        }
    }

    pub async fn isolated() -> Self {
        let etcd = match TestEtcd::start().await {
            Ok(etcd) => etcd,
            Err(e) => panic!("{e}"),
        };
        CacheHarness {
            cacher: cacher(&etcd, config()).await,
            etcd: Etcd::Own(etcd),
        }
    }

    pub fn etcd(&self) -> &TestEtcd {
        match &self.etcd {
            Etcd::Shared(etcd) => etcd,
            Etcd::Own(etcd) => etcd,
        }
    }

    pub fn cacher(&self) -> &Cacher {
        &self.cacher
    }
}

#[async_trait]
impl Harness for CacheHarness {
    fn storage(&self) -> &dyn Storage {
        &self.cacher
    }

    /// Compacts etcd, then has the cache learn it (as its periodic probe
    /// would).
    async fn compact(&self, revision: Revision) {
        if let Err(e) = self.etcd().compact(revision).await {
            panic!("compacting to {revision}: {e}");
        }
        match self.cacher.check_compaction().await {
            Ok(known) => assert!(
                known >= revision,
                "cache knows compaction {known} < {revision}"
            ),
            Err(e) => panic!("compaction probe: {e}"),
        }
    }
}
