//! Maintenance off the load path (SPEC §4.7): index creation (every index
//! the checks look up and every `@index` the schema declares), index folds
//! and compaction of small fragments; and `optimize`. Each is one bounded
//! step under the lease, one Lance version of one table, published as a
//! graph commit of kind `maintain` (same rows, new pin), so readers and
//! recovery see it like any other commit. A step built off the lock is
//! committed only onto the table it was built from (its Lance branch, no
//! overwrite since). A step that crashes before its publish leaves only a
//! table version above its pin, which the next writer restores away (the
//! rows are the same); so maintenance needs no recovery record.
//!
//! ```text
//! Graph::maintain_step()   (server and sustained bench: Graph::maintain_if_due every
//!                           MAINTENANCE_INTERVAL, for graphs loads changed, on a
//!                           thread and tokio runtime of its own at MAINTENANCE_NICE
//!                           (graph::spawn_maintenance): loads keep the server's
//!                           workers and get the cores first;
//!                           CLI: `optimize`, and once after a split file's last batch on a
//!                           local root, up to 4 steps per batch it committed; never between
//!                           a run's batches)
//!   off the lock (loads go on): the first table of any branch that has a next job is
//!     opened at the version its head pins and the step is built there: a missing index
//!     (og_id/src/dst, first @unique member, each @index; tables::prepare_index, all of the
//!     column, the whole table after an overwrite; an _id index also builds its key runs),
//!     a fold (tables::prepare_fold: size-tiered, merging the new rows with the
//!     newest segments at most FOLD_TIER_RATIO× their size, so a fold usually writes what
//!     loads added; an _id fold also builds its new segments' key runs), or a compaction
//!     of the small fragments no index covers yet (at least MIN_SMALL_FRAGMENTS, or
//!     MIN_SMALL_FRAGMENTS_BEFORE_COVERING before a fold is due; tables::prepare_compaction: one Lance compaction task,
//!     rewritten but not committed, and the new fragments' key runs read back from their
//!     files; indexed fragments are never rewritten, so no index is ever remapped)
//!   lease (no waiting: another host's lease means "later"), then, if the head still pins
//!     the table the step was built from (same Lance branch, version not below the
//!     snapshot, no overwrite or restore below it since: tables::replaced_since; else the
//!     step is dropped and nothing of it published),
//!     a prepared fold: committed on top of the table's current pin (Lance checks it
//!       against the loads since its snapshot), only its new segment warmed; or
//!     a prepared compaction (tables::commit_compaction_onto): every row a load deleted
//!       since the snapshot from a rewritten fragment is deleted from the new fragments
//!       too (the rewrite holds the snapshot's live rows in fragment and offset order),
//!       the new fragments' ids reserved first (deletion files are named by fragment id),
//!       one Rewrite on the current version; a fragment gone since: planned again; or
//!     a prepared index (tables::commit_index): one CreateIndex on the current version,
//!       dropped if a compaction rewrote rows since or the index exists by now
//!   fenced: every version above the pin is the step's own (CreateIndex, ReserveFragments,
//!   Rewrite); then a commit of kind `maintain` (same rows, the table's new pin,
//!   `maintenance` says what), put-if-absent. No recovery record: a crash before the
//!   publish leaves a version above the pin, restored away by the next writer.
//!   A server that shuts down (SIGTERM/SIGINT) finishes the step in flight, then
//!   stops; it cuts only the wait between rounds and a version cleanup short.
//!   after the publish, off the lock: a new index's or fold's segments into the index cache.
//! Graph::maintain_if_due, before each step: the key runs merges lack (keys.rs), one per
//!   round, none a graph commit; an `_id` index's creation or fold builds the runs of its
//!   new segments before its commit, off the lock, so loads use them from its publish on.
//! ```
//!
//! Under the lock a step does work bounded by what loads added since the last
//! step (a compaction's commit reads the deletion vectors of the fragments it
//! rewrote and writes those of the new ones; a fold's or an index creation's
//! commit writes one manifest), so a load waits for at most that. The row
//! rewriting of a compaction, the O(index) part of a fold and the O(table)
//! build of a missing index never hold the lock.

use std::sync::atomic::Ordering;

use fail::fail_point;
use lance::Dataset;
use lance::dataset::transaction::Operation;
use omnigraph_validate_wasm::{DST_COLUMN, SRC_COLUMN, TableKind, TypeDef};

use super::Graph;
use crate::error::EngineError;
use crate::limits::MAINTENANCE_NICE;
use crate::manifest::{Commit, CommitKind, TablePin, table_path};
use crate::tables;

