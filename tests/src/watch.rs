//! A raw HTTP watch client and etcd's history to check it against.
//!
//! `open` sends `GET ...?watch=1...` and, once the response head says 200,
//! forwards each complete line of the chunked body as it arrives; the
//! channel closes with the connection (a killed server or a load balancer
//! dropping it leaves at most a partial line, which is dropped).
//! `etcd_history` reads what a watcher of a key prefix must have seen from
//! etcd's own watch, so a test compares a client's events with the truth:
//! no gap, no duplicate, same order.

use etcd_client::{EventType as EtcdEventType, WatchOptions};
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// One event as a client saw it (or as etcd recorded it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// ADDED, MODIFIED or DELETED.
    pub kind: String,
    pub name: String,
    pub revision: i64,
}

/// One line of a watch stream.
#[derive(Debug)]
pub enum Line {
    Event(Seen),
    Bookmark(i64),
    /// An ERROR event's Status.
    Error(Value),
}

/// Parses one watch line; `None` when it is not a watch event.
pub fn parse_line(line: &[u8]) -> Option<Line> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let kind = v["type"].as_str()?.to_string();
    let object = &v["object"];
    if kind == "ERROR" {
        return Some(Line::Error(object.clone()));
    }
    let revision = object["metadata"]["resourceVersion"]
        .as_str()?
        .parse()
        .ok()?;
    if kind == "BOOKMARK" {
        return Some(Line::Bookmark(revision));
    }
    let name = object["metadata"]["name"].as_str()?.to_string();
    Some(Line::Event(Seen {
        kind,
        name,
        revision,
    }))
}

/// Why a watch could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot reach {0}")]
    Io(#[from] std::io::Error),
    /// The server answered something else than a chunked 200.
    #[error("watch answered {status}: {body}")]
    Status { status: u16, body: String },
}

/// Opens a watch at `addr` (`host:port`) on `path` (with its query) and
/// returns its lines once the server has answered 200.
pub async fn open(addr: &str, path: &str) -> Result<mpsc::UnboundedReceiver<Line>, OpenError> {
    open_with(addr, path, |line| match parse_line(line) {
        Some(line) => line,
        None => panic!("bad watch line {:?}", String::from_utf8_lossy(line)),
    })
    .await
}

/// [`open`], forwarding each line as its bytes, for a caller that reads more
/// of the objects than [`Line`] keeps.
pub async fn open_raw(
    addr: &str,
    path: &str,
) -> Result<mpsc::UnboundedReceiver<Vec<u8>>, OpenError> {
    open_with(addr, path, <[u8]>::to_vec).await
}

async fn open_with<T: Send + 'static>(
    addr: &str,
    path: &str,
    parse: fn(&[u8]) -> T,
) -> Result<mpsc::UnboundedReceiver<T>, OpenError> {
    let mut socket = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await?;
    let mut decoder = ChunkedLines::default();
    let mut buf = vec![0u8; 16 * 1024];
    // The response head first: a refused watch is the caller's to handle.
    let early = loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before the response head",
            )
            .into());
        }
        if let Some(lines) = decoder.push(&buf[..n])? {
            break lines;
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut pending = early;
        loop {
            for line in pending.drain(..) {
                if tx.send(parse(&line)).is_err() {
                    return;
                }
            }
            let n = match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            match decoder.push(&buf[..n]) {
                Ok(Some(lines)) => pending = lines,
                Ok(None) => {}
                Err(_) => return,
            }
        }
    });
    Ok(rx)
}

/// An incremental reader of a chunked HTTP/1.1 response whose body is
/// newline-separated lines.
#[derive(Default)]
struct ChunkedLines {
    raw: Vec<u8>,
    head_done: bool,
    /// Body bytes not yet ended by a newline.
    partial: Vec<u8>,
}

