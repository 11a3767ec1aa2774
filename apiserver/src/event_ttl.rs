//! Events expire (`--event-ttl`, default one hour) through etcd leases,
//! shared the way kube's lease manager shares them: one lease serves every
//! event written within a short reuse window (5% of the TTL, at most a
//! minute, and at most 1,000 objects), and is granted that much longer than
//! the TTL so that no event lives less than its TTL. Writes of kinds whose
//! registry row sets `ttl_lease` go through [`EventLeases::lease`].
//!
//! Below the state: it takes the store it grants leases on.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use watchcache::{Storage, StorageError};

/// The longest a lease is reused.
const MAX_REUSE: Duration = Duration::from_secs(60);
/// The most objects attached to one lease.
const MAX_OBJECTS: u32 = 1000;

#[derive(Debug)]
struct Current {
    id: i64,
    granted: Instant,
    objects: u32,
}

/// The shared lease of event writes.
#[derive(Debug)]
pub struct EventLeases {
    ttl: Duration,
    current: Mutex<Option<Current>>,
}

impl Default for EventLeases {
    fn default() -> Self {
        EventLeases::new(Duration::from_secs(3600))
    }
}

impl EventLeases {
    pub fn new(ttl: Duration) -> Self {
        EventLeases {
            ttl: ttl.max(Duration::from_secs(1)),
            current: Mutex::new(None),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn reuse_window(&self) -> Duration {
        (self.ttl / 20).min(MAX_REUSE)
    }

    /// A lease to attach the next event write (of `key`) to: the current
    /// one while it is young enough, else a new one granted for TTL +
    /// reuse window by the etcd cluster that holds `key`. Every kind with
    /// a TTL lease (core and events.k8s.io Events) is stored under the one
    /// `events` key range, so one cluster holds them all and one current
    /// lease serves them (with `--etcd-servers-overrides` too).
    pub async fn lease(&self, store: &dyn Storage, key: &str) -> Result<i64, StorageError> {
        let window = self.reuse_window();
        {
            let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cur.as_mut() {
                if c.granted.elapsed() < window && c.objects < MAX_OBJECTS {
                    c.objects += 1;
                    return Ok(c.id);
                }
            }
        }
        let ttl = (self.ttl + window).as_secs().max(1) as i64;
        let id = store.grant_lease(key, ttl).await?;
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        *cur = Some(Current {
            id,
            granted: Instant::now(),
            objects: 1,
        });
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_window_is_five_percent_up_to_a_minute() {
        assert_eq!(
            EventLeases::default().reuse_window(),
            Duration::from_secs(60)
        );
        assert_eq!(
            EventLeases::new(Duration::from_secs(100)).reuse_window(),
            Duration::from_secs(5)
        );
    }
}
