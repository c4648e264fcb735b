//! A map from strings (ids, unique tuples) to values for the batch checks.
//!
//! Keys are copied into one contiguous arena, so lookups touch a few cache
//! lines instead of chasing pointers into a 32 MiB batch. The core may not use
//! randomness, so the hash is fixed and an attacker could choose keys that
//! collide: if any probe sequence grows past [`MAX_PROBE`] the map moves every
//! entry into a `BTreeMap`, whose cost is O(log n) whatever the keys. Results
//! never depend on which representation is in use. More in lib.rs.

use std::collections::BTreeMap;

use crate::words::{half, same_bytes, word};

/// Longest probe sequence tolerated before falling back to the ordered map.
const MAX_PROBE: usize = 64;
const MIN_CAPACITY: usize = 16;
/// [`StrMap::clear`] empties slot by slot, not the whole table, when fewer
/// than one slot in this many holds a key.
const SPARSE_CLEAR: usize = 8;
/// Most key bytes the open-addressed table holds: its offsets are `u32`.
const MAX_ARENA_BYTES: usize = u32::MAX as usize;
/// Most keys [`StrMap::contains_each`] looks up, or [`KeyGroup`] holds, at once.
pub const LOOKUP_GROUP: usize = 32;

fn hash(key: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let word = |at: usize| word(key, at);
    let half = |at: usize| u64::from(half(key, at));
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let n = key.len();
    let mut h = n as u64;
    // The last bytes without a copy: the 8 that end the key (overlapping
    // the words before them; the length is mixed in already), or two
    // halves, or the few bytes of a key under 4 long. The first word is
    // taken before the loop, which a key under 16 bytes (most ids) then
    // never enters: every loop turn costs an epoch check in wasmtime's code.
    let tail = match n {
        8.. => {
            h = mix(h, word(0));
            let mut at = 8;
            while at + 8 <= n {
                h = mix(h, word(at));
                at += 8;
            }
            if at < n { word(n - 8) } else { 0 }
        }
        4..8 => half(0) | half(n - 4) << 32,
        _ => key.iter().fold(0, |w, &b| w << 8 | u64::from(b)),
    };
    h = mix(h, tail);
    // Murmur3's finalizer: every input bit reaches the low bits that pick slots.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[derive(Clone, Copy)]
struct Slot {
    /// High half of the key's hash; compared before the key itself.
    tag: u32,
    /// Index into `entries` plus one; 0 = empty.
    entry: u32,
}

const EMPTY: Slot = Slot { tag: 0, entry: 0 };

/// 24 bytes with an 8-byte value (32 with `usize` offsets): a batch has an
/// entry per id, and writing them is a good part of its state's cache
/// misses. The arena's offsets fit in `u32`: a map whose keys would pass
/// 4 GiB moves to the ordered map first.
struct Entry<V> {
    hash: u64,
    start: u32,
    len: u32,
    value: V,
}

impl<V> Entry<V> {
    /// Where the entry's key is in the arena.
    fn key_range(&self) -> std::ops::Range<usize> {
        let start = self.start as usize;
        start..start + self.len as usize
    }
}

pub struct StrMap<V> {
    slots: Vec<Slot>,
    entries: Vec<Entry<V>>,
    arena: Vec<u8>,
    ordered: Option<BTreeMap<Box<str>, V>>,
    /// [`MAX_ARENA_BYTES`], except in a test of the bound
    /// ([`StrMap::with_arena_bound`]).
    max_arena_bytes: usize,
}

/// Where a key is, or would go, in the open-addressed table.
enum Probe {
    Found(usize),
    Vacant(usize),
    TooLong,
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        StrMap::with_capacity(0)
    }
}

impl<V> StrMap<V> {
    pub fn with_capacity(n: usize) -> Self {
        let slots = (n * 2).next_power_of_two().max(MIN_CAPACITY);
        StrMap { slots: vec![EMPTY; slots], entries: Vec::with_capacity(n), arena: Vec::new(), ordered: None, max_arena_bytes: MAX_ARENA_BYTES }
    }

    /// An empty map whose open-addressed table holds at most `bytes` of
    /// keys, so a test reaches the bound without 4 GiB of them.
    #[cfg(test)]
    fn with_arena_bound(bytes: usize) -> Self {
        StrMap { max_arena_bytes: bytes, ..StrMap::with_capacity(0) }
    }

    fn key(&self, e: &Entry<V>) -> &[u8] {
        &self.arena[e.key_range()]
    }

