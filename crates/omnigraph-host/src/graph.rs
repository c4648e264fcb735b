//! The commit engine (SPEC §4): a graph of Lance tables made visible one
//! graph commit at a time. See docs/ARCHITECTURE.md for the data flow and
//! the invariants, `graph/load.rs` for the protocol step by step,
//! docs/storage.md for the layout.
//!
//! Here: the engine's types (`Graph`, `EngineConfig`, `LoadRequest`,
//! `Receipt`, `Recovered`), init and open, and the validator options of a
//! load (configured bounds, legacy identity); one module per step of a load
//! below.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use fail::fail_point;
use futures::TryStreamExt;
use lance::Dataset;
use lance::dataset::transaction::Operation;
use lance::datatypes::BlobHandling;
use omnigraph_validate_wasm::{ID_COLUMN, Limits, Mode, Options, Schema, format_timestamp};

use crate::checks::{self, BatchTable, ExternalRefs, Snapshot};
use crate::error::EngineError;
use crate::export::write_records;
use crate::lease::{self, HeldLease, now_ms};
use crate::limits::{
    DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT, LEASE_PUBLISH_MARGIN, MAX_COMMIT_ATTEMPTS, MAX_TENURE_WRITES, RENEW_BACKOFF_FIRST,
    RENEW_BACKOFF_MAX,
};
use crate::manifest::{
    BRANCHES_DIR, CATALOG_PATH, Commit, CommitKind, CommitRef, FORMAT_VERSION, GRAPH_INFO_PATH, GraphInfo,
    MAIN_BRANCH, RECOVERY_DIR, RecoveryRecord, SCHEMA_PATH, StagedTable, TableCounts, TablePin, check_branch_name,
    commit_path, generation_from_lease_name, head_hint_path, recovery_path, seq_from_commit_name, table_lance_branch,
    table_path,
};
use crate::storage::GraphRoot;
use crate::tables;
use crate::validator::{PrepareResult, Validator};

mod branch;
mod cleanup;
mod commit;
mod head;
mod load;
mod maintain;
mod overwrite;
mod read;
mod recovery;
mod tenure;
pub use cleanup::Cleaned;
pub use maintain::spawn_maintenance;
pub use overwrite::OverwritePublish;
pub use tenure::{CallerGone, never_gone};

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
    /// Rows this graph's key runs may hold in all (src/keys.rs): about 40
    /// bytes each. Runs that do not fit are answered by Lance's indexes.
    pub key_run_rows: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            owner: format!("pid-{}-{}", std::process::id(), ulid::Ulid::new()),
            lease_ttl: DEFAULT_LEASE_TTL,
            lease_wait: DEFAULT_LEASE_WAIT,
            durable: true,
            limits: Limits::default(),
            key_run_rows: crate::limits::MAX_KEY_RUN_ROWS,
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
    /// Commit only if no commit after this sequence number changed the
    /// branch's rows (maintenance does not count), else `TargetMoved`:
    /// checked under the write lease, so a client that read the branch at
    /// this commit writes on exactly what it read (the stream consumer's
    /// exactly-once step). The branch must exist.
    pub unchanged_since: Option<u64>,
}

/// Where a load's time went, step by step along its path.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimings {
    /// The validator (wasmtime), before the lease is asked for.
    pub validate: Duration,
    /// Waiting for and taking (or keeping) the write lease.
    pub lease: Duration,
    /// Resolving the branch's head commit.
    pub head: Duration,
    /// The stateful checks against the stored tables.
    pub checks: Duration,
    /// Opening each table at its pin and staging its transaction.
    pub stage: Duration,
    /// Writing the recovery record.
    pub record: Duration,
    /// The fenced table commits.
    pub commit: Duration,
    /// Making the table files durable (local disks).
    pub sync: Duration,
    /// The put-if-absent of the graph commit (and its head hint).
    pub publish: Duration,
}

impl LoadTimings {
    /// Everything after the checks: stage, record, table commits, sync, publish.
    pub fn writing(&self) -> Duration {
        self.stage + self.record + self.commit + self.sync + self.publish
    }
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
    pub report_json: Arc<String>,
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
    pub report_json: Arc<String>,
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
    /// Shared with the receipt, not copied: the report of a batch of edges
    /// whose nodes are stored is larger than the batch.
    report_json: Arc<String>,
    tables: Vec<BatchTable>,
    external_refs: ExternalRefs,
}

/// Where a staged table's new contents come from.
enum Source<'a> {
    /// A validated batch's rows, written in the load's mode.
    Rows(&'a RecordBatch),
    /// Every row of another commit's table (a multi-batch overwrite's work
    /// branch), replacing the table's contents.
    CopyOf(TablePin),
}

/// The lease a process keeps across back-to-back loads (taken, renewed and
/// given up in graph/tenure.rs).
struct Tenure {
    lease: HeldLease,
    /// Writes done under it: bounded by `MAX_TENURE_WRITES`, so a busy host
    /// gives other hosts a turn.
    writes: u32,
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
    /// The `_id` lookups merges use instead of Lance's index (src/keys.rs),
    /// built by maintenance.
    key_runs: crate::keys::KeyRuns,
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
        root.prove_conditional_create().await?;
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
        fail_point!("graph-open");
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
        // Not durable means no fsync at all, the manifest's objects included.
        let root = if config.durable {
            root
        } else {
            root.without_fsync()
        };
        let key_runs = crate::keys::KeyRuns::holding_at_most(config.key_run_rows);
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
            key_runs,
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
}
