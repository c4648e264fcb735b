//! Loading files larger than one batch (SPEC §5, §7). The file is streamed,
//! never read whole: memory is one batch. A batch is bounded as the
//! validator bounds it: rows per table (the records naming one type) and
//! bytes. A file within both is sent as it is, one commit, however many
//! lines it has. A larger one is split at line boundaries in two passes: node
//! records (and every line that is no edge record, so the validator still
//! reports it) first, then edge records, each pass keeping the file's order
//! (merge's last-wins is unchanged; an edge never reaches the host before a
//! node of a later line it points to). Each batch is named by its pass and
//! byte range, so `--resume` neither loses nor repeats one, however batches
//! were split further to fit the validator's bounds. Each batch takes every
//! line it can (a cut falls only where the next line would cross a bound),
//! so a pass has the fewest batches those bounds allow.
//!
//! Rows are counted per table as the bounds count them (a line's table read
//! by `Probe`, without a parse when written plainly); a batch refused for a
//! size bound is halved and retried. Batch keys come from byte ranges; the
//! `--resume` checkpoint is here too (with a multi-batch overwrite's work
//! branch). The whole flow of a file load (CLI `load`, local or `--server`):
//!
//! ```text
//! file ─► streamed (one batch in memory) ─► every table ≤ rows bound and bytes ≤ bound?
//!                                               │ yes ─► one load, file order, key <run>:a:0-len
//!                                               │ no (or refused for a size bound)
//!                                               ▼
//!         nodes pass (every non-edge line), then edges pass, each in file order
//!         a batch ends where the next line's table is full or the bytes would pass the bound;
//!         a batch refused for a size bound is halved and retried
//!         key <run>:<n|e>:<start>-<end> per commit; checkpoint after each (--resume: log wins)
//!         after the last batch (local root): bounded maintenance steps, once
//!         mode overwrite: fork ow-<run> from the target with the named types' tables empty →
//!         batches in append mode onto it → POST /overwrite: checks of a single overwrite against the
//!         target head (must still be the fork base, else 409 target_moved) → one commit on the target
//!         whose replaced tables are streamed copies of the work branch's → work branch deleted
//! ```
//!
//! The upload page follows the same flow with the same bounds and keys
//! (web/split.js, web/worker.js).
//!
//! Over 600 lines only with its unit tests (the splitter is about 550).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which lines a batch takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// The whole file in its order (it fits one batch).
    All,
    /// Node records and every line that is not an edge record.
    Nodes,
    /// Edge records.
    Edges,
}

impl Pass {
    fn letter(self) -> &'static str {
        match self {
            Pass::All => "a",
            Pass::Nodes => "n",
            Pass::Edges => "e",
        }
    }

    fn takes(self, line: &Probe<'_>) -> bool {
        match self {
            Pass::All => true,
            Pass::Nodes => !line.is_edge(),
            Pass::Edges => line.is_edge(),
        }
    }
}

/// Where a split run stands: a pass and a byte offset into the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub pass: Pass,
    pub offset: u64,
}

