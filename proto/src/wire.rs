//! Protobuf wire format: a bounds-checked reader and append-only writers.

use crate::ProtoError;

pub(crate) const WIRE_VARINT: u8 = 0;
pub(crate) const WIRE_FIXED64: u8 = 1;
pub(crate) const WIRE_LEN: u8 = 2;
pub(crate) const WIRE_FIXED32: u8 = 5;

/// Largest field number protobuf allows (2^29 - 1).
const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// Reads protobuf values from a byte slice; never reads out of bounds.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(crate) fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = *self.buf.get(self.pos).ok_or(ProtoError::Truncated)?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtoError::VarintOverflow)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        let end = self.pos.checked_add(n).ok_or(ProtoError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(ProtoError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn fixed32(&mut self) -> Result<u32, ProtoError> {
        let s = self.take(4)?;
        let mut b = [0u8; 4];
        b.copy_from_slice(s);
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn fixed64(&mut self) -> Result<u64, ProtoError> {
        let s = self.take(8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        Ok(u64::from_le_bytes(b))
    }

    /// A length-delimited value.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| ProtoError::Truncated)?;
        self.take(len)
    }

    /// A tag: (field number, wire type).
    pub(crate) fn tag(&mut self) -> Result<(u32, u8), ProtoError> {
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 || number > MAX_FIELD_NUMBER {
            return Err(ProtoError::IllegalTag(tag));
        }
        // Truncation is impossible: number <= 2^29 - 1.
        Ok((number as u32, (tag & 7) as u8))
    }

    /// Skips the value of an unknown field.
    pub(crate) fn skip(&mut self, wire_type: u8) -> Result<(), ProtoError> {
        match wire_type {
            WIRE_VARINT => self.varint().map(|_| ()),
            WIRE_FIXED64 => self.take(8).map(|_| ()),
            WIRE_LEN => self.bytes().map(|_| ()),
            WIRE_FIXED32 => self.take(4).map(|_| ()),
            other => Err(ProtoError::UnsupportedWireType(other)),
        }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

/// The bytes a varint of `v` takes.
pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        n += 1;
        v >>= 7;
    }
    n
}

/// The encoded size of length-delimited field `number` whose data is `len`
/// bytes: tag, length, data.
pub(crate) fn len_field_size(number: u32, len: usize) -> usize {
    varint_len((u64::from(number) << 3) | u64::from(WIRE_LEN)) + varint_len(len as u64) + len
}

pub(crate) fn put_len(out: &mut Vec<u8>, number: u32, data: &[u8]) {
    put_tag(out, number, WIRE_LEN);
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// `bytes` as a string, invalid UTF-8 replaced by U+FFFD as Go's JSON
/// encoder writes it. Valid input (nearly all) is checked by
/// `str::from_utf8`, which reads ASCII a word at a time; the lossy
/// conversion alone walked every byte and cost a 2 KiB ConfigMap's create
/// about 35k instructions (BENCHMARKS.md, "Instructions per create").
pub(crate) fn lossy_string(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut r = Reader::new(&out);
            assert_eq!(r.varint().unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn varint_errors() {
        assert_eq!(Reader::new(&[0x80]).varint(), Err(ProtoError::Truncated));
        assert_eq!(
            Reader::new(&[0xff; 11]).varint(),
            Err(ProtoError::VarintOverflow)
        );
    }

    #[test]
    fn length_beyond_input_is_truncated() {
        let mut out = Vec::new();
        put_varint(&mut out, u64::MAX);
        assert_eq!(Reader::new(&out).bytes(), Err(ProtoError::Truncated));
        assert_eq!(Reader::new(&[5, 1, 2]).bytes(), Err(ProtoError::Truncated));
    }

    #[test]
    fn tags() {
        assert_eq!(Reader::new(&[0x0a]).tag(), Ok((1, WIRE_LEN)));
        assert_eq!(Reader::new(&[0x02]).tag(), Err(ProtoError::IllegalTag(2)));
        assert_eq!(
            Reader::new(&[0x0b]).skip(3),
            Err(ProtoError::UnsupportedWireType(3))
        );
    }

    #[test]
    fn valid_text_is_kept_and_invalid_bytes_become_replacement_characters() {
        assert_eq!(super::lossy_string(b"caf\xc3\xa9"), "café");
        assert_eq!(super::lossy_string(b""), "");
        assert_eq!(super::lossy_string(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(super::lossy_string(b"\xc3"), "\u{fffd}");
    }
}
