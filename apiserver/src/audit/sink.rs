//! Where audit events go: one JSON line each, written by a thread of its
//! own so requests never wait on disk I/O. Requests hand finished lines to
//! a bounded queue; when it is full the event is dropped, counted and
//! logged (kube's blocking backend would hold the request instead).
//!
//! A file is rotated by size as kube-apiserver's (lumberjack) does: past
//! `max_bytes` it is renamed `NAME-<UTC timestamp>.EXT` and a new file
//! begins; beyond `max_backups` old files (0: keep all) the oldest go.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Events waiting for the writer before new ones are dropped.
pub const QUEUE_CAPACITY: usize = 10_000;

/// `--audit-log-path` and its rotation settings.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// A file, or `-` for standard output.
    pub path: PathBuf,
    /// Rotate past this size (0: lumberjack's default, 100 MB).
    pub max_bytes: u64,
    /// Old files kept (0: all).
    pub max_backups: usize,
}

/// Counters of the audit backend.
#[derive(Debug, Default)]
pub struct Counters {
    /// Events handed to the writer.
    pub events: AtomicU64,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Events lost to write errors.
    pub errors: AtomicU64,
}

/// The sending side, shared by every request.
#[derive(Clone)]
pub struct Sink {
    tx: SyncSender<Msg>,
    pub counters: Arc<Counters>,
}

enum Msg {
    Line(Vec<u8>),
    /// Answered once every line sent before it is written and flushed.
    Flush(SyncSender<()>),
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("counters", &self.counters)
            .finish()
    }
}

impl Sink {
    /// Opens the log (an error here stops the server from starting) and
    /// starts its writer thread.
    pub fn start(config: LogConfig) -> std::io::Result<Sink> {
        Self::with_capacity(config, QUEUE_CAPACITY)
    }

    pub fn with_capacity(config: LogConfig, capacity: usize) -> std::io::Result<Sink> {
        let out = Output::open(config)?;
        let (tx, rx) = sync_channel(capacity.max(1));
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || write_loop(out, rx, &c))?;
        Ok(Sink { tx, counters })
    }

    /// Queues one event line (without its newline); never blocks.
    pub fn send(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        match self.tx.try_send(Msg::Line(line)) {
            Ok(()) => {
                self.counters.events.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let n = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // Logged at the first drop and then every power of two.
                if n.is_power_of_two() {
                    tracing::error!(dropped = n, "audit queue full: events dropped");
                }
            }
        }
    }

    /// Waits (blocking) until everything queued so far is written; for
    /// tests and shutdown.
    pub fn flush(&self) {
        let (tx, rx) = sync_channel(1);
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

enum Target {
    Stdout,
    File(std::io::BufWriter<std::fs::File>),
}

struct Output {
    config: LogConfig,
    target: Target,
    size: u64,
}

const DEFAULT_MAX_BYTES: u64 = 100 << 20;

impl Output {
    fn open(config: LogConfig) -> std::io::Result<Output> {
        if config.path.as_os_str() == "-" {
            return Ok(Output {
                config,
                target: Target::Stdout,
                size: 0,
            });
        }
        if let Some(dir) = config.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.path)?;
        let size = file.metadata()?.len();
        Ok(Output {
            config,
            target: Target::File(std::io::BufWriter::new(file)),
            size,
        })
    }

    fn max_bytes(&self) -> u64 {
        if self.config.max_bytes == 0 {
            DEFAULT_MAX_BYTES
        } else {
            self.config.max_bytes
        }
    }

    fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        if let Target::File(_) = self.target {
            let len = line.len() as u64;
            if self.size > 0 && self.size + len > self.max_bytes() {
                self.rotate()?;
            }
        }
        match &mut self.target {
            Target::Stdout => std::io::stdout().lock().write_all(line),
            Target::File(f) => {
                f.write_all(line)?;
                self.size += line.len() as u64;
                Ok(())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.target {
            Target::Stdout => std::io::stdout().lock().flush(),
            Target::File(f) => f.flush(),
        }
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.flush()?;
        let path = self.config.path.clone();
        let backup = backup_name(&path, chrono::Utc::now());
        std::fs::rename(&path, &backup)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        self.target = Target::File(std::io::BufWriter::new(file));
        self.size = 0;
        if self.config.max_backups > 0 {
            let mut backups = backups(&path);
            backups.sort();
            let excess = backups.len().saturating_sub(self.config.max_backups);
            for old in backups.into_iter().take(excess) {
                let _ = std::fs::remove_file(old);
            }
        }
        Ok(())
    }
}

/// `audit.log` → `audit-2026-11-21T23-40-05.123.log` (lumberjack's
/// format: sorts by time).
fn backup_name(path: &Path, at: chrono::DateTime<chrono::Utc>) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let stamp = at.format("%Y-%m-%dT%H-%M-%S%.3f");
    let mut name = format!("{stem}-{stamp}{ext}");
    let mut n = 1;
    // Two rotations in one millisecond must not overwrite each other.
    while path.with_file_name(&name).exists() {
        name = format!("{stem}-{stamp}.{n}{ext}");
        n += 1;
    }
    path.with_file_name(name)
}

