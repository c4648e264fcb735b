//! The commit engine (SPEC §4): a graph of Lance tables made visible one
//! graph commit at a time. See docs/ARCHITECTURE.md for the protocol and
//! its invariants, docs/storage.md for the layout.

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_ipc::reader::StreamReader;
use fail::fail_point;
use futures::TryStreamExt;
use lance::Dataset;
use lance::dataset::transaction::Operation;
use lance::datatypes::BlobHandling;
use omnigraph_validate_wasm::{ID_COLUMN, Limits, Mode, Options, Schema, format_timestamp};
use serde::Deserialize;

use crate::checks::{self, BatchTable, ExternalRef, Snapshot};
use crate::error::EngineError;
use crate::export::write_records;
use crate::lease::{self, HeldLease, now_ms};
use crate::limits::{DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT, LEASE_PUBLISH_MARGIN, MAX_COMMIT_ATTEMPTS, MAX_TENURE_WRITES};
use crate::manifest::{
    BRANCHES_DIR, CATALOG_PATH, Commit, CommitKind, CommitRef, FORMAT_VERSION, GRAPH_INFO_PATH, GraphInfo,
    MAIN_BRANCH, RECOVERY_DIR, RecoveryRecord, SCHEMA_PATH, StagedTable, TableCounts, TablePin, check_branch_name,
    commit_path, generation_from_lease_name, head_hint_path, recovery_path, seq_from_commit_name, table_path,
};
use crate::storage::GraphRoot;
use crate::tables;
use crate::validator::{PrepareResult, Validator};

mod maintain;
mod overwrite;
pub use overwrite::OverwritePublish;

/// How a graph handle writes.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Names this writer in leases (host and process).
    pub owner: String,
    pub lease_ttl: Duration,
    pub lease_wait: Duration,
    /// fsync table files and manifest objects before a load returns (local
    /// disks; object stores are durable on write).
    pub durable: bool,
    /// The batch bounds (SPEC §5) every load and dry run is validated with,
    /// and that `/rules` reports.
    pub limits: Limits,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            owner: format!("pid-{}-{}", std::process::id(), ulid::Ulid::new()),
            lease_ttl: DEFAULT_LEASE_TTL,
            lease_wait: DEFAULT_LEASE_WAIT,
            durable: true,
            limits: Limits::default(),
        }
    }
}

/// A load: which branch, how, by whom, and the batch's bytes.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub branch: String,
    /// Fork the branch from this one's head if it does not exist (in the
    /// same graph commit as the load).
    pub from: Option<String>,
    pub mode: Mode,
    /// Strict NDJSON (SPEC §2) or the compatibility reading (§2.6).
    pub strict: bool,
    pub actor: String,
    pub batch: Arc<Vec<u8>>,
    /// Recorded in the commit (see [`Commit::batch_key`]).
    pub batch_key: Option<String>,
}

/// Where a load's time went.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimings {
    pub validate: Duration,
    pub checks: Duration,
    pub commit: Duration,
    pub sync: Duration,
}

/// What a successful load did.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub branch: String,
    /// The base this load forked the branch from, if it created it.
    pub created_from: Option<CommitRef>,
    pub mode: Mode,
    /// The published commit; `None` for an empty batch (nothing committed).
    pub commit: Option<Commit>,
    /// The validator's report (SPEC §3).
    pub report_json: String,
    pub timings: LoadTimings,
}

impl Receipt {
    /// Whether the load wrote no rows (an empty batch; with `from`, only the fork was committed).
    pub fn empty(&self) -> bool {
        self.commit.as_ref().is_none_or(|c| c.kind == CommitKind::Fork)
    }

    /// Rows inserted/updated/removed per touched table (none for an empty batch).
    pub fn counts(&self) -> &BTreeMap<String, TableCounts> {
        const NONE: &BTreeMap<String, TableCounts> = &BTreeMap::new();
        self.commit.as_ref().map_or(NONE, |c| &c.counts)
    }
}

/// A dry run's result: the report and what the stateful checks found.
#[derive(Debug, Clone)]
pub struct DryRun {
    pub report_json: String,
    pub conflicts: Vec<crate::error::Conflict>,
    pub counts: BTreeMap<String, TableCounts>,
}

/// What recovery did with a leftover recovery record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Recovered {
    Nothing,
    RolledForward { branch: String, seq: u64 },
    RolledBack { branch: String, seq: u64 },
}

/// A validated batch: the report and its rows as Arrow, per touched type.
struct Validated {
    report_json: String,
    tables: Vec<BatchTable>,
    external_refs: Vec<ExternalRef>,
}

/// Where a staged table's new contents come from.
enum Source<'a> {
    /// A validated batch's rows, written in the load's mode.
    Rows(&'a RecordBatch),
    /// Every row of another commit's table (a multi-batch overwrite's work
    /// branch), replacing the table's contents.
    CopyOf(TablePin),
}

#[derive(Deserialize)]
struct ReportRefs {
    external_refs: Vec<ExternalRef>,
}

/// A graph's settings, fixed when it is created (kept in `_graph/graph.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphSettings {
    /// SPEC §2.3: `data.id` is a node's identity when the record has no top-level `id`.
    pub legacy_identity: bool,
}

pub struct Graph {
    root: GraphRoot,
    schema_source: Arc<str>,
    schema: Arc<Schema>,
    settings: GraphSettings,
    validator: Arc<Validator>,
    config: EngineConfig,
    /// Serializes this process's writers (the lease serializes processes),
    /// and keeps the lease between back-to-back loads.
    writer: tokio::sync::Mutex<Option<Tenure>>,
    /// Writers waiting for `writer`: while one waits, the lease is kept for it.
    waiting: AtomicUsize,
    /// Branch heads known under the current tenure (published by this
    /// process, or read under the lease): nobody else can publish while the
    /// lease is unbroken, so a writer needs no request to find them. Cleared
    /// whenever the lease is given up.
    heads: std::sync::Mutex<HashMap<String, Commit>>,
    /// Whether a load of the current tenure wrote its recovery record (it
    /// is deleted when the lease is given up).
    record_written: AtomicBool,
    /// Set by every published load: maintenance may have work (the server's
    /// background task looks only at graphs with it set).
    maintenance_due: AtomicBool,
}

