//! Key runs: the engine's own lookup of stored `_id`s for merges, and of
//! the other keys a load's checks look stored rows up by ([`Key`]: `_src`
//! for `@card`, a `@unique`'s members). What follows says `id` for the
//! `_id` key; a run of any key follows the `_id` index's segments and is
//! built, merged, kept and dropped with the `_id` runs (docs/storage.md,
//! "Key runs").
//!
//! Lance's BTree answers the `IsIn` of a batch's ids by evaluating the list
//! against every row of every page a key falls in: spread ids touch every page,
//! so a merge's lookup costs O(table). A key run mirrors one segment of the
//! `_id` index: the `(id, row address)` pairs of the fragments the segment
//! covers, deleted rows included, sorted by a 64-bit hash of the id, with a
//! bucket directory on the hash's top bits (about four hashes per bucket),
//! built by scanning those fragments (`include_deleted_rows`). A merge hashes
//! its ids once and reads one bucket per id and run, an id's bytes only where
//! its hash matches (a collision costs a comparison, never an answer): O(batch)
//! per run, whatever the table's size, and the probes of different ids do not
//! wait on each other. A merge's ids are dealt out to `KEY_LOOKUP_THREADS`
//! threads, each probing every run with its share (`keys::find_in_runs`): a
//! probe is a cache miss more than work. The runs live in the host process's
//! memory (`Graph::key_runs`, at most [`MAX_KEY_RUN_ROWS`] rows in all), keyed by
//! segment uuid, and are dropped when no head lists their segment.
//!
//! Why a run answers like its segment on every version that lists it: a
//! fragment's rows never change (deletions are deletion vectors, which
//! `live_rows` checks; indexed fragments are never compacted), fragment ids are
//! never reused on a lineage, and a segment uuid names one build. Rows deleted
//! when the run was built are in it, so a version that has them live again (a
//! restore) finds them; a fragment removed when the run was built is not in
//! [`KeyRun::fragments`], so on a version that has it again it is scanned like an
//! unindexed one. `tables::tests::key_runs_answer_as_the_index_does` checks
//! both against Lance's own answer. Where one segment lacks a run (a fresh
//! process, another host's fold, a run that does not fit), the merge asks
//! Lance's index as before: runs change speed, never the answer.
//!
//! A fragment no segment covers yet (a load's, or a compaction's output) has a
//! run of its own, keyed by its data file (unique, and its rows never change)
//! and holding row offsets, so it answers under whatever id the fragment gets:
//! a merge keeps the runs of the fragments it writes from the batch it wrote
//! (`keep_written_runs`), a compaction builds the runs of the fragments it
//! wrote before its commit (`PreparedCompaction::warm_key_runs`: otherwise the
//! merges right after it read up to `COMPACT_FRAGMENT_ROWS` ids, the slowest
//! loads of the sustained bench), and maintenance builds any still missing (a
//! fresh process's, another host's; [`crate::Graph::warm_key_runs`]) before
//! each durable step. Once a segment covers a fragment, the fragment's run is
//! dropped. A fragment without a run is scanned.
//!
//! The deletion vectors a merge or a compaction's commit writes
//! (`tables::write_deletions`, through Lance's own `write_deletion_file`, as
//! `FileFragment::extend_deletions` writes them) are kept beside the runs, one
//! per fragment by data file, with the deletion file they were written to: the
//! next merge (or compaction commit, under the lock) that reads the fragment's
//! deletions takes the vector from memory when its version names that very file
//! (`tables::deleted_rows`), and reads the store's otherwise (another host's,
//! an older version's; `tests/engine.rs`
//! `a_merge_reads_the_deletions_another_host_wrote`). Lance's cache holds only
//! the vectors it read, so without this every spread merge read back every
//! vector the previous one wrote. They are dropped when no head lists the
//! fragment.
//!
//! A fold builds the run of its new segment before its publish, from the
//! snapshot it was built on, so the first merge after the fold finds it. Where
//! this process holds the runs of everything the segment absorbs (the merged
//! segments' and the newly covered fragments'), the run is their k-way merge
//! in hash order (`KeyRun::merged`, `KeyRuns::covering`): O(rows) in memory,
//! against a scan, a hash of every id and a sort when it is read from the
//! table (a fresh process, another host's fold). Folds rewrite O(n log n) rows
//! over a table's life, so this was most of maintenance's CPU beside Lance's
//! own index merge, and that CPU is what loads that overlap a step compete
//! with on two cores. That
//! run is counted against `MAX_KEY_RUN_ROWS` net of the segment and fragment
//! runs it absorbs (`KeyRuns::rows_replaced`): they are dropped at the next
//! maintenance round after the publish, so the runs hold up to twice the bound
//! while a fold is in flight, and a fold of a table whose runs fit always gets
//! its run (`tables::tests::a_folds_run_replaces_the_runs_it_absorbs`). Before,
//! a fold that merged most of the table found no room beside the runs it
//! replaced, and every merge asked Lance's index until the next round built
//! the run (13 loads of 100–500 ms in the sustained bench).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, RecordBatch, StringArray, UInt64Array};
use lance::deps::datafusion::scalar::ScalarValue;
use omnigraph_validate_wasm::ID_COLUMN;
use futures::TryStreamExt;
use lance::Dataset;
use lance::table::format::{DeletionFile, Fragment, IndexMetadata};
use roaring::{RoaringBitmap, RoaringTreemap};

