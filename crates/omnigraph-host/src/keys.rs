//! Key runs: the engine's own lookup of stored `_id`s for merges
//! (docs/ARCHITECTURE.md, "Key runs").
//!
//! Lance's BTree answers an `IsIn` of a batch's ids by evaluating the list
//! against every row of every page a key falls in, so a merge of spread ids
//! costs O(table). A key run holds, for one segment of the `_id` index, the
//! `(id, row address)` pairs of the fragments it covers, sorted by id; a
//! merge walks its sorted ids through each run, O(batch × log table).
//!
//! A run is as safe to use as the segment it mirrors, for every version
//! that lists the segment: a fragment's rows never change (deletions live in
//! deletion vectors, which the caller checks; covered fragments are never
//! compacted), fragment ids are never reused on a lineage, and a segment's
//! uuid names one build. A run holds deleted rows too (as the index does),
//! so a restore to an older version that lists the same segment finds them.
//! A covered fragment the run did not read (it was removed when the run was
//! built, and a restore brought it back) is not in [`KeyRun::fragments`]:
//! the caller scans it like an unindexed one.
//!
//! A fragment no segment covers yet (a load's, or a compaction's) has a run
//! of its own, keyed by its data file: a merge writes the run of the
//! fragment it adds from the batch it wrote, and maintenance builds the
//! ones missing (a compaction's new fragments). A fragment's run holds row
//! offsets, so it answers under whatever id the fragment has.
//!
//! Segment runs are built off the load path (maintenance, before a fold is
//! published, and [`crate::Graph::warm_key_runs`]); all runs are kept in
//! memory up to [`MAX_KEY_RUN_ROWS`] in all, and dropped when no head lists
//! their segment or fragment. A merge that meets a segment without a run
//! asks Lance's index instead, and a fragment without one is scanned.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, RecordBatch, StringArray, UInt64Array};
use futures::TryStreamExt;
use lance::Dataset;
use lance::table::format::{Fragment, IndexMetadata};
use roaring::{RoaringBitmap, RoaringTreemap};

use crate::error::EngineError;
use crate::limits::MAX_KEY_RUN_ROWS;

/// The column Lance's scans add for `with_row_address` (`lance_core::ROW_ADDR`).
const ROW_ADDRESS_COLUMN: &str = "_rowaddr";

/// The id and row address columns of a batch from a scan that projected
/// `id_column` `with_row_address`.
pub fn ids_and_addresses<'a>(batch: &'a RecordBatch, id_column: &str) -> Result<(&'a StringArray, &'a UInt64Array), EngineError> {
    let ids = batch.column_by_name(id_column).and_then(|c| c.as_any().downcast_ref::<StringArray>());
    let rows = batch.column_by_name(ROW_ADDRESS_COLUMN).and_then(|c| c.as_any().downcast_ref::<UInt64Array>());
    match (ids, rows) {
        (Some(ids), Some(rows)) => Ok((ids, rows)),
        _ => Err(EngineError::Storage("a scan gave no ids or row addresses".into())),
    }
}

/// One segment's ids, sorted, with the address of the row holding each
/// (an id appears once per stored row: a replaced row and its replacement
/// can both be covered).
pub struct KeyRun {
    /// The fragments whose rows (deleted ones included) the run holds.
    fragments: RoaringBitmap,
    /// The ids' bytes, back to back in sorted order.
    bytes: Vec<u8>,
    /// Where each id starts in `bytes`, and one past the last.
    starts: Vec<usize>,
    /// The row address of each id.
    addresses: Vec<u64>,
}

impl KeyRun {
    /// Reads the `_id` of every row, deleted ones included, of the fragments
    /// of `ds` that `covered` names, and sorts them.
    pub async fn build(ds: &Dataset, id_column: &str, covered: &RoaringBitmap) -> Result<KeyRun, EngineError> {
        let present: Vec<_> =
            ds.get_fragments().iter().filter(|f| covered.contains(f.id() as u32)).map(|f| f.metadata().clone()).collect();
        let fragments: RoaringBitmap = present.iter().map(|f| f.id as u32).collect();
        let (mut bytes, mut starts, mut addresses) = (Vec::new(), vec![0], Vec::new());
        if !present.is_empty() {
            let mut scan = ds.scan();
            scan.with_fragments(present).project(&[id_column])?.with_row_id().with_row_address().include_deleted_rows();
            let mut stream = scan.try_into_stream().await?;
            while let Some(batch) = stream.try_next().await? {
                let (ids, rows) = ids_and_addresses(&batch, id_column)?;
                for (id, address) in ids.iter().zip(rows.values()) {
                    // `_id` is required: a null is a row that was never written.
                    let Some(id) = id else { continue };
                    bytes.extend_from_slice(id.as_bytes());
                    starts.push(bytes.len());
                    addresses.push(*address);
                }
            }
        }
        let unsorted = KeyRun { fragments, bytes, starts, addresses };
        tokio::task::spawn_blocking(move || unsorted.sorted())
            .await
            .map_err(|e| EngineError::Storage(format!("sorting a key run: {e}")))
    }