/// The lease a process keeps across back-to-back loads.
struct Tenure {
    lease: HeldLease,
    /// Writes done under it: bounded by `MAX_TENURE_WRITES`, so a busy host
    /// gives other hosts a turn.
    writes: u32,
}

fn now_rfc3339() -> String {
    format_timestamp(now_ms() as i64 * 1000)
}

fn storage_error(e: impl std::fmt::Display) -> EngineError {
    EngineError::Storage(e.to_string())
}

impl Graph {
    /// Creates a graph at `root` from `.pg` source: one empty Lance dataset
    /// per type, the schema and catalog, and `main`'s first commit.
    pub async fn init(
        root: GraphRoot,
        schema_source: &str,
        validator: Arc<Validator>,
        config: EngineConfig,
    ) -> Result<Graph, EngineError> {
        Graph::init_with(root, schema_source, GraphSettings::default(), validator, config).await
    }

    /// [`Graph::init`] with the graph's fixed settings.
    pub async fn init_with(
        root: GraphRoot,
        schema_source: &str,
        settings: GraphSettings,
        validator: Arc<Validator>,
        config: EngineConfig,
    ) -> Result<Graph, EngineError> {
        let schema = Schema::compile(schema_source).map_err(|e| EngineError::Schema(e.to_string()))?;
        let info = GraphInfo {
            format: FORMAT_VERSION,
            schema_hash: schema.hash().to_owned(),
            created_at: now_rfc3339(),
            legacy_identity: settings.legacy_identity,
        };
        if !root.put_json_if_absent(GRAPH_INFO_PATH, &info).await? {
            return Err(EngineError::GraphExists(root.uri().to_owned()));
        }
        root.put(SCHEMA_PATH, schema_source.as_bytes().to_vec()).await?;
        root.put(CATALOG_PATH, schema.canonical_json().as_bytes().to_vec()).await?;
        let mut pins = BTreeMap::new();
        for def in &schema.types {
            let ds = tables::create(&root, def, &table_path(def.kind, &def.name)).await?;
            pins.insert(def.name.clone(), TablePin { lance_branch: None, version: ds.version().version });
        }
        let graph = Graph::with(root, schema_source.into(), schema, settings, validator, config);
        graph.sync_tables().await?;
        let commit = Commit {
            id: ulid::Ulid::new().to_string(),
            branch: MAIN_BRANCH.into(),
            seq: 0,
            kind: CommitKind::Init,
            parent: None,
            parent_id: None,
            actor: "init".into(),
            time: now_rfc3339(),
            batch_id: None,
            batch_key: None,
            mode: None,
            maintenance: None,
            lance_branch: None,
            tables: pins,
            counts: BTreeMap::new(),
        };
        if !graph.publish_commit(&commit).await? {
            return Err(EngineError::GraphExists(graph.root.uri().to_owned()));
        }
        Ok(graph)
    }

    /// Opens the graph at `root` and, unless another writer holds the
    /// lease, finishes whatever a crashed writer left (SPEC §4.2).
    pub async fn open(root: GraphRoot, validator: Arc<Validator>, config: EngineConfig) -> Result<Graph, EngineError> {
        let graph = Graph::open_unrecovered(root, validator, config).await?;
        match graph.recover_with_wait(Duration::ZERO).await {
            Ok(_) | Err(EngineError::LeaseBusy { .. } | EngineError::RecoveryInProgress) => Ok(graph),
            Err(e) => Err(e),
        }
    }

    /// Opens the graph without finishing a crashed writer's load, for a
    /// caller that recovers itself and wants to know what recovery did.
    pub async fn open_unrecovered(
        root: GraphRoot,
        validator: Arc<Validator>,
        config: EngineConfig,
    ) -> Result<Graph, EngineError> {
        let Some(info) = root.get_json::<GraphInfo>(GRAPH_INFO_PATH).await? else {
            return Err(EngineError::NoGraph(root.uri().to_owned()));
        };
        let source = root.get(SCHEMA_PATH).await?.ok_or_else(|| EngineError::NoGraph(root.uri().to_owned()))?;
        let source = String::from_utf8(source).map_err(|_| EngineError::Corrupt("schema.pg is not UTF-8".into()))?;
        let schema = Schema::compile(&source).map_err(|e| EngineError::Schema(e.to_string()))?;
        let settings = GraphSettings { legacy_identity: info.legacy_identity };
        let graph = Graph::with(root, source.into(), schema, settings, validator, config);
        if graph.head(MAIN_BRANCH).await?.is_none() {
            return Err(EngineError::NoGraph(format!("{} (init did not finish)", graph.root.uri())));
        }
        Ok(graph)
    }

    fn with(
        root: GraphRoot,
        schema_source: Arc<str>,
        schema: Schema,
        settings: GraphSettings,
        validator: Arc<Validator>,
        config: EngineConfig,
    ) -> Graph {
        let schema = Arc::new(schema);
        Graph {
            root,
            schema_source,
            schema,
            settings,
            validator,
            config,
            writer: tokio::sync::Mutex::new(None),
            waiting: AtomicUsize::new(0),
            heads: std::sync::Mutex::new(HashMap::new()),
            record_written: AtomicBool::new(false),
            maintenance_due: AtomicBool::new(true),
        }
    }

    /// The validator options of a load or dry run: the mode and reading, the
    /// configured bounds and the graph's identity rule.
    pub fn options(&self, mode: Mode, strict: bool) -> Options {
        Options {
            mode,
            strict,
            limits: self.config.limits,
            legacy_identity: self.settings.legacy_identity,
            ..Options::default()
        }
    }

    pub fn settings(&self) -> GraphSettings {
        self.settings
    }