/// The top-level names of a record line: which kind, which type.
#[derive(Deserialize, Default)]
struct Probe<'a> {
    #[serde(borrow, rename = "type")]
    node: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    edge: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Probe<'a> {
    /// A line's names; a line that is no JSON object with string (or null)
    /// `type` and `edge` names none.
    fn of(line: &'a [u8]) -> Probe<'a> {
        Probe::as_written(line).unwrap_or_else(|| serde_json::from_slice(line).unwrap_or_default())
    }

    /// A record laid out as writers write them, read without parsing it:
    /// `{"type":"Name",…` or `{"edge":"Name",…`, no escape in the line, and
    /// neither name again after `Name`. For every line the validator
    /// accepts, the same answer as parsing (a line it refuses fails its
    /// file anyway). `web/split.js`'s `probeLine` reads lines the same way.
    fn as_written(line: &'a [u8]) -> Option<Probe<'a>> {
        let rest = line.strip_prefix(b"{\"")?;
        let (edge, rest) = match rest.strip_prefix(b"type\":\"") {
            Some(rest) => (false, rest),
            None => (true, rest.strip_prefix(b"edge\":\"")?),
        };
        let end = rest.iter().position(|&b| b == b'"' || b == b'\\').filter(|&end| end > 0 && rest[end] == b'"')?;
        // The rest in one scalar pass from the name's closing quote on (a
        // record's quotes are a few bytes apart: SIMD searches restarted at
        // each cost more than this loop).
        let after = &rest[end..];
        for (at, &byte) in after.iter().enumerate() {
            let named_again = || after[at + 1..].starts_with(b"type\"") || after[at + 1..].starts_with(b"edge\"");
            if byte == b'\\' || (byte == b'"' && named_again()) {
                return None;
            }
        }
        let name = Some(std::borrow::Cow::Borrowed(std::str::from_utf8(&rest[..end]).ok()?));
        Some(if edge { Probe { node: None, edge: name } } else { Probe { node: name, edge: None } })
    }

    /// An edge record (an `edge` string). Anything else, invalid lines
    /// included, goes with the nodes.
    fn is_edge(&self) -> bool {
        self.edge.is_some()
    }

    /// The table the record's row goes to (`edge`, else `type`): the one
    /// whose rows bound it counts against. A line naming none counts
    /// against no table (the validator refuses it; its bytes still count).
    fn table(&self) -> Option<&str> {
        self.edge.as_deref().or(self.node.as_deref())
    }
}

/// The table a record line's row goes to (its `edge`, else its `type`),
/// as the splitter counts it against the rows bound; `None` for a line
/// that names none (the validator refuses it).
pub fn table_of(line: &[u8]) -> Option<String> {
    Probe::of(line).table().map(str::to_owned)
}

/// Rows per table of the lines a batch holds so far.
#[derive(Default)]
struct TableRows(std::collections::HashMap<String, usize>);

impl TableRows {
    /// Counts one more row of `table` if it stays within `max` rows; a
    /// line naming no table always fits.
    fn admit(&mut self, table: Option<&str>, max: usize) -> bool {
        let Some(table) = table else { return true };
        match self.0.get_mut(table) {
            Some(rows) if *rows >= max => false,
            Some(rows) => {
                *rows += 1;
                true
            }
            None if max == 0 => false,
            None => {
                self.0.insert(table.to_owned(), 1);
                true
            }
        }
    }
}

/// One batch: the lines of its pass in `[start, end)` of the file.
#[derive(Debug, Clone)]
pub struct Batch {
    pub pass: Pass,
    pub start: u64,
    pub end: u64,
    /// The batch's bytes: its lines, in file order (shared with the load
    /// request, not copied).
    pub bytes: Arc<Vec<u8>>,
    /// Per batch line: the file line number (1-based) and the file offset.
    pub lines: Vec<(u64, u64)>,
    /// Per batch line: where it ends in `bytes`.
    line_ends: Vec<usize>,
}

impl Batch {
    /// The key its commit carries: `<run>:<pass>:<start>-<end>`.
    pub fn key(&self, run: &str) -> String {
        format!("{run}:{}:{}-{}", self.pass.letter(), self.start, self.end)
    }

    /// Splits a batch of two lines or more into two halves covering the
    /// same range (a batch the validator refused for a bound).
    pub fn halves(self) -> Option<(Batch, Batch)> {
        if self.lines.len() < 2 {
            return None;
        }
        let mid = self.lines.len() / 2;
        let cut = self.line_ends[mid - 1];
        let middle = self.lines[mid].1;
        let first = Batch {
            pass: self.pass,
            start: self.start,
            end: middle,
            bytes: Arc::new(self.bytes[..cut].to_vec()),
            lines: self.lines[..mid].to_vec(),
            line_ends: self.line_ends[..mid].to_vec(),
        };
        let second = Batch {
            pass: self.pass,
            start: middle,
            end: self.end,
            bytes: Arc::new(self.bytes[cut..].to_vec()),
            lines: self.lines[mid..].to_vec(),
            line_ends: self.line_ends[mid..].iter().map(|e| e - cut).collect(),
        };
        Some((first, second))
    }

    /// The file line of the batch's line `n` (1-based), as reports name it.
    pub fn file_line(&self, n: u64) -> Option<u64> {
        let index = usize::try_from(n.checked_sub(1)?).ok()?;
        self.lines.get(index).map(|(line, _)| *line)
    }
}

/// Reads one file in batches of at most `max_table_rows` records of any
/// one type and `max_bytes` bytes.
pub struct Splitter {
    reader: BufReader<File>,
    len: u64,
    position: Position,
    /// Lines before `position.offset` (file line numbers continue from here).
    line_no: u64,
    max_table_rows: usize,
    max_bytes: usize,
    /// A line read past the end of the previous batch, with its offset.
    pending: Option<(Vec<u8>, u64)>,
}

impl Splitter {
    pub fn open(path: &Path, max_table_rows: usize, max_bytes: usize) -> Result<Splitter, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?.len();
        let reader = BufReader::with_capacity(1 << 20, file);
        let start = Position {
            pass: Pass::All,
            offset: 0,
        };
        Ok(Splitter {
            reader,
            len,
            position: start,
            line_no: 0,
            max_table_rows,
            max_bytes,
            pending: None,
        })
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn position(&self) -> Position {
        self.position
    }

    /// Moves to `position`, counting the lines before it.
    pub fn seek(&mut self, position: Position) -> Result<(), String> {
        self.reader.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        let mut prefix = (&mut self.reader).take(position.offset);
        let mut buf = vec![0u8; 1 << 20];
        let mut lines = 0u64;
        loop {
            let n = prefix.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        }
        self.position = position;
        self.line_no = lines;
        self.pending = None;
        Ok(())
    }

    /// The whole file as one batch, if it is within both bounds (then it
    /// goes as it is); otherwise `None`, and the splitter is back at the start.
    pub fn whole_file(&mut self) -> Result<Option<Batch>, String> {
        let start = Position {
            pass: Pass::All,
            offset: 0,
        };
        if self.len > self.max_bytes as u64 {
            return Ok(None);
        }
        self.seek(start)?;
        let batch = self.fill()?;
        if self.pending.is_none() && !batch.lines.is_empty() {
            return Ok(Some(batch));
        }
        self.seek(start)?;
        Ok(None)
    }

    /// Reads the next line (LF included) into `line`; `false` at the end of the file.
    fn read_line(&mut self, line: &mut Vec<u8>) -> Result<bool, String> {
        line.clear();
        loop {
            let available = self.reader.fill_buf().map_err(|e| e.to_string())?;
            if available.is_empty() {
                return Ok(!line.is_empty());
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if line.len() + take > self.max_bytes {
                return Err(format!(
                    "line {} (at byte {}) is longer than one batch may hold ({} bytes)",
                    self.line_no + 1,
                    self.position.offset,
                    self.max_bytes
                ));
            }
            line.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            if done {
                return Ok(true);
            }
        }
    }

    /// The next batch from the current position, or `None` when the file is
    /// done. A pass that ends moves to the next one (nodes → edges).
    pub fn next_batch(&mut self) -> Result<Option<Batch>, String> {
        loop {
            if self.position.offset >= self.len && self.pending.is_none() {
                match self.position.pass {
                    Pass::Nodes => self.seek(Position {
                        pass: Pass::Edges,
                        offset: 0,
                    })?,
                    Pass::All | Pass::Edges => return Ok(None),
                }
                continue;
            }
            let batch = self.fill()?;
            if !batch.lines.is_empty() {
                return Ok(Some(batch));
            }
        }
    }

    /// Reads lines of the current pass until the next would cross a bound.
    fn fill(&mut self) -> Result<Batch, String> {
        let pass = self.position.pass;
        let start = self.position.offset;
        let (mut bytes, mut lines, mut line_ends) = (Vec::new(), Vec::new(), Vec::new());
        let mut rows = TableRows::default();
        let mut line = Vec::new();
        loop {
            let offset = self.position.offset;
            match self.pending.take() {
                Some((pending, _)) => line = pending,
                None => {
                    if !self.read_line(&mut line)? {
                        break;
                    }
                }
            }
            let probe = Probe::of(&line);
            if !pass.takes(&probe) {
                self.advance(line.len());
                continue;
            }
            let fits = bytes.len() + line.len() <= self.max_bytes && rows.admit(probe.table(), self.max_table_rows);
            drop(probe);
            if !fits {
                self.pending = Some((std::mem::take(&mut line), offset));
                break;
            }
            bytes.extend_from_slice(&line);
            line_ends.push(bytes.len());
            lines.push((self.line_no + 1, offset));
            self.advance(line.len());
        }
        Ok(Batch { pass, start, end: self.position.offset, bytes: Arc::new(bytes), lines, line_ends })
    }

    fn advance(&mut self, bytes: usize) {
        self.position.offset += bytes as u64;
        self.line_no += 1;
    }
}

/// The distinct types a file's records name (the types a multi-batch
/// overwrite replaces), in one streamed pass.
pub fn types_named(path: &Path, max_bytes: usize) -> Result<Vec<String>, String> {
    let mut splitter = Splitter::open(path, usize::MAX, max_bytes)?;
    let mut names = std::collections::BTreeSet::new();
    let mut line = Vec::new();
    while splitter.read_line(&mut line)? {
        if let Some(name) = Probe::of(&line).table() {
            names.insert(name.to_owned());
        }
        splitter.advance(line.len());
    }
    Ok(names.into_iter().collect())
}

/// The SHA-256 of a file, streamed.
pub fn file_sha256(path: &Path) -> Result<String, String> {
    let mut file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(crate::auth::hex(&hasher.finalize()))
}

/// The work branch of a multi-batch overwrite (see `Graph::create_work_branch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkBranch {
    pub branch: String,
    /// The target's head the work branch was forked from.
    pub base_seq: u64,
    pub types: Vec<String>,
}

/// Progress of one file's load: `<file>.omnigraph-checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Names the run; each batch's key is `<run>:<pass>:<start>-<end>` and
    /// is stored in its commit.
    pub run: String,
    pub file_sha256: String,
    /// The bounds the file is split with (rows per table; runs written
    /// before rows were counted per table named it `batch_lines`).
    #[serde(alias = "batch_lines")]
    pub batch_rows: usize,
    pub batch_bytes: usize,
    /// Everything before this position is committed.
    pub next: Position,
    /// Set once a multi-batch overwrite forked its work branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<WorkBranch>,
}

