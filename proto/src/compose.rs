//! Bodies composed from parts encoded elsewhere, so that a stored object is
//! encoded once and its bytes shared: a list whose items are already
//! encoded ([`encode_list`]), and the frames of a watch stream
//! ([`watch_event_frame`]).

use serde_json::Value;

use crate::envelope::split_api_version;
use crate::table::{table, Kind, Ty};
use crate::wire::{len_field_size, put_len, put_tag, put_varint};
use crate::{encode, gvk, ProtoError};

/// The protobuf message of an object carrying `apiVersion` and `kind`,
/// without the envelope: what a list's `items` and a watch event's object
/// are made of.
pub fn encode_raw(object: &Value) -> Result<Vec<u8>, ProtoError> {
    let field = |k: &str| {
        object
            .get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| ProtoError::invalid_json(k, "missing or not a string"))
    };
    let api_version = field("apiVersion")?;
    let kind = field("kind")?;
    let (group, version) = split_api_version(api_version);
    let message =
        gvk::message_for(group, version, kind).ok_or_else(|| ProtoError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })?;
    encode::encode_from_json(message, object)
}

/// A whole list body (envelope included) of kind `kind` (`ConfigMapList`)
/// in `api_version`: `metadata` (a ListMeta, as JSON) and `items`, each the
/// message of one item as [`encode_raw`] makes it. The field numbers come
/// from the list's message, so any list kind of the table works.
pub fn encode_list<'a>(
    api_version: &str,
    kind: &str,
    metadata: &Value,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, ProtoError> {
    let items: Vec<&[u8]> = items.into_iter().collect();
    let mut parts = ListParts::new(api_version, kind, metadata, items.iter().map(|i| i.len()))?;
    // The envelope's `raw` is written in place, each item copied once: its
    // length is known before any item is.
    let mut out = Vec::with_capacity(parts.len());
    out.extend_from_slice(&parts.take_head());
    for item in items {
        parts.put_item(&mut out, item);
    }
    out.extend_from_slice(ListParts::TAIL);
    Ok(out)
}

/// A list body cut where its items go, so that a large list can be written
/// item by item (streamed) after `head`: each item framed by
/// [`ListParts::put_item`], then [`ListParts::TAIL`]. The item lengths are
/// needed up front, since the envelope's `raw` field is length-prefixed.
#[derive(Debug, Clone)]
pub struct ListParts {
    /// The magic, the envelope's typeMeta, the head of `raw`, and the
    /// list's metadata.
    head: Vec<u8>,
    items_field: u32,
    /// The whole body's length.
    len: usize,
}

impl ListParts {
    /// The envelope's empty `contentEncoding` and `contentType`, after the
    /// items.
    pub const TAIL: &'static [u8] = &[3 << 3 | 2, 0, 4 << 3 | 2, 0];

    pub fn new(
        api_version: &str,
        kind: &str,
        metadata: &Value,
        item_lens: impl IntoIterator<Item = usize>,
    ) -> Result<ListParts, ProtoError> {
        let t = table()?;
        let (group, version) = split_api_version(api_version);
        let message =
            gvk::message_in(t, group, version, kind).ok_or_else(|| ProtoError::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })?;
        let m = t.message(t.lookup(message)?);
        let field = |name: &str| {
            m.fields.iter().find(|f| f.name == name).ok_or_else(|| {
                ProtoError::invalid_json(name, format!("{} has no such field", m.name))
            })
        };
        let meta_field = field("metadata")?;
        let items_field = field("items")?.number;
        let Kind::Single(Ty::Message(meta_message)) = meta_field.kind else {
            return Err(ProtoError::invalid_json("metadata", "not a message"));
        };
        let mut meta = Vec::new();
        encode::encode_message(t, meta_message, metadata, &mut meta, 1)?;
        let raw_len = len_field_size(meta_field.number, meta.len())
            + item_lens
                .into_iter()
                .map(|len| len_field_size(items_field, len))
                .sum::<usize>();
        let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
        put_len(&mut type_meta, 1, api_version.as_bytes());
        put_len(&mut type_meta, 2, kind.as_bytes());
        let mut head =
            Vec::with_capacity(crate::MAGIC.len() + type_meta.len() + 12 + meta.len() + 6);
        head.extend_from_slice(crate::MAGIC);
        put_len(&mut head, 1, &type_meta);
        put_tag(&mut head, 2, crate::wire::WIRE_LEN);
        put_varint(&mut head, raw_len as u64);
        let before_raw = head.len();
        put_len(&mut head, meta_field.number, &meta);
        Ok(ListParts {
            head,
            items_field,
            len: before_raw + raw_len + Self::TAIL.len(),
        })
    }

    /// The bytes before the first item (taken: a stream writes them once).
    pub fn take_head(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.head)
    }

    /// Appends one item (its message, as [`encode_raw`] makes it).
    pub fn put_item(&self, out: &mut Vec<u8>, item: &[u8]) {
        self.put_item_head(out, item.len());
        out.extend_from_slice(item);
    }

    /// Appends the tag and length that go before an item of `len` bytes.
    pub fn put_item_head(&self, out: &mut Vec<u8>, len: usize) {
        put_tag(out, self.items_field, crate::wire::WIRE_LEN);
        put_varint(out, len as u64);
    }

    /// The whole body's length: the head, every item framed, the tail.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }
}