/// A step built off the lock, waiting to be committed under it.
struct PendingStep {
    branch: String,
    table: usize,
    /// The table's Lance branch and version it was built from: it commits
    /// only onto a later version of that same table (not one overwritten,
    /// or a branch deleted and created again, since).
    built_on: TablePin,
    work: Prepared,
}

enum Prepared {
    Index(tables::PreparedIndex),
    Fold(tables::PreparedFold),
    Compaction(tables::PreparedCompaction),
}

impl Graph {
    /// Runs one bounded maintenance step on the first table, of any branch,
    /// that needs one, and publishes it; `None` when nothing needs work.
    /// Waits for no other host: `LeaseBusy` then means "later".
    ///
    /// An index fold reads the whole index and a compaction rewrites rows:
    /// each is built first, without the writer lock, on the snapshot a head
    /// pins (loads go on meanwhile), and only its commit, on top of whatever
    /// loads landed since, holds the lock (a compaction's commit carries
    /// over the deletions those loads made). A missing index (a new table's,
    /// or any table's after an overwrite) is built the same way.
    pub async fn maintain_step(&self) -> Result<Option<Commit>, EngineError> {
        let pending = self.prepare_step().await?;
        fail_point!("step-prepared");
        let step = self.with_lease(std::time::Duration::ZERO, |lease, _| async move {
            if let Some(pending) = pending
                && let Some(head) = self.head_leased(&pending.branch).await?
            {
                let def = &self.schema.types[pending.table];
                let pin = &head.tables[&def.name];
                // The step commits only onto the table it was built from;
                // otherwise it is dropped (nothing of it is published) and
                // the next step plans on what the table holds now.
                let built_from_this = pin.owned_by(head.lance_branch.as_deref())
                    && pin.lance_branch == pending.built_on.lance_branch
                    && pin.version >= pending.built_on.version;
                let ds = if built_from_this {
                    Some(self.settle(&table_path(def.kind, &def.name), pin.lance_branch.as_deref(), pin.version).await?)
                } else {
                    None
                };
                let ds = match ds {
                    Some(ds) if !tables::replaced_since(&ds, pending.built_on.version).await? => Some(ds),
                    _ => None,
                };
                if let Some(ds) = ds {
                    let read_version = ds.version().version;
                    let (job, ds, warmup) = match pending.work {
                        Prepared::Index(index) => {
                            let job = tables::Job::CreateIndex { column: index.column.clone(), name: index.name.clone() };
                            match tables::commit_index(ds, index).await? {
                                Some((ds, warmup)) => (job, Some(ds), Some(warmup)),
                                None => (job, None, None),
                            }
                        }
                        Prepared::Fold(fold) => {
                            let job = tables::Job::FoldIndex(fold.name.clone());
                            let (ds, warmup) = tables::commit_fold(ds, fold).await?;
                            (job, Some(ds), Some(warmup))
                        }
                        Prepared::Compaction(compaction) => {
                            (tables::Job::Compact, tables::commit_compaction_onto(ds, compaction, &self.key_runs).await?, None)
                        }
                    };
                    if let Some(ds) = ds {
                        let commit = self.publish_step(&lease, &head, def, read_version, ds, &job).await?;
                        return Ok(Some((commit, warmup.map(|w| (pending.table, w)))));
                    }
                }
            }
            Ok(None)
        })
        .await?;
        let Some((commit, warmup)) = step else { return Ok(None) };
        // Off the lock: a fold's new segments into the index cache. The
        // step is published; a failure here only leaves the cache cold.
        if let Some((table, warmup)) = warmup {
            let def = &self.schema.types[table];
            let path = table_path(def.kind, &def.name);
            let warmed = match tables::open_pinned(&self.root, &path, &commit.tables[&def.name]).await {
                Ok(ds) => warmup.run(&ds).await,
                Err(e) => Err(e),
            };
            if let Err(e) = warmed {
                eprintln!("warming the index of {}: {e}", def.name);
            }
        }
        Ok(Some(commit))
    }