    fn sorted(self) -> KeyRun {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_unstable_by(|&a, &b| self.id(a).cmp(self.id(b)));
        let (mut bytes, mut starts) = (Vec::with_capacity(self.bytes.len()), Vec::with_capacity(self.starts.len()));
        starts.push(0);
        for &i in &order {
            bytes.extend_from_slice(self.id(i));
            starts.push(bytes.len());
        }
        let addresses = order.iter().map(|&i| self.addresses[i]).collect();
        KeyRun { fragments: self.fragments, bytes, starts, addresses }
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    /// The fragments the run answers for.
    pub fn fragments(&self) -> &RoaringBitmap {
        &self.fragments
    }

    fn id(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i]..self.starts[i + 1]]
    }

    /// Adds to `found` the address of every row whose id is one of `sorted`
    /// (ascending), each plus `base` (a fragment run's fragment, shifted; 0
    /// for a segment's run). One pass: each id's place is galloped to from
    /// the previous one, so a batch costs O(batch × log(run / batch)).
    pub fn find_sorted(&self, sorted: &[&[u8]], base: u64, found: &mut RoaringTreemap) {
        let mut from = 0;
        for &key in sorted {
            from = self.lower_bound_from(from, key);
            let mut i = from;
            while i < self.len() && self.id(i) == key {
                found.insert(base | self.addresses[i]);
                i += 1;
            }
        }
    }

    /// The run of one fragment whose rows hold `ids`, in row order (a batch
    /// as it was just written): addresses are row offsets.
    pub fn of_rows<'a>(ids: impl IntoIterator<Item = &'a str>) -> KeyRun {
        let (mut bytes, mut starts, mut addresses) = (Vec::new(), vec![0], Vec::new());
        for (offset, id) in ids.into_iter().enumerate() {
            bytes.extend_from_slice(id.as_bytes());
            starts.push(bytes.len());
            addresses.push(offset as u64);
        }
        KeyRun { fragments: RoaringBitmap::new(), bytes, starts, addresses }.sorted()
    }

    /// This run of one fragment with row offsets for addresses, so it
    /// answers for the fragment under whatever id it has.
    pub fn into_fragment_run(mut self) -> KeyRun {
        self.addresses.iter_mut().for_each(|address| *address &= u64::from(u32::MAX));
        self.fragments = RoaringBitmap::new();
        self
    }

    /// The first index at or after `from` whose id is not below `key`.
    fn lower_bound_from(&self, from: usize, key: &[u8]) -> usize {
        let n = self.len();
        // Every index below `low` holds an id below `key`.
        let (mut low, mut high, mut step) = (from, from, 1);
        while high < n && self.id(high) < key {
            low = high + 1;
            high += step;
            step *= 2;
        }
        let mut high = high.min(n);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.id(mid) < key {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }
}

/// The runs this process holds: a segment's by its uuid, a fragment's (one
/// no segment covers yet) by its data file, whose name is unique and whose
/// rows never change.
pub struct KeyRuns {
    segments: Mutex<HashMap<u128, Arc<KeyRun>>>,
    fragments: Mutex<HashMap<String, Arc<KeyRun>>>,
    /// Rows the runs may hold in all ([`MAX_KEY_RUN_ROWS`] but in tests).
    max_rows: u64,
}

impl Default for KeyRuns {
    fn default() -> KeyRuns {
        KeyRuns::holding_at_most(MAX_KEY_RUN_ROWS)
    }
}

/// The data file a fragment's run is kept under (fragments of one file only).
fn fragment_key(fragment: &Fragment) -> Option<&str> {
    match fragment.files.as_slice() {
        [file] => Some(file.path.as_str()),
        _ => None,
    }
}

impl KeyRuns {
    pub fn holding_at_most(max_rows: u64) -> KeyRuns {
        KeyRuns { segments: Mutex::default(), fragments: Mutex::default(), max_rows }
    }

    /// The runs of `segments`, if every one has a run.
    pub fn of(&self, segments: &[&IndexMetadata]) -> Option<Vec<Arc<KeyRun>>> {
        let runs = self.segments.lock().expect("key runs");
        segments.iter().map(|segment| runs.get(&segment.uuid.as_u128()).cloned()).collect()
    }

