//! A one-shot move of objects written by earlier versions of this server,
//! which kept every named group's resources under `<group>/<resource>`
//! (and core Services, Endpoints, Nodes and ReplicationControllers under
//! their plural), to kube's key layout ([`crate::storage_format`]).
//!
//! Run at start-up, before the watch cache lists etcd, unless
//! `--migrate-storage-layout=false`: for each resource whose layout
//! changed, the keys under its old segment are read (through the
//! transformers, so encrypted values are decrypted with the old key as
//! their additional data), written under the new key (re-encoded in the
//! configured media type, re-encrypted with the new key) and deleted, in
//! one transaction per object that only applies if the old value is
//! unchanged and the new key is free. A second replica starting at once
//! therefore cannot move an object twice; an object whose new key is
//! taken is left where it is and logged. Once no old key remains the move
//! costs one keys-only range read per changed resource.

use crate::registry::Resource;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use watchcache::Transformers;

/// What a migration did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub moved: usize,
    /// Old keys left in place (new key taken, or the value unreadable).
    pub skipped: usize,
}

/// Moves every object under a legacy segment of `resources` to kube's key.
pub async fn migrate(
    client: &Client,
    transformers: &Transformers,
    prefix: &str,
    resources: &[Resource],
) -> Result<Moved, etcd_client::Error> {
    let prefix = prefix.trim_end_matches('/');
    let mut done = Moved::default();
    let mut seen = std::collections::HashSet::new();
    for res in resources {
        let Some(old) = crate::storage_format::legacy_segment(res) else {
            continue;
        };
        if !seen.insert(old.clone()) {
            continue;
        }
        let new = crate::storage_format::segment(res);
        let from = format!("{prefix}/{old}/");
        let depth = if res.namespaced { 2 } else { 1 };
        let mut kv = client.kv_client();
        // Keys only: under `services/` sit kube's own `services/specs/...`
        // and `services/endpoints/...`, which are not read.
        let keys = kv
            .get(
                from.as_bytes(),
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await?;
        for listed in keys.kvs() {
            let Ok(key) = std::str::from_utf8(listed.key()) else {
                continue;
            };
            let rest = &key[from.len()..];
            // Old `services/<ns>/<name>` keys, not kube's
            // `services/specs/<ns>/<name>` under the same prefix.
            if rest.split('/').count() != depth {
                continue;
            }
            let resp = kv.get(key, None).await?;
            let Some(item) = resp.kvs().first() else {
                continue;
            };
            let to = format!("{prefix}/{new}/{rest}");
            let encoded = transformers
                .decode(item.key(), item.value())
                .and_then(|v| transformers.encode(&to, v))
                .and_then(|(data, _)| transformers.write(&to, data));
            let data = match encoded {
                Ok(d) => d,
                Err(e) => {
                    tracing::error!(%key, error = %e, "storage migration: cannot re-encode; left in place");
                    done.skipped += 1;
                    continue;
                }
            };
            let txn = Txn::new()
                .when([
                    Compare::mod_revision(key, CompareOp::Equal, item.mod_revision()),
                    Compare::create_revision(to.as_str(), CompareOp::Equal, 0),
                ])
                .and_then([
                    TxnOp::put(to.as_str(), data, None),
                    TxnOp::delete(key, None),
                ]);
            if kv.txn(txn).await?.succeeded() {
                done.moved += 1;
            } else {
                tracing::warn!(%key, %to, "storage migration: changed or already moved; left in place");
                done.skipped += 1;
            }
        }
    }
    if done.moved + done.skipped > 0 {
        tracing::info!(
            moved = done.moved,
            skipped = done.skipped,
            "storage layout migrated to kube's keys"
        );
    }
    Ok(done)
}
