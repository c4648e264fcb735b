//! The graph manifest's objects (docs/storage.md): graph info, immutable
//! commits per branch, the write lease and the recovery record; their object
//! names and the branch-name rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::limits::MAX_BRANCH_NAME_BYTES;

pub const MAIN_BRANCH: &str = "main";
pub const FORMAT_VERSION: u32 = 1;

pub const GRAPH_INFO_PATH: &str = "_graph/graph.json";
pub const SCHEMA_PATH: &str = "_graph/schema.pg";
pub const CATALOG_PATH: &str = "_graph/catalog.json";
/// One recovery record per lease generation: a writer only ever writes and
/// deletes its own, so a writer that lost its lease cannot overwrite or
/// remove a newer holder's.
pub const RECOVERY_DIR: &str = "_graph/recovery";
pub const LEASE_DIR: &str = "_graph/lease";
pub const BRANCHES_DIR: &str = "_graph/branches";

/// `_graph/graph.json`: written first by `init` (put-if-absent).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphInfo {
    pub format: u32,
    pub schema_hash: String,
    pub created_at: String,
    /// SPEC §2.3 legacy identity: `data.id` identifies a node whose record
    /// has no top-level `id`. Fixed at `init`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy_identity: bool,
}

/// Where one table's data is for a commit: a Lance branch and a version on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablePin {
    /// The Lance branch holding this table's data for the commit; absent on
    /// Lance's main branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lance_branch: Option<String>,
    pub version: u64,
}

impl TablePin {
    /// Whether this table's data is the graph branch's own (written on it),
    /// rather than its base's: its Lance branch is the branch's
    /// (`Commit::lance_branch`), or one of that branch's per-generation
    /// table branches ([`table_lance_branch`]).
    pub fn owned_by(&self, branch_lance_branch: Option<&str>) -> bool {
        match (self.lance_branch.as_deref(), branch_lance_branch) {
            (None, None) => true,
            (Some(table), Some(branch)) => {
                table == branch
                    || table
                        .strip_prefix(branch)
                        .and_then(|rest| rest.strip_prefix(GENERATION_MARK))
                        .is_some_and(|generation| !generation.is_empty() && generation.bytes().all(|b| b.is_ascii_digit()))
            }
            _ => false,
        }
    }
}

/// Separates a graph branch's Lance branch name from the lease generation
/// in the name of a table's Lance branch ([`table_lance_branch`]).
const GENERATION_MARK: &str = ".g";

/// The Lance branch a table's first write on a graph branch creates, under
/// lease `generation`: `<branch's lance branch>.g<generation>`. Two lease
/// generations never share one, so a writer that stalled past its lease can
/// only ever delete or replace a Lance branch of its own generation, never
/// one another host published. (The generation is digits only and graph
/// branch names hold no `.g<digits>` at their end once `-<seq>` follows, so
/// the owner of a name is unambiguous.)
pub fn table_lance_branch(branch_lance_branch: &str, generation: u64) -> String {
    format!("{branch_lance_branch}{GENERATION_MARK}{generation}")
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCounts {
    pub inserted: u64,
    pub updated: u64,
    pub removed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitKind {
    /// The first commit of `main`: empty tables.
    Init,
    /// A batch was loaded.
    Load,
    /// A branch was created (its tables point at the base's versions).
    Fork,
    /// The branch was deleted; a later fork of the same name continues the chain.
    Delete,
    /// Maintenance rewrote one table (compaction, index fold or a new
    /// index): the same rows, in a layout that keeps loads fast.
    Maintain,
    /// Recovery rolled an interrupted load back: the tables are the parent's.
    /// It takes the load's sequence number, so the interrupted writer (which
    /// may still be running, its lease lost) can never publish the load.
    Rollback,
}

/// Another commit, named by branch and sequence number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRef {
    pub branch: String,
    pub seq: u64,
}

/// One immutable graph commit: `_graph/branches/<branch>/<inverted seq>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// A ULID, unique across branches.
    pub id: String,
    pub branch: String,
    pub seq: u64,
    pub kind: CommitKind,
    /// The commit this one builds on: the previous one of the branch, or the
    /// base's head for a fork.
    pub parent: Option<CommitRef>,
    pub parent_id: Option<String>,
    pub actor: String,
    /// RFC 3339 UTC.
    pub time: String,
    pub batch_id: Option<String>,
    /// The client's name for the batch (the CLI's `<run>:<n>`), so a client
    /// that crashed can tell whether its batch committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What a `maintain` commit did to its table (e.g. "compact small fragments").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<String>,
    /// The name of this graph branch's Lance branches: absent for `main`,
    /// `<branch>-<seq of its fork commit>` otherwise, so a branch deleted and
    /// created again never shares Lance branches with its earlier life. Each
    /// table's own Lance branch is this name plus the lease generation that
    /// first wrote it ([`table_lance_branch`]; graphs written before that
    /// rule have tables on this name itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lance_branch: Option<String>,
    /// Every table of the graph, by type name.
    pub tables: BTreeMap<String, TablePin>,
    /// Touched tables only.
    pub counts: BTreeMap<String, TableCounts>,
}

