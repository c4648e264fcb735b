//! One Lance dataset per node/edge type: its stored schema (with the
//! primary-key metadata), opening it at a pinned version, staging and
//! committing one transaction per load (merge/append: `stage_upsert`, the
//! replaced rows found by the key runs or the `_id` index, one Lance
//! `Update`), lookups by indexed column, and the maintenance jobs that keep
//! its scalar indexes current.
//!
//! One file of about 880 lines of code: staging and the maintenance jobs
//! share the helpers that read and write deletion vectors and key runs
//! (`deleted_rows`, `write_deletions`), private to this module so that no other
//! code writes a deletion vector.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{Field, Schema as ArrowSchema, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use lance::datatypes::BlobHandling;
use lance::deps::datafusion::error::DataFusionError;
use lance::deps::datafusion::physical_plan::SendableRecordBatchStream;
use lance::deps::datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use lance::Dataset;
use lance::dataset::transaction::{Operation, Transaction, UpdateMode};
use lance::dataset::{CommitBuilder, InsertBuilder, ProjectionRequest, WriteMode};
use lance::deps::datafusion::prelude::{col, lit};
use lance::deps::datafusion::scalar::ScalarValue;
use lance::index::DatasetIndexExt;
use lance_index::IndexType;
use lance_index::optimize::OptimizeOptions;
use lance_index::metrics::NoOpMetricsCollector;
use lance_index::scalar::expression::{ScalarIndexExpr, ScalarIndexSearch};
use lance_index::scalar::{SargableQuery, ScalarIndexParams};
use omnigraph_validate_wasm::{DST_COLUMN, ID_COLUMN, SRC_COLUMN, TableKind, TypeDef, UniqueMember};

use crate::error::EngineError;
use crate::keys::{HashedIds, Key, KeyRun, KeyRuns, row_addresses};
use crate::limits::{
    COMPACT_FRAGMENT_ROWS, DELETION_WRITES_IN_FLIGHT, FOLD_TIER_RATIO, LOOKUP_CHUNK, MAX_COMPACTION_TASKS_PER_STEP,
    MAX_UNINDEXED_ROWS, MIN_SMALL_FRAGMENTS, MIN_SMALL_FRAGMENTS_BEFORE_COVERING,
};
use crate::manifest::TablePin;
use lance::table::format::{Fragment, IndexMetadata};
use crate::storage::GraphRoot;
use lance::dataset::fragment::FileFragment;
use lance::dataset::optimize::{CompactionOptions, RewriteResult, plan_compaction};
use lance::dataset::transaction::RewriteGroup;
use lance::index::optimize::{IndexSegmentResult, commit_optimize_indices, plan_optimize_indices};

/// Field metadata that makes Lance treat `_id` as the table's key: two
/// racing inserts of one id then conflict instead of both landing.
pub const PRIMARY_KEY_METADATA: (&str, &str) = ("lance-schema:unenforced-primary-key", "true");