/// One frame of a protobuf watch stream: a 4-byte big-endian length, then
/// a `WatchEvent` body (envelope included) in `api_version` (the watched
/// resource's group version, as kube's stream encoder writes it): `type`
/// and `object`, a RawExtension holding the object's own whole body
/// (`object_body`, envelope included).
pub fn watch_event_frame(api_version: &str, event_type: &str, object_body: &[u8]) -> Vec<u8> {
    // k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent: type = 1,
    // object = 2; runtime.RawExtension: raw = 1. Every length is known
    // before anything is written, so the object's bytes (the bulk of the
    // frame) are copied once, into place.
    let object_len = len_field_size(1, object_body.len());
    let event_len = len_field_size(1, event_type.len()) + len_field_size(2, object_len);
    let type_meta_len =
        len_field_size(1, api_version.len()) + len_field_size(2, "WatchEvent".len());
    let body_len = crate::MAGIC.len()
        + len_field_size(1, type_meta_len)
        + len_field_size(2, event_len)
        + len_field_size(3, 0)
        + len_field_size(4, 0);
    let mut frame = Vec::with_capacity(4 + body_len);
    frame.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(crate::MAGIC);
    put_head(&mut frame, 1, type_meta_len);
    put_len(&mut frame, 1, api_version.as_bytes());
    put_len(&mut frame, 2, b"WatchEvent");
    put_head(&mut frame, 2, event_len);
    put_len(&mut frame, 1, event_type.as_bytes());
    put_head(&mut frame, 2, object_len);
    put_len(&mut frame, 1, object_body);
    put_len(&mut frame, 3, b"");
    put_len(&mut frame, 4, b"");
    debug_assert_eq!(frame.len(), 4 + body_len);
    frame
}

/// The tag and length of a length-delimited field, its data to follow.
fn put_head(out: &mut Vec<u8>, number: u32, len: usize) {
    put_tag(out, number, crate::wire::WIRE_LEN);
    put_varint(out, len as u64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_object, decode_unknown, encode_object};
    use serde_json::json;

    fn cm(name: &str) -> Value {
        json!({"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": name, "resourceVersion": "5"}, "data": {"a": "b"}})
    }

    #[test]
    fn list_of_shared_items_decodes_as_the_list() {
        let items = [encode_raw(&cm("x")).unwrap(), encode_raw(&cm("y")).unwrap()];
        let body = encode_list(
            "v1",
            "ConfigMapList",
            &json!({"resourceVersion": "9", "continue": "c"}),
            items.iter().map(Vec::as_slice),
        )
        .unwrap();
        let v = decode_object(&body).unwrap();
        assert_eq!(v["kind"], "ConfigMapList");
        assert_eq!(v["metadata"]["resourceVersion"], "9");
        assert_eq!(v["metadata"]["continue"], "c");
        assert_eq!(v["items"][1]["metadata"]["name"], "y");
        assert_eq!(v["items"][0]["data"]["a"], "b");
        // The same bytes as encoding the whole list at once.
        let whole = encode_object(&json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "9", "continue": "c"},
            "items": [cm("x"), cm("y")]}))
        .unwrap();
        assert_eq!(body, whole);
    }

    #[test]
    fn watch_frame_is_length_prefixed_watch_event() {
        let object = encode_object(&cm("x")).unwrap();
        let frame = watch_event_frame("v1", "ADDED", &object);
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        let unk = decode_unknown(&frame[4..]).unwrap();
        assert_eq!(
            (unk.api_version.as_str(), unk.kind.as_str()),
            ("v1", "WatchEvent")
        );
        let v = decode_object(&frame[4..]).unwrap();
        assert_eq!(v["type"], "ADDED");
        assert_eq!(v["object"]["metadata"]["name"], "x");
    }

    /// The frame written in place is the frame built from its nested
    /// messages, byte for byte, at every varint width of the lengths.
    #[test]
    fn watch_frame_in_place_equals_the_nested_encoding() {
        for size in [0usize, 100, 127, 128, 200, 16_383, 16_384, 70_000] {
            let object = vec![b'o'; size];
            for api_version in ["v1", "apps/v1", "a.very.long.group.example.com/v1beta1"] {
                let mut raw = Vec::new();
                put_len(&mut raw, 1, &object);
                let mut event = Vec::new();
                put_len(&mut event, 1, b"MODIFIED");
                put_len(&mut event, 2, &raw);
                let body = crate::envelope::encode_unknown(api_version, "WatchEvent", &event);
                let mut want = (body.len() as u32).to_be_bytes().to_vec();
                want.extend_from_slice(&body);
                assert_eq!(
                    watch_event_frame(api_version, "MODIFIED", &object),
                    want,
                    "{size} bytes in {api_version}"
                );
            }
        }
    }
}