    pub fn has(&self, segment: &IndexMetadata) -> bool {
        self.segments.lock().expect("key runs").contains_key(&segment.uuid.as_u128())
    }

    /// The run of `fragment`, if there is one for every row it holds.
    pub fn of_fragment(&self, fragment: &Fragment) -> Option<Arc<KeyRun>> {
        let run = self.fragments.lock().expect("key runs").get(fragment_key(fragment)?).cloned()?;
        (Some(run.len()) == fragment.physical_rows).then_some(run)
    }

    /// Whether runs of `rows` more rows fit under the bound once the runs
    /// of `replaced` rows are dropped.
    pub fn room_for(&self, rows: u64, replaced: u64) -> bool {
        (self.rows() as u64).saturating_sub(replaced) + rows <= self.max_rows
    }

    /// Rows of the runs a segment over the fragments `covered` names (of
    /// `fragments`, a version's) replaces: those of the segments it absorbs
    /// (a fold's) and of the fragments it covers. Both are dropped once no
    /// head lists them, so a fold's run counts against the bound only for
    /// rows no run held; until then the runs hold up to twice the bound.
    pub fn rows_replaced(&self, covered: &RoaringBitmap, fragments: &[Fragment]) -> u64 {
        let segments: usize =
            self.segments.lock().expect("key runs").values().filter(|run| run.fragments.is_subset(covered)).map(|run| run.len()).sum();
        let fragment_runs: usize = fragments
            .iter()
            .filter(|fragment| covered.contains(fragment.id as u32))
            .filter_map(|fragment| self.of_fragment(fragment))
            .map(|run| run.len())
            .sum();
        (segments + fragment_runs) as u64
    }

    /// Keeps `run` for `segment` if it fits once the runs of `replaced`
    /// rows are dropped; whether it was kept.
    pub fn insert(&self, segment: &IndexMetadata, run: KeyRun, replaced: u64) -> bool {
        if !self.room_for(run.len() as u64, replaced) {
            return false;
        }
        self.segments.lock().expect("key runs").insert(segment.uuid.as_u128(), Arc::new(run));
        true
    }

    /// Keeps `run` (offsets for addresses) for `fragment` if it fits;
    /// whether it was kept.
    pub fn insert_fragment(&self, fragment: &Fragment, run: KeyRun) -> bool {
        let Some(key) = fragment_key(fragment) else { return false };
        if Some(run.len()) != fragment.physical_rows || !self.room_for(run.len() as u64, 0) {
            return false;
        }
        self.fragments.lock().expect("key runs").insert(key.to_owned(), Arc::new(run));
        true
    }

    /// Drops the runs of segments and fragments no head lists (folded or
    /// compacted away, or of a branch deleted since).
    pub fn retain<'a>(&self, segments: impl IntoIterator<Item = &'a IndexMetadata>, fragments: impl IntoIterator<Item = &'a Fragment>) {
        let segments: HashSet<u128> = segments.into_iter().map(|segment| segment.uuid.as_u128()).collect();
        self.segments.lock().expect("key runs").retain(|segment, _| segments.contains(segment));
        let fragments: HashSet<&str> = fragments.into_iter().filter_map(fragment_key).collect();
        self.fragments.lock().expect("key runs").retain(|file, _| fragments.contains(file.as_str()));
    }

    /// How many rows the runs hold in all.
    pub fn rows(&self) -> usize {
        let segments: usize = self.segments.lock().expect("key runs").values().map(|run| run.len()).sum();
        segments + self.fragments.lock().expect("key runs").values().map(|run| run.len()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A run finds exactly the rows a linear scan finds, duplicates included.
        #[test]
        fn finds_what_a_scan_finds(
            stored in proptest::collection::vec("[a-d]{0,3}", 0..200),
            wanted in proptest::collection::btree_set("[a-d]{0,3}", 0..40),
            fragment in 0u64..4,
        ) {
            let run = KeyRun::of_rows(stored.iter().map(String::as_str));
            let sorted: Vec<&[u8]> = wanted.iter().map(|id| id.as_bytes()).collect();
            let mut found = RoaringTreemap::new();
            run.find_sorted(&sorted, fragment << 32, &mut found);
            let expected: RoaringTreemap =
                stored.iter().enumerate().filter(|(_, id)| wanted.contains(*id)).map(|(offset, _)| fragment << 32 | offset as u64).collect();
            prop_assert_eq!(found, expected);
        }
    }
}