    fn probe(&self, h: u64, key: &[u8]) -> Probe {
        let mask = self.slots.len() - 1;
        let tag = (h >> 32) as u32;
        let mut slot = h as usize & mask;
        for _ in 0..MAX_PROBE {
            let s = self.slots[slot];
            if s.entry == 0 {
                return Probe::Vacant(slot);
            }
            if s.tag == tag {
                let e = &self.entries[s.entry as usize - 1];
                if e.hash == h && same_bytes(self.key(e), key) {
                    return Probe::Found(s.entry as usize - 1);
                }
            }
            slot = (slot + 1) & mask;
        }
        Probe::TooLong
    }

    fn fall_back(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        let arena = std::mem::take(&mut self.arena);
        self.slots = Vec::new();
        self.ordered = Some(
            entries
                .into_iter()
                .map(|e| {
                    let key = std::str::from_utf8(&arena[e.key_range()]).expect("keys are str");
                    (Box::from(key), e.value)
                })
                .collect(),
        );
    }

    /// Empties the map and keeps its memory for the next batch's keys (a
    /// [`crate::Scratch`] keeps its maps between batches). A table sparse
    /// for its keys (a small batch after a large one) has only its used
    /// slots emptied, so clearing costs what the last batch put in, not
    /// what the largest one did.
    pub fn clear(&mut self) {
        // Only the fallback leaves the table empty.
        if self.ordered.take().is_some() {
            self.slots = vec![EMPTY; MIN_CAPACITY];
        } else if self.entries.len() * SPARSE_CLEAR < self.slots.len() {
            let mask = self.slots.len() - 1;
            for (i, e) in self.entries.iter().enumerate() {
                let mut slot = e.hash as usize & mask;
                while self.slots[slot].entry != i as u32 + 1 {
                    slot = (slot + 1) & mask;
                }
                self.slots[slot] = EMPTY;
            }
        } else {
            self.slots.fill(EMPTY);
        }
        self.entries.clear();
        self.arena.clear();
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        self.slots = vec![EMPTY; size];
        for (i, e) in self.entries.iter().enumerate() {
            let mut slot = e.hash as usize & (size - 1);
            while self.slots[slot].entry != 0 {
                slot = (slot + 1) & (size - 1);
            }
            self.slots[slot] = Slot { tag: (e.hash >> 32) as u32, entry: i as u32 + 1 };
        }
    }

