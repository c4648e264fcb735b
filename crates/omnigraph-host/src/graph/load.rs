//! One load, in its order: validate (the artifact in wasmtime), resolve the
//! base, run the stateful checks, then stage and commit (commit.rs) under the
//! lease (tenure.rs).

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
        let mut snapshot = Snapshot::new(&self.root, &self.schema, &base.tables);
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