/// The rotated files of `path`.
pub fn backups(path: &Path) -> Vec<PathBuf> {
    let stem = path
        .file_stem()
        .map(|s| format!("{}-", s.to_string_lossy()))
        .unwrap_or_default();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p != path
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&stem))
        })
        .collect()
}

fn write_loop(mut out: Output, rx: Receiver<Msg>, counters: &Counters) {
    let mut failing = false;
    while let Ok(msg) = rx.recv() {
        let mut batch = vec![msg];
        batch.extend(rx.try_iter());
        let mut flushes = Vec::new();
        for msg in batch {
            match msg {
                Msg::Line(line) => {
                    if let Err(e) = out.write(&line) {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        if !failing {
                            tracing::error!(error = %e, "cannot write the audit log");
                            failing = true;
                        }
                    } else {
                        failing = false;
                    }
                }
                Msg::Flush(done) => flushes.push(done),
            }
        }
        // Flushed whenever the queue runs empty: lines reach the file
        // promptly without a write per event under load.
        if let Err(e) = out.flush() {
            counters.errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "cannot flush the audit log");
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_max_backups() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let sink = Sink::start(LogConfig {
            path: path.clone(),
            max_bytes: 100,
            max_backups: 2,
        })
        .expect("opens");
        for i in 0..20 {
            sink.send(
                format!("{{\"n\":\"{i:04}\",\"pad\":\"xxxxxxxxxxxxxxxxxxxx\"}}").into_bytes(),
            );
        }
        sink.flush();
        let current = std::fs::read_to_string(&path).expect("log");
        assert!(current.len() <= 100, "{}", current.len());
        assert!(
            current.ends_with("\"n\":\"0019\",\"pad\":\"xxxxxxxxxxxxxxxxxxxx\"}\n"),
            "{current}"
        );
        let kept = backups(&path);
        assert_eq!(kept.len(), 2, "{kept:?}");
        for b in &kept {
            let text = std::fs::read_to_string(b).expect("backup");
            assert!(text.len() <= 100 && !text.is_empty());
            for line in text.lines() {
                serde_json::from_str::<serde_json::Value>(line).expect("whole JSON lines");
            }
        }
        assert_eq!(sink.counters.events.load(Ordering::Relaxed), 20);
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let sink = Sink::with_capacity(
            LogConfig {
                path,
                max_bytes: 0,
                max_backups: 0,
            },
            1,
        )
        .expect("opens");
        // Hold the writer: it blocks answering this flush until we listen.
        let (held_tx, held_rx) = sync_channel(0);
        sink.tx.send(Msg::Flush(held_tx)).expect("writer alive");
        let start = std::time::Instant::now();
        for _ in 0..10 {
            sink.send(b"{}".to_vec());
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "send blocked"
        );
        held_rx.recv().expect("writer answers");
        sink.flush();
        let c = &sink.counters;
        assert_eq!(
            c.events.load(Ordering::Relaxed) + c.dropped.load(Ordering::Relaxed),
            10
        );
        assert!(c.dropped.load(Ordering::Relaxed) >= 9);
    }
}
