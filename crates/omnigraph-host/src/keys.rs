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
//! Runs are built off the load path (maintenance, before a fold is
//! published, and [`crate::Graph::warm_key_runs`]), kept in memory up to
//! [`MAX_KEY_RUN_ROWS`] in all, and dropped when no head lists their segment.
//! A merge that meets a segment without a run asks Lance's index instead.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, StringArray, UInt64Array};
use futures::TryStreamExt;
use lance::Dataset;
use lance::table::format::IndexMetadata;
use roaring::{RoaringBitmap, RoaringTreemap};

use crate::error::EngineError;
use crate::limits::MAX_KEY_RUN_ROWS;

/// The column Lance's scans add for `with_row_address` (`lance_core::ROW_ADDR`).
pub const ROW_ADDRESS_COLUMN: &str = "_rowaddr";

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
                let ids = batch.column_by_name(id_column).and_then(|c| c.as_any().downcast_ref::<StringArray>());
                let rows = batch.column_by_name(ROW_ADDRESS_COLUMN).and_then(|c| c.as_any().downcast_ref::<UInt64Array>());
                let (Some(ids), Some(rows)) = (ids, rows) else {
                    return Err(EngineError::Storage("a key run's scan gave no ids or row addresses".into()));
                };
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
    /// (ascending). One pass: each id's place is galloped to from the
    /// previous one, so a batch costs O(batch × log(run / batch)).
    pub fn find_sorted(&self, sorted: &[&[u8]], found: &mut RoaringTreemap) {
        let mut from = 0;
        for &key in sorted {
            from = self.lower_bound_from(from, key);
            let mut i = from;
            while i < self.len() && self.id(i) == key {
                found.insert(self.addresses[i]);
                i += 1;
            }
        }
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

/// The runs this process holds, by the uuid of the segment each mirrors.
#[derive(Default)]
pub struct KeyRuns {
    runs: Mutex<HashMap<u128, Arc<KeyRun>>>,
}

impl KeyRuns {
    /// The runs of `segments`, if every one has a run.
    pub fn of(&self, segments: &[&IndexMetadata]) -> Option<Vec<Arc<KeyRun>>> {
        let runs = self.runs.lock().expect("key runs");
        segments.iter().map(|segment| runs.get(&segment.uuid.as_u128()).cloned()).collect()
    }

    pub fn has(&self, segment: &IndexMetadata) -> bool {
        self.runs.lock().expect("key runs").contains_key(&segment.uuid.as_u128())
    }

    /// Whether a run of `rows` more rows fits under [`MAX_KEY_RUN_ROWS`].
    pub fn room_for(&self, rows: u64) -> bool {
        let held: usize = self.runs.lock().expect("key runs").values().map(|run| run.len()).sum();
        held as u64 + rows <= MAX_KEY_RUN_ROWS
    }

    /// Keeps `run` for `segment` if it fits; whether it was kept.
    pub fn insert(&self, segment: &IndexMetadata, run: KeyRun) -> bool {
        if !self.room_for(run.len() as u64) {
            return false;
        }
        self.runs.lock().expect("key runs").insert(segment.uuid.as_u128(), Arc::new(run));
        true
    }

    /// Drops the runs of segments not in `live` (folded away, or of a
    /// branch deleted since).
    pub fn retain<'a>(&self, live: impl IntoIterator<Item = &'a IndexMetadata>) {
        let live: HashSet<u128> = live.into_iter().map(|segment| segment.uuid.as_u128()).collect();
        self.runs.lock().expect("key runs").retain(|segment, _| live.contains(segment));
    }

    /// How many rows the runs hold in all.
    pub fn rows(&self) -> usize {
        self.runs.lock().expect("key runs").values().map(|run| run.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run_of(ids: &[(&str, u64)]) -> KeyRun {
        let (mut bytes, mut starts, mut addresses) = (Vec::new(), vec![0], Vec::new());
        for (id, address) in ids {
            bytes.extend_from_slice(id.as_bytes());
            starts.push(bytes.len());
            addresses.push(*address);
        }
        KeyRun { fragments: RoaringBitmap::new(), bytes, starts, addresses }.sorted()
    }

    proptest! {
        /// A run finds exactly the rows a linear scan finds, duplicates included.
        #[test]
        fn finds_what_a_scan_finds(
            stored in proptest::collection::vec(("[a-d]{0,3}", 0u64..1_000), 0..200),
            wanted in proptest::collection::btree_set("[a-d]{0,3}", 0..40),
        ) {
            let pairs: Vec<(&str, u64)> = stored.iter().map(|(id, a)| (id.as_str(), *a)).collect();
            let run = run_of(&pairs);
            let sorted: Vec<&[u8]> = wanted.iter().map(|id| id.as_bytes()).collect();
            let mut found = RoaringTreemap::new();
            run.find_sorted(&sorted, &mut found);
            let expected: RoaringTreemap = pairs.iter().filter(|(id, _)| wanted.contains(*id)).map(|(_, a)| *a).collect();
            prop_assert_eq!(found, expected);
        }
    }
}
