//! Loading files larger than one batch (SPEC §5, §7): split at line
//! boundaries into bounded batches, one graph commit each, and remember how
//! far a run got so `--resume` neither loses nor repeats a batch.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Byte ranges of consecutive batches: each holds whole lines, at most
/// `max_lines` of them and at most `max_bytes` bytes. A line longer than
/// `max_bytes` cannot be loaded and is an error naming its line number.
pub fn split_batches(data: &[u8], max_lines: usize, max_bytes: usize) -> Result<Vec<Range<usize>>, String> {
    let mut batches = Vec::new();
    let (mut start, mut lines, mut pos, mut line_no) = (0usize, 0usize, 0usize, 0usize);
    while pos < data.len() {
        let end = memchr::memchr(b'\n', &data[pos..]).map_or(data.len(), |i| pos + i + 1);
        line_no += 1;
        if end - pos > max_bytes {
            return Err(format!("line {line_no} is {} bytes, more than one batch may hold ({max_bytes})", end - pos));
        }
        if lines == max_lines || end - start > max_bytes {
            batches.push(start..pos);
            (start, lines) = (pos, 0);
        }
        lines += 1;
        pos = end;
    }
    if start < data.len() {
        batches.push(start..data.len());
    }
    Ok(batches)
}

/// Progress of one file's load: `<file>.omnigraph-checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Names the run; each batch's key is `<run>:<n>` and is stored in its commit.
    pub run: String,
    pub file_sha256: String,
    /// The bounds the file was split with (`split_batches`).
    pub batch_lines: usize,
    pub batch_bytes: usize,
    /// The first batch not known to be committed.
    pub next_batch: usize,
}

impl Checkpoint {
    pub fn new(file_sha256: String, batch_lines: usize, batch_bytes: usize) -> Checkpoint {
        Checkpoint { run: ulid::Ulid::new().to_string(), file_sha256, batch_lines, batch_bytes, next_batch: 0 }
    }

    pub fn path_for(file: &Path) -> PathBuf {
        let mut name = file.file_name().unwrap_or_default().to_os_string();
        name.push(".omnigraph-checkpoint");
        file.with_file_name(name)
    }

    pub fn key(&self, batch: usize) -> String {
        format!("{}:{batch}", self.run)
    }

    /// Moves past batches whose commits exist (committed after the last
    /// checkpoint write, before a crash).
    pub fn catch_up(&mut self, committed_keys: &[String]) {
        let prefix = format!("{}:", self.run);
        for key in committed_keys {
            if let Some(n) = key.strip_prefix(&prefix).and_then(|n| n.parse::<usize>().ok()) {
                self.next_batch = self.next_batch.max(n + 1);
            }
        }
    }

    pub fn read(path: &Path) -> Result<Option<Checkpoint>, String> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Replaces the checkpoint atomically (write, fsync, rename).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("omnigraph-checkpoint.tmp");
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = std::fs::File::create(&tmp).map_err(fail)?;
        std::io::Write::write_all(&mut file, &serde_json::to_vec(self).expect("checkpoint serializes")).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, path).map_err(fail)
    }

    pub fn remove(path: &Path) -> Result<(), String> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_whole_lines_within_both_bounds() {
        let data = b"aaaa\nbb\ncccccc\nd\n\ne";
        let batches = split_batches(data, 2, 9).unwrap();
        let texts: Vec<&[u8]> = batches.iter().map(|r| &data[r.clone()]).collect();
        assert_eq!(texts, [&b"aaaa\nbb\n"[..], b"cccccc\nd\n", b"\ne"]);
        assert_eq!(batches.iter().map(|r| r.len()).sum::<usize>(), data.len(), "nothing lost or repeated");
        assert!(split_batches(b"ok\nfar too long\n", 10, 5).unwrap_err().contains("line 2"));
        assert!(split_batches(b"", 10, 5).unwrap().is_empty());
    }

    #[test]
    fn catch_up_skips_batches_the_log_shows_committed() {
        let mut c = Checkpoint::new("x".into(), 10, 100);
        c.next_batch = 2;
        let other = Checkpoint::new("x".into(), 10, 100);
        c.catch_up(&[c.key(0), c.key(3), other.key(7), "junk".into()]);
        assert_eq!(c.next_batch, 4);
    }
}
