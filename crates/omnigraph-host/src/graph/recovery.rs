//! Recovery: finishing interrupted loads (roll forward, or take the slot
//! with a rollback marker and roll back) and settling table heads to their
//! pins.
//!
//! Recovery runs on open (except `load`'s open of a local graph, whose first
//! write recovers under its own lease), under the lease before every write,
//! and also right after a load that answered `recovery_required`, while its
//! writer still holds the lease. For each record of an older (or its own)
//! lease generation, oldest first: every staged uuid found exactly at its
//! table's read version + 1 → publish the recorded commit with those
//! versions (roll forward). Otherwise the load's sequence number is taken
//! first by a rollback marker (a commit of kind `rollback` with the parent's
//! tables, or a `delete` tombstone when the load would have created its
//! branch), put if absent, and only then is each touched table restored to
//! what its branch's head pins (or the load's base) and a Lance branch the
//! load created and no head pins deleted (roll back, idempotent). If the
//! slot is already taken, the holder decides: the load itself (same batch
//! id: rolled forward) or anything else (its versions are orphans: roll
//! back). Then every table a branch owns is settled: a head above its
//! published version without a record is restored too. While a host holds
//! the lease and records of older generations exist, other hosts' loads
//! answer 503 `recovery_in_progress`.

use super::*;

impl Graph {

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
    pub(super) async fn recover_leased(&self, up_to: u64) -> Result<Recovered, EngineError> {
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
    pub(super) async fn finish(&self, record: &RecoveryRecord) -> Result<Recovered, EngineError> {
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
    pub(super) fn recorded_table(&self, name: &str) -> Result<String, EngineError> {
        let t = self.schema.type_index(name).ok_or_else(|| EngineError::Corrupt(format!("the recovery record names {name}")))?;
        Ok(table_path(self.schema.types[t].kind, name))
    }

    /// The version at which a staged transaction landed: right after the
    /// version it was staged on, or not at all (landing higher means another
    /// writer committed in between, and the version holds its rows too).
    pub(super) async fn find_transaction(&self, path: &str, staged: &StagedTable) -> Result<Option<u64>, EngineError> {
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
    pub(super) async fn roll_back(&self, record: &RecoveryRecord) -> Result<(), EngineError> {
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
    pub(super) async fn settle(&self, path: &str, lance_branch: Option<&str>, version: u64) -> Result<Dataset, EngineError> {
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
    pub(super) async fn settle_all(&self) -> Result<(), EngineError> {
        for head in self.branches().await? {
            for def in &self.schema.types {
                let pin = &head.tables[&def.name];
                if pin.owned_by(head.lance_branch.as_deref()) {
                    self.settle(&table_path(def.kind, &def.name), pin.lance_branch.as_deref(), pin.version).await?;
                }
            }
        }
        Ok(())
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