    /// Whether the map holds no key. An empty map answers lookups without
    /// hashing (the ids of a node type with no row in the batch, which
    /// every endpoint of a batch of edges is looked up among), and its
    /// caller need not gather keys for [`StrMap::contains_each`].
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.ordered.as_ref().is_none_or(BTreeMap::is_empty)
    }

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&V> {
        if self.is_empty() {
            return None;
        }
        if let Some(tree) = &self.ordered {
            return tree.get(key);
        }
        match self.probe(hash(key.as_bytes()), key.as_bytes()) {
            Probe::Found(e) => Some(&self.entries[e].value),
            // A lookup never needs the fallback: inserts already bound probes.
            Probe::Vacant(_) | Probe::TooLong => None,
        }
    }

    /// The first two stages of looking up a group of keys: every key's hash
    /// and first slot, then the entry each first slot names when its tag
    /// matches. Staged, so that the keys' cache misses overlap instead of
    /// running one after the other.
    fn first_reads<'m>(
        &'m self,
        keys: &[&str],
        hashes: &mut [u64; LOOKUP_GROUP],
        first: &mut [Slot; LOOKUP_GROUP],
    ) -> [Option<&'m Entry<V>>; LOOKUP_GROUP] {
        let mask = self.slots.len() - 1;
        for ((key, h), slot) in keys.iter().zip(hashes.iter_mut()).zip(first.iter_mut()) {
            *h = hash(key.as_bytes());
            *slot = self.slots[*h as usize & mask];
        }
        let mut entries = [None; LOOKUP_GROUP];
        for ((h, slot), entry) in hashes.iter().zip(first.iter()).take(keys.len()).zip(&mut entries) {
            if slot.entry != 0 && slot.tag == (h >> 32) as u32 {
                *entry = Some(&self.entries[slot.entry as usize - 1]);
            }
        }
        entries
    }

    /// Whether each of `keys` is in the map. The keys are looked up in
    /// stages (every first slot, then every entry, then every key's bytes):
    /// a batch's endpoints are looked up this way (their caller asks
    /// [`StrMap::is_empty`] first, so an empty map is not tested here).
    pub fn contains_each(&self, keys: &[&str], found: &mut [bool]) {
        assert!(keys.len() == found.len() && keys.len() <= LOOKUP_GROUP, "one flag per key, at most a group");
        if let Some(tree) = &self.ordered {
            for (key, found) in keys.iter().zip(found) {
                *found = tree.contains_key(*key);
            }
            return;
        }
        let (mut hashes, mut first) = ([0u64; LOOKUP_GROUP], [EMPTY; LOOKUP_GROUP]);
        let entries = self.first_reads(keys, &mut hashes, &mut first);
        for (((key, h), (slot, entry)), found) in keys.iter().zip(&hashes).zip(first.iter().zip(&entries)).zip(found) {
            *found = match entry {
                Some(e) if e.hash == *h && same_bytes(self.key(e), key.as_bytes()) => true,
                // The first slot is empty: the key is absent.
                _ if slot.entry == 0 => false,
                // Someone else's slot: walk the probe sequence.
                _ => matches!(self.probe(*h, key.as_bytes()), Probe::Found(_)),
            };
        }
    }

    /// Hashes `group`'s keys and reads, in the stages of
    /// [`StrMap::contains_each`] (without walking a probe sequence), what
    /// inserting them will read first: their inserts, one by one in order
    /// ([`StrMap::insert_new_hashed`]), then find it in cache instead of
    /// waiting for one miss per key. Reads only: what an insert does does
    /// not depend on it.
    pub fn read_ahead(&self, group: &mut KeyGroup<'_>) {
        let keys = &group.keys[..group.len];
        if self.ordered.is_some() {
            // The ordered map does not use hashes.
            return;
        }
        let mut first = [EMPTY; LOOKUP_GROUP];
        let entries = self.first_reads(keys, &mut group.hashes, &mut first);
        let mut same = 0usize;
        for (key, entry) in keys.iter().zip(&entries) {
            if let Some(e) = entry {
                same += usize::from(same_bytes(self.key(e), key.as_bytes()));
            }
        }
        // Used, so the reads above are not optimised away.
        std::hint::black_box(same);
    }

    /// Inserts `key → value` if `key` is absent and returns `None`;
    /// otherwise leaves the map alone and returns the present value.
    #[cfg(test)]
    pub fn insert_new(&mut self, key: &str, value: V) -> Option<&mut V> {
        self.insert_new_hashed(key, hash(key.as_bytes()), value)
    }

    /// [`StrMap::insert_new`] of a key whose hash `h` is known (from
    /// [`StrMap::read_ahead`]).
    pub fn insert_new_hashed(&mut self, key: &str, h: u64, value: V) -> Option<&mut V> {
        if self.ordered.is_none() {
            debug_assert_eq!(h, hash(key.as_bytes()), "the key's own hash");
            match self.probe(h, key.as_bytes()) {
                Probe::Found(e) => return Some(&mut self.entries[e].value),
                Probe::Vacant(slot) if self.arena.len() + key.len() <= self.max_arena_bytes => {
                    let start = self.arena.len() as u32;
                    self.arena.extend_from_slice(key.as_bytes());
                    self.entries.push(Entry { hash: h, start, len: key.len() as u32, value });
                    self.slots[slot] = Slot { tag: (h >> 32) as u32, entry: self.entries.len() as u32 };
                    if self.entries.len() * 2 > self.slots.len() {
                        self.grow();
                    }
                    return None;
                }
                Probe::Vacant(_) | Probe::TooLong => self.fall_back(),
            }
        }
        let tree = self.ordered.as_mut().expect("fell back");
        match tree.entry(Box::from(key)) {
            std::collections::btree_map::Entry::Occupied(o) => Some(o.into_mut()),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(value);
                None
            }
        }
    }
}

/// Up to [`LOOKUP_GROUP`] keys bound for one map, in the order they are to
/// be inserted, each with the index of the row it came from; their hashes
/// come from [`StrMap::read_ahead`]. Refilled after each group
/// ([`KeyGroup::clear`]), so a batch makes one per map.
#[derive(Default)]
pub struct KeyGroup<'k> {
    keys: [&'k str; LOOKUP_GROUP],
    hashes: [u64; LOOKUP_GROUP],
    rows: [usize; LOOKUP_GROUP],
    len: usize,
}

