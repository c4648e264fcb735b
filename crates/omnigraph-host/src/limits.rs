//! The host engine's bounds, in one place. Each names the error it causes:
//! commit attempts, lease times, index lag, lookup chunk, in-flight body
//! bytes, body and head deadlines, control body size; and glibc's arenas,
//! mmap and trim thresholds, set in `main` before any thread starts.

use std::time::Duration;

/// Branch names are object path segments and Lance branch names
/// (`EngineError::InvalidBranchName`).
pub const MAX_BRANCH_NAME_BYTES: usize = 64;

/// A load that loses the branch-head compare-and-swap re-checks and retries
/// this many times in all (`EngineError::CommitConflict`).
pub const MAX_COMMIT_ATTEMPTS: u32 = 5;

/// How long a write lease is valid. A load must publish before its lease
/// ends (`EngineError::LeaseExpired`); a crashed holder blocks writers of the
/// graph for at most this long, then its lease is taken over.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(120);

/// Writes one process does under one lease while more of its writers wait
/// (the lease is kept between back-to-back loads); then it is released so
/// other hosts get a turn.
pub const MAX_TENURE_WRITES: u32 = 64;

/// A load waits this long for another host's lease (`EngineError::LeaseBusy`).
pub const DEFAULT_LEASE_WAIT: Duration = Duration::from_secs(30);

/// Publishing needs this much lease time left (at most a quarter of the
/// lease), so a slow store cannot make a publish land after the lease ended.
pub const LEASE_PUBLISH_MARGIN: Duration = Duration::from_secs(5);

/// A failed lease renewal is tried again after this, doubling up to
/// `RENEW_BACKOFF_MAX`, while the lease's time left covers the next try
/// (a store that fails once must not cost a long load its lease).
pub const RENEW_BACKOFF_FIRST: Duration = Duration::from_millis(50);
pub const RENEW_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Rows appended since a table's scalar indexes were last updated: past this
/// many, maintenance folds them into the indexes (one step), so lookups
/// stay proportional to the batch.
pub const MAX_UNINDEXED_ROWS: u64 = 65_536;

/// Rows one graph's key runs hold in all (src/keys.rs; the default of
/// `EngineConfig::key_run_rows`), about 24 bytes plus the key's length
/// each: 8M rows of 16-byte ids are ~320 MiB. Every key counts (`_id`,
/// `_src` of an edge with `@card`, each `@unique`), so a table of a million
/// rows with one `@unique` holds 2M.
/// A segment whose run would not fit is looked up through Lance's index.
/// A fold's run counts net of the runs it absorbs (dropped at its publish),
/// so while a fold is built and published the runs hold up to twice this.
pub const MAX_KEY_RUN_ROWS: u64 = 8 * 1024 * 1024;

/// Threads a merge's lookup in the key runs is dealt out to (the machine
/// this is tuned for has two cores).
pub const KEY_LOOKUP_THREADS: usize = 2;

/// Keys a lookup thread takes at least: fewer are probed on the calling
/// thread alone (a thread's start costs more than they do).
pub const MIN_KEYS_PER_LOOKUP_THREAD: usize = 1024;

/// An index fold merges the new rows with the newest segments while each
/// is at most this many times the rows gathered so far (size-tiered):
/// segments stay O(log table), rows are rewritten O(log table) times.
pub const FOLD_TIER_RATIO: u64 = 2;

/// Deletion vectors a merge reads and rewrites at once (one per fragment
/// holding rows the batch replaces): I/O in flight, not CPU.
pub const DELETION_WRITES_IN_FLIGHT: usize = 32;

/// Ids per `IN (…)` filter of a stateful check: bounds one query's size.
pub const LOOKUP_CHUNK: usize = 4_096;

/// A fragment with fewer rows is small: only small fragments that no index
/// covers yet are compacted, into fragments of up to this many rows, so a
/// large fragment is never rewritten to absorb a small one and no index is
/// ever remapped.
pub const COMPACT_FRAGMENT_ROWS: usize = 131_072;

/// Small unindexed fragments of a table (each load adds one or two) before
/// maintenance compacts them even though no index is about to cover them
/// (many small loads): merges and lookups cost per fragment. Otherwise they
/// are compacted right before the fold or index creation that covers them
/// (at least [`MIN_SMALL_FRAGMENTS_BEFORE_COVERING`]).
pub const MIN_SMALL_FRAGMENTS: usize = 16;

/// Small unindexed fragments that are compacted right before a fold or
/// index creation covers them. More than two: loads go on while a
/// compaction is built off the lock and add a fragment or two, which must
/// not start another compaction ahead of the fold forever.
pub const MIN_SMALL_FRAGMENTS_BEFORE_COVERING: usize = 4;

/// Compaction tasks (each at most `COMPACT_FRAGMENT_ROWS` rows) in one
/// maintenance step: a load waits for at most one step.
pub const MAX_COMPACTION_TASKS_PER_STEP: usize = 1;

/// Maintenance steps the CLI runs on a local root, per batch it committed,
/// once its last batch is committed: enough to keep up with what one batch
/// adds.
pub const MAINTENANCE_STEPS_PER_BATCH: usize = 4;

/// Table versions no commit of a live branch pins are removed once older
/// than this (`omnigraph-host optimize --retention-secs`); pinned versions
/// are never removed.
pub const VERSION_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often the server removes unpinned versions of a graph it maintains
/// (cleanup walks every live branch's commits: rare, in the background).
pub const CLEANUP_INTERVAL: Duration = Duration::from_secs(3600);

