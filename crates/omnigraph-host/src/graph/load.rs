//! One load, in its order: validate (the artifact in wasmtime), resolve the
//! base, run the stateful checks, then stage and commit (commit.rs) under the
//! lease (tenure.rs). Also dry runs and generated ids.
//!
//! The commit protocol:
//!
//! ```text
//! Graph::load(branch, from?, mode, actor, bytes)
//!   1 validate      the artifact in wasmtime (spawn_blocking) → report + Arrow per touched type;
//!                   a refused batch ends here (Invalid, nothing read or written)
//!   2 lease         in-process mutex, then the graph's lease: the one kept from the previous
//!                   load of this process (kept only while another load of it waits, at most
//!                   MAX_TENURE_WRITES writes), or create _graph/lease/<g+1>.json put-if-absent
//!                   once <g> is released or expired; renewed while the load runs whenever half
//!                   of it is left
//!   3 recover       leftover _graph/recovery/<gen>.json records (older generations) are
//!                   rolled forward or back first
//!   4 resolve       head of `branch`, or `from`'s head when forking: known to the tenure (what
//!                   it published or read under its lease: no request), else the HEAD.json hint
//!                   plus a probe of the next sequence number
//!   5 check         stateful checks against the head's pinned table versions (indexed lookups);
//!                   conflicts → Rejected (nothing written)
//!   6 stage         per touched table: settle its Lance head to the pin (restore unpublished
//!                   versions) or, on the table's first write on the branch, fork a Lance branch
//!                   `<branch's lance branch>.g<lease generation>` (a leftover of that name is
//!                   this generation's own and is replaced); fill ULIDs; stage one transaction
//!                   with properties {batch_id, commit}: merge/append (tables::stage_upsert)
//!                   find the stored rows of the batch's ids (the key runs of the _id index's
//!                   segments where this process has them all, else the index itself; other
//!                   fragments by their own key runs, else scanned), write the
//!                   batch as new fragments and extend the deletion vectors of the replaced
//!                   rows, one Lance Update (what merge_insert commits, without reading the
//!                   replaced rows back or joining them); an append that finds a stored id
//!                   fails; overwrite: Overwrite
//!   7 record        write _graph/recovery/<own gen>.json {commit to publish, per table: lance
//!                   branch, published version, read version, transaction uuid}. From here on
//!                   every failure answers RecoveryRequired (503 recovery_required): recovery,
//!                   not this writer, decides whether the load is published
//!   8 commit        each table's transaction exactly once, fenced: it must land at read version
//!                   + 1, else another writer committed in between (Fenced); no upkeep here
//!                   (maintenance is its own commits, graph/maintain.rs)
//!   9 sync          syncfs on local disks
//!  10 publish       _graph/branches/<b>/<inverted seq>.json put-if-absent, fenced: a slot taken
//!                   by this very load (recovered by another host) is success, by anything else
//!                   SlotTaken (the lease was lost); a clock saying the lease is nearly over
//!                   gives up early (LeaseExpired), for liveness only
//!  11 finish        keep the lease for a load already waiting (its record is overwritten by
//!                   the next one), or delete the record and release the lease (failures are
//!                   logged, never the load's error: the next recovery removes a record of a
//!                   published load)
//! ```

use super::*;

impl Graph {

    /// Runs the validator artifact on a batch; a refused batch is `Invalid`.
    pub(super) async fn validate(&self, req: &LoadRequest) -> Result<Validated, EngineError> {
        let options = serde_json::to_vec(&self.options(req.mode, req.strict)).expect("options serialize");
        let batch = req.batch.clone();
        let (validator, source, schema) = (self.validator.clone(), self.schema_source.clone(), self.schema.clone());
        let result = tokio::task::spawn_blocking(move || {
            fail_point!("validating");
            validator.prepare_compiled(&source, &schema, &options, &batch)
        })
            .await
            .map_err(storage_error)??;
        match result {
            PrepareResult::Accepted { report_json, tables } => {
                let external_refs = ExternalRefs::from_report(&report_json, &self.schema)
                    .map_err(|e| EngineError::Corrupt(format!("report: {e}")))?;
                let mut decoded = Vec::with_capacity(tables.len());
                for table in tables {
                    let t = self.schema.type_index(&table.name).expect("the validator names schema types");
                    decoded.push(BatchTable { t, rows: table.batch, lines: table.lines });
                }
                Ok(Validated { report_json: Arc::new(report_json), tables: decoded, external_refs })
            }
            PrepareResult::Rejected { report_json } => Err(EngineError::Invalid { report_json }),
            PrepareResult::SchemaError(e) | PrepareResult::OptionsError(e) => Err(EngineError::Schema(e)),
        }
    }

