//! The engine's typed errors: `EngineError` and `Conflict` (a failed stateful
//! check). Each has a stable code (the HTTP layer maps codes to statuses);
//! Lance's own messages carry source locations, so they are kept in
//! `details` only.

use serde::Serialize;

use crate::validator::ValidatorError;

/// One failed stateful check (SPEC §4.5). Rows in Arrow carry no line
/// number, so the row is named by its type and id; external references keep
/// the line the validator reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub code: &'static str,
    #[serde(rename = "type")]
    pub type_name: String,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub message: String,
}

#[derive(Debug)]
pub enum EngineError {
    /// The root is not a local path or an `s3://` URI, or an option is unknown.
    InvalidRoot(String),
    /// `init` on a root that already holds a graph.
    GraphExists(String),
    /// No graph at the root (or its `init` never finished).
    NoGraph(String),
    /// The schema does not compile (the message lists line:column errors).
    Schema(String),
    InvalidBranchName(String),
    /// `main` cannot be deleted (it exists from `init` on).
    MainBranchProtected,
    BranchNotFound(String),
    /// A request names a type the schema does not declare.
    UnknownType(String),
    BranchExists(String),
    CommitNotFound(String),
    /// The validator refused the batch: the report JSON (SPEC §3).
    Invalid { report_json: String },
    /// The batch passed the validator but not the checks against stored data.
    Rejected { report_json: String, conflicts: Vec<Conflict> },
    /// The validator could not run (timeout, memory cap, busy, …).
    Validator(ValidatorError),
    /// Another writer kept winning the branch head; retry later.
    CommitConflict { attempts: u32 },
    /// Another host holds the graph's write lease (of this generation).
    LeaseBusy { owner: String, generation: u64 },
    /// This writer's lease ran out before it could publish (a cause of
    /// `RecoveryRequired`: it is noticed after the recovery record is written).
    LeaseExpired,
    /// A table commit did not land right after the version it was staged on:
    /// another writer committed to the table, so this writer lost its lease
    /// (a cause of `RecoveryRequired`).
    Fenced { table: String, staged_on: u64, landed_at: u64 },
    /// Another writer took this load's sequence number: this writer lost its
    /// lease (a cause of `RecoveryRequired`).
    SlotTaken { branch: String, seq: u64 },
    /// The load failed after its recovery record was written (SPEC §4.7):
    /// whether it is published is decided by recovery, not claimed here.
    RecoveryRequired { cause: Box<EngineError> },
    /// Another host holds the lease to finish an interrupted load.
    RecoveryInProgress,
    /// The caller went away while its write waited for the writer lock or
    /// another host's lease: nothing was written.
    CallerGone,
    /// The store does not refuse a second conditional create of one object
    /// (`If-None-Match: *`): leases and commit slots would be
    /// last-writer-wins, so the host refuses to write to it.
    UnsafeStore(String),
    /// A host-side bound (SPEC §5) refused the load before anything was
    /// written, e.g. `removed_ids_limit`.
    BoundExceeded { code: &'static str, resource: String, limit: u64, actual: u64 },
    /// The branch changed rows after the commit a write was based on: a
    /// multi-batch overwrite's target after its work branch was forked
    /// (publishing would drop the newer commits), or a load's
    /// `unchanged_since`. Nothing changes.
    TargetMoved { branch: String, expected_seq: u64, head_seq: u64 },
    /// A manifest object that does not parse.
    Corrupt(String),
    Storage(String),
    Lance(lance::Error),
}

/// The report codes of the validator's size bounds (SPEC §5): a smaller
/// batch may fit them (the CLI halves a batch refused for one). The
/// removed-id allowance is not among them: it depends on stored data.
pub const SIZE_BOUND_CODES: [&str; 5] =
    ["batch_bytes_limit", "line_too_long", "json_too_complex", "table_rows_limit", "table_bytes_limit"];

/// The size bounds a record passes on its own (its line, its JSON's
/// structure): no smaller batch takes it, so the record is the one at
/// fault. The other bounds are the batch's: the line they name is only
/// where the batch passed them.
pub const RECORD_BOUND_CODES: [&str; 2] = ["line_too_long", "json_too_complex"];

/// The first size bound a report's errors hit: its code and
/// `{resource, limit, actual}`. A batch refused for a bound is a 413 on
/// every route, whatever else is wrong with it. Only the report's errors
/// (at most `max_errors`) are read; its other members are skipped unread.
pub fn report_bound(report_json: &str) -> Option<(&'static str, serde_json::Value)> {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<serde_json::Value>,
    }
    let report: Errors = serde_json::from_str(report_json).ok()?;
    let error = report.errors.into_iter().find(|e| e.get("limit").is_some())?;
    let code = SIZE_BOUND_CODES.into_iter().find(|c| error["code"] == *c).unwrap_or("bound_exceeded");
    Some((code, error["limit"].clone()))
}

impl EngineError {
    /// Whether the write may have been committed all the same: only a
    /// failure after the recovery record (SPEC §4.7); every other error
    /// leaves the graph as it was.
    pub fn maybe_committed(&self) -> bool {
        matches!(self, EngineError::RecoveryRequired { .. })
    }