use crate::error::EngineError;
use crate::limits::{KEY_LOOKUP_THREADS, MAX_KEY_RUN_ROWS, MIN_KEYS_PER_LOOKUP_THREAD};

/// The column Lance's scans add for `with_row_address` (`lance_core::ROW_ADDR`).
const ROW_ADDRESS_COLUMN: &str = "_rowaddr";

/// The row address column of a batch from a scan `with_row_address`.
pub fn row_addresses(batch: &RecordBatch) -> Result<&UInt64Array, EngineError> {
    batch
        .column_by_name(ROW_ADDRESS_COLUMN)
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .ok_or_else(|| EngineError::Storage("a scan gave no row addresses".into()))
}

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

/// What a run is keyed by: stored columns of a table whose values, taken
/// together, a check looks rows up by: `_id` (merges, appends, external
/// references), `_src` (`@card`), the members of a `@unique`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(Vec<String>);

impl Key {
    pub fn id() -> Key {
        Key(vec![ID_COLUMN.to_owned()])
    }

    pub fn of(columns: Vec<String>) -> Key {
        Key(columns)
    }

    pub fn columns(&self) -> Vec<&str> {
        self.0.iter().map(String::as_str).collect()
    }

    pub fn is_id(&self) -> bool {
        self.0 == [ID_COLUMN]
    }

    /// Each row's key as bytes (`None` where a member is null: such a row
    /// has no key). Equal values give equal bytes; a lookup confirms a
    /// match on the values themselves, so bytes that two unequal values
    /// share would cost a comparison, never an answer. One string column
    /// is its bytes; otherwise each member's text, length-prefixed.
    pub fn bytes<'b>(&self, batch: &'b RecordBatch) -> Result<KeyBytes<'b>, EngineError> {
        let columns: Vec<&'b arrow_array::ArrayRef> = self
            .0
            .iter()
            .map(|name| batch.column_by_name(name).ok_or_else(|| EngineError::Storage(format!("no column {name} to key rows by"))))
            .collect::<Result<_, _>>()?;
        if let [column] = columns[..]
            && let Some(strings) = column.as_any().downcast_ref::<StringArray>()
        {
            return Ok(KeyBytes::Strings(strings));
        }
        let mut rows = Vec::with_capacity(batch.num_rows());
        'rows: for row in 0..batch.num_rows() {
            let mut bytes = Vec::new();
            for column in &columns {
                let value = ScalarValue::try_from_array(column, row).map_err(|e| EngineError::Storage(e.to_string()))?;
                if value.is_null() {
                    rows.push(None);
                    continue 'rows;
                }
                let text = value.to_string();
                bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
                bytes.extend_from_slice(text.as_bytes());
            }
            rows.push(Some(bytes));
        }
        Ok(KeyBytes::Encoded(rows))
    }
}