/// Compiled modules (`validator.rs`) no process has used for this long are
/// removed when a new one is stored: another version's, or one compiled by
/// a wasmtime this host no longer runs (no error: a removed entry costs
/// its next user one compile).
pub const MODULE_CACHE_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Compiled schemas a validator keeps (`validator.rs`; a host has one per
/// graph). Past it they are dropped and compiled again on next use: slower,
/// never an error.
pub const MAX_COMPILED_SCHEMAS: usize = 64;

/// Address space wasmtime reserves for each validator instance's linear
/// memory, and the guard region after it. With 4 GiB reserved (every 32-bit
/// index) and a guard that covers static offsets, the compiled artifact
/// needs no bounds check on its loads and stores; lowering either brings
/// them back (a test in `validator.rs` fails). These are wasmtime 48's own
/// 64-bit defaults, set explicitly so they cannot change silently.
pub const WASM_MEMORY_RESERVATION: u64 = 1 << 32;
pub const WASM_MEMORY_GUARD: u64 = 32 << 20;

/// Table memory a reused pooling slot keeps mapped between batches (zeroed,
/// not handed back to the kernel). The artifact's two tables (its indirect
/// functions, wasm-bindgen's externrefs) take 12 KiB; wasmtime's default
/// of none made every batch `madvise` them away and fault them back in as
/// its first calls filled them lazily (two page faults and two system
/// calls a batch; a 1-line batch's CPU time 125 -> 88 us here,
/// docs/lab/2026-12-03-slot-keeps-tables.md). Beyond this, a table is returned as before.
pub const WASM_TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// The nice value of the server's maintenance thread
/// (`graph::spawn_maintenance`): where loads saturate every core it gets
/// about a tenth of one (CFS weight 110 against 1024): slower, never stopped.
pub const MAINTENANCE_NICE: libc::c_int = 10;

/// How often the server looks for graphs that loads have changed since
/// their last maintenance.
pub const MAINTENANCE_INTERVAL: Duration = Duration::from_secs(1);

/// Lance's index cache per graph root (the BTree pages of `_id`, `_src`,
/// `_dst` and @unique lookups). Past it, least-recently-used pages are
/// evicted and re-read: slower, never an error.
pub const INDEX_CACHE_BYTES: usize = 256 * 1024 * 1024;

/// Lance's metadata cache per graph root (manifests, fragment metadata).
pub const METADATA_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Loads one actor may have in flight on a server; more are answered 429.
pub const DEFAULT_MAX_LOADS_PER_ACTOR: usize = 4;

/// Request bodies a server holds at once, summed over all requests (a body
/// of unknown length counts as the batch bound until it is read). Past it,
/// a request is answered 503 `server_busy` with `Retry-After` before its
/// body is read, so memory stays bounded whatever clients send.
pub const DEFAULT_MAX_INFLIGHT_BYTES: u64 = 256 * 1024 * 1024;

/// Bound on a control request's JSON body (branch creation): 413 `body_too_large`.
pub const MAX_CONTROL_BODY_BYTES: u64 = 64 * 1024;

/// A request body must arrive within this long once its handler starts
/// reading it (slow-loris clients): 408 `body_timeout`. 32 MiB in 120 s is
/// 2.2 Mbit/s.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A request's head (request line and headers) must arrive within this long,
/// or the connection is closed (slow-loris heads). Hyper also caps a head
/// at 100 headers and ~400 KiB: more is answered 431.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// After a failed `accept` (e.g. out of file descriptors), the server waits
/// this long before accepting again.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// `Retry-After` (seconds) of a 429 or 503.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// glibc malloc arenas of a host process (`mallopt(M_ARENA_MAX)`). glibc's
/// default (8 per core) lets every Lance/DataFusion worker thread keep its
/// own arena of freed batch buffers: a CLI load's peak RSS then grew with the
/// file (431 MiB for 32 MiB, 1.2 GiB for 256 MiB, 1.9 GiB for 512 MiB);
/// with two arenas it stays flat (docs/lab/2026-11-30-load-larger-than-memory.md, bench-load-rss.py).
pub const MALLOC_ARENAS: i32 = 2;

/// Allocations from this size up are mmapped by glibc and unmapped when
/// freed (`mallopt(M_MMAP_THRESHOLD)`): a batch's bytes, its canonical rows
/// and its Arrow buffers go back to the kernel after each batch. Setting it
/// also stops glibc from raising the threshold to the largest buffer freed
/// so far, after which later batches' buffers came from the heap and stayed
/// resident: a CLI load of 128 MiB (4 batches) peaked at 290-299 MiB with
/// glibc's default and 245-254 MiB with this, in the same wall time
/// (docs/lab/2026-12-02-rows-copied-once.md, bench-load-rss.py).
pub const MALLOC_MMAP_THRESHOLD: i32 = 4 << 20;

/// Free memory at the top of a malloc heap kept for reuse instead of given
/// back (`mallopt(M_TRIM_THRESHOLD)`). A fixed mmap threshold also fixes
/// this one at glibc's 128 KiB, and the heap was then trimmed and faulted
/// in again around every batch: a 204,800-record CLI load took ~100,000
/// page faults against ~21,000 and ~10 % longer, while
/// `scripts/bench-load-rss.py 32 256` stayed at 1.10-1.13 (goal 1.5).
/// Bounded: at most this much per arena stays resident beyond live data.
pub const MALLOC_TRIM_THRESHOLD: i32 = 32 << 20;