impl<'k> KeyGroup<'k> {
    /// Adds row `row`'s key, if it has one (at most a group of them).
    pub fn push(&mut self, row: usize, key: Option<&'k str>) {
        if let Some(key) = key {
            (self.keys[self.len], self.rows[self.len]) = (key, row);
            self.len += 1;
        }
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Each key in order: its row, the key and its hash.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &'k str, u64)> + '_ {
        (0..self.len).map(|k| (self.rows[k], self.keys[k], self.hashes[k]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_finds() {
        let mut m = StrMap::with_capacity(0);
        for i in 0..1000 {
            assert!(m.insert_new(&format!("id-{i}"), i).is_none());
        }
        assert_eq!(m.insert_new("id-7", 0).copied(), Some(7));
        assert_eq!(m.get("id-999"), Some(&999));
        assert_eq!(m.get("id-1000"), None);
        assert!(m.ordered.is_none(), "ordinary ids never need the fallback");
    }

    /// Keys of every length around the hash's word and half-word reads,
    /// each next to keys that differ from it in one byte only.
    #[test]
    fn keys_of_every_length_are_told_apart() {
        let base = "abcdefghijklmnopqrstuvwxyz0123456789ABCD";
        let mut keys: Vec<String> = (0..=base.len()).map(|n| base[..n].to_string()).collect();
        for n in 1..=20 {
            for at in 0..n {
                let mut k = base.as_bytes()[..n].to_vec();
                k[at] = b'_';
                keys.push(String::from_utf8(k).unwrap());
            }
        }
        let mut m = StrMap::with_capacity(0);
        for (i, k) in keys.iter().enumerate() {
            assert!(m.insert_new(k, i).is_none(), "{k:?} is new");
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get(k), Some(&i), "{k:?}");
        }
        assert_eq!(m.get("abcdefgh__"), None);
        assert!(m.ordered.is_none(), "no probe sequence degrades");
    }

    #[test]
    fn contains_each_agrees_with_get() {
        let mut hashed = StrMap::with_capacity(0);
        for i in 0..500 {
            hashed.insert_new(&format!("id-{}", i * 2), i);
        }
        // The same keys, then keys whose first slots collide, so the map
        // falls back to the ordered one.
        let mut ordered = StrMap::with_capacity(0);
        for i in 0..500 {
            ordered.insert_new(&format!("id-{}", i * 2), i);
        }
        // Whatever the table grows to (at most 4,096 slots for these keys).
        let mask = (MIN_CAPACITY * 256 - 1) as u64;
        for key in (0..1_000_000).map(|i| format!("k{i}")).filter(|k| hash(k.as_bytes()) & mask == 0).take(MAX_PROBE + 1) {
            ordered.insert_new(&key, 0);
        }
        assert!(ordered.ordered.is_some(), "the colliding keys made the map fall back");
        let empty: StrMap<i32> = StrMap::with_capacity(0);
        // Present and absent keys, groups of every size, probe runs included.
        let keys: Vec<String> = (0..1000).map(|i| format!("id-{i}")).collect();
        for m in [&hashed, &ordered, &empty] {
            for size in [1, 7, LOOKUP_GROUP] {
                for group in keys.chunks(size) {
                    let group: Vec<&str> = group.iter().map(String::as_str).collect();
                    let mut found = vec![false; group.len()];
                    m.contains_each(&group, &mut found);
                    let expected: Vec<bool> = group.iter().map(|k| m.get(k).is_some()).collect();
                    assert_eq!(found, expected, "{group:?}");
                }
            }
        }
    }

    /// Groups read ahead, then inserted in order, give what inserting the
    /// keys one by one gives, duplicates inside a group and a fallback to
    /// the ordered map in the middle of one included.
    #[test]
    fn groups_read_ahead_insert_as_one_by_one() {
        let mask = (MIN_CAPACITY * 64 - 1) as u64;
        let colliding = (0..100_000).map(|i| format!("k{i}")).filter(|k| hash(k.as_bytes()) & mask == 0).take(80);
        let mut keys: Vec<String> = (0..300).map(|i| format!("id-{}", i % 170)).collect();
        keys.extend(colliding);
        keys.extend((0..100).map(|i| format!("id-{i}")));
        let (mut grouped, mut single) = (StrMap::with_capacity(4), StrMap::with_capacity(4));
        let mut group = KeyGroup::default();
        for (chunk, block) in keys.chunks(LOOKUP_GROUP).enumerate() {
            group.clear();
            for (k, key) in block.iter().enumerate() {
                group.push(chunk * LOOKUP_GROUP + k, Some(key));
            }
            grouped.read_ahead(&mut group);
            for (i, key, h) in group.iter() {
                assert_eq!(key, keys[i]);
                let got = grouped.insert_new_hashed(key, h, i).copied();
                assert_eq!(got, single.insert_new(key, i).copied(), "{key:?}");
            }
        }
        assert!(grouped.ordered.is_some(), "the colliding keys switched representation mid-group");
        for key in &keys {
            assert_eq!(grouped.get(key), single.get(key));
        }
    }

    /// A map cleared after holding many keys, few, or the ordered map's,
    /// answers each next set of keys as a new map does.
    #[test]
    fn a_cleared_map_answers_as_a_new_one() {
        let mask = (MIN_CAPACITY * 64 - 1) as u64;
        let colliding: Vec<String> =
            (0..100_000).map(|i| format!("k{i}")).filter(|k| hash(k.as_bytes()) & mask == 0).take(80).collect();
        let many: Vec<String> = (0..5000).map(|i| format!("id-{}", i % 3000)).collect();
        let few: Vec<String> = (0..40).map(|i| format!("id-{}", i % 30 + 2990)).collect();
        // The colliding keys (the ordered map, then cleared), few, many (a
        // dense clear next), many, few (a sparse clear before them), the
        // same few again (in the slots they held), many.
        let sets = [&colliding, &few, &many, &many, &few, &few, &many];
        let mut reused = StrMap::with_capacity(0);
        let (mut cleared_ordered, mut cleared_dense, mut cleared_sparse) = (false, false, false);
        for keys in sets {
            let sparse = reused.entries.len() * SPARSE_CLEAR < reused.slots.len();
            cleared_ordered |= reused.ordered.is_some();
            cleared_dense |= !reused.entries.is_empty() && !sparse;
            cleared_sparse |= !reused.entries.is_empty() && sparse;
            reused.clear();
            let mut new = StrMap::with_capacity(0);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(reused.insert_new(k, i).copied(), new.insert_new(k, i).copied(), "{k:?}");
            }
            for k in keys.iter().chain(&many).chain(&colliding) {
                assert_eq!(reused.get(k), new.get(k), "{k:?}");
            }
            // What it holds is this set's keys only, whatever came before.
            assert_eq!((reused.entries.len(), reused.arena.len()), (new.entries.len(), new.arena.len()));
        }
        assert!(cleared_ordered && cleared_dense && cleared_sparse, "every kind of clear ran");
    }

    #[test]
    fn keys_past_the_arena_bound_fall_back_to_the_ordered_map() {
        let mut m = StrMap::with_arena_bound(40);
        let keys: Vec<String> = (0..20).map(|i| format!("key-{i}")).collect();
        for (i, k) in keys.iter().enumerate() {
            assert!(m.insert_new(k, i).is_none(), "{k:?} is new");
            assert_eq!(m.ordered.is_some(), m.arena.is_empty(), "the arena holds the keys until the map falls back");
        }
        assert!(m.ordered.is_some(), "keys past the bound switch representation");
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get(k), Some(&i));
            assert_eq!(m.insert_new(k, 0).copied(), Some(i));
        }
        let mut found = [false; 2];
        m.contains_each(&[&keys[3], "absent"], &mut found);
        assert_eq!(found, [true, false]);
    }

    #[test]
    fn colliding_keys_fall_back_to_the_ordered_map() {
        let mut m = StrMap::with_capacity(4);
        // Keys whose hashes share their low bits probe the same run.
        let mask = (MIN_CAPACITY * 64 - 1) as u64;
        let colliding: Vec<String> =
            (0..100_000).map(|i| format!("k{i}")).filter(|k| hash(k.as_bytes()) & mask == 0).take(80).collect();
        assert!(colliding.len() > MAX_PROBE, "found {}", colliding.len());
        for (i, k) in colliding.iter().enumerate() {
            assert!(m.insert_new(k, i).is_none());
        }
        assert!(m.ordered.is_some(), "a long probe sequence switches representation");
        let mut found = [false; 2];
        m.contains_each(&[&colliding[0], "absent"], &mut found);
        assert_eq!(found, [true, false]);
        for (i, k) in colliding.iter().enumerate() {
            assert_eq!(m.get(k), Some(&i));
            assert_eq!(m.insert_new(k, 0).copied(), Some(i));
        }
    }
}