    /// The first fold or compaction any table of any branch needs, built
    /// on the version its head pins, without the lease.
    async fn prepare_step(&self) -> Result<Option<PendingStep>, EngineError> {
        for head in self.branches().await? {
            for (t, def) in self.schema.types.iter().enumerate() {
                let pin = &head.tables[&def.name];
                if !pin.owned_by(head.lance_branch.as_deref()) {
                    continue;
                }
                let ds =
                    tables::open_pinned(&self.root, &table_path(def.kind, &def.name), pin).await?;
                let work = match tables::next_job(&ds, def, &self.declared_indexes(def)).await? {
                    Some(tables::Job::CreateIndex { column, name }) => {
                        let index = tables::prepare_index(&ds, &column, &name).await?;
                        index.warm_key_runs(&ds, &tables::keys_of(def), &self.key_runs).await?;
                        Prepared::Index(index)
                    }
                    Some(tables::Job::FoldIndex(name)) => {
                        let fold = tables::prepare_fold(&ds, &name).await?;
                        fold.warm_key_runs(&ds, &tables::keys_of(def), &self.key_runs).await?;
                        Prepared::Fold(fold)
                    }
                    Some(tables::Job::Compact) => match tables::prepare_compaction(&ds).await? {
                        Some(compaction) => {
                            compaction.warm_key_runs(&ds, &tables::keys_of(def), &self.key_runs).await?;
                            Prepared::Compaction(compaction)
                        }
                        None => continue,
                    },
                    None => continue,
                };
                return Ok(Some(PendingStep { branch: head.branch.clone(), table: t, built_on: pin.clone(), work }));
            }
        }
        Ok(None)
    }

    /// Fences a step's table versions and publishes them as a `maintain` commit.
    async fn publish_step(
        &self,
        lease: &crate::lease::HeldLease,
        head: &Commit,
        def: &TypeDef,
        read_version: u64,
        ds: Dataset,
        job: &tables::Job,
    ) -> Result<Commit, EngineError> {
        let landed_at = ds.version().version;
        // Fenced like a load's commit: nothing but this step's own versions
        // (a compaction is two: reserve, rewrite) above the pin.
        if !steps_only(&ds, read_version).await? {
            return Err(EngineError::Fenced {
                table: def.name.clone(),
                staged_on: read_version,
                landed_at,
            });
        }
        fail_point!("after-maintain-commit");
        let pin = &head.tables[&def.name];
        let mut commit = self
            .next_commit(
                &head.branch,
                head,
                CommitKind::Maintain,
                "maintenance",
                None,
                None,
            )
            .await?;
        commit.maintenance = Some(job.describe());
        commit.tables.insert(
            def.name.clone(),
            TablePin {
                lance_branch: pin.lance_branch.clone(),
                version: landed_at,
            },
        );
        self.sync_tables().await?;
        if !lease.valid_for(self.publish_margin()) {
            return Err(EngineError::LeaseExpired);
        }
        if !self.publish_commit(&commit).await? {
            return Err(EngineError::SlotTaken {
                branch: commit.branch,
                seq: commit.seq,
            });
        }
        fail_point!("after-maintain-publish");
        Ok(commit)
    }

    /// Runs maintenance steps until nothing needs work (at most `max_steps`);
    /// the commits it published.
    pub async fn optimize(&self, max_steps: usize) -> Result<Vec<Commit>, EngineError> {
        let mut done = Vec::new();
        while done.len() < max_steps {
            match self.maintain_step().await? {
                Some(commit) => done.push(commit),
                None => break,
            }
        }
        Ok(done)
    }