/// The stored Arrow schema of a type: the validator's schema with `_id`
/// required and marked as the primary key.
pub fn stored_schema(def: &TypeDef) -> SchemaRef {
    let emitted = omnigraph_validate_wasm::arrow_schema(def);
    let fields: Vec<Field> = emitted
        .fields()
        .iter()
        .map(|f| {
            if f.name() == ID_COLUMN {
                Field::new(ID_COLUMN, f.data_type().clone(), false)
                    .with_metadata([(PRIMARY_KEY_METADATA.0.into(), PRIMARY_KEY_METADATA.1.into())].into())
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Arc::new(ArrowSchema::new(fields))
}

/// Columns with a BTree index: the id, the endpoints of edges and the first
/// member of each `@unique` tuple, so every stateful check is a lookup.
pub fn indexed_columns(def: &TypeDef) -> Vec<String> {
    let mut cols = vec![ID_COLUMN.to_owned()];
    if def.kind == TableKind::Edge {
        cols.push(SRC_COLUMN.to_owned());
        cols.push(DST_COLUMN.to_owned());
    }
    for unique in &def.uniques {
        if let Some(UniqueMember::Prop(p)) = unique.first()
            && def.props[*p].ty.is_scalar()
            && !cols.contains(&def.props[*p].name)
        {
            cols.push(def.props[*p].name.clone());
        }
    }
    cols
}

/// The keys a type's rows are looked up by, each with a key run per
/// segment and fragment (src/keys.rs): `_id` first, then `_src` for
/// `@card`, then each `@unique`'s members.
pub fn keys_of(def: &TypeDef) -> Vec<Key> {
    let mut keys = vec![Key::id()];
    if def.card_max.is_some() {
        keys.push(card_key());
    }
    for unique in &def.uniques {
        let key = unique_key(def, unique);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// The key `@card` counts stored edges by: their source.
pub fn card_key() -> Key {
    Key::of(vec![SRC_COLUMN.to_owned()])
}

/// The key a `@unique` looks stored rows up by: its members' columns.
pub fn unique_key(def: &TypeDef, unique: &[UniqueMember]) -> Key {
    Key::of(unique.iter().map(|member| unique_member_column(def, *member).to_owned()).collect())
}

/// The stored column of a `@unique` member.
pub fn unique_member_column(def: &TypeDef, member: UniqueMember) -> &str {
    match member {
        UniqueMember::Prop(p) => &def.props[p].name,
        UniqueMember::Src => SRC_COLUMN,
        UniqueMember::Dst => DST_COLUMN,
    }
}

fn index_name(column: &str) -> String {
    format!("og_{}_idx", column.trim_start_matches('_'))
}

/// Creates the empty dataset of a type.
pub async fn create(root: &GraphRoot, def: &TypeDef, path: &str) -> Result<Dataset, EngineError> {
    let params = root.write_params(WriteMode::Create);
    let empty = RecordBatch::new_empty(stored_schema(def));
    Ok(InsertBuilder::new(root.table_uri(path).as_str()).with_params(&params).execute(vec![empty]).await?)
}

/// Opens a table at a commit's pin.
pub async fn open_pinned(root: &GraphRoot, path: &str, pin: &TablePin) -> Result<Dataset, EngineError> {
    root.open_table_at(path, pin.lance_branch.as_deref(), pin.version).await
}

/// The latest version of a Lance branch (`None` = main), or `None` if the
/// branch does not exist.
pub async fn latest_on(root: &GraphRoot, path: &str, lance_branch: Option<&str>) -> Result<Option<Dataset>, EngineError> {
    let ds = root.open_table(path).await?;
    match lance_branch {
        None => Ok(Some(ds)),
        Some(b) => {
            if !ds.list_branches().await?.contains_key(b) {
                return Ok(None);
            }
            Ok(Some(ds.checkout_branch(b).await?))
        }
    }
}

/// A staged (written, not yet committed) change of one table.
pub struct Staged {
    pub dataset: Arc<Dataset>,
    pub transaction: Transaction,
    pub affected_rows: Option<lance_select::RowAddrTreeMap>,
    /// Rows inserted and updated, as the merge counted them.
    pub merged: Option<(u64, u64)>,
}

/// Stages a load's rows for one table. `merge` upserts whole rows by `_id`,
/// `append` inserts and fails on an existing id (the stateful check has
/// already reported every conflict; this is the fence against a writer
/// that bypassed the lease), `overwrite` replaces the table's contents.
pub async fn stage(
    root: &GraphRoot,
    dataset: Arc<Dataset>,
    mode: omnigraph_validate_wasm::Mode,
    batch: RecordBatch,
    properties: HashMap<String, String>,
    keys: &[Key],
    key_runs: &KeyRuns,
) -> Result<Staged, EngineError> {
    use omnigraph_validate_wasm::Mode;
    let properties = Some(Arc::new(properties));
    match mode {
        Mode::Overwrite => {
            let mut params = root.write_params(WriteMode::Overwrite);
            params.transaction_properties = properties;
            let transaction = InsertBuilder::new(dataset.clone()).with_params(&params).execute_uncommitted(vec![batch.clone()]).await?;
            // The table is these fragments now, with no index: their runs
            // answer the next loads until maintenance indexes them.
            if let Operation::Overwrite { fragments, .. } = &transaction.operation {
                let ids: Vec<&str> = strings(batch.column_by_name(ID_COLUMN).expect("id column")).collect();
                keep_written_runs(key_runs, fragments, &ids, &HashedIds::of(&ids).rows, &batch, keys)?;
            }
            Ok(Staged { dataset, transaction, affected_rows: None, merged: None })
        }
        Mode::Merge | Mode::Append => stage_upsert(root, dataset, mode, batch, properties, keys, key_runs).await,
    }
}

/// Stages a merge (whole rows replaced by `_id`) or an append as Lance's
/// merge insert would commit it, one `Update`: the batch written as new
/// fragments, and the stored rows it replaces deleted (their fragments'
/// deletion vectors extended). Lance's `merge_insert` also reads every
/// replaced row back and joins the batch with them, work whose result a
/// whole-row replace throws away (docs/lab/2026-12-01-commit-engine-vs-raw-lance.md). The batch's ids are
/// unique (the validator folds or refuses duplicates).
async fn stage_upsert(
    root: &GraphRoot,
    dataset: Arc<Dataset>,
    mode: omnigraph_validate_wasm::Mode,
    batch: RecordBatch,
    properties: Option<Arc<HashMap<String, String>>>,
    keys: &[Key],
    key_runs: &KeyRuns,
) -> Result<Staged, EngineError> {
    let rows = batch.num_rows() as u64;
    let id_column = batch.column_by_name(ID_COLUMN).expect("id column").clone();
    let ids: Vec<&str> = strings(&id_column).collect();
    let hashed = HashedIds::of(&ids);
    let replaced = live_rows(&dataset, id_rows(&dataset, &hashed, key_runs).await?, key_runs).await?;
    let replaced_rows: u64 = replaced.iter().map(|fragment| fragment.rows.len()).sum();
    if mode == omnigraph_validate_wasm::Mode::Append && replaced_rows > 0 {
        // The checks found no stored id on this very version: only a writer
        // that bypassed the lease can have added one.
        return Err(EngineError::Storage(format!(
            "append: {replaced_rows} ids exist at version {} although the checks found none",
            dataset.version().version
        )));
    }
    let mut params = root.write_params(WriteMode::Append);
    params.transaction_properties = properties.clone();
    let appended = InsertBuilder::new(dataset.clone()).with_params(&params).execute_uncommitted(vec![batch.clone()]).await?;
    if let Operation::Append { fragments } = &appended.operation {
        keep_written_runs(key_runs, fragments, &ids, &hashed.rows, &batch, keys)?;
    }
    let merged = Some((rows - replaced_rows, replaced_rows));
    if replaced.is_empty() {
        return Ok(Staged { dataset, transaction: appended, affected_rows: None, merged });
    }
    let Operation::Append { fragments: new_fragments } = appended.operation else {
        return Err(EngineError::Storage("an append staged something else".into()));
    };
    let mut affected = roaring::RoaringTreemap::new();
    for replaced in &replaced {
        let id = replaced.fragment.id() as u64;
        affected.append(replaced.rows.iter().map(|offset| id << 32 | offset as u64)).expect("addresses ascend");
    }
    let store = dataset.object_store(None).await?;
    let changes: Vec<(u64, Option<Fragment>)> = futures::stream::iter(replaced)
        .map(|replaced| {
            let (dataset, store) = (&dataset, &store);
            async move {
                let id = replaced.fragment.id() as u64;
                // `None`: every row of the fragment is deleted now.
                Ok::<_, EngineError>((id, write_deletions(dataset, store, replaced, key_runs).await?))
            }
        })
        .buffer_unordered(DELETION_WRITES_IN_FLIGHT)
        .try_collect()
        .await?;
    let (mut updated_fragments, mut removed_fragment_ids) = (Vec::new(), Vec::new());
    for (id, kept) in changes {
        match kept {
            Some(fragment) => updated_fragments.push(fragment),
            None => removed_fragment_ids.push(id),
        }
    }
    let operation = Operation::Update {
        removed_fragment_ids,
        updated_fragments,
        new_fragments,
        // Rows are replaced whole: no column of a kept row changes.
        fields_modified: vec![],
        compacted_sstables: vec![],
        // New rows keep no row ids of the rows they replace, so no index
        // may count the new fragments as covered.
        fields_for_preserving_frag_bitmap: vec![],
        update_mode: Some(UpdateMode::RewriteRows),
        inserted_rows_filter: None,
        updated_fragment_offsets: None,
    };
    let mut transaction = Transaction::new(dataset.version().version, operation, None);
    transaction.transaction_properties = properties;
    Ok(Staged { dataset, transaction, affected_rows: Some(lance_select::RowAddrTreeMap::from(affected)), merged })
}

/// Where the rows of `ds` with a `key` are found: the runs that answer,
/// each with the base its addresses are relative to, and the fragments
/// that no run answers for and that are to be read.
struct RunsOf {
    searched: Vec<(Arc<KeyRun>, u64)>,
    /// Whether the live `_id` segments' runs of `key` are among `searched`.
    /// Else none is, and the fragments those segments cover are left out
    /// of `unanswered`: the segments' index answers for them, or nothing.
    segments_answered: bool,
    unanswered: Vec<Fragment>,
}

async fn runs_of(ds: &Dataset, key: &Key, key_runs: &KeyRuns) -> Result<RunsOf, EngineError> {
    // Lance answers from the segments that cover a fragment of this version
    // (an index made on an empty table covers none yet).
    let indices = ds.load_indices().await?;
    let segments = live_id_segments(ds, &indices);
    let mut searched = Vec::new();
    let segment_runs = if segments.is_empty() { Some(Vec::new()) } else { key_runs.of(&segments, key) };
    let segments_answered = segment_runs.is_some();
    // A run answers for the fragments it read (a fragment removed when it
    // was built and back on this version, a restore's, is read).
    let answered = match segment_runs {
        Some(runs) => {
            let mut answered = roaring::RoaringBitmap::new();
            for run in runs {
                answered |= run.fragments();
                searched.push((run, 0));
            }
            answered
        }
        None => covered_fragments(segments),
    };
    let mut unanswered = Vec::new();
    for fragment in ds.get_fragments().iter().filter(|f| !answered.contains(f.id() as u32)) {
        match key_runs.of_fragment(fragment.metadata(), key) {
            Some(run) => searched.push((run, (fragment.id() as u64) << 32)),
            None => unanswered.push(fragment.metadata().clone()),
        }
    }
    Ok(RunsOf { searched, segments_answered, unanswered })
}

/// Calls `found` with the index in `hashed.sorted` and the address of
/// every row of `fragments` (of `ds`) whose `key` is one of `hashed`'s: the
/// fragments no run answers for, read.
async fn scan_for_keys(
    ds: &Dataset,
    key: &Key,
    hashed: &HashedIds<'_>,
    fragments: Vec<Fragment>,
    mut found: impl FnMut(usize, u64),
) -> Result<(), EngineError> {
    if fragments.is_empty() {
        return Ok(());
    }
    let wanted: HashMap<&[u8], usize> = hashed.sorted.iter().enumerate().map(|(i, (_, key))| (*key, i)).collect();
    let mut scan = ds.scan();
    scan.with_fragments(fragments).project(&key.columns())?.with_row_address();
    let mut stream = scan.try_into_stream().await?;
    while let Some(batch) = stream.try_next().await? {
        let (keys, addresses) = (key.bytes(&batch)?, row_addresses(&batch)?);
        for row in 0..keys.len() {
            if let Some(&i) = keys.get(row).and_then(|k| wanted.get(k)) {
                found(i, addresses.value(row));
            }
        }
    }
    Ok(())
}

/// Addresses of rows of `ds` that may hold one of the ids `hashed`: what the `_id`
/// index answers for the fragments it covers (deleted rows included, and
/// rows of fragments since removed), and the rows of the fragments it does
/// not cover yet whose `_id` is one of them. Without a usable index (a
/// young table maintenance has not indexed yet) every fragment is read.
///
/// The index is answered by its segments' key runs where this process has
/// them all (src/keys.rs), else asked directly, as Lance's merge insert
/// asks it, not through a scan whose planner would take the whole batch as
/// an `IN` list. Fragments no segment answers for are answered by their own
/// runs, or read.
async fn id_rows(ds: &Dataset, hashed: &HashedIds<'_>, key_runs: &KeyRuns) -> Result<roaring::RoaringTreemap, EngineError> {
    let mut found = roaring::RoaringTreemap::new();
    if hashed.sorted.is_empty() {
        return Ok(found);
    }
    let key = Key::id();
    let runs = runs_of(ds, &key, key_runs).await?;
    if !runs.segments_answered {
        let index = index_name(ID_COLUMN);
        let values = hashed.sorted.iter().map(|(_, id)| ScalarValue::Utf8(Some(String::from_utf8_lossy(id).into_owned()))).collect();
        let search = ScalarIndexExpr::Query(ScalarIndexSearch {
            column: ID_COLUMN.to_owned(),
            index_name: index.clone(),
            index_type: String::new(),
            query: Arc::new(SargableQuery::IsIn(values)),
            needs_recheck: false,
            fragment_bitmap: None,
        });
        let result = search.evaluate(ds, &NoOpMetricsCollector).await?;
        let addresses = result.upper.iter_addrs().filter(|_| result.is_exact());
        let addresses = addresses.ok_or_else(|| EngineError::Storage(format!("{index} gave no exact row addresses")))?;
        found.extend(addresses.map(u64::from));
    }
    found |= crate::keys::find_in_runs(&runs.searched, &hashed.sorted);
    scan_for_keys(ds, &key, hashed, runs.unanswered, |_, address| {
        found.insert(address);
    })
    .await?;
    Ok(found)
}

/// The live rows of `ds` whose `key` is one of `hashed`'s, each as (its
/// key's index in `hashed.sorted`, its address), found through the key
/// runs: O(keys) where runs answer, whatever the table's size. `None`
/// where a live `_id` segment has no run of `key` yet (a fresh process,
/// another host's fold; maintenance builds it): the caller asks Lance.
pub async fn live_rows_keyed(ds: &Dataset, key: &Key, hashed: &HashedIds<'_>, key_runs: &KeyRuns) -> Result<Option<Vec<(usize, u64)>>, EngineError> {
    if hashed.sorted.is_empty() || ds.manifest().fragments.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let runs = runs_of(ds, key, key_runs).await?;
    if !runs.segments_answered {
        return Ok(None);
    }
    let mut found = crate::keys::find_pairs_in_runs(&runs.searched, &hashed.sorted);
    scan_for_keys(ds, key, hashed, runs.unanswered, |i, address| found.push((i, address))).await?;
    let candidates: roaring::RoaringTreemap = found.iter().map(|(_, address)| *address).collect();
    let live = live_addresses(ds, candidates, key_runs).await?;
    found.retain(|(_, address)| live.contains(*address));
    Ok(Some(found))
}

/// The addresses of the live rows of `ds` holding `ids`: the rows a
/// merge of them replaces.
pub async fn live_id_addresses(ds: &Dataset, ids: &[&str], key_runs: &KeyRuns) -> Result<roaring::RoaringTreemap, EngineError> {
    if ids.is_empty() || ds.manifest().fragments.is_empty() {
        return Ok(roaring::RoaringTreemap::new());
    }
    live_addresses(ds, id_rows(ds, &HashedIds::of(ids), key_runs).await?, key_runs).await
}

/// The addresses of the candidates that are live rows of `ds` ([`live_rows`]).
async fn live_addresses(ds: &Dataset, candidates: roaring::RoaringTreemap, key_runs: &KeyRuns) -> Result<roaring::RoaringTreemap, EngineError> {
    let live = live_rows(ds, candidates, key_runs).await?;
    Ok(live
        .iter()
        .flat_map(|replaced| {
            let base = (replaced.fragment.id() as u64) << 32;
            replaced.rows.iter().map(move |offset| base | offset as u64)
        })
        .collect())
}

/// The ids among `ids` (distinct) that live rows of `ds` hold: their rows
/// found as a merge finds the rows it replaces (`id_rows`, then
/// `live_rows` for deletion vectors), so O(ids) where key runs answer, never
/// a planned `IN` list over the table's pages. The
/// checks' `_id` lookups (append's absent ids, merge counts, external
/// references, an overwrite's kept ids) all come here.
pub async fn stored_ids(ds: &Dataset, ids: &[&str], key_runs: &KeyRuns) -> Result<BTreeSet<String>, EngineError> {
    let mut stored = BTreeSet::new();
    if ids.is_empty() || ds.manifest().fragments.is_empty() {
        return Ok(stored);
    }
    let addresses: Vec<u64> = live_id_addresses(ds, ids, key_runs).await?.iter().collect();
    // A version's live rows have distinct ids (a merge replaces a stored
    // row, an append refuses a stored id; `stage_upsert` checks both), and
    // each candidate holds one of `ids`: none means none is stored, as many
    // as `ids` means all are. Only a partial answer is read back, since
    // reading the ids of rows spread over the table reads its every page.
    if addresses.is_empty() {
        return Ok(stored);
    }
    if addresses.len() == ids.len() {
        return Ok(ids.iter().map(|id| (*id).to_owned()).collect());
    }
    // Without stable row ids (this engine never enables them) a row's id
    // is its address.
    let found = ds.take_rows(&addresses, ProjectionRequest::from_columns([ID_COLUMN], ds.schema())).await?;
    stored.extend(strings(found.column(0)).map(str::to_owned));
    Ok(stored)
}

/// Keeps the key runs of the fragments a batch was just written as: its
/// rows (ids and their hashes, and every other key's bytes) in order, split
/// by the fragments' row counts (none if they differ from the batch's).
fn keep_written_runs(key_runs: &KeyRuns, fragments: &[Fragment], ids: &[&str], hashes: &[u64], batch: &RecordBatch, keys: &[Key]) -> Result<(), EngineError> {
    let written: usize = fragments.iter().map(|f| f.physical_rows.unwrap_or(0)).sum();
    if written != ids.len() {
        return Ok(());
    }
    let id = Key::id();
    let others: Vec<(&Key, crate::keys::KeyBytes<'_>)> =
        keys.iter().filter(|key| !key.is_id()).map(|key| Ok((key, key.bytes(batch)?))).collect::<Result<_, EngineError>>()?;
    let mut start = 0;
    for fragment in fragments {
        let end = start + fragment.physical_rows.unwrap_or(0);
        key_runs.insert_fragment(fragment, &id, KeyRun::of_rows(&ids[start..end], &hashes[start..end]), 0);
        for (key, bytes) in &others {
            key_runs.insert_fragment(fragment, key, KeyRun::of_key_rows(bytes, start..end), 0);
        }
        start = end;
    }
    Ok(())
}

/// The segments of the `_id` index that cover a fragment of `ds`'s version:
/// the ones Lance answers from (an index made on an empty table covers
/// none yet).
fn live_id_segments<'a>(ds: &Dataset, indices: &'a [IndexMetadata]) -> Vec<&'a IndexMetadata> {
    let index = index_name(ID_COLUMN);
    let fragments: roaring::RoaringBitmap = ds.get_fragments().iter().map(|f| f.id() as u32).collect();
    indices
        .iter()
        .filter(|i| i.name == index && i.fragment_bitmap.as_ref().is_none_or(|covered| covered.intersection_len(&fragments) > 0))
        .collect()
}

/// Builds the run of `key` of one fragment of `ds` that no `_id` segment
/// covers and that has no such run yet (another host's, or written before
/// this process started), if it fits; whether it built one.
pub async fn keep_fragment_run(ds: &Dataset, key: &Key, key_runs: &KeyRuns) -> Result<bool, EngineError> {
    let covered = covered_fragments(live_id_segments(ds, &ds.load_indices().await?));
    for fragment in ds.get_fragments() {
        let metadata = fragment.metadata();
        if covered.contains(fragment.id() as u32) || key_runs.of_fragment(metadata, key).is_some() || !key_runs.room_for(fragment_rows(&fragment), 0) {
            continue;
        }
        let run = KeyRun::of_fragments(ds, key, vec![metadata.clone()]).await?.into_fragment_run();
        if key_runs.insert_fragment(metadata, key, run, 0) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// [`live_id_segments`] of `ds`, owned.
pub async fn id_segments(ds: &Dataset) -> Result<Vec<IndexMetadata>, EngineError> {
    Ok(live_id_segments(ds, &ds.load_indices().await?).into_iter().cloned().collect())
}

/// Builds and keeps the run of `key` of `segment`, a segment of the `_id`
/// index of `ds` (or of a fold built on it), if it fits; whether it did.
pub async fn keep_key_run(ds: &Dataset, key: &Key, segment: &IndexMetadata, key_runs: &KeyRuns) -> Result<bool, EngineError> {
    let covered = segment.fragment_bitmap.clone().unwrap_or_default();
    // The covered fragments this version has: the rows the run holds.
    let present: Vec<_> = ds.get_fragments().into_iter().filter(|f| covered.contains(f.id() as u32)).collect();
    let rows: u64 = present.iter().map(fragment_rows).sum();
    let replaced = key_runs.rows_replaced(&covered, ds.manifest().fragments.as_slice(), key);
    if !key_runs.room_for(rows, replaced) {
        return Ok(false);
    }
    // From the runs of what the segment absorbs where this process has them
    // all (a fold's), else read from the table.
    let present_ids: roaring::RoaringBitmap = present.iter().map(|f| f.id() as u32).collect();
    let run = match key_runs.covering(&present_ids, ds.manifest().fragments.as_slice(), key) {
        Some(sources) => tokio::task::spawn_blocking(move || KeyRun::merged(&sources, present_ids))
            .await
            .map_err(|e| EngineError::Storage(format!("merging key runs: {e}")))?,
        None => KeyRun::of_fragments(ds, key, present.iter().map(|f| f.metadata().clone()).collect()).await?,
    };
    Ok(key_runs.insert(segment, key, run, replaced))
}

/// A fragment a merge replaces rows of.
struct Replaced {
    fragment: FileFragment,
    /// The live rows replaced.
    rows: roaring::RoaringBitmap,
    /// The rows its version deletes already.
    deleted: Arc<roaring::RoaringBitmap>,
}

/// The candidates that are live rows of `ds`, per fragment (in fragment id
/// order): rows already deleted, and fragments the version no longer has,
/// are dropped. A deletion vector this process wrote is taken from memory.
async fn live_rows(ds: &Dataset, candidates: roaring::RoaringTreemap, key_runs: &KeyRuns) -> Result<Vec<Replaced>, EngineError> {
    let fragments: Vec<_> = candidates
        .bitmaps()
        .filter_map(|(fragment_id, rows)| Some((ds.get_fragment(fragment_id as usize)?, rows.clone())))
        .collect();
    // Deletion vectors are read concurrently, like they are written.
    futures::stream::iter(fragments)
        .map(|(fragment, rows)| async move {
            let deleted = deleted_rows(&fragment, key_runs).await?;
            let rows = rows - deleted.as_ref();
            Ok::<_, EngineError>(Replaced { fragment, rows, deleted })
        })
        .buffered(DELETION_WRITES_IN_FLIGHT)
        .try_filter(|replaced| std::future::ready(!replaced.rows.is_empty()))
        .try_collect()
        .await
}

/// The rows `fragment`'s version deletes: from memory when this process
/// wrote its deletion file, else from the store (or Lance's cache).
async fn deleted_rows(fragment: &FileFragment, key_runs: &KeyRuns) -> Result<Arc<roaring::RoaringBitmap>, EngineError> {
    if let Some(deleted) = key_runs.deleted_rows(fragment.metadata()) {
        return Ok(deleted);
    }
    let stored = fragment.get_deletion_vector().await?;
    Ok(Arc::new(stored.map(|d| roaring::RoaringBitmap::from(d.as_ref())).unwrap_or_default()))
}

/// Writes the deletion vector of a fragment a merge replaces rows of, as
/// Lance's `FileFragment::extend_deletions` writes it, and keeps it for the
/// next merge ([`KeyRuns::deleted_rows`]); the fragment's new metadata, or
/// `None` when no row of it is left.
async fn write_deletions(
    ds: &Dataset,
    store: &lance::io::ObjectStore,
    replaced: Replaced,
    key_runs: &KeyRuns,
) -> Result<Option<Fragment>, EngineError> {
    let physical_rows = replaced.fragment.physical_rows().await? as u64;
    let deleted = replaced.deleted.as_ref() | &replaced.rows;
    if deleted.max().is_some_and(|offset| u64::from(offset) >= physical_rows) {
        return Err(EngineError::Storage(format!(
            "fragment {}: deleting rows past its {physical_rows} rows",
            replaced.fragment.id()
        )));
    }
    if deleted.len() == physical_rows {
        return Ok(None);
    }
    let mut fragment = replaced.fragment.metadata().clone();
    fragment.deletion_file = lance_table::io::deletion::write_deletion_file(
        &ds.branch_location().path,
        fragment.id,
        ds.version().version,
        &deleted.clone().into(),
        store,
    )
    .await?;
    key_runs.keep_deletions(&fragment, Arc::new(deleted));
    Ok(Some(fragment))
}

/// Stages the replacement of a table's contents by every row of `from` (the
/// same type at another commit), streamed: memory stays bounded whatever the
/// table's size. The multi-batch overwrite publishes its work branch this way.
pub async fn stage_copy(
    root: &GraphRoot,
    dataset: Arc<Dataset>,
    from: &Dataset,
    def: &TypeDef,
    properties: HashMap<String, String>,
) -> Result<Staged, EngineError> {
    let schema = stored_schema(def);
    let mut scan = from.scan();
    scan.blob_handling(BlobHandling::AllBinary);
    let rows = scan.try_into_stream().await?;
    let as_stored = schema.clone();
    // Scanned batches carry the scan's field metadata; the table keeps its own.
    let stream = rows.map(move |batch| {
        let batch = batch.map_err(|e| DataFusionError::External(Box::new(e)))?;
        RecordBatch::try_new(as_stored.clone(), batch.columns().to_vec()).map_err(DataFusionError::from)
    });
    let source: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(schema, stream));
    let mut params = root.write_params(WriteMode::Overwrite);
    params.transaction_properties = Some(Arc::new(properties));
    let transaction = InsertBuilder::new(dataset.clone()).with_params(&params).execute_uncommitted_stream(source).await?;
    Ok(Staged { dataset, transaction, affected_rows: None, merged: None })
}

/// Commits a staged transaction exactly once. Never call it again for the
/// same transaction: Lance would apply it twice.
pub async fn commit(staged: Staged) -> Result<Dataset, EngineError> {
    let mut builder = CommitBuilder::new(staged.dataset.clone());
    if let Some(rows) = staged.affected_rows {
        builder = builder.with_affected_rows(rows);
    }
    Ok(builder.execute(staged.transaction).await?)
}

/// One bounded maintenance job of a table, the most urgent first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// An index the schema asks for does not exist yet.
    CreateIndex { column: String, name: String },
    /// Small fragments no index covers yet (each load adds one): at least
    /// [`MIN_SMALL_FRAGMENTS`] of them, or more than [`MAX_UNINDEXED_ROWS`]
    /// rows in [`MIN_SMALL_FRAGMENTS_BEFORE_COVERING`] or more. Compacted before they are folded into the
    /// indexes, so no index is ever remapped.
    Compact,
    /// An index more than [`MAX_UNINDEXED_ROWS`] rows behind the table.
    FoldIndex(String),
}

impl Job {
    pub fn describe(&self) -> String {
        match self {
            Job::CreateIndex { name, .. } => format!("create index {name}"),
            Job::FoldIndex(name) => format!("fold new rows into {name}"),
            Job::Compact => "compact small fragments".to_owned(),
        }
    }
}

/// The next maintenance job a table needs, if any. `declared`: the columns
/// the schema's `@index` asks for, besides the ones checks look up.
pub async fn next_job(ds: &Dataset, def: &TypeDef, declared: &[String]) -> Result<Option<Job>, EngineError> {
    let existing = ds.load_indices().await?;
    let mut columns = indexed_columns(def);
    columns.extend(
        declared
            .iter()
            .filter(|c| !columns.contains(c))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let mut missing = None;
    let mut coverage = Vec::new();
    for column in columns {
        let name = index_name(&column);
        // An index is several segments of one name (a delta per fold).
        let segments: Vec<_> = existing.iter().filter(|i| i.name == name).collect();
        if segments.is_empty() {
            missing.get_or_insert(Job::CreateIndex { column, name });
            continue;
        }
        coverage.push((name, covered_fragments(segments)));
    }
    let fragments = ds.get_fragments();
    let stale = coverage.iter().find(|(_, covered)| {
        fragments
            .iter()
            .filter(|f| !covered.contains(f.id() as u32))
            .map(fragment_rows)
            .sum::<u64>()
            > MAX_UNINDEXED_ROWS
    });
    // Small fragments are compacted before an index covers them (after,
    // compacting them would remap the index), or once there are many.
    let small = fragments
        .iter()
        .filter(|f| {
            fragment_rows(f) < COMPACT_FRAGMENT_ROWS as u64
                && !coverage.iter().any(|(_, c)| c.contains(f.id() as u32))
        })
        .count();
    let covering_next = missing.is_some() || stale.is_some();
    if (small >= MIN_SMALL_FRAGMENTS || (small >= MIN_SMALL_FRAGMENTS_BEFORE_COVERING && covering_next))
        && plan_compaction(ds, &compaction_options(&existing))
            .await?
            .compaction_tasks()
            .next()
            .is_some()
    {
        return Ok(Some(Job::Compact));
    }
    Ok(missing.or_else(|| stale.map(|(name, _)| Job::FoldIndex(name.clone()))))
}

/// Compaction of the small fragments no index covers, so no index is ever
/// remapped (an O(index) rewrite) and a large indexed fragment is never
/// rewritten to absorb a small one.
fn compaction_options(indexes: &[IndexMetadata]) -> CompactionOptions {
    CompactionOptions {
        target_rows_per_fragment: COMPACT_FRAGMENT_ROWS,
        excluded_fragment_ids: covered_fragments(indexes).iter().collect(),
        ..Default::default()
    }
}

/// Rows a fragment holds (deleted ones included: they are still scanned).
fn fragment_rows(fragment: &lance::dataset::fragment::FileFragment) -> u64 {
    fragment.metadata().physical_rows.unwrap_or(0) as u64
}

/// The fragments any of `segments` (index segments) covers.
pub fn covered_fragments<'a>(segments: impl IntoIterator<Item = &'a IndexMetadata>) -> roaring::RoaringBitmap {
    let mut covered = roaring::RoaringBitmap::new();
    for segment in segments {
        covered |= segment.fragment_bitmap.clone().unwrap_or_default();
    }
    covered
}

/// How many of an index's newest segments a fold merges with the new rows:
/// size-tiered, like an LSM tree. The new segment absorbs each next-newest
/// segment at most [`FOLD_TIER_RATIO`] times the size gathered so far, so a
/// fold usually writes about what loads added, the segment count stays
/// logarithmic in the table, and the whole index is rewritten only when the
/// table has doubled since it last was.
fn segments_to_merge(segment_rows: &[u64], unindexed_rows: u64) -> usize {
    let mut gathered = unindexed_rows;
    let mut merged = 0;
    for &rows in segment_rows.iter().rev() {
        if rows > gathered * FOLD_TIER_RATIO {
            break;
        }
        gathered += rows;
        merged += 1;
    }
    merged
}

/// An index fold built on a snapshot of a table but not committed: the
/// part of a fold that reads index segments, done without the writer lock.
pub struct PreparedFold {
    /// The index folded.
    pub name: String,
    options: OptimizeOptions,
    segments: Vec<IndexSegmentResult>,
}

/// Builds the fold of index `name` on `ds` (any version; nothing is
/// written to the manifest).
pub async fn prepare_fold(ds: &Dataset, name: &str) -> Result<PreparedFold, EngineError> {
    let mut existing: Vec<_> = ds
        .load_indices()
        .await?
        .iter()
        .filter(|i| i.name == name)
        .cloned()
        .collect();
    existing.sort_by_key(|segment| segment.dataset_version);
    let rows_of: HashMap<u32, u64> = ds.get_fragments().iter().map(|f| (f.id() as u32, fragment_rows(f))).collect();
    let segment_rows: Vec<u64> = existing
        .iter()
        .map(|segment| covered_fragments([segment]).iter().filter_map(|f| rows_of.get(&f)).sum())
        .collect();
    let covered = covered_fragments(&existing);
    let unindexed: u64 = rows_of
        .iter()
        .filter(|(f, _)| !covered.contains(**f))
        .map(|(_, rows)| rows)
        .sum();
    let options = OptimizeOptions::merge(segments_to_merge(&segment_rows, unindexed))
        .index_names(vec![name.to_owned()]);
    let plan = plan_optimize_indices(ds, &options).await?;
    let mut built = Vec::new();
    for task in &plan.tasks {
        built.extend(task.execute(ds).await?);
    }
    let mut segments = Vec::new();
    for merge in &plan.merges {
        segments.extend(merge.execute(ds, &built).await?);
    }
    Ok(PreparedFold {
        name: name.to_owned(),
        options,
        segments,
    })
}

impl PreparedFold {
    /// Builds, from the snapshot the fold was built on, the runs of each of
    /// `keys` of the segments it adds to the `_id` index, so loads use them
    /// as soon as the fold is published.
    pub async fn warm_key_runs(&self, ds: &Dataset, keys: &[Key], key_runs: &KeyRuns) -> Result<(), EngineError> {
        let segments: Vec<&IndexMetadata> = self.segments.iter().map(|result| &result.segment).collect();
        warm_segment_runs(ds, &self.name, &segments, keys, key_runs).await
    }
}

/// Commits a prepared fold on top of `ds` (the table's current version):
/// Lance checks it against every version since the snapshot it was built
/// on (loads' appends and updates leave it valid) and lands it as one
/// version. Its new segments are warmed later ([`IndexWarmup`]).
pub async fn commit_fold(mut ds: Dataset, fold: PreparedFold) -> Result<(Dataset, IndexWarmup), EngineError> {
    let warmup = IndexWarmup { name: fold.name.clone(), segments: fold.segments.iter().map(|result| result.segment.uuid).collect() };
    commit_optimize_indices(&mut ds, fold.segments, &fold.options).await?;
    Ok((ds, warmup))
}

/// The new segments of a committed fold or index creation, to load into the
/// index cache once the step is published and the lock released: O(segment),
/// which no load should wait for (merges find their rows through key runs
/// meanwhile; a lookup loads only the pages it needs).
pub struct IndexWarmup {
    name: String,
    segments: Vec<uuid::Uuid>,
}

impl IndexWarmup {
    pub async fn run(self, ds: &Dataset) -> Result<(), EngineError> {
        Ok(ds.prewarm_index_segments(&self.name, &self.segments).await?)
    }
}

/// An index built on a snapshot of a table but not committed. A missing
/// index reads every row of its column (after an overwrite of a large
/// table, all of it), so it is built without the writer lock, like a fold.
pub struct PreparedIndex {
    pub column: String,
    pub name: String,
    segment: IndexMetadata,
}

/// Builds index `name` on `column` of `ds` (any version; nothing is
/// written to the manifest).
pub async fn prepare_index(ds: &Dataset, column: &str, name: &str) -> Result<PreparedIndex, EngineError> {
    let mut snapshot = ds.clone();
    let params = ScalarIndexParams::default();
    let segment = lance::index::CreateIndexBuilder::new(&mut snapshot, &[column], IndexType::BTree, &params)
        .name(name.to_owned())
        .execute_uncommitted()
        .await?;
    Ok(PreparedIndex { column: column.to_owned(), name: name.to_owned(), segment })
}

impl PreparedIndex {
    /// Builds, from the snapshot the index was built on, the runs of each
    /// of `keys` of its segment if it is the `_id` index's, so loads use
    /// them as soon as it is published.
    pub async fn warm_key_runs(&self, ds: &Dataset, keys: &[Key], key_runs: &KeyRuns) -> Result<(), EngineError> {
        warm_segment_runs(ds, &self.name, &[&self.segment], keys, key_runs).await
    }
}

/// Builds the runs of each of `keys` of `segments`, new segments of index
/// `name` built on `ds`, if it is the `_id` index (the segments every
/// key's runs follow).
async fn warm_segment_runs(ds: &Dataset, name: &str, segments: &[&IndexMetadata], keys: &[Key], key_runs: &KeyRuns) -> Result<(), EngineError> {
    if name != index_name(ID_COLUMN) {
        return Ok(());
    }
    for key in keys {
        for segment in segments {
            keep_key_run(ds, key, segment, key_runs).await?;
        }
    }
    Ok(())
}

/// Commits a prepared index on top of `ds`, the table's current version
/// (the caller checked that no overwrite or restore below the snapshot
/// came since). What landed since the snapshot leaves it valid: loads'
/// appends and whole-row updates (the rows they added are folded in
/// later, the rows they deleted are dropped by deletion vectors), and a
/// crashed step's version restored away. `None`, and the step dropped, if
/// a compaction rewrote rows since (the index would name fragments by
/// what they were) or the table has an index of that name by now (another
/// host's). Committed as read at the current version: Lance would
/// otherwise count a crashed step's index creation, restored away, as a
/// concurrent one.
pub async fn commit_index(ds: Dataset, prepared: PreparedIndex) -> Result<Option<(Dataset, IndexWarmup)>, EngineError> {
    if ds.load_indices().await?.iter().any(|index| index.name == prepared.name) {
        return Ok(None);
    }
    let current = ds.version().version;
    for version in prepared.segment.dataset_version + 1..=current {
        if let Some(Operation::Rewrite { .. }) = ds.read_transaction_by_version(version).await?.map(|t| t.operation) {
            return Ok(None);
        }
    }
    let warmup = IndexWarmup { name: prepared.name.clone(), segments: vec![prepared.segment.uuid] };
    let operation = Operation::CreateIndex { new_indices: vec![prepared.segment], removed_indices: vec![] };
    let ds = CommitBuilder::new(Arc::new(ds)).execute(Transaction::new(current, operation, None)).await?;
    Ok(Some((ds, warmup)))
}

/// Whether the table was replaced since `version` of its Lance branch (an
/// overwrite, or a restore to an older version): a step built on `version`
/// would then rewrite rows or index what the table no longer holds. Reads
/// the transactions above `version`: as many as landed while the step was
/// built.
pub async fn replaced_since(ds: &Dataset, version: u64) -> Result<bool, EngineError> {
    for v in version + 1..=ds.version().version {
        match ds.read_transaction_by_version(v).await?.map(|t| t.operation) {
            Some(Operation::Overwrite { .. }) => return Ok(true),
            Some(Operation::Restore { version: restored }) if restored < version => return Ok(true),
            _ => {}
        }
    }
    Ok(false)
}

/// A compaction built on a snapshot of a table but not committed: the
/// small fragments rewritten without the writer lock, loads going on.
pub struct PreparedCompaction {
    rewrites: Vec<RewriteResult>,
}

/// Rewrites the small fragments of `ds` no index covers (one compaction
/// task: [`MAX_COMPACTION_TASKS_PER_STEP`]); nothing is committed. `None`:
/// Lance's planner finds no run of fragments to merge.
pub async fn prepare_compaction(ds: &Dataset) -> Result<Option<PreparedCompaction>, EngineError> {
    let options = compaction_options(&ds.load_indices().await?);
    let plan = plan_compaction(ds, &options).await?;
    let mut rewrites = Vec::new();
    for task in plan.compaction_tasks().take(MAX_COMPACTION_TASKS_PER_STEP) {
        rewrites.push(task.execute(ds).await?);
    }
    Ok((!rewrites.is_empty()).then_some(PreparedCompaction { rewrites }))
}

impl PreparedCompaction {
    /// Builds the key runs of the fragments the compaction wrote (read back
    /// from their files, off the lock, the same rows whatever ids they get
    /// at the commit), so the merges after its publish find their rows in
    /// memory instead of reading fragments of up to `COMPACT_FRAGMENT_ROWS`.
    /// Each counts against the bound net of the runs of the fragments it
    /// replaces, dropped once no head lists those.
    pub async fn warm_key_runs(&self, ds: &Dataset, keys: &[Key], key_runs: &KeyRuns) -> Result<(), EngineError> {
        for key in keys {
            for rewrite in &self.rewrites {
                let replaced: usize = rewrite.original_fragments.iter().filter_map(|f| key_runs.of_fragment(f, key)).map(|run| run.len()).sum();
                for fragment in &rewrite.new_fragments {
                    let rows = fragment.physical_rows.unwrap_or(0) as u64;
                    if key_runs.room_for(rows, replaced as u64) {
                        let run = KeyRun::of_fragments(ds, key, vec![fragment.clone()]).await?.into_fragment_run();
                        key_runs.insert_fragment(fragment, key, run, replaced as u64);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Commits a prepared compaction on top of `ds`, the table's current
/// version (under the lock). Loads since the snapshot may have deleted rows
/// of the fragments it rewrote; the rewrite holds the snapshot's live rows
/// in fragment and offset order (Lance scans them in order, as its own index
/// remap assumes), so each such row is deleted from the new fragments too
/// and nothing a load replaced comes back. Two Lance versions, like Lance's
/// own compaction: the new fragments' ids are reserved first, because a
/// deletion file is named by its fragment's id. `None`: a rewritten
/// fragment is gone since (a load replaced all its rows); the next step
/// plans again.
pub async fn commit_compaction_onto(ds: Dataset, prepared: PreparedCompaction, key_runs: &KeyRuns) -> Result<Option<Dataset>, EngineError> {
    let ds = Arc::new(ds);
    let mut groups = Vec::new();
    for rewrite in prepared.rewrites {
        // Positions, in the rewrite's row order, of the rows deleted since.
        let (mut deleted, mut position, mut old_now) = (Vec::new(), 0u64, Vec::new());
        for old in &rewrite.original_fragments {
            let Some(current) = ds.get_fragment(old.id as usize) else { return Ok(None) };
            let before = deleted_rows(&FileFragment::new(ds.clone(), old.clone()), key_runs).await?;
            let now = deleted_rows(&current, key_runs).await?;
            let physical = old.physical_rows.ok_or_else(|| EngineError::Storage(format!("fragment {} has no row count", old.id)))?;
            for offset in 0..physical as u32 {
                if before.contains(offset) {
                    continue;
                }
                if now.contains(offset) {
                    deleted.push(position);
                }
                position += 1;
            }
            old_now.push(current.metadata().clone());
        }
        let written: u64 = rewrite.new_fragments.iter().map(|f| f.physical_rows.unwrap_or(0) as u64).sum();
        if written != position {
            return Err(EngineError::Storage(format!("a compaction wrote {written} rows of the {position} it read")));
        }
        groups.push((old_now, rewrite.new_fragments, deleted));
    }
    let count: usize = groups.iter().map(|(_, new, _)| new.len()).sum();
    let reserve = Transaction::new(ds.version().version, Operation::ReserveFragments { num_fragments: count as u32 }, None);
    let reserved = Arc::new(CommitBuilder::new(ds.clone()).execute(reserve).await?);
    let mut next_id = (reserved.manifest().max_fragment_id.unwrap_or(0) + 1) as u64 - count as u64;
    let store = reserved.object_store(None).await?;
    let mut rewritten = Vec::new();
    for (old_fragments, new, deleted) in groups {
        let (mut deleted, mut start, mut new_fragments) = (deleted.into_iter().peekable(), 0u64, Vec::new());
        for mut fragment in new {
            fragment.id = next_id;
            next_id += 1;
            let rows = fragment.physical_rows.unwrap_or(0) as u64;
            let mut mine = roaring::RoaringBitmap::new();
            while let Some(&p) = deleted.peek()
                && p < start + rows
            {
                mine.insert((p - start) as u32);
                deleted.next();
            }
            start += rows;
            if mine.is_empty() {
                new_fragments.push(fragment);
            } else {
                let replaced = Replaced { fragment: FileFragment::new(reserved.clone(), fragment), rows: mine, deleted: Arc::default() };
                new_fragments.extend(write_deletions(&reserved, &store, replaced, key_runs).await?);
            }
        }
        rewritten.push(RewriteGroup { old_fragments, new_fragments });
    }
    let operation = Operation::Rewrite { groups: rewritten, rewritten_indices: vec![], frag_reuse_index: None };
    let transaction = Transaction::new(reserved.version().version, operation, None);
    Ok(Some(CommitBuilder::new(reserved).execute(transaction).await?))
}

/// Rows of `ds` whose `column` is one of `values`, projected to `project`.
/// Chunked so one filter stays bounded; uses the column's index if any.
pub async fn lookup(
    ds: &Dataset,
    column: &str,
    values: Vec<ScalarValue>,
    project: &[&str],
) -> Result<Vec<RecordBatch>, EngineError> {
    let mut out = Vec::new();
    // A table with no fragment has no row: planning an `IN` list of a
    // batch's values over it cost 20–30 ms a lookup of 8,192 values.
    if ds.manifest().fragments.is_empty() {
        return Ok(out);
    }
    for chunk in values.chunks(LOOKUP_CHUNK) {
        let list = chunk.iter().cloned().map(lit).collect();
        let mut scan = ds.scan();
        scan.project(project)?.filter_expr(col(column).in_list(list, false));
        let batches: Vec<RecordBatch> = scan.try_into_stream().await?.try_collect().await?;
        out.extend(batches.into_iter().filter(|b| b.num_rows() > 0));
    }
    Ok(out)
}

/// The non-null values of a Utf8 column.
pub fn strings(array: &ArrayRef) -> impl Iterator<Item = &str> {
    array.as_any().downcast_ref::<StringArray>().expect("string column").iter().flatten()
}

/// One value of a Utf8 column.
pub fn string_at(array: &ArrayRef, row: usize) -> Option<&str> {
    let array = array.as_any().downcast_ref::<StringArray>().expect("string column");
    (!array.is_null(row)).then(|| array.value(row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Three fragments of ten ids each (`a0`…`c9`) under one `_id` index
    /// segment: version 1 before the deletions, version 2 after deleting all
    /// of fragment `b` (the fragment is removed) and the row `a1`.
    async fn table_with_deletions(dir: &std::path::Path) -> (Dataset, Dataset) {
        let schema = Arc::new(ArrowSchema::new(vec![Field::new(ID_COLUMN, arrow_schema::DataType::Utf8, false)]));
        let ids: Vec<String> = ["a", "b", "c"].iter().flat_map(|p| (0..10).map(move |i| format!("{p}{i}"))).collect();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(ids))]).unwrap();
        let params = lance::dataset::WriteParams { max_rows_per_file: 10, ..Default::default() };
        let reader = arrow_array::RecordBatchIterator::new([Ok(batch)], schema);
        let uri = dir.to_str().unwrap();
        let mut ds = Dataset::write(reader, uri, Some(params)).await.unwrap();
        assert_eq!(ds.get_fragments().len(), 3);
        let name = index_name(ID_COLUMN);
        ds.create_index(&[ID_COLUMN], IndexType::BTree, Some(name), &ScalarIndexParams::default(), true).await.unwrap();
        let before = ds.clone();
        ds.delete("_id LIKE 'b%' OR _id = 'a1'").await.unwrap();
        assert_eq!(ds.get_fragments().len(), 2);
        (before, ds)
    }

    /// Appends a fragment of ten ids (`d0`…`d9` for prefix `d`) no index
    /// segment covers.
    async fn append_fragment(ds: &mut Dataset, prefix: &str) {
        let schema = Arc::new(ArrowSchema::new(vec![Field::new(ID_COLUMN, arrow_schema::DataType::Utf8, false)]));
        let ids: Vec<String> = (0..10).map(|i| format!("{prefix}{i}")).collect();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(ids))]).unwrap();
        ds.append(arrow_array::RecordBatchIterator::new([Ok(batch)], schema), None).await.unwrap();
    }

    /// Key runs answer a merge's lookup exactly as Lance's index does, on
    /// the version they were built on and on an older one (a restore) that
    /// lists the same segment: deleted rows are found (the caller drops
    /// them), and a fragment the run never read is scanned.
    #[tokio::test]
    async fn key_runs_answer_as_the_index_does() {
        let dir = tempfile::tempdir().unwrap();
        let (before, after) = table_with_deletions(dir.path()).await;
        let runs = KeyRuns::default();
        let segments = id_segments(&after).await.unwrap();
        assert_eq!(segments.len(), 1);
        assert!(keep_key_run(&after, &Key::id(), &segments[0], &runs).await.unwrap());
        assert_eq!(runs.rows(), 20, "fragments a and c, the deleted a1 included");
        let wanted = ["a1", "a2", "b3", "c5", "c5", "zz"];
        // Per version: the candidates in its fragments (the index also
        // names rows of fragments since removed), and how many are live.
        async fn answer(ds: &Dataset, ids: &[&str], runs: &KeyRuns) -> (roaring::RoaringTreemap, u64) {
            let present: roaring::RoaringBitmap = ds.get_fragments().iter().map(|f| f.id() as u32).collect();
            let found = id_rows(ds, &HashedIds::of(ids), runs).await.unwrap();
            let kept = found.iter().filter(|a| present.contains((a >> 32) as u32)).collect();
            let live = live_rows(ds, found, runs).await.unwrap().iter().map(|replaced| replaced.rows.len()).sum();
            (kept, live)
        }
        for (ds, candidates, live) in [(&after, 3, 2), (&before, 4, 4)] {
            let by_index = answer(ds, &wanted, &KeyRuns::default()).await;
            assert_eq!((by_index.0.len(), by_index.1), (candidates, live), "version {}", ds.version().version);
            assert_eq!(answer(ds, &wanted, &runs).await, by_index, "version {}", ds.version().version);
        }
        // A fragment no segment covers gets a run of its own (offsets), and
        // answers under its id.
        let mut later = after.clone();
        append_fragment(&mut later, "d").await;
        assert!(keep_fragment_run(&later, &Key::id(), &runs).await.unwrap());
        assert!(!keep_fragment_run(&later, &Key::id(), &runs).await.unwrap(), "one run per fragment");
        let wanted = ["a2", "d4", "d9", "zz"];
        let by_index = answer(&later, &wanted, &KeyRuns::default()).await;
        assert_eq!(by_index.1, 3);
        assert_eq!(answer(&later, &wanted, &runs).await, by_index);
    }

    /// A fold's run fits where the runs it replaces fit: it is counted
    /// against the bound net of the segment and fragment runs it absorbs,
    /// which are dropped once the fold is published. It is merged from them.
    #[tokio::test]
    async fn a_folds_run_replaces_the_runs_it_absorbs() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut ds) = table_with_deletions(dir.path()).await;
        append_fragment(&mut ds, "d").await;
        // Exactly room for what the table holds: a segment run of 20 rows
        // (fragments a and c) and a fragment run of 10 (d).
        let runs = KeyRuns::holding_at_most(30);
        assert!(keep_key_run(&ds, &Key::id(), &id_segments(&ds).await.unwrap()[0], &runs).await.unwrap());
        assert!(keep_fragment_run(&ds, &Key::id(), &runs).await.unwrap());
        assert_eq!(runs.rows(), 30);
        let fold = prepare_fold(&ds, &index_name(ID_COLUMN)).await.unwrap();
        let [merged] = fold.segments.as_slice() else { panic!("one segment: {}", fold.segments.len()) };
        fold.warm_key_runs(&ds, &[Key::id()], &runs).await.unwrap();
        assert!(runs.has(&merged.segment, &Key::id()), "the fold's run is built before its publish");
        assert_eq!(runs.rows(), 60, "until the publish, both are held");
        // Merged from the runs it absorbs, it is the run a read would build.
        let covered = merged.segment.fragment_bitmap.clone().unwrap();
        let present = ds.get_fragments().iter().filter(|f| covered.contains(f.id() as u32)).map(|f| f.metadata().clone()).collect();
        let read = KeyRun::of_fragments(&ds, &Key::id(), present).await.unwrap();
        let kept = runs.of(&[&merged.segment], &Key::id()).unwrap().remove(0);
        assert_eq!(kept.entries(), read.entries());
        assert_eq!(kept.fragments(), read.fragments());
        assert!(runs.covering(&covered, ds.manifest().fragments.as_slice(), &Key::id()).is_some(), "merged, not read");
    }

    /// A compaction's fragments have their runs before it is committed, and
    /// they answer as Lance's scan does, rows a load deleted meanwhile too.
    #[tokio::test]
    async fn a_compactions_fragments_have_runs_before_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut ds) = table_with_deletions(dir.path()).await;
        for prefix in ["d", "e", "f"] {
            append_fragment(&mut ds, prefix).await;
        }
        let runs = KeyRuns::default();
        while keep_fragment_run(&ds, &Key::id(), &runs).await.unwrap() {}
        let compaction = prepare_compaction(&ds).await.unwrap().expect("three small fragments to compact");
        compaction.warm_key_runs(&ds, &[Key::id()], &runs).await.unwrap();
        ds.delete("_id = 'e4'").await.unwrap();
        let compacted = commit_compaction_onto(ds, compaction, &runs).await.unwrap().expect("committed");
        let covered = covered_fragments(&id_segments(&compacted).await.unwrap());
        let uncovered: Vec<_> = compacted.get_fragments().into_iter().filter(|f| !covered.contains(f.id() as u32)).collect();
        assert_eq!(uncovered.len(), 1, "d, e and f compacted into one fragment");
        assert!(runs.of_fragment(uncovered[0].metadata(), &Key::id()).is_some(), "the compacted fragment has its run");
        let wanted = ["a2", "d0", "e4", "e5", "f9", "zz"];
        let live = async |runs: &KeyRuns| {
            let found = id_rows(&compacted, &HashedIds::of(&wanted), runs).await.unwrap();
            let rows = live_rows(&compacted, found, runs).await.unwrap();
            rows.iter().map(|replaced| (replaced.fragment.id(), replaced.rows.iter().collect::<Vec<_>>())).collect::<Vec<_>>()
        };
        let by_scan = live(&KeyRuns::default()).await;
        assert_eq!(by_scan.iter().map(|(_, rows)| rows.len()).sum::<usize>(), 4, "e4 was deleted after the compaction was built");
        assert_eq!(live(&runs).await, by_scan);
    }

    /// A stored row of the random tables: its id, a string `v` that many
    /// rows share (as edges share a source) and a nullable `w`.
    type Row = (String, String, Option<i32>);

    /// Writes `rows` as fragments of at most 15 rows: appended, or replacing
    /// the table (an overwrite, which drops its index segments).
    async fn write_rows(uri: &str, rows: &[Row], mode: WriteMode) -> Dataset {
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new(ID_COLUMN, arrow_schema::DataType::Utf8, false),
            Field::new("v", arrow_schema::DataType::Utf8, false),
            Field::new("w", arrow_schema::DataType::Int32, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>())),
                Arc::new(StringArray::from(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>())),
                Arc::new(arrow_array::Int32Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
            ],
        )
        .unwrap();
        let params = lance::dataset::WriteParams { max_rows_per_file: 15, mode, ..Default::default() };
        Dataset::write(arrow_array::RecordBatchIterator::new([Ok(batch)], schema), uri, Some(params)).await.unwrap()
    }

    /// The live ids of `ds` among `ids`, by reading every row.
    async fn scanned_ids(ds: &Dataset, ids: &[&str]) -> BTreeSet<String> {
        let wanted: std::collections::HashSet<&str> = ids.iter().copied().collect();
        let mut scan = ds.scan();
        scan.project(&[ID_COLUMN]).unwrap();
        let batches: Vec<RecordBatch> = scan.try_into_stream().await.unwrap().try_collect().await.unwrap();
        batches.iter().flat_map(|b| strings(b.column(0)).filter(|id| wanted.contains(id)).map(str::to_owned).collect::<Vec<_>>()).collect()
    }

    /// The ids of the live rows whose `key` is one of `probe`'s rows' (a
    /// batch of the key's columns), through [`live_rows_keyed`]; `None`
    /// where it has no runs to answer with.
    async fn keyed_ids(ds: &Dataset, key: &Key, probe: &RecordBatch, runs: &KeyRuns) -> Option<BTreeSet<String>> {
        let bytes = key.bytes(probe).unwrap();
        let hashed = HashedIds::of_bytes((0..bytes.len()).filter_map(|row| bytes.get(row)));
        let found = live_rows_keyed(ds, key, &hashed, runs).await.unwrap()?;
        let mut addresses: Vec<u64> = found.into_iter().map(|(_, address)| address).collect();
        addresses.sort_unstable();
        addresses.dedup();
        if addresses.is_empty() {
            return Some(BTreeSet::new());
        }
        // Counted before they are read: a take skips deleted rows, a count
        // (`@card`'s) does not.
        let rows = ds.take_rows(&addresses, ProjectionRequest::from_columns([ID_COLUMN], ds.schema())).await.unwrap();
        assert_eq!(rows.num_rows(), addresses.len(), "every address found is a live row");
        Some(strings(rows.column(0)).map(str::to_owned).collect())
    }

    /// `stored_ids` and the other keys' lookups (`live_rows_keyed`: one
    /// column many rows share, as `@card`'s `_src`; a tuple with a nullable
    /// member, as a `@unique`'s) answer as a full scan does, on random
    /// tables whose ids are deleted, inserted again (with other values),
    /// compacted, folded and overwritten: without key runs (Lance's index
    /// and reads; the other keys then answer `None`), with runs built on
    /// the current version, and with runs kept from every earlier version
    /// (as a host keeps them), which must change the speed, never the answer.
    #[tokio::test]
    async fn key_lookups_answer_as_a_full_scan() {
        let (shared, tuple) = (Key::of(vec!["v".into()]), Key::of(vec!["v".into(), "w".into()]));
        let keys = [Key::id(), shared.clone(), tuple.clone()];
        for seed in 1..=4u64 {
            let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut next = move |below: usize| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % below as u64) as usize
            };
            let universe: Vec<String> = (0..150).map(|i| format!("k{i}")).collect();
            let dir = tempfile::tempdir().unwrap();
            let uri = dir.path().join("t.lance");
            let uri = uri.to_str().unwrap();
            let first: BTreeSet<usize> = (0..60).map(|i| (i * 37 + seed as usize * 11) % 150).collect();
            let mut live: BTreeMap<String, Row> = first.iter().map(|&i| (universe[i].clone(), random_row(&mut next, &universe[i]))).collect();
            let mut ds = write_rows(uri, &live.values().cloned().collect::<Vec<_>>(), WriteMode::Create).await;
            let index = ScalarIndexParams::default();
            ds.create_index(&[ID_COLUMN], IndexType::BTree, Some(index_name(ID_COLUMN)), &index, true).await.unwrap();
            let kept_runs = KeyRuns::default();
            assert!(stored_ids(&write_rows(&format!("{uri}-empty"), &[], WriteMode::Create).await, &["k1"], &kept_runs).await.unwrap().is_empty());
            for step in 0..12 {
                match next(6) {
                    0 => {
                        let gone: Vec<String> = live.keys().filter(|_| next(3) == 0).cloned().collect();
                        if !gone.is_empty() {
                            let list = gone.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>().join(", ");
                            ds.delete(&format!("_id IN ({list})")).await.unwrap();
                            live.retain(|id, _| !gone.contains(id));
                        }
                    }
                    1 | 2 => {
                        // Absent ids, some of them deleted before: inserted again.
                        let ids: Vec<String> = (0..20).map(|_| universe[next(150)].clone()).filter(|id| !live.contains_key(id)).collect();
                        let new: BTreeMap<String, Row> = ids.into_iter().map(|id| (id.clone(), random_row(&mut next, &id))).collect();
                        ds = write_rows(uri, &new.values().cloned().collect::<Vec<_>>(), WriteMode::Append).await;
                        live.extend(new);
                    }
                    3 => {
                        if let Some(compaction) = prepare_compaction(&ds).await.unwrap() {
                            compaction.warm_key_runs(&ds, &keys, &kept_runs).await.unwrap();
                            if let Some(compacted) = commit_compaction_onto(ds.clone(), compaction, &kept_runs).await.unwrap() {
                                ds = compacted;
                            }
                        }
                    }
                    4 => {
                        let fold = prepare_fold(&ds, &index_name(ID_COLUMN)).await.unwrap();
                        fold.warm_key_runs(&ds, &keys, &kept_runs).await.unwrap();
                        ds = commit_fold(ds, fold).await.unwrap().0;
                    }
                    _ => {
                        let ids: Vec<String> = (0..40).map(|_| universe[next(150)].clone()).collect();
                        live = ids.into_iter().map(|id| (id.clone(), random_row(&mut next, &id))).collect();
                        ds = write_rows(uri, &live.values().cloned().collect::<Vec<_>>(), WriteMode::Overwrite).await;
                        if next(2) == 0 {
                            ds.create_index(&[ID_COLUMN], IndexType::BTree, Some(index_name(ID_COLUMN)), &index, true).await.unwrap();
                        }
                    }
                }
                let fresh_runs = KeyRuns::default();
                for runs in [&kept_runs, &fresh_runs] {
                    for key in &keys {
                        for segment in id_segments(&ds).await.unwrap() {
                            keep_key_run(&ds, key, &segment, runs).await.unwrap();
                        }
                        while keep_fragment_run(&ds, key, runs).await.unwrap() {}
                    }
                }
                let every_runs = [(&KeyRuns::default(), "no runs"), (&fresh_runs, "runs of this version"), (&kept_runs, "runs kept across versions")];
                // Random ids (some stored), only stored ones, only absent ones.
                let random: BTreeSet<&str> = (0..40).map(|_| universe[next(150)].as_str()).collect();
                let stored_only: Vec<&str> = live.keys().map(String::as_str).filter(|_| next(2) == 0).collect();
                let absent_only: Vec<&str> = universe.iter().map(String::as_str).filter(|id| !live.contains_key(*id)).take(20).collect();
                for probe in [random.into_iter().collect::<Vec<_>>(), stored_only, absent_only] {
                    let scanned = scanned_ids(&ds, &probe).await;
                    let modelled: BTreeSet<String> = probe.iter().filter(|id| live.contains_key(**id)).map(|id| id.to_string()).collect();
                    assert_eq!(scanned, modelled, "seed {seed} step {step}: the scan sees the model's table");
                    for (runs, which) in every_runs {
                        assert_eq!(stored_ids(&ds, &probe, runs).await.unwrap(), scanned, "seed {seed} step {step}, {which}");
                    }
                }
                // Some shared values (and one no row has); some tuples, a null member among them.
                let values: Vec<String> = (0..4).map(|_| format!("s{}", next(12))).chain(["none".to_owned()]).collect();
                let tuples: Vec<Row> = (0..6).map(|i| random_row(&mut next, &format!("probe{i}"))).collect();
                let probes = [
                    (&shared, write_probe(&["v"], &values.iter().map(|v| (String::new(), v.clone(), None)).collect::<Vec<_>>())),
                    (&tuple, write_probe(&["v", "w"], &tuples)),
                ];
                for (key, probe) in &probes {
                    let bytes = key.bytes(probe).unwrap();
                    let wanted: BTreeSet<&[u8]> = (0..bytes.len()).filter_map(|row| bytes.get(row)).collect();
                    // The model's rows with those keys, keyed as the probe is.
                    let model = write_probe(&key.columns(), &live.values().cloned().collect::<Vec<_>>());
                    let model_bytes = key.bytes(&model).unwrap();
                    let expected: BTreeSet<String> =
                        live.keys().enumerate().filter(|(row, _)| model_bytes.get(*row).is_some_and(|k| wanted.contains(k))).map(|(_, id)| id.clone()).collect();
                    for (runs, which) in every_runs {
                        match keyed_ids(&ds, key, probe, runs).await {
                            Some(found) => assert_eq!(found, expected, "seed {seed} step {step}, key {key:?}, {which}"),
                            None => assert!(which == "no runs", "seed {seed} step {step}, key {key:?}: {which} did not answer"),
                        }
                    }
                }
            }
        }
    }

    /// A row of id `id` with random `v` (of 12) and `w` (of 5, or null).
    fn random_row(next: &mut impl FnMut(usize) -> usize, id: &str) -> Row {
        (id.to_owned(), format!("s{}", next(12)), (next(4) != 0).then(|| next(5) as i32))
    }

    /// A batch of `rows`' columns named in `columns` (`v`, `w`).
    fn write_probe(columns: &[&str], rows: &[Row]) -> RecordBatch {
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for column in columns {
            match *column {
                "v" => {
                    fields.push(Field::new("v", arrow_schema::DataType::Utf8, false));
                    arrays.push(Arc::new(StringArray::from(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>())));
                }
                _ => {
                    fields.push(Field::new("w", arrow_schema::DataType::Int32, true));
                    arrays.push(Arc::new(arrow_array::Int32Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())));
                }
            }
        }
        RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), arrays).unwrap()
    }

    #[test]
    fn folds_merge_size_tiered() {
        // No segments yet, or a fresh delta bigger than the newest: merged.
        assert_eq!(segments_to_merge(&[], 70_000), 0);
        assert_eq!(segments_to_merge(&[8_192], 70_000), 1);
        // The newest segment much larger than the delta stays as it is.
        assert_eq!(segments_to_merge(&[1_000_000], 70_000), 0);
        // Small newest segments are gathered until a large one stops it.
        assert_eq!(segments_to_merge(&[1_000_000, 140_000, 70_000], 70_000), 2);
        assert_eq!(segments_to_merge(&[280_000, 140_000, 70_000], 70_000), 3);
        // Simulated over 128 folds of equal deltas: few segments, and the
        // rows rewritten stay O(n log n), not O(n²).
        let (mut segments, mut rewritten) = (Vec::<u64>::new(), 0u64);
        for _ in 0..128 {
            let k = segments_to_merge(&segments, 65_536);
            let merged: u64 = segments.drain(segments.len() - k..).sum::<u64>() + 65_536;
            rewritten += merged;
            segments.push(merged);
        }
        assert!(segments.len() <= 8, "{segments:?}");
        assert!(rewritten <= 65_536 * 128 * 9, "{rewritten}");
    }
}