    /// A stable snake_case code for APIs and logs.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::InvalidRoot(_) => "invalid_root",
            EngineError::GraphExists(_) => "graph_exists",
            EngineError::NoGraph(_) => "graph_not_found",
            EngineError::Schema(_) => "schema_error",
            EngineError::InvalidBranchName(_) => "invalid_branch_name",
            EngineError::MainBranchProtected => "main_branch_protected",
            EngineError::BranchNotFound(_) => "branch_not_found",
            EngineError::UnknownType(_) => "unknown_type",
            EngineError::BranchExists(_) => "branch_exists",
            EngineError::CommitNotFound(_) => "commit_not_found",
            EngineError::Invalid { .. } => "validation_failed",
            EngineError::Rejected { conflicts, .. } => {
                if conflicts.iter().all(|c| c.code == "key_conflict") {
                    "key_conflict"
                } else {
                    "stateful_check_failed"
                }
            }
            EngineError::Validator(_) => "validator_error",
            EngineError::CommitConflict { .. } => "commit_conflict",
            EngineError::LeaseBusy { .. } => "graph_busy",
            EngineError::LeaseExpired => "lease_expired",
            EngineError::Fenced { .. } => "fenced",
            EngineError::SlotTaken { .. } => "slot_taken",
            EngineError::RecoveryRequired { .. } => "recovery_required",
            EngineError::RecoveryInProgress => "recovery_in_progress",
            EngineError::CallerGone => "caller_gone",
            EngineError::UnsafeStore(_) => "store_not_conditional",
            EngineError::BoundExceeded { code, .. } => code,
            EngineError::TargetMoved { .. } => "target_moved",
            EngineError::Corrupt(_) => "corrupt_manifest",
            EngineError::Storage(_) => "storage_error",
            EngineError::Lance(_) => "table_error",
        }
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::InvalidRoot(m) => write!(f, "invalid graph root: {m}"),
            EngineError::GraphExists(r) => write!(f, "a graph already exists at {r}"),
            EngineError::NoGraph(r) => write!(f, "no graph at {r}"),
            EngineError::Schema(m) => write!(f, "schema error:\n{m}"),
            EngineError::InvalidBranchName(b) => write!(
                f,
                "invalid branch name {b:?}: use 1-64 ASCII letters, digits, '_', '-' or '.', starting with a letter or digit"
            ),
            EngineError::BranchNotFound(b) => write!(f, "branch {b:?} does not exist"),
            EngineError::MainBranchProtected => write!(f, "branch \"main\" cannot be deleted"),
            EngineError::UnknownType(t) => write!(f, "the schema declares no type {t:?}"),
            EngineError::BranchExists(b) => write!(f, "branch {b:?} already exists"),
            EngineError::CommitNotFound(c) => write!(f, "commit {c:?} not found"),
            EngineError::Invalid { .. } => write!(f, "the batch failed validation"),
            EngineError::Rejected { conflicts, .. } => {
                write!(f, "the batch conflicts with stored data ({} problem(s))", conflicts.len())?;
                for c in conflicts.iter().take(5) {
                    write!(f, "\n  {}: {}", c.code, c.message)?;
                }
                Ok(())
            }
            EngineError::Validator(e) => write!(f, "validator: {e}"),
            EngineError::CommitConflict { attempts } => {
                write!(f, "the branch head kept moving: gave up after {attempts} attempts")
            }
            EngineError::LeaseBusy { owner, .. } => write!(f, "another writer ({owner}) holds the graph's write lease"),
            EngineError::LeaseExpired => write!(f, "the write lease expired before the commit was published"),
            EngineError::Fenced { table, staged_on, landed_at } => write!(
                f,
                "table {table} was staged on version {staged_on} but landed at {landed_at}: another writer committed to it, this writer's lease was lost"
            ),
            EngineError::SlotTaken { branch, seq } => {
                write!(f, "another writer took commit {seq} of branch {branch}: this writer's lease was lost")
            }
            EngineError::RecoveryRequired { cause } => write!(
                f,
                "the load stopped after its recovery record was written ({cause}); recovery decides whether it is published, nothing is claimed: check the branch's log for the batch key, then retry"
            ),
            EngineError::RecoveryInProgress => {
                write!(f, "another host is finishing an interrupted load on this graph; retry shortly")
            }
            EngineError::CallerGone => write!(f, "the caller went away while the write waited its turn; nothing was written"),
            EngineError::UnsafeStore(store) => write!(
                f,
                "the store at {store} accepted a second conditional create of one object (If-None-Match: *): the graph's lease and commit slots would be last-writer-wins there, so nothing is written to it (docs/reliability.md, \"Stores\")"
            ),
            EngineError::BoundExceeded { resource, limit, actual, .. } => {
                write!(f, "the load exceeds a bound: {resource} needs {actual}, the limit is {limit}; split the load")
            }
            EngineError::TargetMoved { branch, expected_seq, head_seq } => write!(
                f,
                "branch {branch:?} changed at commit {head_seq}, after commit {expected_seq} the write was based on; nothing was changed: read the branch again and retry"
            ),
            EngineError::Corrupt(m) => write!(f, "corrupt graph manifest: {m}"),
            EngineError::Storage(m) => write!(f, "storage: {m}"),
            EngineError::Lance(e) => write!(f, "table storage: {e}"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<lance::Error> for EngineError {
    fn from(e: lance::Error) -> Self {
        EngineError::Lance(e)
    }
}

impl From<object_store::Error> for EngineError {
    fn from(e: object_store::Error) -> Self {
        EngineError::Storage(e.to_string())
    }
}

impl From<ValidatorError> for EngineError {
    fn from(e: ValidatorError) -> Self {
        EngineError::Validator(e)
    }
}