    /// A background round (the server's, every MAINTENANCE_INTERVAL): if a
    /// load was published since the last round, maintenance steps until
    /// none is needed, each published one passed to `on_step`; before each,
    /// the key runs merges lack are built, one per round. Returns
    /// between steps once `stop` says so; a stop or an error (another
    /// host's lease, say) leaves the work owed to the next round.
    pub async fn maintain_if_due(&self, stop: impl Fn() -> bool, mut on_step: impl FnMut(&Commit)) -> Result<(), EngineError> {
        if !self.maintenance_due.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        loop {
            if stop() {
                self.maintenance_due.store(true, Ordering::Release);
                return Ok(());
            }
            // Missing key runs first (a fresh process's, another host's),
            // one per round, then the next durable step.
            let progressed = match self.warm_key_run().await {
                Ok(true) => Ok(true),
                Ok(false) => self.maintain_step().await.map(|step| step.inspect(&mut on_step).is_some()),
                Err(e) => Err(e),
            };
            match progressed {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    self.maintenance_due.store(true, Ordering::Release);
                    return Err(e);
                }
            }
        }
    }

    /// Builds one missing key run (src/keys.rs) of any branch's tables, and
    /// drops the runs no head lists any more; whether it built one. Not a
    /// graph commit: runs are this process's memory, not the graph's state.
    /// `_id` runs come first (every load looks ids up), then the other
    /// keys' (`@card`, `@unique`), so that under the rows bound the ids'
    /// runs are the ones kept.
    async fn warm_key_run(&self) -> Result<bool, EngineError> {
        let (mut listed_segments, mut uncovered, mut fragments) = (Vec::new(), Vec::new(), Vec::new());
        let mut tables_owned = Vec::new();
        for head in self.branches().await? {
            for def in &self.schema.types {
                let pin = &head.tables[&def.name];
                if !pin.owned_by(head.lance_branch.as_deref()) {
                    continue;
                }
                let ds = tables::open_pinned(&self.root, &table_path(def.kind, &def.name), pin).await?;
                let segments = tables::id_segments(&ds).await?;
                // A fragment a segment covers is answered by the segment's run.
                let covered = tables::covered_fragments(&segments);
                uncovered.extend(ds.get_fragments().iter().filter(|f| !covered.contains(f.id() as u32)).map(|f| f.metadata().clone()));
                fragments.extend(ds.manifest().fragments.iter().cloned());
                listed_segments.extend(segments.iter().cloned());
                tables_owned.push((def, ds, segments));
            }
        }
        self.key_runs.retain(&listed_segments, &uncovered, &fragments);
        for ids_only in [true, false] {
            for (def, ds, segments) in &tables_owned {
                for key in tables::keys_of(def).iter().filter(|key| key.is_id() == ids_only) {
                    for segment in segments {
                        if !self.key_runs.has(segment, key) && tables::keep_key_run(ds, key, segment, &self.key_runs).await? {
                            return Ok(true);
                        }
                    }
                    if tables::keep_fragment_run(ds, key, &self.key_runs).await? {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// Builds every missing key run, as the server's maintenance does in
    /// the background (a benchmark's graph, opened fresh, starts with none);
    /// how many it built.
    pub async fn warm_key_runs(&self) -> Result<usize, EngineError> {
        let mut built = 0;
        while self.warm_key_run().await? {
            built += 1;
        }
        Ok(built)
    }

    /// How many rows this process's key runs hold.
    pub fn key_run_rows(&self) -> usize {
        self.key_runs.rows()
    }

    /// The columns a type's `@index` declarations name (their first member;
    /// a BTree per column), as stored: edge endpoints are `_src`/`_dst`.
    fn declared_indexes(&self, def: &TypeDef) -> Vec<String> {
        let catalog = self.schema.catalog();
        let types = if def.kind == TableKind::Edge { &catalog.edges } else { &catalog.nodes };
        let Some(declared) = types.iter().find(|t| t.name == def.name) else { return Vec::new() };
        declared
            .index
            .iter()
            .filter_map(|names| names.first())
            .filter_map(|name| match name.as_str() {
                "src" if def.kind == TableKind::Edge => Some(SRC_COLUMN.to_owned()),
                "dst" if def.kind == TableKind::Edge => Some(DST_COLUMN.to_owned()),
                other => def.prop(other).filter(|&p| def.props[p].ty.is_scalar()).map(|_| other.to_owned()),
            })
            .collect()
    }
}

/// Starts `work` (the server's maintenance rounds) on a thread of its own
/// with a tokio runtime of its own, at [`MAINTENANCE_NICE`]; its output
/// arrives on the receiver. Loads run on the server's runtime: a step's
/// tasks (Lance's decoding and encoding of a fold or a compaction, the
/// sorting of key runs) never take a worker a load's request is waiting
/// for, and the scheduler gives loads the cores first. Maintenance takes
/// what loads leave, so it slows down under saturation but never stops
/// (docs/lab/2026-12-01-sustained-merges.md, the sustained bench). The runtime lives until
/// `work` ends.
pub fn spawn_maintenance<F>(work: F) -> std::io::Result<tokio::sync::oneshot::Receiver<F::Output>>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (done, output) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("maintenance".into()).spawn(move || {
        // Linux keeps a nice value per thread: this one alone, and the
        // blocking threads it starts (they inherit it).
        #[cfg(target_os = "linux")]
        // SAFETY: a plain syscall on the calling thread's own id.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, MAINTENANCE_NICE);
        }
        let _ = done.send(runtime.block_on(work));
    })?;
    Ok(output)
}

/// Whether every version of `ds` above `read_version` is a maintenance step's
/// own kind of change (index creation or fold, fragment reservation,
/// rewrite): a load, overwrite or restore of another writer in between
/// would mean this step lost the lease.
async fn steps_only(ds: &Dataset, read_version: u64) -> Result<bool, EngineError> {
    for version in read_version + 1..=ds.version().version {
        let operation = ds.read_transaction_by_version(version).await?.map(|t| t.operation);
        if !matches!(operation, Some(Operation::CreateIndex { .. } | Operation::ReserveFragments { .. } | Operation::Rewrite { .. })) {
            return Ok(false);
        }
    }
    Ok(true)
}
