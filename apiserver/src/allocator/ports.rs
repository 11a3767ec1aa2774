//! NodePorts: one bitmap in a `RangeAllocation` object, changed by
//! compare-and-swap, as kube's port allocator keeps it.
//!
//! The bitmap is kube's: bit `i` stands for port `start + i`, and `data` is
//! the big-endian bytes of that number (as Go's `big.Int.Bytes`), base64 in
//! JSON.

use apimachinery::read::Freshness;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rand::Rng;
use serde_json::{json, Value};
use watchcache::StorageError;

use crate::backend::Backend;
use std::ops::RangeInclusive;

/// How often a compare-and-swap is retried when other writers win.
const MAX_CAS_ATTEMPTS: usize = 32;

/// Why node ports could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// A requested port is outside the range (its index in the request).
    #[error("provided port is not in the valid range. The range of valid ports is {range}")]
    NotInRange { index: usize, range: String },
    /// A requested port is taken.
    #[error("provided port is already allocated")]
    Allocated { index: usize },
    #[error("range is full")]
    Full,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// One port asked for: a given number, or any free one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Port(u16),
    Any,
}

/// A range as kube prints it (`30000-32767`).
pub fn range_text(range: &RangeInclusive<u16>) -> String {
    format!("{}-{}", range.start(), range.end())
}

fn key(backend: &Backend) -> String {
    format!("{}/ranges/servicenodeports", backend.prefix)
}

/// The bitmap, least significant byte first, one bit per port.
struct Bitmap {
    bits: Vec<u8>,
}

impl Bitmap {
    fn new(len: usize) -> Bitmap {
        Bitmap {
            bits: vec![0; len.div_ceil(8)],
        }
    }

    fn decode(obj: &Value, len: usize) -> Bitmap {
        let mut map = Bitmap::new(len);
        let data = obj
            .get("data")
            .and_then(Value::as_str)
            .and_then(|s| STANDARD.decode(s).ok())
            .unwrap_or_default();
        for (i, b) in data.iter().rev().enumerate() {
            if let Some(slot) = map.bits.get_mut(i) {
                *slot = *b;
            }
        }
        map
    }

    fn encode(&self) -> String {
        let mut be: Vec<u8> = self.bits.iter().rev().copied().collect();
        let first = be.iter().position(|b| *b != 0).unwrap_or(be.len());
        be.drain(..first);
        STANDARD.encode(be)
    }

    fn get(&self, i: usize) -> bool {
        self.bits[i / 8] & (1 << (i % 8)) != 0
    }

    fn set(&mut self, i: usize, on: bool) {
        if on {
            self.bits[i / 8] |= 1 << (i % 8);
        } else {
            self.bits[i / 8] &= !(1 << (i % 8));
        }
    }
}

/// Takes the wanted ports in one compare-and-swap: every one or none. A
/// dry run checks without writing.
pub async fn allocate(
    backend: &Backend,
    range: &RangeInclusive<u16>,
    wants: &[Want],
    dry_run: bool,
) -> Result<Vec<u16>, PortError> {
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    change(backend, range, dry_run, |map, start, len| {
        let mut got = Vec::with_capacity(wants.len());
        for (index, want) in wants.iter().enumerate() {
            if let Want::Port(p) = want {
                let i = usize::from(*p).wrapping_sub(start);
                if usize::from(*p) < start || i >= len {
                    return Err(PortError::NotInRange {
                        index,
                        range: range_text(range),
                    });
                }
                if map.get(i) {
                    return Err(PortError::Allocated { index });
                }
                map.set(i, true);
            }
        }
        for want in wants {
            got.push(match want {
                Want::Port(p) => *p,
                Want::Any => {
                    // A random start, then the next free port, as kube's
                    // random-scan allocator does.
                    let from = rand::rng().random_range(0..len);
                    let i = (0..len)
                        .map(|k| (from + k) % len)
                        .find(|i| !map.get(*i))
                        .ok_or(PortError::Full)?;
                    map.set(i, true);
                    (start + i) as u16
                }
            });
        }
        Ok(got)
    })
    .await
}

/// Frees `ports` (ports outside the range are ignored).
pub async fn release(
    backend: &Backend,
    range: &RangeInclusive<u16>,
    ports: &[u16],
) -> Result<(), PortError> {
    change(backend, range, false, |map, start, len| {
        for p in ports {
            let i = usize::from(*p).wrapping_sub(start);
            if usize::from(*p) >= start && i < len {
                map.set(i, false);
            }
        }
        Ok(())
    })
    .await
}

