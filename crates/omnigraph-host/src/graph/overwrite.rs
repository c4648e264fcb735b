//! An overwrite larger than one batch (SPEC §4.3, §5). Committing each batch
//! as its own overwrite would let every batch wipe the rows the previous one
//! wrote, and readers would see the types half replaced. Instead the batches
//! are loaded (in `append` mode) onto a *work branch* forked from the target
//! whose replaced tables start empty; then one graph commit on the target
//! replaces those tables by the work branch's, checked like a single
//! overwrite (removed-id allowance, stored edges stranded by removed nodes).
//! Until that commit the target is untouched: a refused batch, a crash or an
//! abandoned run leave it as it was. If the target moved meanwhile, the
//! publish is refused (`target_moved`) rather than dropping newer commits.
//! Rollback markers and maintenance move no row, so the publish and a
//! retried publish look through them (`maintain` commits since the fork
//! change no rows); a retried publish that landed answers that publish,
//! found by batch key since the base.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use omnigraph_validate_wasm::{Mode, TableKind};

use super::{Graph, LoadTimings, Receipt, Source};
use crate::checks::{self, RemovedIdAllowance, Replacement, Snapshot};
use crate::error::EngineError;
use crate::manifest::{Commit, CommitKind, MAIN_BRANCH, TableCounts, check_branch_name, table_path};
use crate::tables;

/// The publish step of a multi-batch overwrite.
#[derive(Debug, Clone)]
pub struct OverwritePublish {
    /// The branch whose types are replaced.
    pub branch: String,
    /// The work branch holding the new contents (forked from `branch` at
    /// `base_seq` by [`Graph::create_work_branch`]); deleted once published.
    pub work: String,
    pub base_seq: u64,
    /// The replaced types: exactly the work branch's cleared tables.
    pub types: Vec<String>,
    pub actor: String,
    /// Makes a retried publish recognisable (the CLI's `<run>:publish`).
    pub batch_key: Option<String>,
}