impl Checkpoint {
    pub fn new(file_sha256: String, batch_rows: usize, batch_bytes: usize) -> Checkpoint {
        Checkpoint {
            run: ulid::Ulid::new().to_string(),
            file_sha256,
            batch_rows,
            batch_bytes,
            next: Position {
                pass: Pass::All,
                offset: 0,
            },
            overwrite: None,
        }
    }

    pub fn path_for(file: &Path) -> PathBuf {
        let mut name = file.file_name().unwrap_or_default().to_os_string();
        name.push(".omnigraph-checkpoint");
        file.with_file_name(name)
    }

    /// The key of a multi-batch overwrite's publish commit.
    pub fn publish_key(&self) -> String {
        format!("{}:publish", self.run)
    }

    /// The work branch name of this run's multi-batch overwrite.
    pub fn work_branch_name(&self) -> String {
        format!("ow-{}", self.run.to_ascii_lowercase())
    }

    /// Moves past batches whose commits exist (committed after the last
    /// checkpoint write, before a crash): each key that starts where the
    /// run stands moves it to that key's end.
    pub fn catch_up(&mut self, committed_keys: &[String], file_len: u64) {
        let prefix = format!("{}:", self.run);
        let ranges: Vec<(&str, u64, u64)> = committed_keys
            .iter()
            .filter_map(|key| {
                let (pass, range) = key.strip_prefix(&prefix)?.split_once(':')?;
                let (start, end) = range.split_once('-')?;
                Some((pass, start.parse().ok()?, end.parse().ok()?))
            })
            .collect();
        loop {
            if self.next.pass == Pass::Nodes && self.next.offset >= file_len {
                self.next = Position {
                    pass: Pass::Edges,
                    offset: 0,
                };
            }
            let found = ranges
                .iter()
                .find(|(pass, start, _)| *pass == self.next.pass.letter() && *start == self.next.offset);
            match found {
                Some((_, _, end)) if *end > self.next.offset => self.next.offset = *end,
                _ => return,
            }
        }
    }

