//! Staging, the recovery record, the fenced table commits, the sync and the
//! fenced publish of one load. A table's first write on a branch forks a
//! Lance branch named for the lease generation; a table commit must land at
//! read version + 1; failures after the record answer `RecoveryRequired`.

use super::*;

impl Graph {
    /// Stages one transaction per touched table, writes the recovery record,
    /// commits the tables, syncs and publishes. Any failure after the record
    /// is written answers `RecoveryRequired` (SPEC §4.7): recovery, not this
    /// writer, decides whether the load is published.
    pub(super) async fn stage_and_commit(
        &self,
        mode: Mode,
        sources: Vec<(usize, Source<'_>)>,
        lease: &HeldLease,
        mut commit: Commit,
        timings: &mut LoadTimings,
    ) -> Result<Commit, EngineError> {
        let staging = Instant::now();
        let target = commit.lance_branch.clone();
        let mut staged_tables = BTreeMap::new();
        let mut staged = Vec::new();
        let mut ids = ulid::Generator::new();
        for (t, source) in sources {
            let def = &self.schema.types[t];
            let path = table_path(def.kind, &def.name);
            let pin = commit.tables.get(&def.name).cloned().ok_or_else(|| EngineError::Corrupt(format!("no pin for {}", def.name)))?;
            let (lance_branch, base, published) = if pin.owned_by(target.as_deref()) {
                let base = self.settle(&path, pin.lance_branch.as_deref(), pin.version).await?;
                (pin.lance_branch.clone(), base, Some(pin.version))
            } else {
                // First write of this table on the branch: fork a Lance branch
                // named for this lease generation. Only this generation ever
                // writes that name, so a leftover of it is this generation's
                // own rolled-back first write, never a branch another host
                // published: deleting it is safe even if this writer stalled
                // past its lease.
                let branch = target.as_deref().expect("main's tables are always on Lance's main");
                let name = table_lance_branch(branch, lease.generation);
                fail_point!("before-table-branch");
                let mut ds = self.root.open_table(&path).await?;
                if ds.list_branches().await?.contains_key(&name) {
                    ds.force_delete_branch(&name).await?;
                }
                let forked = ds
                    .create_branch(&name, (pin.lance_branch.as_deref(), Some(pin.version)), Some(self.root.store_params()))
                    .await?;
                (Some(name), forked, None)
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
                    tables::stage(&self.root, Arc::new(base), mode, rows, properties, &tables::keys_of(def), &self.key_runs).await?
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
                StagedTable { lance_branch: lance_branch.clone(), published, read_version, uuid: one.transaction.uuid.clone() },
            );
            staged.push(StagedOn { table: t, lance_branch, read_version, staged: one });
        }
        timings.stage = staging.elapsed();
        fail_point!("after-stage");
        let recording = Instant::now();
        let record = RecoveryRecord {
            lease_generation: lease.generation,
            commit: commit.clone(),
            staged: staged_tables,
        };
        self.record_written.store(true, Ordering::Release);
        self.root
            .put(
                &recovery_path(lease.generation),
                serde_json::to_vec_pretty(&record).expect("record serializes"),
            )
            .await?;
        timings.record = recording.elapsed();
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
    pub(super) async fn commit_armed(
        &self,
        staged: Vec<StagedOn>,
        lease: &HeldLease,
        mut commit: Commit,
        timings: &mut LoadTimings,
    ) -> Result<Commit, EngineError> {
        let committing = Instant::now();
        for StagedOn { table, lance_branch, read_version, staged: one } in staged {
            let def = &self.schema.types[table];
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
            commit.tables.insert(def.name.clone(), TablePin { lance_branch, version: ds.version().version });
        }
        timings.commit = committing.elapsed();
        let syncing = Instant::now();
        self.sync_tables().await?;
        timings.sync = syncing.elapsed();
        fail_point!("after-sync");
        if !lease.valid_for(self.publish_margin()) {
            return Err(EngineError::LeaseExpired);
        }
        fail_point!("before-publish");
        let publishing = Instant::now();
        let published = self.publish_commit(&commit).await?;
        timings.publish = publishing.elapsed();
        if !published {
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

    /// Makes committed table files durable. Lance never fsyncs; on a local
    /// disk one `syncfs` flushes every new data, deletion, transaction and
    /// manifest file and the directories naming them.
    pub(super) async fn sync_tables(&self) -> Result<(), EngineError> {
        match (self.config.durable, self.root.local_dir()) {
            (true, Some(dir)) => crate::durability::sync_filesystem(dir),
            _ => Ok(()),
        }
    }
}

/// One table's staged transaction: the Lance branch it commits on and the
/// version it was staged on (it must land right above it).
pub(super) struct StagedOn {
    table: usize,
    lance_branch: Option<String>,
    read_version: u64,
    staged: tables::Staged,
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