    /// The bounds this graph's loads are validated with (what `/rules` reports).
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    pub fn root(&self) -> &GraphRoot {
        &self.root
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn schema_source(&self) -> &str {
        &self.schema_source
    }

    pub fn validator(&self) -> &Validator {
        &self.validator
    }

    // ---- reading the manifest -------------------------------------------------

    /// The newest commit object of a branch, a deletion included, in O(1)
    /// requests whatever the history: the head hint, then a probe of the next
    /// sequence numbers (commits published after the hint was last written).
    /// A branch without a hint (its writer stopped before writing the first
    /// one) is listed once.
    async fn latest_commit(&self, branch: &str) -> Result<Option<Commit>, EngineError> {
        let mut head = match self.root.get_json::<Commit>(&head_hint_path(branch)).await? {
            Some(hint) => hint,
            None => {
                let names = self.root.list_names(&format!("{BRANCHES_DIR}/{branch}")).await?;
                match names.iter().filter_map(|n| seq_from_commit_name(n)).max() {
                    Some(seq) => self.commit_at(branch, seq).await?,
                    None => return Ok(None),
                }
            }
        };
        while let Some(next) = self.root.get_json::<Commit>(&commit_path(branch, head.seq + 1)).await? {
            head = next;
        }
        Ok(Some(head))
    }

    /// Publishes a commit: the put-if-absent of its sequence number is the
    /// visibility point (`false`: the slot is taken). Then the branch's head
    /// hint; failing to write it only costs readers a probe.
    async fn publish_commit(&self, commit: &Commit) -> Result<bool, EngineError> {
        if !self.root.put_json_if_absent(&commit_path(&commit.branch, commit.seq), commit).await? {
            return Ok(false);
        }
        self.heads.lock().expect("heads lock").insert(commit.branch.clone(), commit.clone());
        if commit.kind == CommitKind::Load {
            self.maintenance_due.store(true, Ordering::Release);
        }
        let hint = serde_json::to_vec_pretty(commit).expect("commits serialize");
        if let Err(e) = self.root.put(&head_hint_path(&commit.branch), hint).await {
            eprintln!("could not update the head hint of branch {} ({e}); readers probe past it", commit.branch);
        }
        Ok(true)
    }

    /// A branch's head commit, or `None` if the branch does not exist.
    pub async fn head(&self, branch: &str) -> Result<Option<Commit>, EngineError> {
        check_branch_name(branch)?;
        Ok(self.latest_commit(branch).await?.filter(|c| c.kind != CommitKind::Delete))
    }

    /// A branch's head for a writer holding the lease: from the tenure's
    /// cache when known (no request), else read once and remembered.
    async fn head_leased(&self, branch: &str) -> Result<Option<Commit>, EngineError> {
        let known = self.heads.lock().expect("heads lock").get(branch).cloned();
        let latest = match known {
            Some(commit) => Some(commit),
            None => {
                check_branch_name(branch)?;
                let latest = self.latest_commit(branch).await?;
                if let Some(commit) = &latest {
                    self.heads.lock().expect("heads lock").insert(branch.to_owned(), commit.clone());
                }
                latest
            }
        };
        Ok(latest.filter(|c| c.kind != CommitKind::Delete))
    }

    async fn head_or_404(&self, branch: &str) -> Result<Commit, EngineError> {
        self.head(branch).await?.ok_or_else(|| EngineError::BranchNotFound(branch.to_owned()))
    }

    /// Commit `seq` of a branch (time travel).
    pub async fn commit_at(&self, branch: &str, seq: u64) -> Result<Commit, EngineError> {
        check_branch_name(branch)?;
        self.root
            .get_json::<Commit>(&commit_path(branch, seq))
            .await?
            .ok_or_else(|| EngineError::CommitNotFound(format!("{branch}@{seq}")))
    }

    /// A branch's commits, newest first, back to where it was forked.
    pub async fn log(&self, branch: &str) -> Result<Vec<Commit>, EngineError> {
        let mut commit = self.head_or_404(branch).await?;
        let mut out = Vec::new();
        loop {
            let parent = commit.parent.clone();
            out.push(commit);
            match parent {
                Some(p) if p.branch == branch => commit = self.commit_at(branch, p.seq).await?,
                _ => return Ok(out),
            }
        }
    }

    /// Every existing branch with its head.
    pub async fn branches(&self) -> Result<Vec<Commit>, EngineError> {
        let mut out = Vec::new();
        for name in self.root.list_dirs(BRANCHES_DIR).await? {
            if check_branch_name(&name).is_ok()
                && let Some(head) = self.head(&name).await?
            {
                out.push(head);
            }
        }
        Ok(out)
    }

    /// Rows per table at a branch's head (or commit `at`).
    pub async fn row_counts(&self, branch: &str, at: Option<u64>) -> Result<BTreeMap<String, u64>, EngineError> {
        let commit = self.resolve(branch, at).await?;
        let mut out = BTreeMap::new();
        for def in &self.schema.types {
            let ds = tables::open_pinned(&self.root, &table_path(def.kind, &def.name), &commit.tables[&def.name]).await?;
            out.insert(def.name.clone(), ds.count_rows(None).await? as u64);
        }
        Ok(out)
    }

    async fn resolve(&self, branch: &str, at: Option<u64>) -> Result<Commit, EngineError> {
        match at {
            Some(seq) => self.commit_at(branch, seq).await,
            None => self.head_or_404(branch).await,
        }
    }

    /// Streams every record of a branch head (or commit `at`) as strict
    /// NDJSON, nodes first, to `sink`, one chunk per Lance batch (awaited:
    /// a slow consumer slows the scan instead of buffering it).
    pub async fn export<F, Fut>(&self, branch: &str, at: Option<u64>, mut sink: F) -> Result<Commit, EngineError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<(), EngineError>>,
    {
        let commit = self.resolve(branch, at).await?;
        for def in &self.schema.types {
            let ds = tables::open_pinned(&self.root, &table_path(def.kind, &def.name), &commit.tables[&def.name]).await?;
            let mut scan = ds.scan();
            scan.blob_handling(BlobHandling::AllBinary);
            let mut stream = scan.try_into_stream().await?;
            while let Some(batch) = stream.try_next().await? {
                let mut chunk = String::new();
                write_records(&mut chunk, def, &batch);
                if !chunk.is_empty() {
                    sink(chunk).await?;
                }
            }
        }
        Ok(commit)
    }

    // ---- branches ------------------------------------------------------------

    /// Creates `name` from `from`'s head: a commit pointing at the base's
    /// table versions (no data copied).
    pub async fn create_branch(&self, name: &str, from: &str, actor: &str) -> Result<Commit, EngineError> {
        self.fork(name, from, &[], actor).await
    }

    /// Deletes a branch: a tombstone commit ends its chain. Its Lance
    /// branches stay (older commits and branches forked from it still read
    /// them); `main` cannot be deleted.
    pub async fn delete_branch(&self, name: &str, actor: &str) -> Result<Commit, EngineError> {
        check_branch_name(name)?;
        if name == MAIN_BRANCH {
            return Err(EngineError::MainBranchProtected);
        }
        self.with_lease(self.config.lease_wait, |_, _| async {
            let head = self.head_or_404(name).await?;
            let tombstone = self.next_commit(name, &head, CommitKind::Delete, actor, None, None).await?;
            if !self.publish_commit(&tombstone).await? {
                return Err(EngineError::CommitConflict { attempts: 1 });
            }
            Ok(tombstone)
        })
        .await
    }

    /// The next commit object of `branch` on top of `parent`: its sequence
    /// number continues the branch's chain (after a deletion too).
    async fn next_commit(
        &self,
        branch: &str,
        parent: &Commit,
        kind: CommitKind,
        actor: &str,
        batch_id: Option<String>,
        mode: Option<Mode>,
    ) -> Result<Commit, EngineError> {
        // On its own branch the parent is the head; a fork continues after
        // whatever the name last held (a deletion).
        let (seq, lance_branch) = if parent.branch == branch {
            (parent.seq + 1, parent.lance_branch.clone())
        } else {
            let seq = self.latest_commit(branch).await?.map_or(0, |c| c.seq + 1);
            (seq, Some(format!("{branch}-{seq}")))
        };
        Ok(Commit {
            id: ulid::Ulid::new().to_string(),
            branch: branch.to_owned(),
            seq,
            kind,
            parent: Some(CommitRef { branch: parent.branch.clone(), seq: parent.seq }),
            parent_id: Some(parent.id.clone()),
            actor: actor.to_owned(),
            time: now_rfc3339(),
            batch_id,
            batch_key: None,
            mode: mode.map(|m| m.as_str().to_owned()),
            maintenance: None,
            lance_branch,
            tables: parent.tables.clone(),
            counts: BTreeMap::new(),
        })
    }

    // ---- loads ---------------------------------------------------------------

    /// Runs the validator artifact on a batch; a refused batch is `Invalid`.
    async fn validate(&self, req: &LoadRequest) -> Result<Validated, EngineError> {
        let options = serde_json::to_vec(&self.options(req.mode, req.strict)).expect("options serialize");
        let batch = req.batch.clone();
        let (validator, source, schema) = (self.validator.clone(), self.schema_source.clone(), self.schema.clone());
        let result = tokio::task::spawn_blocking(move || validator.prepare_compiled(&source, &schema, &options, &batch))
            .await
            .map_err(storage_error)??;
        match result {
            PrepareResult::Accepted { report_json, tables } => {
                let refs: ReportRefs =
                    serde_json::from_str(&report_json).map_err(|e| EngineError::Corrupt(format!("report: {e}")))?;
                let mut decoded = Vec::with_capacity(tables.len());
                for table in tables {
                    let t = self.schema.type_index(&table.name).expect("the validator names schema types");
                    let mut reader = StreamReader::try_new(Cursor::new(table.ipc), None).map_err(storage_error)?;
                    let rows = reader.next().transpose().map_err(storage_error)?.expect("one batch per table");
                    decoded.push(BatchTable { t, rows, lines: table.lines });
                }
                Ok(Validated { report_json, tables: decoded, external_refs: refs.external_refs })
            }
            PrepareResult::Rejected { report_json } => Err(EngineError::Invalid { report_json }),
            PrepareResult::SchemaError(e) | PrepareResult::OptionsError(e) => Err(EngineError::Schema(e)),
        }
    }

    /// The commit a load builds on, and the fork base if it creates the branch.
    async fn load_base(&self, branch: &str, from: Option<&str>, leased: bool) -> Result<(Commit, Option<CommitRef>), EngineError> {
        let head = if leased { self.head_leased(branch).await? } else { self.head(branch).await? };
        if let Some(head) = head {
            return Ok((head, None));
        }
        let Some(from) = from else { return Err(EngineError::BranchNotFound(branch.to_owned())) };
        let base = if leased { self.head_leased(from).await? } else { self.head(from).await? };
        let base = base.ok_or_else(|| EngineError::BranchNotFound(from.to_owned()))?;
        let base_ref = CommitRef { branch: base.branch.clone(), seq: base.seq };
        Ok((base, Some(base_ref)))
    }

    /// Validates a batch and runs the stateful checks against the branch
    /// head (or `from`'s head). Writes nothing.
    pub async fn dry_run(&self, req: &LoadRequest) -> Result<DryRun, EngineError> {
        check_branch_name(&req.branch)?;
        let validated = self.validate(req).await?;
        let (base, _) = self.load_base(&req.branch, req.from.as_deref(), false).await?;
        let mut snapshot = Snapshot::new(&self.root, &self.schema, &base.tables);
        let removed_id_limit = self.config.limits.max_removed_id_bytes;
        let outcome =
            checks::run(&mut snapshot, req.mode, &validated.tables, &validated.external_refs, true, removed_id_limit).await?;
        Ok(DryRun { report_json: validated.report_json, conflicts: outcome.conflicts, counts: outcome.counts })
    }

    /// Loads one batch as one graph commit (SPEC §4.2): all of it becomes
    /// visible at once, or none of it.
    pub async fn load(&self, req: LoadRequest) -> Result<Receipt, EngineError> {
        check_branch_name(&req.branch)?;
        if let Some(from) = &req.from {
            check_branch_name(from)?;
        }
        let started = Instant::now();
        let validated = self.validate(&req).await?;
        let validate_time = started.elapsed();
        let mut receipt = self.with_lease(self.config.lease_wait, |lease, _| self.load_leased(&req, &validated, lease)).await?;
        receipt.timings.validate = validate_time;
        Ok(receipt)
    }

    /// Runs `work` holding this process's writer lock and the graph's lease
    /// (waiting at most `wait` for it), after finishing any interrupted load;
    /// `work` learns what that recovery did. The lease is renewed while
    /// `work` runs, and kept for the next writer of this process when one is
    /// already waiting (back-to-back loads pay for the lease once); it is
    /// released when none waits, after `MAX_TENURE_WRITES` writes, or after
    /// a failure that needs recovery.
    async fn with_lease<'s, T, F, Fut>(&'s self, wait: Duration, work: F) -> Result<T, EngineError>
    where
        F: FnOnce(HeldLease, Recovered) -> Fut,
        Fut: std::future::Future<Output = Result<T, EngineError>> + 's,
    {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut held = self.writer.lock().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        let kept = match held.take() {
            Some(tenure) if tenure.lease.valid_for(self.publish_margin()) => Some(tenure),
            Some(tenure) => {
                self.give_up(&tenure.lease, true).await;
                None
            }
            None => None,
        };
        let (mut tenure, recovered) = match kept {
            Some(tenure) => (tenure, Recovered::Nothing),
            None => {
                let lease = match lease::acquire(&self.root, &self.config.owner, self.config.lease_ttl, wait).await {
                    Err(EngineError::LeaseBusy { owner, generation }) => {
                        return Err(if self.unfinished_before(generation).await? {
                            EngineError::RecoveryInProgress
                        } else {
                            EngineError::LeaseBusy { owner, generation }
                        });
                    }
                    other => other?,
                };
                // Heads known before this lease (from an earlier tenure, or
                // published outside one, like `init`'s) may be stale now.
                self.heads.lock().expect("heads lock").clear();
                match self.recover_leased(lease.generation).await {
                    Ok(recovered) => (Tenure { lease, writes: 0 }, recovered),
                    Err(e) => {
                        self.give_up(&lease, false).await;
                        return Err(e);
                    }
                }
            }
        };
        tenure.writes += 1;
        // On its own task, so a load busy on its thread cannot starve it; and
        // stopped however the work ends, a panic included (a lease renewed
        // by an orphaned task would never expire).
        let renewer = AbortOnDrop(tokio::spawn(keep_renewed(
            self.root.clone(),
            tenure.lease.clone(),
            self.config.owner.clone(),
            self.config.lease_ttl,
        )));
        let result = work(tenure.lease.clone(), recovered).await;
        drop(renewer);
        let needs_recovery = matches!(result, Err(EngineError::RecoveryRequired { .. }));
        // A load that stopped after its record was written is finished now,
        // while this writer likely still holds the lease (else by the next
        // writer); its answer stays `recovery_required` either way.
        if needs_recovery
            && tenure.lease.valid_for(self.publish_margin())
            && let Err(e) = self.recover_leased(tenure.lease.generation).await
        {
            eprintln!("recovery after a failed load did not finish ({e}); the next writer finishes it");
        }
        let keep = !needs_recovery
            && self.waiting.load(Ordering::Acquire) > 0
            && tenure.writes < MAX_TENURE_WRITES
            && tenure.lease.valid_for(self.publish_margin());
        if keep {
            *held = Some(tenure);
        } else {
            self.give_up(&tenure.lease, !needs_recovery).await;
        }
        result
    }