impl ChunkedLines {
    /// Takes more bytes; returns the lines they complete, `None` while the
    /// response head is incomplete, and an error for a non-200 head.
    fn push(&mut self, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, OpenError> {
        self.raw.extend_from_slice(bytes);
        if !self.head_done {
            let Some(end) = self.raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                return Ok(None);
            };
            let head = String::from_utf8_lossy(&self.raw[..end]).into_owned();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let chunked = head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked");
            if status != 200 || !chunked {
                let body = String::from_utf8_lossy(&self.raw[end + 4..]).into_owned();
                return Err(OpenError::Status {
                    status,
                    body: format!("{head}\n\n{body}"),
                });
            }
            self.raw.drain(..end + 4);
            self.head_done = true;
        }
        // Whole chunks only: size line, data, CRLF.
        while let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size_text = String::from_utf8_lossy(&self.raw[..eol]).into_owned();
            let Ok(size) =
                usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            else {
                return Err(OpenError::Status {
                    status: 200,
                    body: format!("bad chunk size {size_text:?}"),
                });
            };
            if self.raw.len() < eol + 2 + size + 2 {
                break;
            }
            if &self.raw[eol + 2 + size..eol + 2 + size + 2] != b"\r\n" {
                return Err(OpenError::Status {
                    status: 200,
                    body: format!("chunk of {size} bytes not followed by CRLF"),
                });
            }
            self.partial
                .extend_from_slice(&self.raw[eol + 2..eol + 2 + size]);
            self.raw.drain(..eol + 2 + size + 2);
        }
        let mut lines = Vec::new();
        while let Some(nl) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=nl).collect();
            lines.push(line[..line.len() - 1].to_vec());
        }
        Ok(Some(lines))
    }
}

/// etcd's history of the keys under `key_prefix` after revision `after` up
/// to `until` (inclusive), as a watcher of that prefix must see it (event
/// names are the keys without the prefix). `until` is the revision of a
/// change under the prefix (etcd reports no progress on a quiet prefix, so
/// nothing else tells when the history is complete), or at most `after`:
/// then the history is empty.
pub async fn etcd_history(
    endpoints: &[String],
    key_prefix: &str,
    after: i64,
    until: i64,
    timeout: Duration,
) -> Vec<Seen> {
    if until <= after {
        return Vec::new();
    }
    let mut client = etcd_client::Client::connect(endpoints, None)
        .await
        .expect("etcd client");
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(after + 1);
    let mut stream = client
        .watch(key_prefix, Some(options))
        .await
        .expect("etcd watch");
    let mut history = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    // etcd reports no progress on an idle prefix: a quorum read tells
    // whether anything at all is left to wait for.
    let current = client
        .get("\0", None)
        .await
        .expect("etcd revision")
        .header()
        .map_or(0, |h| h.revision());
    assert!(
        current >= until,
        "etcd is at {current}, before the awaited {until}"
    );
    while history.last().is_none_or(|s: &Seen| s.revision < until) {
        let resp = tokio::time::timeout_at(deadline, stream.message())
            .await
            .expect("etcd history in time")
            .expect("etcd watch")
            .expect("etcd watch open");
        assert!(!resp.canceled(), "etcd cancelled the history watch");
        for event in resp.events() {
            let kv = event.kv().expect("event kv");
            let kind = match event.event_type() {
                EtcdEventType::Delete => "DELETED",
                EtcdEventType::Put if kv.create_revision() == kv.mod_revision() => "ADDED",
                EtcdEventType::Put => "MODIFIED",
            };
            let name = String::from_utf8_lossy(kv.key())
                .trim_start_matches(key_prefix)
                .to_string();
            history.push(Seen {
                kind: kind.to_string(),
                name,
                revision: kv.mod_revision(),
            });
        }
    }
    history.retain(|s| s.revision <= until);
    history
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_lines_across_chunks_and_reads() {
        let mut d = ChunkedLines::default();
        assert!(d.push(b"HTTP/1.1 200 OK\r\nTransfer-").unwrap().is_none());
        let lines = d
            .push(b"Encoding: chunked\r\n\r\n5\r\nab\ncd\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(lines, vec![b"ab".to_vec()]);
        let lines = d.push(b"2\r\n\nx\r\n").unwrap().unwrap();
        assert_eq!(lines, vec![b"cd".to_vec()]);
    }

    #[test]
    fn refuses_a_chunk_longer_than_its_size() {
        let mut d = ChunkedLines::default();
        let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab\ncd\r\n";
        assert!(d.push(bytes).is_err());
    }

    #[test]
    fn refuses_a_non_200_head() {
        let mut d = ChunkedLines::default();
        let err = d
            .push(b"HTTP/1.1 503 Service Unavailable\r\n\r\nno server")
            .unwrap_err();
        assert!(matches!(err, OpenError::Status { status: 503, .. }));
    }
}