    /// The commit a load builds on, and the fork base if it creates the branch.
    pub(super) async fn load_base(&self, branch: &str, from: Option<&str>, leased: bool) -> Result<(Commit, Option<CommitRef>), EngineError> {
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
        let mut snapshot = Snapshot::new(&self.root, &self.schema, &base.tables, &self.key_runs);
        let removed_id_limit = self.config.limits.max_removed_id_bytes;
        let outcome =
            checks::run(&mut snapshot, req.mode, &validated.tables, &validated.external_refs, true, removed_id_limit).await?;
        Ok(DryRun { report_json: validated.report_json, conflicts: outcome.conflicts, counts: outcome.counts })
    }

    /// Loads one batch as one graph commit (SPEC §4.2): all of it becomes
    /// visible at once, or none of it.
    pub async fn load(&self, req: LoadRequest) -> Result<Receipt, EngineError> {
        self.load_while_wanted(req, never_gone()).await
    }

    /// [`Graph::load`] for a caller that may go away: while the load waits
    /// for the writer lock or another host's lease, `gone` resolving gives
    /// its place up (`CallerGone`, nothing written). Once it holds the lease
    /// it runs to its end.
    pub async fn load_while_wanted(&self, req: LoadRequest, gone: CallerGone<'_>) -> Result<Receipt, EngineError> {
        check_branch_name(&req.branch)?;
        if let Some(from) = &req.from {
            check_branch_name(from)?;
        }
        let started = Instant::now();
        let validated = self.validate(&req).await?;
        let validate_time = started.elapsed();
        let asked = Instant::now();
        self.with_lease_while_wanted(self.config.lease_wait, gone, |lease, recovered| {
            let timings = LoadTimings {
                validate: validate_time,
                lease: asked.elapsed(),
                ..LoadTimings::default()
            };
            let (req, validated) = (&req, &validated);
            async move {
                if let Some(commit) = self.rolled_forward_as(req, &recovered).await? {
                    return Ok(Receipt {
                        branch: req.branch.clone(),
                        created_from: None,
                        mode: req.mode,
                        commit: Some(commit),
                        report_json: validated.report_json.clone(),
                        timings,
                    });
                }
                self.load_leased(req, validated, lease, timings).await
            }
        })
        .await
    }

    /// The commit recovery just rolled forward, if it is this very batch
    /// (same branch and batch key): a client retrying a load whose answer it
    /// lost (`recovery_required`, a broken connection) while its record was
    /// still unrecovered gets that commit, not a second copy of the batch.
    async fn rolled_forward_as(&self, req: &LoadRequest, recovered: &Recovered) -> Result<Option<Commit>, EngineError> {
        let (Some(key), Recovered::RolledForward { branch, seq }) = (&req.batch_key, recovered) else { return Ok(None) };
        if *branch != req.branch {
            return Ok(None);
        }
        let commit = self.commit_at(branch, *seq).await?;
        Ok((commit.batch_key.as_deref() == Some(key.as_str())).then_some(commit))
    }

    pub(super) async fn load_leased(
        &self,
        req: &LoadRequest,
        validated: &Validated,
        lease: HeldLease,
        mut timings: LoadTimings,
    ) -> Result<Receipt, EngineError> {
        // Only an empty load's fork loops (its branch appeared meanwhile); a
        // load with rows is published or answers an error, its slot fenced.
        for _ in 1..=MAX_COMMIT_ATTEMPTS {
            let started = Instant::now();
            let (base, created_from) = self
                .load_base(&req.branch, req.from.as_deref(), true)
                .await?;
            timings.head += started.elapsed();
            if let Some(since) = req.unchanged_since {
                if created_from.is_some() {
                    return Err(EngineError::BranchNotFound(req.branch.clone()));
                }
                let changed = self.last_change_since(&base, since).await?;
                if changed.seq != since {
                    return Err(EngineError::TargetMoved { branch: req.branch.clone(), expected_seq: since, head_seq: base.seq });
                }
            }
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
            fail_point!("checking");
            let mut snapshot = Snapshot::new(&self.root, &self.schema, &base.tables, &self.key_runs);
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
                    report_json: validated.report_json.as_ref().clone(),
                    conflicts: outcome.conflicts,
                });
            }
            let batch_id = ulid::Ulid::new().to_string();
            let mut commit =
                self.next_commit(&req.branch, &base, CommitKind::Load, &req.actor, Some(batch_id), Some(req.mode)).await?;
            commit.counts = outcome.counts;
            commit.batch_key = req.batch_key.clone();
            let sources = validated
                .tables
                .iter()
                .map(|table| (table.t, Source::Rows(&table.rows)))
                .collect();
            let commit = self
                .stage_and_commit(req.mode, sources, &lease, commit, &mut timings)
                .await?;
            return Ok(receipt(Some(commit), timings));
        }
        Err(EngineError::CommitConflict { attempts: MAX_COMMIT_ATTEMPTS })
    }
}