    pub fn read(path: &Path) -> Result<Option<Checkpoint>, String> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Replaces the checkpoint atomically (write, fsync, rename).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("omnigraph-checkpoint.tmp");
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = std::fs::File::create(&tmp).map_err(fail)?;
        std::io::Write::write_all(&mut file, &serde_json::to_vec(self).expect("checkpoint serializes"))
            .map_err(fail)?;
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

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    fn all_batches(splitter: &mut Splitter) -> Vec<Batch> {
        splitter
            .seek(Position {
                pass: Pass::Nodes,
                offset: 0,
            })
            .unwrap();
        std::iter::from_fn(|| splitter.next_batch().unwrap()).collect()
    }

    const NODE: &str = r#"{"type":"P","id":"a"}"#;
    const EDGE: &str = r#"{"edge":"K","from":"a","to":"b"}"#;

    const OTHER_NODE: &str = r#"{"type":"Q","id":"q"}"#;

    fn texts(batches: &[Batch]) -> Vec<String> {
        batches.iter().map(|b| String::from_utf8(b.bytes.to_vec()).unwrap()).collect()
    }

    #[test]
    fn nodes_come_before_edges_in_file_order_and_rows_are_counted_per_table() {
        let text = format!("{EDGE}\n{NODE}\n{OTHER_NODE}\nnot json\n\n{NODE}\n{OTHER_NODE}\n{EDGE}\n{NODE}");
        let f = file(&text);
        // Two rows per table: the cut falls before the third P, whatever
        // the other table and the lines naming no table hold.
        let mut s = Splitter::open(f.path(), 2, 1000).unwrap();
        let batches = all_batches(&mut s);
        assert_eq!(
            texts(&batches),
            [
                format!("{NODE}\n{OTHER_NODE}\nnot json\n\n{NODE}\n{OTHER_NODE}\n"),
                NODE.to_owned(),
                format!("{EDGE}\n{EDGE}\n")
            ]
        );
        let lines: Vec<Vec<u64>> = batches.iter().map(|b| b.lines.iter().map(|l| l.0).collect()).collect();
        assert_eq!(lines, [vec![2, 3, 4, 5, 6, 7], vec![9], vec![1, 8]], "file line numbers");
        // Each pass's ranges tile the file: nothing lost, nothing repeated.
        assert_eq!((batches[0].start, batches[1].end), (0, text.len() as u64));
        assert_eq!(batches[0].end, batches[1].start);
        assert_eq!((batches[2].start, batches[2].end), (0, text.len() as u64));
        let total: usize = batches.iter().map(|b| b.bytes.len()).sum();
        assert_eq!(total, text.len(), "every byte once");
        // The byte bound cuts too: two node lines fill a batch, an edge line
        // is more than half of one.
        let mut s = Splitter::open(f.path(), 100, 2 * NODE.len() + 2).unwrap();
        let sizes: Vec<usize> = all_batches(&mut s).iter().map(|b| b.lines.len()).collect();
        assert_eq!(sizes, [2, 3, 2, 1, 1]);
    }