/// The bitmap as stored: its revision (`None`: no bitmap yet) and the
/// ports it marks taken. A bitmap kept for another range reads as empty,
/// as [`allocate`] reads it.
pub async fn snapshot(
    backend: &Backend,
    range: &RangeInclusive<u16>,
) -> Result<(Option<i64>, Vec<u16>), StorageError> {
    let start = usize::from(*range.start());
    let len = usize::from(*range.end()) - start + 1;
    let Some(current) = backend
        .store
        .get(&key(backend), Freshness::MostRecent)
        .await?
    else {
        return Ok((None, Vec::new()));
    };
    let mut taken = Vec::new();
    if current.value().get("range").and_then(Value::as_str) == Some(&range_text(range)) {
        let map = Bitmap::decode(current.value(), len);
        taken.extend((0..len).filter(|i| map.get(*i)).map(|i| (start + i) as u16));
    }
    Ok((Some(current.revision), taken))
}

/// Replaces the bitmap by one marking exactly `taken`, if it is still at
/// `revision` (`None`: if there is none): kube's repair loop's
/// `CreateOrUpdate` of the snapshot it rebuilt. `Conflict` or
/// `AlreadyExists` when someone allocated meanwhile.
pub async fn restore(
    backend: &Backend,
    range: &RangeInclusive<u16>,
    revision: Option<i64>,
    taken: &[u16],
) -> Result<(), StorageError> {
    let start = usize::from(*range.start());
    let len = usize::from(*range.end()) - start + 1;
    let mut map = Bitmap::new(len);
    for p in taken {
        let i = usize::from(*p).wrapping_sub(start);
        if usize::from(*p) >= start && i < len {
            map.set(i, true);
        }
    }
    let obj = range_allocation(range, &map);
    let key = key(backend);
    match revision {
        Some(rev) => backend.store.update(&key, &obj, rev).await.map(drop),
        None => backend.store.create(&key, &obj).await.map(drop),
    }
}

fn range_allocation(range: &RangeInclusive<u16>, map: &Bitmap) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "RangeAllocation",
        "metadata": {"name": "", "creationTimestamp": null},
        "range": range_text(range),
        "data": map.encode(),
    })
}

/// Reads the bitmap, applies `f`, and writes it back if its revision has
/// not moved; retried when it has.
async fn change<T>(
    backend: &Backend,
    range: &RangeInclusive<u16>,
    dry_run: bool,
    mut f: impl FnMut(&mut Bitmap, usize, usize) -> Result<T, PortError>,
) -> Result<T, PortError> {
    let start = usize::from(*range.start());
    let len = usize::from(*range.end()) - start + 1;
    let key = key(backend);
    for _ in 0..MAX_CAS_ATTEMPTS {
        let current = backend.store.get(&key, Freshness::MostRecent).await?;
        let mut map = match &current {
            // A bitmap kept for another range is read as empty: kube's
            // repair loop rebuilds it from the Services then.
            Some(o)
                if o.value().get("range").and_then(Value::as_str) == Some(&range_text(range)) =>
            {
                Bitmap::decode(o.value(), len)
            }
            _ => Bitmap::new(len),
        };
        let out = f(&mut map, start, len)?;
        if dry_run {
            return Ok(out);
        }
        let obj = range_allocation(range, &map);
        let written = match &current {
            Some(o) => backend.store.update(&key, &obj, o.revision).await,
            None => backend.store.create(&key, &obj).await,
        };
        match written {
            Ok(_) => return Ok(out),
            Err(StorageError::Conflict { .. })
            | Err(StorageError::AlreadyExists { .. })
            | Err(StorageError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(PortError::Storage(StorageError::Unavailable(
        "the node port bitmap kept changing; try again".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_round_trips_as_big_endian_bytes() {
        let mut m = Bitmap::new(2768);
        m.set(0, true);
        m.set(9, true);
        let enc = m.encode();
        // bits 0 and 9: the number 0x201, big-endian [0x02, 0x01].
        assert_eq!(STANDARD.decode(&enc).unwrap(), vec![0x02, 0x01]);
        let back = Bitmap::decode(&json!({ "data": enc }), 2768);
        assert!(back.get(0) && back.get(9) && !back.get(1));
        assert_eq!(Bitmap::new(16).encode(), "");
    }
}