/// The keys of a batch's rows ([`Key::bytes`]).
pub enum KeyBytes<'b> {
    Strings(&'b StringArray),
    Encoded(Vec<Option<Vec<u8>>>),
}

impl KeyBytes<'_> {
    pub fn get(&self, row: usize) -> Option<&[u8]> {
        match self {
            KeyBytes::Strings(strings) => strings.is_valid(row).then(|| strings.value(row).as_bytes()),
            KeyBytes::Encoded(rows) => rows[row].as_deref(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            KeyBytes::Strings(strings) => strings.len(),
            KeyBytes::Encoded(rows) => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One segment's keys (or one fragment's), sorted by their hash, with the
/// address of the row holding each (an id appears once per stored row: a
/// replaced row and its replacement can both be covered).
pub struct KeyRun {
    /// The fragments whose rows (deleted ones included) the run holds.
    fragments: RoaringBitmap,
    /// The rows read to build the run, those without a key included: a
    /// fragment's run answers for it only if this is its row count.
    rows_read: usize,
    /// Each id's [`id_hash`], ascending: a lookup reads these and an id's
    /// bytes only where its hash matches.
    hashes: Vec<u64>,
    /// Where the hashes whose top bits are `b` start, for every `b`, and
    /// one past the last: a lookup reads one bucket (a few hashes) instead
    /// of searching, so its memory reads do not wait on each other.
    buckets: Vec<u32>,
    /// The bits a hash is shifted right by to give its bucket.
    bucket_shift: u32,
    /// The ids' bytes, back to back in the order of `hashes`.
    bytes: Vec<u8>,
    /// Where each id starts in `bytes`, and one past the last.
    starts: Vec<usize>,
    /// The row address of each id.
    addresses: Vec<u64>,
}

/// The hash a run is ordered by. Collisions cost a comparison, never an
/// answer: a match is confirmed on the id's bytes.
fn id_hash(id: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same in every run of this process.
    let mut hasher = std::hash::DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
}

/// A merge's ids, hashed once: in row order for the runs of the fragments
/// the batch is written as ([`KeyRun::of_rows`]), and in hash order for the
/// lookup ([`KeyRun::find_sorted`]).
pub struct HashedIds<'a> {
    /// Each row's id hash.
    pub rows: Vec<u64>,
    /// `(hash, id)` pairs, ascending.
    pub sorted: Vec<(u64, &'a [u8])>,
}

impl<'a> HashedIds<'a> {
    pub fn of(ids: &[&'a str]) -> HashedIds<'a> {
        HashedIds::of_bytes(ids.iter().map(|id| id.as_bytes()))
    }

    /// Keys of any [`Key`], as bytes.
    pub fn of_bytes(keys: impl IntoIterator<Item = &'a [u8]>) -> HashedIds<'a> {
        let keys: Vec<&[u8]> = keys.into_iter().collect();
        let rows: Vec<u64> = keys.iter().map(|key| id_hash(key)).collect();
        let mut sorted: Vec<(u64, &[u8])> = rows.iter().copied().zip(keys).collect();
        sorted.sort_unstable();
        HashedIds { rows, sorted }
    }
}

impl KeyRun {
    /// Reads the `key` of every row, deleted ones included, of `present`:
    /// fragments of `ds`, or written for it and not yet committed (a
    /// compaction's, under a placeholder id), and sorts them.
    pub async fn of_fragments(ds: &Dataset, key: &Key, present: Vec<Fragment>) -> Result<KeyRun, EngineError> {
        let fragments: RoaringBitmap = present.iter().map(|f| f.id as u32).collect();
        let (mut hashes, mut bytes, mut starts, mut addresses) = (Vec::new(), Vec::new(), vec![0], Vec::new());
        let mut rows_read = 0;
        if !present.is_empty() {
            let mut scan = ds.scan();
            scan.with_fragments(present).project(&key.columns())?.with_row_id().with_row_address().include_deleted_rows();
            let mut stream = scan.try_into_stream().await?;
            while let Some(batch) = stream.try_next().await? {
                let keys = key.bytes(&batch)?;
                let rows = row_addresses(&batch)?;
                rows_read += batch.num_rows();
                for (row, address) in rows.values().iter().enumerate() {
                    // A null `_id` is a row that was never written; a null
                    // member, a row with no key.
                    let Some(key) = keys.get(row) else { continue };
                    hashes.push(id_hash(key));
                    bytes.extend_from_slice(key);
                    starts.push(bytes.len());
                    addresses.push(*address);
                }
            }
        }
        tokio::task::spawn_blocking(move || KeyRun::sorted(fragments, rows_read, hashes, bytes, starts, addresses))
            .await
            .map_err(|e| EngineError::Storage(format!("sorting a key run: {e}")))
    }

    /// The run of keys given in any order (`hashes`, `starts` and `addresses`
    /// index them alike).
    fn sorted(fragments: RoaringBitmap, rows_read: usize, hashes: Vec<u64>, bytes: Vec<u8>, starts: Vec<usize>, addresses: Vec<u64>) -> KeyRun {
        let id = |i: usize| &bytes[starts[i]..starts[i + 1]];
        let mut order: Vec<usize> = (0..addresses.len()).collect();
        order.sort_unstable_by_key(|&i| hashes[i]);
        let (mut sorted_bytes, mut sorted_starts) = (Vec::with_capacity(bytes.len()), Vec::with_capacity(starts.len()));
        sorted_starts.push(0);
        for &i in &order {
            sorted_bytes.extend_from_slice(id(i));
            sorted_starts.push(sorted_bytes.len());
        }
        let sorted_hashes: Vec<u64> = order.iter().map(|&i| hashes[i]).collect();
        let (buckets, bucket_shift) = bucketed(&sorted_hashes);
        KeyRun {
            fragments,
            rows_read,
            hashes: sorted_hashes,
            buckets,
            bucket_shift,
            bytes: sorted_bytes,
            starts: sorted_starts,
            addresses: order.iter().map(|&i| addresses[i]).collect(),
        }
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

    /// Every `(id, address)` the run holds, sorted: two runs are the same
    /// run when these are equal.
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(Vec<u8>, u64)> {
        let mut entries: Vec<_> = (0..self.len()).map(|i| (self.id(i).to_vec(), self.addresses[i])).collect();
        entries.sort();
        entries
    }

    /// Adds to `found` the address of every row whose id is one of `keys`
    /// (as [`HashedIds::sorted`] holds them: in hash order, so the buckets are read
    /// front to back), each plus `base` (a fragment run's fragment,
    /// shifted; 0 for a segment's run). O(1) per key.
    pub fn find_sorted(&self, keys: &[(u64, &[u8])], base: u64, found: &mut RoaringTreemap) {
        self.find_each(keys, base, |_, address| {
            found.insert(address);
        });
    }

    /// Calls `found` with the index in `keys` and the address (plus `base`)
    /// of every row whose key is one of `keys` ([`KeyRun::find_sorted`]).
    pub fn find_each(&self, keys: &[(u64, &[u8])], base: u64, mut found: impl FnMut(usize, u64)) {
        for (k, &(hash, key)) in keys.iter().enumerate() {
            let bucket = (hash >> self.bucket_shift) as usize;
            for i in self.buckets[bucket] as usize..self.buckets[bucket + 1] as usize {
                if self.hashes[i] == hash && self.id(i) == key {
                    found(k, base | self.addresses[i]);
                }
            }
        }
    }

    /// The run of one fragment whose rows hold `ids`, in row order (a batch
    /// as it was just written), with their `hashes` ([`HashedIds::rows`]):
    /// addresses are row offsets.
    pub fn of_rows(ids: &[&str], hashes: &[u64]) -> KeyRun {
        let (mut bytes, mut starts) = (Vec::new(), vec![0]);
        for id in ids {
            bytes.extend_from_slice(id.as_bytes());
            starts.push(bytes.len());
        }
        KeyRun::sorted(RoaringBitmap::new(), ids.len(), hashes.to_vec(), bytes, starts, (0..ids.len() as u64).collect())
    }

    /// The run of one fragment written from `rows` of a batch whose keys
    /// are `keys` (rows without a key left out): addresses are row offsets.
    pub fn of_key_rows(keys: &KeyBytes<'_>, rows: std::ops::Range<usize>) -> KeyRun {
        let (mut hashes, mut bytes, mut starts, mut addresses) = (Vec::new(), Vec::new(), vec![0], Vec::new());
        let rows_read = rows.len();
        for (offset, row) in rows.enumerate() {
            if let Some(key) = keys.get(row) {
                hashes.push(id_hash(key));
                bytes.extend_from_slice(key);
                starts.push(bytes.len());
                addresses.push(offset as u64);
            }
        }
        KeyRun::sorted(RoaringBitmap::new(), rows_read, hashes, bytes, starts, addresses)
    }

    /// The run of the rows of the fragments `keep` names that `sources`
    /// hold (each with the base its addresses are relative to), merged in
    /// hash order: the run [`KeyRun::of_fragments`] would read for those
    /// fragments, from memory. O(rows × log sources), no sort.
    pub fn merged(sources: &[(Arc<KeyRun>, u64)], keep: RoaringBitmap) -> KeyRun {
        use std::cmp::Reverse;
        let rows: usize = sources.iter().map(|(run, _)| run.len()).sum();
        let (mut hashes, mut bytes, mut starts, mut addresses) =
            (Vec::with_capacity(rows), Vec::new(), Vec::with_capacity(rows + 1), Vec::with_capacity(rows));
        starts.push(0);
        // The next entry of each source, smallest hash first.
        let mut next: std::collections::BinaryHeap<Reverse<(u64, usize, usize)>> =
            sources.iter().enumerate().filter(|(_, (run, _))| !run.is_empty()).map(|(s, (run, _))| Reverse((run.hashes[0], s, 0))).collect();
        while let Some(Reverse((hash, s, i))) = next.pop() {
            let (run, base) = &sources[s];
            let address = base | run.addresses[i];
            if keep.contains((address >> 32) as u32) {
                hashes.push(hash);
                bytes.extend_from_slice(run.id(i));
                starts.push(bytes.len());
                addresses.push(address);
            }
            if i + 1 < run.len() {
                next.push(Reverse((run.hashes[i + 1], s, i + 1)));
            }
        }
        let (buckets, bucket_shift) = bucketed(&hashes);
        // A segment's run answers by its fragments, not by a row count.
        let rows_read = addresses.len();
        KeyRun { fragments: keep, rows_read, hashes, buckets, bucket_shift, bytes, starts, addresses }
    }

    /// This run of one fragment with row offsets for addresses, so it
    /// answers for the fragment under whatever id it has.
    pub fn into_fragment_run(mut self) -> KeyRun {
        self.addresses.iter_mut().for_each(|address| *address &= u64::from(u32::MAX));
        self.fragments = RoaringBitmap::new();
        self
    }

}

/// Adds up what [`KeyRun::find_sorted`] finds in each of `runs` (each with
/// its base), the keys dealt out to [`KEY_LOOKUP_THREADS`] threads: a
/// probe is a cache miss more than work, so the misses of two cores overlap.
pub fn find_in_runs(runs: &[(Arc<KeyRun>, u64)], keys: &[(u64, &[u8])]) -> RoaringTreemap {
    dealt_out(runs, keys, |run, base, keys, _, found: &mut RoaringTreemap| run.find_sorted(keys, base, found), |found, other| found | other)
}

/// What [`KeyRun::find_each`] finds in each of `runs`: (index in `keys`,
/// address) pairs, the keys dealt out as [`find_in_runs`] deals them.
pub fn find_pairs_in_runs(runs: &[(Arc<KeyRun>, u64)], keys: &[(u64, &[u8])]) -> Vec<(usize, u64)> {
    dealt_out(
        runs,
        keys,
        |run, base, keys, first, found: &mut Vec<(usize, u64)>| run.find_each(keys, base, |k, address| found.push((first + k, address))),
        |mut found, other| {
            found.extend(other);
            found
        },
    )
}

/// `find` of every run with a share of `keys` (a contiguous range of the
/// hash order, so a thread reads its own part of each run; given with the
/// index of its first key) on each of up to [`KEY_LOOKUP_THREADS`] threads,
/// the shares' findings joined by `join`. Keys, not runs, are dealt out:
/// one run is usually most of a table (its oldest segment's), and its
/// probes, out of cache, are most of the time.
fn dealt_out<T: Default + Send>(
    runs: &[(Arc<KeyRun>, u64)],
    keys: &[(u64, &[u8])],
    find: impl Fn(&KeyRun, u64, &[(u64, &[u8])], usize, &mut T) + Sync,
    join: impl Fn(T, T) -> T,
) -> T {
    let share = |range: std::ops::Range<usize>| {
        let mut found = T::default();
        for (run, base) in runs {
            find(run, *base, &keys[range.clone()], range.start, &mut found);
        }
        found
    };
    let threads = (keys.len() / MIN_KEYS_PER_LOOKUP_THREAD).clamp(1, KEY_LOOKUP_THREADS);
    if threads == 1 || runs.is_empty() {
        return share(0..keys.len());
    }
    let per_thread = keys.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let share = &share;
        let others: Vec<_> = (1..threads)
            .map(|n| scope.spawn(move || share(n * per_thread..((n + 1) * per_thread).min(keys.len()))))
            .collect();
        others.into_iter().fold(share(0..per_thread), |found, other| join(found, other.join().expect("a key lookup thread")))
    })
}

/// Hashes per bucket a run aims at: one or two cache lines per lookup.
const HASHES_PER_BUCKET: usize = 4;

/// The bucket starts of `hashes` (ascending) and the shift that gives a
/// hash's bucket: 2^k buckets for the top k bits, about
/// [`HASHES_PER_BUCKET`] hashes each (4 bytes per bucket).
fn bucketed(hashes: &[u64]) -> (Vec<u32>, u32) {
    assert!(u32::try_from(hashes.len()).is_ok(), "a run holds fewer than 2^32 rows");
    let bits = (hashes.len() / HASHES_PER_BUCKET).max(2).next_power_of_two().trailing_zeros();
    let shift = u64::BITS - bits;
    let mut buckets = Vec::with_capacity((1 << bits) + 1);
    let mut next = 0;
    for bucket in 0..1u64 << bits {
        while next < hashes.len() && hashes[next] >> shift < bucket {
            next += 1;
        }
        buckets.push(next as u32);
    }
    buckets.push(hashes.len() as u32);
    (buckets, shift)
}

/// What this process keeps for its merges: runs, a segment's by its uuid, a
/// fragment's (one no segment covers yet) by its data file, whose name is
/// unique and whose rows never change; and the newest deletion vector its
/// merges wrote for a fragment, so the next merge that touches the fragment
/// reads it from memory, not from the store (Lance's cache holds only the
/// vectors it read).
pub struct KeyRuns {
    /// By segment uuid (of the `_id` index: a run of any key holds the
    /// fragments an `_id` segment covers) and key.
    segments: Mutex<HashMap<(u128, Key), Arc<KeyRun>>>,
    /// By data file and key.
    fragments: Mutex<HashMap<(String, Key), Arc<KeyRun>>>,
    /// By data file: the deletion file written and the rows it deletes. A
    /// fragment whose version names another deletion file (another host's,
    /// an older version's) is read from the store.
    deletions: Mutex<HashMap<String, (DeletionFile, Arc<RoaringBitmap>)>>,
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
        KeyRuns { segments: Mutex::default(), fragments: Mutex::default(), deletions: Mutex::default(), max_rows }
    }

    /// The runs of `key` of `segments`, if every one has a run.
    pub fn of(&self, segments: &[&IndexMetadata], key: &Key) -> Option<Vec<Arc<KeyRun>>> {
        let runs = self.segments.lock().expect("key runs");
        segments.iter().map(|segment| runs.get(&(segment.uuid.as_u128(), key.clone())).cloned()).collect()
    }

    pub fn has(&self, segment: &IndexMetadata, key: &Key) -> bool {
        self.segments.lock().expect("key runs").contains_key(&(segment.uuid.as_u128(), key.clone()))
    }

    /// The run of `key` of `fragment`, if there is one for every row it holds.
    pub fn of_fragment(&self, fragment: &Fragment, key: &Key) -> Option<Arc<KeyRun>> {
        let run = self.fragments.lock().expect("key runs").get(&(fragment_key(fragment)?.to_owned(), key.clone())).cloned()?;
        (Some(run.rows_read) == fragment.physical_rows).then_some(run)
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
    pub fn rows_replaced(&self, covered: &RoaringBitmap, fragments: &[Fragment], key: &Key) -> u64 {
        let segments: usize = self
            .segments
            .lock()
            .expect("key runs")
            .iter()
            .filter(|((_, of), run)| of == key && run.fragments.is_subset(covered))
            .map(|(_, run)| run.len())
            .sum();
        let fragment_runs: usize = fragments
            .iter()
            .filter(|fragment| covered.contains(fragment.id as u32))
            .filter_map(|fragment| self.of_fragment(fragment, key))
            .map(|run| run.len())
            .sum();
        (segments + fragment_runs) as u64
    }

    /// Runs that together hold every row of the fragments `keep` names,
    /// each with its base, if there are such: segment runs none of whose
    /// listed fragments (of `fragments`, a version's) lies outside `keep`,
    /// largest first and never two for one fragment, then the fragments'
    /// own runs. What [`KeyRun::merged`] merges into a fold's run.
    pub fn covering(&self, keep: &RoaringBitmap, fragments: &[Fragment], key: &Key) -> Option<Vec<(Arc<KeyRun>, u64)>> {
        let listed: RoaringBitmap = fragments.iter().map(|fragment| fragment.id as u32).collect();
        // Each with the fragments it holds that the version still lists.
        let mut segments: Vec<(Arc<KeyRun>, RoaringBitmap)> = self
            .segments
            .lock()
            .expect("key runs")
            .iter()
            .filter(|((_, of), _)| of == key)
            .map(|(_, run)| (run.clone(), &run.fragments & &listed))
            // A run of fragments all removed since (a segment folded away,
            // not yet dropped) holds nothing to keep.
            .filter(|(_, live)| !live.is_empty() && live.is_subset(keep))
            .collect();
        segments.sort_by_key(|(run, _)| std::cmp::Reverse(run.len()));
        let (mut sources, mut answered) = (Vec::new(), RoaringBitmap::new());
        for (run, live) in segments {
            if live.is_disjoint(&answered) {
                answered |= live;
                sources.push((run, 0));
            }
        }
        for fragment in fragments.iter().filter(|f| keep.contains(f.id as u32) && !answered.contains(f.id as u32)) {
            sources.push((self.of_fragment(fragment, key)?, fragment.id << 32));
        }
        Some(sources)
    }

    /// Keeps `run` for `segment` if it fits once the runs of `replaced`
    /// rows are dropped; whether it was kept.
    pub fn insert(&self, segment: &IndexMetadata, key: &Key, run: KeyRun, replaced: u64) -> bool {
        if !self.room_for(run.len() as u64, replaced) {
            return false;
        }
        self.segments.lock().expect("key runs").insert((segment.uuid.as_u128(), key.clone()), Arc::new(run));
        true
    }

    /// Keeps `run` (offsets for addresses) of `key` for `fragment` if it
    /// fits once the runs of `replaced` rows are dropped; whether it was kept.
    pub fn insert_fragment(&self, fragment: &Fragment, key: &Key, run: KeyRun, replaced: u64) -> bool {
        let Some(file) = fragment_key(fragment) else { return false };
        if Some(run.rows_read) != fragment.physical_rows || !self.room_for(run.len() as u64, replaced) {
            return false;
        }
        self.fragments.lock().expect("key runs").insert((file.to_owned(), key.clone()), Arc::new(run));
        true
    }

    /// The rows `fragment` deletes, if this process wrote the deletion file
    /// its version names.
    pub fn deleted_rows(&self, fragment: &Fragment) -> Option<Arc<RoaringBitmap>> {
        let file = fragment.deletion_file.as_ref()?;
        let deletions = self.deletions.lock().expect("key runs");
        let (written, rows) = deletions.get(fragment_key(fragment)?)?;
        (written == file).then(|| rows.clone())
    }

    /// Keeps the deletion vector just written for `fragment` (whose
    /// metadata names its deletion file).
    pub fn keep_deletions(&self, fragment: &Fragment, rows: Arc<RoaringBitmap>) {
        if let (Some(key), Some(file)) = (fragment_key(fragment), fragment.deletion_file.clone()) {
            self.deletions.lock().expect("key runs").insert(key.to_owned(), (file, rows));
        }
    }

    /// Drops the runs of segments and of uncovered fragments no head lists
    /// (folded or compacted away, or of a branch deleted since), and the
    /// deletion vectors of fragments no head lists at all.
    pub fn retain<'a>(
        &self,
        segments: impl IntoIterator<Item = &'a IndexMetadata>,
        uncovered: impl IntoIterator<Item = &'a Fragment>,
        listed: impl IntoIterator<Item = &'a Fragment>,
    ) {
        let segments: HashSet<u128> = segments.into_iter().map(|segment| segment.uuid.as_u128()).collect();
        self.segments.lock().expect("key runs").retain(|(segment, _), _| segments.contains(segment));
        let uncovered: HashSet<&str> = uncovered.into_iter().filter_map(fragment_key).collect();
        self.fragments.lock().expect("key runs").retain(|(file, _), _| uncovered.contains(file.as_str()));
        let listed: HashSet<&str> = listed.into_iter().filter_map(fragment_key).collect();
        self.deletions.lock().expect("key runs").retain(|file, _| listed.contains(file.as_str()));
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

    /// Keys enough for every lookup thread are dealt out, and what each
    /// share finds carries its key's index in the whole lookup.
    #[test]
    fn keys_dealt_out_find_what_one_thread_finds() {
        let stored: Vec<String> = (0..10_000).map(|i| format!("k{i}")).collect();
        let ids: Vec<&str> = stored.iter().map(String::as_str).collect();
        let (first, second) = ids.split_at(6_000);
        let runs = [
            (Arc::new(KeyRun::of_rows(first, &HashedIds::of(first).rows)), 1u64 << 32),
            (Arc::new(KeyRun::of_rows(second, &HashedIds::of(second).rows)), 2u64 << 32),
        ];
        let wanted: Vec<String> = (0..2 * KEY_LOOKUP_THREADS * MIN_KEYS_PER_LOOKUP_THREAD).map(|i| format!("k{}", i * 3)).collect();
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let hashed = HashedIds::of(&wanted);
        let address_of = |id: &str| {
            let i: u64 = id[1..].parse().unwrap();
            if i < 6_000 { 1 << 32 | i } else { 2 << 32 | (i - 6_000) }
        };
        let expected: RoaringTreemap = wanted.iter().filter(|id| id[1..].parse::<u64>().unwrap() < 10_000).map(|id| address_of(id)).collect();
        assert_eq!(find_in_runs(&runs, &hashed.sorted), expected);
        let pairs = find_pairs_in_runs(&runs, &hashed.sorted);
        assert_eq!(pairs.len() as u64, expected.len());
        for (k, address) in pairs {
            assert_eq!(address_of(std::str::from_utf8(hashed.sorted[k].1).unwrap()), address, "key {k}");
        }
    }

    proptest! {
        /// A run finds exactly the rows a linear scan finds, duplicates included.
        #[test]
        fn finds_what_a_scan_finds(
            stored in proptest::collection::vec("[a-d]{0,3}", 0..1000),
            wanted in proptest::collection::btree_set("[a-d]{0,3}", 0..40),
            fragment in 0u64..4,
        ) {
            let stored_ids: Vec<&str> = stored.iter().map(String::as_str).collect();
            let run = KeyRun::of_rows(&stored_ids, &HashedIds::of(&stored_ids).rows);
            let wanted_ids: Vec<&str> = wanted.iter().map(String::as_str).collect();
            let mut found = RoaringTreemap::new();
            run.find_sorted(&HashedIds::of(&wanted_ids).sorted, fragment << 32, &mut found);
            let expected: RoaringTreemap =
                stored.iter().enumerate().filter(|(_, id)| wanted.contains(*id)).map(|(offset, _)| fragment << 32 | offset as u64).collect();
            prop_assert_eq!(found, expected);
        }
    }
}