    #[test]
    fn a_line_is_read_as_parsing_reads_it() {
        #[derive(Deserialize)]
        struct Case {
            line: String,
            edge: bool,
            table: Option<String>,
        }
        #[derive(Deserialize)]
        struct Cases {
            cases: Vec<Case>,
        }
        let cases: Cases = serde_json::from_str(include_str!("../../../tests/split/probe-lines.json")).unwrap();
        for Case { line, edge, table } in cases.cases {
            let table = table.as_deref();
            let probe = Probe::of(line.as_bytes());
            assert_eq!((probe.is_edge(), probe.table()), (edge, table), "{line}");
            // Read without parsing only where parsing agrees.
            if let Some(fast) = Probe::as_written(line.as_bytes()) {
                let parsed: Probe<'_> = serde_json::from_slice(line.as_bytes()).unwrap();
                assert_eq!((fast.is_edge(), fast.table()), (parsed.is_edge(), parsed.table()), "{line}");
            }
        }
        assert!(Probe::as_written(br#"{"type":"Person","data":{}}"#).is_some(), "a writer's record is not parsed");
    }

    #[test]
    fn a_file_within_both_bounds_is_one_batch_however_many_lines() {
        let text = format!("{EDGE}\n{NODE}\n{OTHER_NODE}\n{NODE}\n{EDGE}\n{OTHER_NODE}\n");
        let f = file(&text);
        let whole = Splitter::open(f.path(), 2, 1000).unwrap().whole_file().unwrap().unwrap();
        assert_eq!((whole.pass, whole.start, whole.end, whole.lines.len()), (Pass::All, 0, text.len() as u64, 6));
        assert_eq!(*whole.bytes, text.as_bytes());
        // One row too many of one table, or one byte too many: split.
        let mut s = Splitter::open(f.path(), 1, 1000).unwrap();
        assert!(s.whole_file().unwrap().is_none());
        assert_eq!(s.position(), Position { pass: Pass::All, offset: 0 });
        assert!(Splitter::open(f.path(), 2, text.len() - 1).unwrap().whole_file().unwrap().is_none());
        assert!(Splitter::open(file("").path(), 2, 1000).unwrap().whole_file().unwrap().is_none());
    }

    #[test]
    fn halves_cover_the_same_range_and_a_long_line_is_an_error() {
        let f = file(&format!("{NODE}\n{NODE}\n{NODE}\n"));
        let mut s = Splitter::open(f.path(), 10, 1000).unwrap();
        let batch = all_batches(&mut s).remove(0);
        let (a, b) = batch.clone().halves().unwrap();
        assert_eq!(
            (a.start, a.end, b.start, b.end),
            (batch.start, b.start, a.end, batch.end)
        );
        assert_eq!([a.bytes.to_vec(), b.bytes.to_vec()].concat(), *batch.bytes);
        assert_eq!((a.lines.len(), b.lines.len()), (1, 2));
        assert_eq!(b.file_line(1), Some(2));
        assert!(a.halves().is_none());
        let mut s = Splitter::open(f.path(), 10, 10).unwrap();
        s.seek(Position {
            pass: Pass::Nodes,
            offset: 0,
        })
        .unwrap();
        assert!(s.next_batch().unwrap_err().contains("line 1"));
    }

    #[test]
    fn seek_resumes_with_file_line_numbers() {
        let f = file(&format!("{NODE}\n{NODE}\n{EDGE}\n{NODE}\n"));
        let mut s = Splitter::open(f.path(), 1, 1000).unwrap();
        let first = all_batches(&mut s);
        s.seek(Position {
            pass: Pass::Nodes,
            offset: first[1].start,
        })
        .unwrap();
        let again = s.next_batch().unwrap().unwrap();
        assert_eq!(
            (again.start, again.end, again.lines.clone()),
            (first[1].start, first[1].end, first[1].lines.clone())
        );
        assert_eq!(types_named(f.path(), 1000).unwrap(), ["K", "P"]);
    }

    #[test]
    fn catch_up_follows_committed_ranges_across_passes() {
        let mut c = Checkpoint::new("x".into(), 10, 100);
        c.next = Position {
            pass: Pass::Nodes,
            offset: 0,
        };
        let other = Checkpoint::new("x".into(), 10, 100);
        let keys = vec![
            format!("{}:n:0-40", c.run),
            format!("{}:n:40-100", c.run),
            format!("{}:e:0-30", c.run),
            format!("{}:e:70-100", c.run),
            format!("{}:n:0-100", other.run),
            "junk".into(),
        ];
        c.catch_up(&keys, 100);
        assert_eq!(
            c.next,
            Position {
                pass: Pass::Edges,
                offset: 30
            }
        );
    }
}