/// `_graph/lease/<generation>.json`: who may write the graph until when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub generation: u64,
    /// Milliseconds since the Unix epoch (host clocks must roughly agree).
    pub expires_at_ms: u64,
}

/// One table of an in-flight load, as the recovery record names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedTable {
    /// The Lance branch the transaction commits on (`None` = main).
    pub lance_branch: Option<String>,
    /// The published version on that Lance branch, or `None` when this load
    /// creates the Lance branch (rollback then deletes it).
    pub published: Option<u64>,
    /// The version the transaction was staged on: recovery looks for it above.
    pub read_version: u64,
    /// The staged Lance transaction's uuid: how recovery recognises it.
    pub uuid: String,
}

/// `_graph/recovery/<generation>.json`: written after staging and before any
/// table commit; deleted after the graph commit is published.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecoveryRecord {
    pub lease_generation: u64,
    /// The commit to publish once every staged transaction has landed
    /// (its touched tables' versions are filled in by recovery).
    pub commit: Commit,
    pub staged: BTreeMap<String, StagedTable>,
}

/// Object path of a branch's commit `seq`: names sort newest first, as
/// Lance's v2 manifests do, so an S3 listing starts at the head.
pub fn commit_path(branch: &str, seq: u64) -> String {
    format!("{BRANCHES_DIR}/{branch}/{:020}.json", u64::MAX - seq)
}

/// A branch's head hint: a copy of the newest commit its writer published.
/// The commit objects stay the authority (the hint is written after the
/// put-if-absent and may lag: readers probe the next sequence number).
pub fn head_hint_path(branch: &str) -> String {
    format!("{BRANCHES_DIR}/{branch}/HEAD.json")
}

pub fn seq_from_commit_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    (digits.len() == 20).then_some(())?;
    digits.parse::<u64>().ok().map(|inverted| u64::MAX - inverted)
}

pub fn recovery_path(generation: u64) -> String {
    format!("{RECOVERY_DIR}/{generation:020}.json")
}

pub fn lease_path(generation: u64) -> String {
    format!("{LEASE_DIR}/{generation:020}.json")
}

pub fn lease_released_path(generation: u64) -> String {
    format!("{LEASE_DIR}/{generation:020}.released")
}

pub fn generation_from_lease_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    (digits.len() == 20).then_some(())?;
    digits.parse().ok()
}

/// Branch names become object paths and Lance branch names: a small,
/// unambiguous alphabet, and never a path trick.
pub fn check_branch_name(name: &str) -> Result<(), EngineError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_BRANCH_NAME_BYTES
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.contains("..");
    if ok { Ok(()) } else { Err(EngineError::InvalidBranchName(name.to_owned())) }
}

/// Where a type's Lance dataset lives under the root.
pub fn table_path(kind: omnigraph_validate_wasm::TableKind, name: &str) -> String {
    match kind {
        omnigraph_validate_wasm::TableKind::Node => format!("nodes/{name}.lance"),
        omnigraph_validate_wasm::TableKind::Edge => format!("edges/{name}.lance"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_names_sort_newest_first_and_round_trip() {
        let names: Vec<String> = [0u64, 1, 9, 10, 12345].iter().map(|&s| commit_path("main", s)).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.reverse();
        assert_eq!(names, sorted);
        for s in [0u64, 7, u64::MAX / 2] {
            let path = commit_path("b", s);
            assert_eq!(seq_from_commit_name(path.rsplit('/').next().unwrap()), Some(s));
        }
        assert_eq!(seq_from_commit_name("12.json"), None);
    }

    #[test]
    fn branch_names_are_checked() {
        for good in ["main", "b1", "feature-x", "v1.2", "A_b"] {
            assert!(check_branch_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-x", ".hidden", "a/b", "a..b", "a b", "é", &"x".repeat(65), "../etc"] {
            assert!(check_branch_name(bad).is_err(), "{bad}");
        }
    }
}