    /// Releases a lease and forgets what was known under it; `finished`:
    /// the tenure's recovery record (if any) belongs to a published load and
    /// is deleted. Housekeeping only: a failure is logged, never the load's
    /// error (a record left behind is recognised by the next recovery; a
    /// lease not released expires).
    async fn give_up(&self, lease: &HeldLease, finished: bool) {
        self.heads.lock().expect("heads lock").clear();
        if self.record_written.swap(false, Ordering::AcqRel) && finished {
            let path = recovery_path(lease.generation);
            if let Err(e) = self.delete_own_record(&path).await {
                eprintln!("could not delete recovery record {path} ({e}); the next recovery removes it");
            }
            fail_point!("after-record-delete");
        }
        if let Err(e) = lease::release(&self.root, lease).await {
            eprintln!("could not release lease generation {} ({e}); it expires on its own", lease.generation);
        }
    }

    async fn delete_own_record(&self, path: &str) -> Result<(), EngineError> {
        fail_point!("record-delete-error", |_| Err(EngineError::Storage("injected failure deleting the recovery record".into())));
        self.root.delete(path).await
    }

    /// Whether a recovery record older than lease `generation` is left: its
    /// holder is finishing (or will finish) an interrupted load.
    async fn unfinished_before(&self, generation: u64) -> Result<bool, EngineError> {
        let names = self.root.list_names(RECOVERY_DIR).await?;
        Ok(names.iter().filter_map(|n| generation_from_lease_name(n)).any(|g| g < generation))
    }