impl Graph {
    /// Type indexes of type names, refusing unknown names.
    fn type_indexes(&self, names: &[String]) -> Result<Vec<usize>, EngineError> {
        let mut out: Vec<usize> = names
            .iter()
            .map(|n| {
                self.schema
                    .type_index(n)
                    .ok_or_else(|| EngineError::UnknownType(n.clone()))
            })
            .collect::<Result<_, _>>()?;
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Forks `name` from `from`'s head, with the tables of `cleared` empty
    /// (pinned at their `init` versions, which hold no rows): the work branch
    /// of a multi-batch overwrite.
    pub async fn create_work_branch(
        &self,
        name: &str,
        from: &str,
        cleared: &[String],
        actor: &str,
    ) -> Result<Commit, EngineError> {
        let cleared = self.type_indexes(cleared)?;
        self.fork(name, from, &cleared, actor).await
    }

    /// Creates `name` from `from`'s head (its tables in `cleared` empty).
    pub(super) async fn fork(
        &self,
        name: &str,
        from: &str,
        cleared: &[usize],
        actor: &str,
    ) -> Result<Commit, EngineError> {
        check_branch_name(name)?;
        let init = if cleared.is_empty() {
            None
        } else {
            Some(self.commit_at(MAIN_BRANCH, 0).await?)
        };
        self.with_lease(self.config.lease_wait, |_, _| async {
            if self.head(name).await?.is_some() {
                return Err(EngineError::BranchExists(name.to_owned()));
            }
            let base = self.head_or_404(from).await?;
            let mut commit = self
                .next_commit(name, &base, CommitKind::Fork, actor, None, None)
                .await?;
            for &t in cleared {
                let table = &self.schema.types[t].name;
                let empty = init.as_ref().and_then(|c| c.tables.get(table)).cloned();
                commit.tables.insert(
                    table.clone(),
                    empty.ok_or_else(|| EngineError::Corrupt(format!("main@0 has no {table}")))?,
                );
            }
            if !self.publish_commit(&commit).await? {
                return Err(EngineError::BranchExists(name.to_owned()));
            }
            Ok(commit)
        })
        .await
    }

    /// The commit above sequence number `floor` on `head`'s branch that
    /// carries batch key `key`, if any: a publish that landed before its
    /// retry (its answer lost). Walks only the commits since `floor`.
    async fn published_since(&self, head: &Commit, floor: u64, key: &str) -> Result<Option<Commit>, EngineError> {
        let mut found = None;
        self.walk_back(head.clone(), |commit| {
            if commit.seq <= floor {
                return false;
            }
            if commit.batch_key.as_deref() == Some(key) {
                found = Some(commit.clone());
                return false;
            }
            true
        })
        .await?;
        Ok(found)
    }

    /// Replaces the tables of `types` on `branch` by the work branch's, in
    /// one graph commit, then deletes the work branch. A retry of a publish
    /// that landed (same batch key) answers that publish's commit.
    pub async fn publish_overwrite(&self, req: OverwritePublish) -> Result<Receipt, EngineError> {
        check_branch_name(&req.branch)?;
        check_branch_name(&req.work)?;
        let types = self.type_indexes(&req.types)?;
        let (commit, timings) = self
            .with_lease(self.config.lease_wait, |lease, _| {
                let req = &req;
                let types = &types;
                async move {
                    let mut timings = LoadTimings::default();
                    let head = self.head_or_404(&req.branch).await?;
                    // Maintenance commits and rollback markers since move no
                    // row: they neither move the target nor hide a publish
                    // done before.
                    let changed = self.last_change_since(&head, req.base_seq).await?;
                    if changed.seq != req.base_seq {
                        if let Some(key) = &req.batch_key
                            && let Some(published) = self.published_since(&head, req.base_seq, key).await?
                        {
                            return Ok((published, timings));
                        }
                        return Err(EngineError::TargetMoved {
                            branch: req.branch.clone(),
                            expected_seq: req.base_seq,
                            head_seq: head.seq,
                        });
                    }
                    let work = self.head_or_404(&req.work).await?;
                    let started = std::time::Instant::now();
                    let counts = self.overwrite_checks(&head, &work, types).await?;
                    timings.checks = started.elapsed();
                    let batch_id = ulid::Ulid::new().to_string();
                    let mut commit = self
                        .next_commit(
                            &req.branch,
                            &head,
                            CommitKind::Load,
                            &req.actor,
                            Some(batch_id),
                            Some(Mode::Overwrite),
                        )
                        .await?;
                    commit.counts = counts;
                    commit.batch_key = req.batch_key.clone();
                    let sources = types
                        .iter()
                        .map(|&t| (t, Source::CopyOf(work.tables[&self.schema.types[t].name].clone())))
                        .collect();
                    let published = self
                        .stage_and_commit(Mode::Overwrite, sources, &lease, commit, &mut timings)
                        .await?;
                    Ok((published, timings))
                }
            })
            .await?;
        // Housekeeping: the work branch has served. Its Lance branches stay
        // (like any deleted branch's); a failure here leaves a branch the user
        // can delete, never a wrong target.
        if let Err(e) = self.delete_branch(&req.work, &req.actor).await
            && !matches!(e, EngineError::BranchNotFound(_))
        {
            eprintln!(
                "overwrite of {} published; deleting work branch {} failed: {e}",
                req.branch, req.work
            );
        }
        Ok(Receipt {
            branch: req.branch,
            created_from: None,
            mode: Mode::Overwrite,
            commit: Some(commit),
            report_json: Arc::new("null".to_owned()),
            timings,
        })
    }

    /// The checks of a single overwrite, for tables replaced by another
    /// commit's: counts, the removed-id allowance, and stored edges of other
    /// types that the removed nodes would strand.
    async fn overwrite_checks(
        &self,
        head: &Commit,
        work: &Commit,
        types: &[usize],
    ) -> Result<BTreeMap<String, TableCounts>, EngineError> {
        let mut snapshot = Snapshot::new(&self.root, &self.schema, &head.tables, &self.key_runs);
        let mut allowance = RemovedIdAllowance::new(self.config.limits.max_removed_id_bytes);
        let mut counts = BTreeMap::new();
        let mut removed = Vec::new();
        for &t in types {
            let def = &self.schema.types[t];
            let new_rows =
                tables::open_pinned(&self.root, &table_path(def.kind, &def.name), &work.tables[&def.name]).await?;
            let keep_gone = def.kind == TableKind::Node;
            let r = checks::removal(
                snapshot.table(t).await?,
                &Replacement::Table(&new_rows),
                keep_gone,
                &mut allowance,
                &self.key_runs,
            )
            .await?;
            let rows = new_rows.count_rows(None).await? as u64;
            counts.insert(
                def.name.clone(),
                TableCounts {
                    inserted: rows - r.kept,
                    updated: r.kept,
                    removed: r.removed,
                },
            );
            if !r.gone.is_empty() {
                removed.push((t, r.gone));
            }
        }
        allowance.check()?;
        let overwritten: HashSet<usize> = types.iter().copied().collect();
        let mut conflicts = Vec::new();
        for (node_type, gone) in &removed {
            checks::check_stranded_edges(&mut snapshot, &overwritten, *node_type, gone, &mut conflicts).await?;
        }
        if !conflicts.is_empty() {
            checks::sort_conflicts(&mut conflicts);
            return Err(EngineError::Rejected {
                report_json: "null".into(),
                conflicts,
            });
        }
        Ok(counts)
    }
}