    async fn load_leased(&self, req: &LoadRequest, validated: &Validated, lease: HeldLease) -> Result<Receipt, EngineError> {
        let mut timings = LoadTimings::default();
        // Only an empty load's fork loops (its branch appeared meanwhile); a
        // load with rows is published or answers an error, its slot fenced.
        for _ in 1..=MAX_COMMIT_ATTEMPTS {
            let (base, created_from) = self.load_base(&req.branch, req.from.as_deref(), true).await?;
            let receipt = |commit: Option<Commit>, timings: LoadTimings| Receipt {
                branch: req.branch.clone(),
                created_from: created_from.clone(),
                mode: req.mode,
                commit,
                report_json: validated.report_json.clone(),
                timings,
            };
            if validated.tables.is_empty() {
                // Nothing to write; a fork still happens, as its own commit,
                // so the receipt's `created` is true only when the branch exists.
                if created_from.is_none() {
                    return Ok(receipt(None, timings));
                }
                let fork = self.next_commit(&req.branch, &base, CommitKind::Fork, &req.actor, None, None).await?;
                if self.publish_commit(&fork).await? {
                    return Ok(receipt(Some(fork), timings));
                }
                continue;
            }
            let started = Instant::now();
            let mut snapshot = Snapshot::new(&self.root, &self.schema, &base.tables);
            let removed_id_limit = self.config.limits.max_removed_id_bytes;
            let outcome = checks::run(
                &mut snapshot,
                req.mode,
                &validated.tables,
                &validated.external_refs,
                false,
                removed_id_limit,
            )
            .await?;
            timings.checks = started.elapsed();
            if !outcome.conflicts.is_empty() {
                return Err(EngineError::Rejected {
                    report_json: validated.report_json.clone(),
                    conflicts: outcome.conflicts,
                });
            }
            let batch_id = ulid::Ulid::new().to_string();
            let mut commit =
                self.next_commit(&req.branch, &base, CommitKind::Load, &req.actor, Some(batch_id), Some(req.mode)).await?;
            commit.counts = outcome.counts;
            commit.batch_key = req.batch_key.clone();
            let started = Instant::now();
            let sources = validated.tables.iter().map(|table| (table.t, Source::Rows(&table.rows))).collect();
            let commit = self.stage_and_commit(req.mode, sources, &lease, commit, &mut timings).await?;
            timings.commit = started.elapsed() - timings.sync;
            return Ok(receipt(Some(commit), timings));
        }
        Err(EngineError::CommitConflict { attempts: MAX_COMMIT_ATTEMPTS })
    }

    /// Stages one transaction per touched table, writes the recovery record,
    /// commits the tables, syncs and publishes. Any failure after the record
    /// is written answers `RecoveryRequired` (SPEC §4.7): recovery, not this
    /// writer, decides whether the load is published.
    async fn stage_and_commit(
        &self,
        mode: Mode,
        sources: Vec<(usize, Source<'_>)>,
        lease: &HeldLease,
        mut commit: Commit,
        timings: &mut LoadTimings,
    ) -> Result<Commit, EngineError> {
        let target = commit.lance_branch.clone();
        let mut staged_tables = BTreeMap::new();
        let mut staged = Vec::new();
        let mut ids = ulid::Generator::new();
        for (t, source) in sources {
            let def = &self.schema.types[t];
            let path = table_path(def.kind, &def.name);
            let pin = commit.tables.get(&def.name).cloned().ok_or_else(|| EngineError::Corrupt(format!("no pin for {}", def.name)))?;
            let (base, published) = if pin.lance_branch == target {
                (self.settle(&path, pin.lance_branch.as_deref(), pin.version).await?, Some(pin.version))
            } else {
                // First write of this table on the branch: fork its Lance branch
                // (a leftover of a rolled-back first write is replaced).
                let name = target.as_deref().expect("main's tables are always on Lance's main");
                let mut ds = self.root.open_table(&path).await?;
                if ds.list_branches().await?.contains_key(name) {
                    ds.force_delete_branch(name).await?;
                }
                let forked = ds
                    .create_branch(name, (pin.lance_branch.as_deref(), Some(pin.version)), Some(self.root.store_params()))
                    .await?;
                (forked, None)
            };
            let properties = [
                ("omnigraph.batch_id".to_owned(), commit.batch_id.clone().unwrap_or_default()),
                ("omnigraph.commit".to_owned(), format!("{}@{}", commit.branch, commit.seq)),
            ]
            .into();
            let read_version = base.version().version;
            let one = match source {
                Source::Rows(batch) => {
                    let rows = with_generated_ids(batch, &tables::stored_schema(def), &mut ids)?;
                    tables::stage(&self.root, Arc::new(base), mode, rows, properties).await?
                }
                Source::CopyOf(pin) => {
                    let from = tables::open_pinned(&self.root, &path, &pin).await?;
                    tables::stage_copy(&self.root, Arc::new(base), &from, def, properties).await?
                }
            };
            if let Some((inserted, updated)) = one.merged {
                commit.counts.insert(def.name.clone(), TableCounts { inserted, updated, removed: 0 });
            }
            staged_tables.insert(
                def.name.clone(),
                StagedTable { lance_branch: target.clone(), published, read_version, uuid: one.transaction.uuid.clone() },
            );
            staged.push((t, read_version, one));
        }
        fail_point!("after-stage");
        let record = RecoveryRecord { lease_generation: lease.generation, commit: commit.clone(), staged: staged_tables };
        self.record_written.store(true, Ordering::Release);
        self.root.put(&recovery_path(lease.generation), serde_json::to_vec_pretty(&record).expect("record serializes")).await?;
        fail_point!("after-record");
        // The record stays until the lease is given up (`give_up`): the next
        // load of the tenure overwrites it, and a record of a published load
        // is recognised as such by recovery.
        self.commit_armed(staged, lease, commit, timings)
            .await
            .map_err(|cause| EngineError::RecoveryRequired { cause: Box::new(cause) })
    }

    /// The part of a load after its recovery record: the table commits, each
    /// fenced (it must land right after the version it was staged on), the
    /// sync and the publish, itself fenced by the put-if-absent of the
    /// commit's sequence number.
    async fn commit_armed(
        &self,
        staged: Vec<(usize, u64, tables::Staged)>,
        lease: &HeldLease,
        mut commit: Commit,
        timings: &mut LoadTimings,
    ) -> Result<Commit, EngineError> {
        let target = commit.lance_branch.clone();
        for (t, read_version, one) in staged {
            let def = &self.schema.types[t];
            // A clock only decides to give up early (liveness); the fences
            // below keep a writer whose lease ran out from doing harm.
            if !lease.valid_for(self.publish_margin()) {
                return Err(EngineError::LeaseExpired);
            }
            fail_point!("table-commit-error", |_| Err(EngineError::Storage("injected table commit failure".into())));
            let ds = tables::commit(one).await?;
            let landed_at = ds.version().version;
            if landed_at != read_version + 1 {
                return Err(EngineError::Fenced { table: def.name.clone(), staged_on: read_version, landed_at });
            }
            fail_point!("after-table-commit");
            commit.tables.insert(def.name.clone(), TablePin { lance_branch: target.clone(), version: ds.version().version });
        }
        let synced = Instant::now();
        self.sync_tables().await?;
        timings.sync = synced.elapsed();
        fail_point!("after-sync");
        if !lease.valid_for(self.publish_margin()) {
            return Err(EngineError::LeaseExpired);
        }
        fail_point!("before-publish");
        if !self.publish_commit(&commit).await? {
            // Recovery by another host may have published this very load.
            let holder = self.commit_at(&commit.branch, commit.seq).await?;
            if holder.batch_id == commit.batch_id {
                return Ok(holder);
            }
            return Err(EngineError::SlotTaken { branch: commit.branch, seq: commit.seq });
        }
        fail_point!("after-publish");
        Ok(commit)
    }

    /// Lease time a writer must have left to commit a table or publish.
    fn publish_margin(&self) -> Duration {
        LEASE_PUBLISH_MARGIN.min(self.config.lease_ttl / 4)
    }

    /// Makes committed table files durable. Lance never fsyncs; on a local
    /// disk one `syncfs` flushes every new data, deletion, transaction and
    /// manifest file and the directories naming them.
    async fn sync_tables(&self) -> Result<(), EngineError> {
        match (self.config.durable, self.root.local_dir()) {
            (true, Some(dir)) => crate::durability::sync_filesystem(dir),
            _ => Ok(()),
        }
    }

    // ---- recovery ------------------------------------------------------------

    /// Takes the lease (waiting at most `wait`) and finishes any interrupted
    /// load; then rolls back table heads above their published versions.
    pub async fn recover_with_wait(&self, wait: Duration) -> Result<Recovered, EngineError> {
        self.with_lease(wait, |_, recovered| async {
            self.settle_all().await?;
            Ok(recovered)
        })
        .await
    }

    /// Finishes the interrupted loads whose recovery records are of lease
    /// generation `up_to` or older (the newest one's outcome is returned).
    async fn recover_leased(&self, up_to: u64) -> Result<Recovered, EngineError> {
        let mut generations: Vec<u64> =
            self.root.list_names(RECOVERY_DIR).await?.iter().filter_map(|n| generation_from_lease_name(n)).collect();
        generations.sort_unstable();
        let mut outcome = Recovered::Nothing;
        for generation in generations.into_iter().filter(|&g| g <= up_to) {
            let path = recovery_path(generation);
            if let Some(record) = self.root.get_json::<RecoveryRecord>(&path).await? {
                fail_point!("during-recovery");
                outcome = self.finish(&record).await?;
            }
            self.root.delete(&path).await?;
        }
        Ok(outcome)
    }

    /// Rolls an interrupted load forward if every staged transaction landed
    /// where it was staged, else back. Either way the load's sequence number
    /// is decided first (its commit, or a rollback marker, put if absent), so
    /// the interrupted writer, should it wake up, can never publish it.
    async fn finish(&self, record: &RecoveryRecord) -> Result<Recovered, EngineError> {
        let (branch, seq) = (record.commit.branch.clone(), record.commit.seq);
        let mut commit = record.commit.clone();
        let mut landed = true;
        for (name, staged) in &record.staged {
            match self.find_transaction(&self.recorded_table(name)?, staged).await? {
                Some(version) => {
                    commit.tables.insert(name.clone(), TablePin { lance_branch: staged.lance_branch.clone(), version });
                }
                None => {
                    landed = false;
                    break;
                }
            }
        }
        if landed {
            self.sync_tables().await?;
            if self.publish_commit(&commit).await? {
                return Ok(Recovered::RolledForward { branch, seq });
            }
        } else if self.publish_commit(&rollback_marker(&record.commit)).await? {
            self.roll_back(record).await?;
            return Ok(Recovered::RolledBack { branch, seq });
        }
        // The slot is taken: by the load itself (its writer published it) or
        // by another commit (then the load's table versions are orphans).
        if self.commit_at(&branch, seq).await?.batch_id == record.commit.batch_id {
            return Ok(Recovered::RolledForward { branch, seq });
        }
        self.roll_back(record).await?;
        Ok(Recovered::RolledBack { branch, seq })
    }

    /// The dataset path of a table a recovery record names.
    fn recorded_table(&self, name: &str) -> Result<String, EngineError> {
        let t = self.schema.type_index(name).ok_or_else(|| EngineError::Corrupt(format!("the recovery record names {name}")))?;
        Ok(table_path(self.schema.types[t].kind, name))
    }

    /// The version at which a staged transaction landed: right after the
    /// version it was staged on, or not at all (landing higher means another
    /// writer committed in between, and the version holds its rows too).
    async fn find_transaction(&self, path: &str, staged: &StagedTable) -> Result<Option<u64>, EngineError> {
        let Some(latest) = tables::latest_on(&self.root, path, staged.lance_branch.as_deref()).await? else {
            return Ok(None);
        };
        let version = staged.read_version + 1;
        if version > latest.version().version {
            return Ok(None);
        }
        Ok(latest.read_transaction_by_version(version).await?.filter(|txn| txn.uuid == staged.uuid).map(|_| version))
    }

    /// Undoes an interrupted load's table commits: each table back to what
    /// its branch's head pins now (a newer writer's versions are kept), or to
    /// the load's base; a Lance branch the load created and no head pins is
    /// deleted. Idempotent: a second pass changes nothing.
    async fn roll_back(&self, record: &RecoveryRecord) -> Result<(), EngineError> {
        let head = self.head(&record.commit.branch).await?;
        for (name, staged) in &record.staged {
            let path = self.recorded_table(name)?;
            let pinned = head
                .as_ref()
                .and_then(|h| h.tables.get(name))
                .filter(|pin| pin.lance_branch == staged.lance_branch)
                .map(|pin| pin.version);
            match (pinned.or(staged.published), staged.lance_branch.as_deref()) {
                (Some(version), lance_branch) => {
                    self.settle(&path, lance_branch, version).await?;
                }
                (None, Some(lance_branch)) => {
                    let mut ds = self.root.open_table(&path).await?;
                    if ds.list_branches().await?.contains_key(lance_branch) {
                        ds.force_delete_branch(lance_branch).await?;
                    }
                }
                (None, None) => return Err(EngineError::Corrupt(format!("record: {name} has no published version"))),
            }
        }
        Ok(())
    }

    /// The latest dataset of a Lance branch whose contents are `version`'s:
    /// anything committed above it and never published is restored away.
    async fn settle(&self, path: &str, lance_branch: Option<&str>, version: u64) -> Result<Dataset, EngineError> {
        // Nothing above the pin (the common case) costs two manifest reads.
        // Opening the latest version would list the table's versions on S3
        // (locally Lance reads its `latest_version_hint.json`): tests/requests.rs.
        let pinned = self.root.open_table_at(path, lance_branch, version).await?;
        match self.root.open_table_at(path, lance_branch, version + 1).await {
            Err(EngineError::Lance(
                lance::Error::DatasetNotFound { .. } | lance::Error::NotFound { .. } | lance::Error::VersionNotFound { .. },
            )) => return Ok(pinned),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let latest = tables::latest_on(&self.root, path, lance_branch)
            .await?
            .ok_or_else(|| EngineError::Corrupt(format!("{path}: Lance branch {lance_branch:?} is missing")))?;
        if latest.version().version == version {
            return Ok(latest);
        }
        if let Some(txn) = latest.read_transaction().await?
            && matches!(txn.operation, Operation::Restore { version: v } if v == version)
        {
            return Ok(latest);
        }
        let mut old = latest.checkout_version((lance_branch, Some(version))).await?;
        old.restore().await?;
        Ok(old)
    }

    /// Rolls back orphan table heads of every branch (a crashed writer's
    /// commits that no graph commit names).
    async fn settle_all(&self) -> Result<(), EngineError> {
        for head in self.branches().await? {
            let own = head.lance_branch.clone();
            for def in &self.schema.types {
                let pin = &head.tables[&def.name];
                if pin.lance_branch == own {
                    self.settle(&table_path(def.kind, &def.name), own.as_deref(), pin.version).await?;
                }
            }
        }
        Ok(())
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews `lease` whenever half of it is left, until aborted (when the work
/// it protects ends). Stops, quietly, once it cannot: the fences keep a
/// writer that lost its lease harmless.
async fn keep_renewed(root: GraphRoot, lease: HeldLease, owner: String, ttl: Duration) {
    let half = ttl.as_millis() as u64 / 2;
    loop {
        let due = lease.expires_at_ms().saturating_sub(half);
        tokio::time::sleep(Duration::from_millis(due.saturating_sub(now_ms()))).await;
        if !matches!(lease::renew(&root, &lease, &owner, ttl).await, Ok(true)) {
            return;
        }
    }
}

/// What recovery publishes in the slot of a load it rolls back: the parent's
/// tables under kind `rollback`, or, for a load that would have created its
/// branch, a deletion (the branch stays absent). No batch id or key: neither
/// the interrupted writer nor a resuming client mistakes it for the load.
fn rollback_marker(load: &Commit) -> Commit {
    let forked_here = load.parent.as_ref().is_some_and(|p| p.branch != load.branch);
    Commit {
        id: ulid::Ulid::new().to_string(),
        kind: if forked_here { CommitKind::Delete } else { CommitKind::Rollback },
        actor: "recovery".to_owned(),
        time: now_rfc3339(),
        batch_id: None,
        batch_key: None,
        mode: None,
        counts: BTreeMap::new(),
        ..load.clone()
    }
}

/// The batch with a ULID in every null `_id`, under the stored schema.
fn with_generated_ids(
    batch: &RecordBatch,
    schema: &arrow_schema::SchemaRef,
    ids: &mut ulid::Generator,
) -> Result<RecordBatch, EngineError> {
    let column = batch.column_by_name(ID_COLUMN).expect("id column");
    let given = column.as_any().downcast_ref::<StringArray>().expect("string ids");
    let filled: StringArray = if given.null_count() == 0 {
        given.clone()
    } else {
        given
            .iter()
            .map(|id| match id {
                Some(id) => Ok(Some(id.to_owned())),
                None => ids.generate().map(|u| Some(u.to_string())).map_err(storage_error),
            })
            .collect::<Result<StringArray, EngineError>>()?
    };
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[0] = Arc::new(filled);
    RecordBatch::try_new(schema.clone(), columns).map_err(storage_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_fill_only_nulls() {
        let schema = Schema::compile("node Note { text: String }").unwrap();
        let def = &schema.types[0];
        let stored = tables::stored_schema(def);
        let emitted = omnigraph_validate_wasm::arrow_schema(def);
        let batch = RecordBatch::try_new(
            emitted,
            vec![
                Arc::new(StringArray::from(vec![Some("n1"), None, None])),
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
            ],
        )
        .unwrap();
        let out = with_generated_ids(&batch, &stored, &mut ulid::Generator::new()).unwrap();
        let ids = out.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(ids.value(0), "n1");
        assert_eq!(ids.value(1).len(), 26);
        assert!(ids.value(1) < ids.value(2), "ULIDs of one batch are monotonic");
        assert_eq!(out.schema(), stored);
    }
}
