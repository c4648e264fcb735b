//! The checks that need every record (SPEC §2.5): duplicate ids and
//! folding, table bounds, `@unique`, endpoints, `@card`.
//!
//! They run as the accepted rows arrive ([`Accepted::push`]), while their
//! bytes are still in cache (passes over the rows after the last line
//! re-read every id and endpoint from the batch, a cache miss each). A
//! table's rows wait in groups of [`LOOKUP_GROUP`]: when a group is full
//! ([`Accepted::settle_waiting`]), its ids are folded, then its `@unique`
//! tuples and `@card` sources counted and its sizes added to its table's
//! totals, each map's keys read ahead together ([`StrMap::read_ahead`]) and
//! then inserted one by one in row order, so every insert gives what it
//! gave row by row, with the group's cache misses overlapping instead of
//! one waited for per key. An edge's endpoints wait likewise, then are
//! looked up among the ids seen so far (its node type's waiting rows are
//! settled first). What a later row can still change is settled in
//! [`Accepted::finish`]: an endpoint not seen yet is looked up again among
//! all the ids, and a table in which a row was folded away or refused as a
//! duplicate has its `@unique`, `@card` and sizes counted again over the
//! rows that survive (the streamed counts included the row that died). So
//! the report is the one a pass over the surviving rows would give, and the
//! sink orders errors itself, whatever order they are found in.
//!
//! Validation's first pass keeps no rows ([`Keep::Count`]): wherever a check
//! must name a row (a duplicate id, a `@unique` clash, a `@card` excess, a
//! bound exceeded, a dangling endpoint) it gives up instead, and the batch is
//! run again by a pass that keeps them (`batch::run`). It counts on past a
//! merge's fold ([`Accepted::settle_waiting`]). More in lib.rs.
//!
//! One file of about 800 lines: every check is fed by the same
//! `Accepted::push` and settled by the same grouping, and a fold or a
//! duplicate changes what `@unique`, `@card` and the bounds count, so the
//! checks are one state machine, not separable passes.

use std::borrow::Cow;
use std::sync::Arc;

use bumpalo::Bump;

use crate::options::{Mode, Options};
use crate::record::{Keep, ReadRow, Row, RowOf, Rows, SpareChunks, emptied, unique_key};
use crate::report::{End, ErrorCode, ErrorSink, ExternalRef, LimitDetail, Position, echo};
use crate::rows::keyed_parse_bytes;
use crate::schema::{Schema, TypeDef, UniqueMember};
use crate::strmap::{KeyGroup, LOOKUP_GROUP, StrMap};
use crate::value::Val;

/// A batch's accepted rows per table (indexed like `Schema::types`), with
/// the batch checks run as they arrive.
pub struct Accepted<'s, 'a> {
    schema: &'s Schema,
    mode: Mode,
    /// What rows keep of their values.
    keep: Keep,
    /// Where a row's owned strings (unescaped or derived ids and
    /// endpoints, rendered tuples) go, so a row keeps `&str`s.
    texts: &'a Bump,
    rows: Vec<Rows<'a>>,
    tables: Vec<TableChecks<'a>>,
    /// The row being pushed: the rendered tuple of each `@unique` of its
    /// type (`None` when a member is null: the row is exempt).
    tuples: Vec<Option<&'a str>>,
    /// Per node type: edge endpoints to look up among its ids, a group at a time.
    pending: Vec<Vec<Unresolved<'a>>>,
    /// Per node type, in (line, end) order: edge endpoints that were not
    /// among its ids when looked up, or that `finish` takes from `pending`
    /// unlooked.
    unresolved: Vec<Vec<Unresolved<'a>>>,
    folded: u64,
    /// Rows are only counted ([`Keep::Count`]) and a check had to name one
    /// (a duplicate or folded id, a `@unique` or `@card` violation): the
    /// batch must be run again by a pass that keeps rows, so the rest of
    /// this one is not checked.
    gave_up: bool,
    /// Chunks of rows a past batch left, taken before new ones.
    spare: SpareChunks<'a>,
}

/// What a batch's checks leave for the next batch to work in (a
/// [`crate::Scratch`] keeps it between batches): each table's maps,
/// emptied chunks of rows, and the emptied lists of endpoints (a batch of
/// edges whose nodes are stored puts every endpoint in one).
#[derive(Default)]
pub struct Recycled<'a> {
    maps: Vec<TableMaps>,
    chunks: SpareChunks<'a>,
    endpoints: Vec<Vec<Unresolved<'a>>>,
}

impl<'a> Recycled<'a> {
    /// The same memory, with `rows`' chunks added, for a batch that
    /// borrows for `'b`.
    pub fn relent<'b>(self, rows: Vec<Rows<'_>>) -> Recycled<'b> {
        Recycled {
            maps: self.maps,
            chunks: self.chunks.relent().take_back(rows),
            endpoints: self.endpoints.into_iter().map(emptied).collect(),
        }
    }
}

/// What [`Accepted::finish`] gives: the rows that survive folding, in line
/// order, how many were folded away, and the endpoints left to the host.
pub struct Settled<'a> {
    pub tables: Vec<Rows<'a>>,
    pub folded: u64,
    pub external_refs: Vec<ExternalRef>,
    /// The checks' maps and the chunks of rows left unused, for the next
    /// batch (the rows' own chunks join them when the rows are done).
    pub recycled: Recycled<'a>,
}

struct TableChecks<'a> {
    /// Each id → the row that holds it now.
    ids: StrMap<usize>,
    /// Rows folded away or refused as duplicates.
    dead: Dead,
    /// The rows after the last full group: their ids are not folded yet,
    /// their tuples, sources and sizes not counted.
    waiting: Waiting<'a>,
    tallies: Tallies<'a>,
    /// The rows' sizes, summed (rows only counted: a bound from above once
    /// one was folded away, see [`Accepted::settle_waiting`]).
    arrow_bytes: u64,
    keyed_bytes: u64,
}

/// An edge's endpoint, with the id and the edge's line, so that looking it
/// up and listing it as an external ref read no row (48 bytes: a batch of
/// edges whose nodes are stored holds two per edge).
#[derive(Clone, Copy)]
struct Unresolved<'a> {
    table: usize,
    row: usize,
    end: End,
    id: &'a str,
    line: u64,
}

/// `@unique` tuples and `@card` sources of one table, counted in row order.
struct Tallies<'a> {
    /// Per `@unique`: each tuple → the first row with it (or, when that
    /// row died before the tuple came again, the row that came next).
    uniques: Vec<StrMap<usize>>,
    /// (unique, row, its tuple, the row that has the tuple already).
    clashes: Vec<(usize, usize, &'a str, usize)>,
    /// Per source: edges counted, when the type has `@card`.
    sources: Option<StrMap<u64>>,
    /// Rows at which their source passes `@card`.
    over_card: Vec<usize>,
}

/// A table's rows since the last full group of [`LOOKUP_GROUP`]: the keys
/// each of its maps will take, in row order, and the rows' sizes.
struct Waiting<'a> {
    len: usize,
    ids: KeyGroup<'a>,
    /// Per `@unique`: the rows' tuples (none when a member is null).
    tuples: Vec<KeyGroup<'a>>,
    /// The rows' sources, with the `@card` maximum they are counted
    /// against, when the type has one.
    sources: Option<(u64, KeyGroup<'a>)>,
    arrow_bytes: u64,
    keyed_bytes: u64,
}

impl<'a> Waiting<'a> {
    fn new(def: &TypeDef) -> Self {
        Waiting {
            len: 0,
            ids: KeyGroup::default(),
            tuples: def.uniques.iter().map(|_| KeyGroup::default()).collect(),
            sources: def.card_max.map(|max| (max, KeyGroup::default())),
            arrow_bytes: 0,
            keyed_bytes: 0,
        }
    }

    /// Adds row `i` (the one after the last waiting row) with its `@unique`
    /// tuples; true when the group is full.
    fn push(&mut self, i: usize, row: &Row<'a>, tuples: &[Option<&'a str>]) -> bool {
        self.ids.push(i, row.id);
        self.arrow_bytes += row.arrow_bytes;
        self.keyed_bytes += keyed_parse_bytes(row);
        self.push_counted(i, row, tuples)
    }

    /// Adds only what [`Tallies::count_group`] reads of row `i` (its tuples
    /// and source): a recount has folded the ids and summed the sizes.
    fn push_counted(&mut self, i: usize, row: &Row<'a>, tuples: &[Option<&'a str>]) -> bool {
        self.len += 1;
        for (group, &tuple) in self.tuples.iter_mut().zip(tuples) {
            group.push(i, tuple);
        }
        if let Some((_, sources)) = &mut self.sources {
            sources.push(i, Some(row.src));
        }
        self.len == LOOKUP_GROUP
    }

    /// Empties the group.
    fn clear(&mut self) {
        self.len = 0;
        self.ids.clear();
        self.tuples.iter_mut().for_each(KeyGroup::clear);
        self.sources.iter_mut().for_each(|(_, sources)| sources.clear());
        (self.arrow_bytes, self.keyed_bytes) = (0, 0);
    }
}

/// The maps of one table's checks (its ids, each `@unique`'s tuples, its
/// `@card` sources), which a [`crate::Scratch`] keeps between batches:
/// emptied, not freed, so the next batch finds them sized and mapped.
#[derive(Default)]
pub struct TableMaps {
    ids: StrMap<usize>,
    uniques: Vec<StrMap<usize>>,
    sources: Option<StrMap<u64>>,
}

/// Which rows of a table were folded away or refused as duplicates: a flag
/// per row up to the last of them (none died: no flag).
#[derive(Default)]
struct Dead(Vec<bool>);

impl Dead {
    fn mark(&mut self, i: usize) {
        if self.0.len() <= i {
            self.0.resize(i + 1, false);
        }
        self.0[i] = true;
    }

    #[inline]
    fn has(&self, i: usize) -> bool {
        self.0.get(i) == Some(&true)
    }

    fn any(&self) -> bool {
        !self.0.is_empty()
    }

    /// The flags, one per row of `rows` rows (none when none died).
    fn take_flags(&mut self, rows: usize) -> Vec<bool> {
        let mut flags = std::mem::take(&mut self.0);
        if !flags.is_empty() {
            flags.resize(rows, false);
        }
        flags
    }
}

impl TableMaps {
    /// These maps, emptied, as many as table `def` uses.
    fn emptied_for(mut self, def: &TypeDef) -> TableMaps {
        self.ids.clear();
        self.uniques.resize_with(def.uniques.len(), StrMap::default);
        self.uniques.iter_mut().for_each(StrMap::clear);
        let sources = self.sources.take();
        self.sources = def.card_max.map(|_| {
            let mut sources = sources.unwrap_or_default();
            sources.clear();
            sources
        });
        self
    }
}

impl<'a> Tallies<'a> {
    /// Counts again, over `rows` (the table's rows that survive), in the
    /// same maps emptied.
    fn recount(&mut self, def: &TypeDef, rows: &Rows<'a>) {
        self.uniques.iter_mut().for_each(StrMap::clear);
        self.sources.iter_mut().for_each(StrMap::clear);
        self.clashes.clear();
        self.over_card.clear();
        let (mut waiting, none_dead) = (Waiting::new(def), Dead::default());
        for (i, (row, tuples)) in rows.with_tuples().enumerate() {
            if waiting.push_counted(i, row, tuples) {
                self.count_group(&mut waiting, &none_dead);
                waiting.clear();
            }
        }
        self.count_group(&mut waiting, &none_dead);
    }

    /// Counts the `waiting` rows' tuples and sources in row order, one map
    /// at a time: the order of inserts into each map is the rows' order,
    /// and no map's result depends on another's. A row already `dead`
    /// (folded away) is not counted. A tuple whose row died since it was
    /// counted passes to the next row with it: while the dead row held it,
    /// no other row had it without a clash, so the next one clashes with
    /// none of the rows that survive. A source whose edge died since stays
    /// counted: the count bounds the surviving edges' from above, so an
    /// excess among them is never missed (only the first pass, which gives
    /// up at any excess, counts past a death).
    fn count_group(&mut self, waiting: &mut Waiting<'a>, dead: &Dead) {
        for ((u, seen), tuples) in self.uniques.iter_mut().enumerate().zip(&mut waiting.tuples) {
            seen.read_ahead(tuples);
            for (i, tuple, h) in tuples.iter() {
                if dead.has(i) {
                    continue;
                }
                if let Some(holder) = seen.insert_new_hashed(tuple, h, i) {
                    if dead.has(*holder) {
                        *holder = i;
                    } else {
                        self.clashes.push((u, i, tuple, *holder));
                    }
                }
            }
        }
        if let (Some(sources), Some((max, waiting_sources))) = (&mut self.sources, &mut waiting.sources) {
            sources.read_ahead(waiting_sources);
            for (i, src, h) in waiting_sources.iter() {
                if dead.has(i) {
                    continue;
                }
                let n = sources.insert_new_hashed(src, h, 1).map_or(1, |n| {
                    *n += 1;
                    *n
                });
                if n == *max + 1 {
                    self.over_card.push(i);
                }
            }
        }
    }

    fn report(&self, def: &TypeDef, rows: &Rows<'_>, sink: &mut ErrorSink) {
        for (u, i, tuple, earlier) in &self.clashes {
            let (members, row, earlier) = (&def.uniques[*u], &rows[*i], rows[*earlier].line);
            let path = match members.as_slice() {
                [UniqueMember::Prop(p)] => format!("/data/{}", def.props[*p].name),
                _ => String::new(),
            };
            let line = row.line;
            sink.push(at_row(row), ErrorCode::UniqueViolation, &path, || {
                let names: Vec<&str> = members
                    .iter()
                    .map(|m| match m {
                        UniqueMember::Prop(p) => def.props[*p].name.as_str(),
                        UniqueMember::Src => "src",
                        UniqueMember::Dst => "dst",
                    })
                    .collect();
                format!(
                    "line {line}: {} {} @unique({}) value {} is already used on line {earlier}",
                    def.kind.word(),
                    def.name,
                    names.join(", "),
                    echo(tuple)
                )
            });
        }
        let Some(max) = def.card_max else { return };
        for &i in &self.over_card {
            let row = &rows[i];
            let line = row.line;
            sink.push(at_row(row), ErrorCode::CardViolation, "/from", || {
                format!(
                    "line {line}: node {} has more than {max} {} edges in this batch; @card allows at most {max} per source",
                    echo(row.src),
                    def.name
                )
            });
        }
    }
}

impl<'s, 'a> Accepted<'s, 'a> {
    /// The checks of a batch of `schema`, in the maps and chunks of
    /// `recycled` (emptied first; a table without maps there gets new ones).
    pub fn new(schema: &'s Schema, mode: Mode, keep: Keep, texts: &'a Bump, recycled: Recycled<'a>) -> Self {
        let Recycled { maps, chunks: spare, endpoints } = recycled;
        let mut maps = maps.into_iter();
        let mut endpoints = endpoints.into_iter();
        Accepted {
            schema,
            mode,
            keep,
            texts,
            rows: schema.types.iter().map(|def| Rows::new(def, keep)).collect(),
            tuples: Vec::new(),
            tables: schema
                .types
                .iter()
                .map(|def| {
                    let TableMaps { ids, uniques, sources } = maps.next().unwrap_or_default().emptied_for(def);
                    TableChecks {
                        ids,
                        dead: Dead::default(),
                        waiting: Waiting::new(def),
                        tallies: Tallies { uniques, clashes: Vec::new(), sources, over_card: Vec::new() },
                        arrow_bytes: 0,
                        keyed_bytes: 0,
                    }
                })
                .collect(),
            pending: schema.types.iter().map(|_| endpoints.next().unwrap_or_default()).collect(),
            unresolved: schema.types.iter().map(|_| endpoints.next().unwrap_or_default()).collect(),
            folded: 0,
            gave_up: false,
            spare,
        }
    }

    /// Whether this pass, keeping no rows, met a check that names one: its
    /// batch must be run again by a pass that keeps rows.
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Whether rows are given whole values (blobs, vectors and lists built).
    pub fn keeps_values(&self) -> bool {
        self.keep.values()
    }

    /// Takes an accepted row of table `t`, whose values are `values` (taken
    /// when kept, else left for the next record), and checks it against the
    /// rows so far.
    pub fn push(&mut self, t: usize, row: ReadRow<'a>, values: &mut Vec<Val<'a>>, sink: &mut ErrorSink) {
        if self.gave_up {
            return;
        }
        let texts = self.texts;
        // Field by field, not through a `map` method on `RowOf`: that made
        // every caller copy the row first (+0.5 % of validating's
        // instructions on the bench batch, +0.27 % always inlined).
        let RowOf { line, offset, id, src, dst, arrow_bytes } = row;
        let row = Row {
            line,
            offset,
            id: id.map(|id| kept(texts, id)),
            src: kept(texts, src),
            dst: kept(texts, dst),
            arrow_bytes,
        };
        let schema = self.schema;
        let def = &schema.types[t];
        let i = self.rows[t].len();
        self.tuples.clear();
        for members in &def.uniques {
            let tuple = unique_key(members, values, row.src, row.dst).map(|tuple| kept(texts, tuple));
            self.tuples.push(tuple);
        }
        let full = self.tables[t].waiting.push(i, &row, &self.tuples);
        let (src, dst) = (row.src, row.dst);
        self.rows[t].push(def, row, values, self.tuples.drain(..), &mut self.spare);
        if full {
            self.settle_waiting(t, sink);
        }
        if let (Some(from), Some(to)) = (def.from, def.to) {
            for (end, node_type, id) in [(End::From, from, src), (End::To, to, dst)] {
                self.pending[node_type].push(Unresolved { table: t, row: i, end, id, line });
                if self.pending[node_type].len() == LOOKUP_GROUP {
                    self.look_up_pending(node_type, sink);
                }
            }
        }
    }

    /// Folds the ids of table `t`'s waiting rows, then counts their tuples,
    /// sources and sizes. Once a row of the table died, the counts stop:
    /// `finish` counts the table again over the rows that survive.
    ///
    /// A pass that keeps no rows has none to count again. It gives up at
    /// a duplicate id (its error names the earlier row) and at a `@unique`
    /// clash or a `@card` excess, and goes on counting past a fold: the
    /// row folded away passes its tuples on ([`Tallies::count_group`]), and
    /// its `@card` source and sizes stay counted, bounds from above of the
    /// surviving rows' (an excess or a bound they exceed is never missed,
    /// and one over the bounds only makes the pass give up).
    fn settle_waiting(&mut self, t: usize, sink: &mut ErrorSink) {
        let (def, mode, keeps_rows) = (&self.schema.types[t], self.mode, self.keep.rows());
        let rows = &self.rows[t];
        let TableChecks { ids, dead, tallies, waiting, arrow_bytes, keyed_bytes } = &mut self.tables[t];
        if waiting.len == 0 || self.gave_up {
            return;
        }
        ids.read_ahead(&mut waiting.ids);
        for (i, id, h) in waiting.ids.iter() {
            match ids.insert_new_hashed(id, h, i) {
                None => {}
                Some(_) if !keeps_rows && mode != Mode::Merge => {
                    self.gave_up = true;
                    return;
                }
                Some(earlier) if mode == Mode::Merge => {
                    dead.mark(*earlier);
                    *earlier = i;
                    self.folded += 1;
                }
                Some(earlier) => {
                    dead.mark(i);
                    let row = &rows[i];
                    let line = row.line;
                    let earlier_line = rows[*earlier].line;
                    sink.push(at_row(row), ErrorCode::DuplicateId, "/id", || {
                        format!(
                            "line {line}: {} {} id {} already appears on line {earlier_line}; ids are unique per type in {} mode (merge folds them: the last wins)",
                            def.kind.word(),
                            def.name,
                            echo(id),
                            mode.as_str()
                        )
                    });
                }
            }
        }
        if !keeps_rows || !dead.any() {
            tallies.count_group(waiting, dead);
            *arrow_bytes += waiting.arrow_bytes;
            *keyed_bytes += waiting.keyed_bytes;
            let named = !tallies.clashes.is_empty() || !tallies.over_card.is_empty();
            if named && !keeps_rows {
                self.gave_up = true;
            }
        }
        waiting.clear();
    }

    /// Looks the pending endpoints of `node_type` up among its ids so far
    /// (an id, once seen, stays: only "not seen yet" can change later),
    /// once its waiting rows' ids are in.
    fn look_up_pending(&mut self, node_type: usize, sink: &mut ErrorSink) {
        self.settle_waiting(node_type, sink);
        let mut pending = std::mem::take(&mut self.pending[node_type]);
        if self.tables[node_type].ids.is_empty() {
            // No id of the type yet (a batch of edges whose nodes are
            // stored): every endpoint is unresolved, its key never read.
            self.unresolved[node_type].append(&mut pending);
        } else {
            let mut keys = [""; LOOKUP_GROUP];
            for (key, u) in keys.iter_mut().zip(&pending) {
                *key = u.id;
            }
            let mut found = [false; LOOKUP_GROUP];
            self.tables[node_type].ids.contains_each(&keys[..pending.len()], &mut found[..pending.len()]);
            self.unresolved[node_type].extend(pending.iter().zip(found).filter(|(_, found)| !found).map(|(u, _)| *u));
            pending.clear();
        }
        self.pending[node_type] = pending;
    }

    /// The node type an endpoint names.
    fn node_type(&self, u: &Unresolved<'_>) -> usize {
        let def = &self.schema.types[u.table];
        match u.end {
            End::From => def.from.expect("an edge"),
            End::To => def.to.expect("an edge"),
        }
    }

    /// Settles what later rows could change and runs the bounds. A pass
    /// that keeps no rows gives its maps back instead (`Err`) when it gave
    /// up, or when an error here names a row: a bound exceeded (at the row
    /// where its total crosses it), a dangling endpoint (at its edge's row).
    pub fn finish(mut self, options: &Options, sink: &mut ErrorSink) -> Result<Settled<'a>, Recycled<'a>> {
        for t in 0..self.rows.len() {
            self.settle_waiting(t, sink);
        }
        if self.gave_up {
            return Err(self.recycled());
        }
        // Every id is in now: the endpoints still pending are looked up once
        // (`settle_endpoints`).
        for (unresolved, pending) in self.unresolved.iter_mut().zip(&mut self.pending) {
            unresolved.append(pending);
        }
        let schema = self.schema;
        let dead: Vec<Vec<bool>> =
            self.tables.iter_mut().zip(&self.rows).map(|(table, rows)| table.dead.take_flags(rows.len())).collect();
        let Ok(external_refs) = self.settle_endpoints(&dead, sink) else {
            return Err(self.recycled());
        };
        for (((def, table), rows), dead) in schema.types.iter().zip(&mut self.tables).zip(&mut self.rows).zip(dead) {
            if dead.is_empty() {
                continue;
            }
            rows.remove_flagged(def, &dead);
            // Rows only counted were counted past the fold (`settle_waiting`).
            if self.keep.rows() {
                table.tallies.recount(def, rows);
                table.arrow_bytes = rows.iter().map(|row| row.arrow_bytes).sum();
                table.keyed_bytes = rows.iter().map(keyed_parse_bytes).sum();
            }
        }
        for ((def, table), rows) in schema.types.iter().zip(&self.tables).zip(&self.rows) {
            table.tallies.report(def, rows, sink);
        }
        if check_bounds(schema, options, &self.tables, &self.rows, sink).is_err() {
            return Err(self.recycled());
        }
        let folded = self.folded;
        let rows = std::mem::take(&mut self.rows);
        Ok(Settled { tables: rows, folded, external_refs, recycled: self.recycled() })
    }

    /// The unresolved endpoints of the rows that survive (`dead` flags the
    /// others), once every id is in: each is among its node type's ids, or
    /// dangling (an error at its edge's row, in overwrite mode when the
    /// batch has rows of that type), or left to the host as an external
    /// ref, in report order (line, end).
    fn settle_endpoints(&self, dead: &[Vec<bool>], sink: &mut ErrorSink) -> Result<Vec<ExternalRef>, NeedsRows> {
        let schema = self.schema;
        // Each type's name once: every ref of a type shares it.
        let names: Vec<Arc<str>> = schema.types.iter().map(|def| Arc::from(def.name.as_str())).collect();
        // The refs in report order, (line, end), which is unique per ref:
        // only those keys, packed in one word, are sorted, and they come in
        // one ascending run per node type, which the stable sort merges. The
        // errors below may come in any order: the sink keeps and orders them
        // by their own key.
        let mut refs: Vec<(u64, &Unresolved)> = Vec::with_capacity(self.unresolved.iter().map(Vec::len).sum());
        for u in self.unresolved.iter().flatten() {
            if dead[u.table].get(u.row) == Some(&true) {
                continue;
            }
            let def = &schema.types[u.table];
            let (node_type, id) = (self.node_type(u), u.id);
            if self.tables[node_type].ids.get(id).is_some() {
                continue;
            }
            if self.mode == Mode::Overwrite && !self.rows[node_type].is_empty() {
                let node_name = &schema.types[node_type].name;
                let member = if u.end == End::From { "from" } else { "to" };
                // The error is at the edge's row: a pass that keeps none gives up.
                let row = self.rows[u.table].get(u.row).ok_or(NeedsRows)?;
                let line = row.line;
                sink.push(at_row(row), ErrorCode::DanglingEndpoint, &format!("/{member}"), || {
                    format!(
                        "line {line}: edge {} \"{member}\" is {}, but this overwrite replaces every {node_name} and that id is not in the batch",
                        def.name,
                        echo(id)
                    )
                });
                continue;
            }
            // A line number is below 2^63 (it counts bytes of one batch).
            refs.push((u.line << 1 | (u.end == End::To) as u64, u));
        }
        refs.sort_by_key(|&(line_end, _)| line_end);
        let external_refs = refs
            .iter()
            .map(|&(_, u)| {
                let (edge, node_type) = (names[u.table].clone(), names[self.node_type(u)].clone());
                ExternalRef { edge, end: u.end, node_type, id: u.id.into(), line: u.line }
            })
            .collect();
        Ok(external_refs)
    }

    /// The checks' maps, the spare chunks and the endpoint lists, emptied,
    /// for the next pass or batch.
    fn recycled(self) -> Recycled<'a> {
        let maps = self
            .tables
            .into_iter()
            .map(|table| TableMaps { ids: table.ids, uniques: table.tallies.uniques, sources: table.tallies.sources })
            .collect();
        let endpoints = self
            .pending
            .into_iter()
            .chain(self.unresolved)
            .map(|mut endpoints| {
                endpoints.clear();
                endpoints
            })
            .collect();
        Recycled { maps, chunks: self.spare, endpoints }
    }
}

/// A string the rows keep: borrowed from the batch as it is, else copied
/// into the batch's arena `texts` (most ids and endpoints are borrowed).
#[inline]
fn kept<'a>(texts: &'a Bump, text: Cow<'a, str>) -> &'a str {
    match text {
        Cow::Borrowed(text) => text,
        Cow::Owned(text) => copied(texts, text),
    }
}

/// [`kept`]'s copy, out of line, so that its three calls a row inline as a
/// test of the borrowed case (the common one).
#[inline(never)]
fn copied(texts: &Bump, text: String) -> &str {
    texts.alloc_str(&text)
}

fn at_row(row: &Row<'_>) -> Position {
    Position { line: row.line, offset: row.offset, column: 0 }
}

/// A check in [`Accepted::finish`] had to name a row, and the pass keeps
/// none ([`Keep::Count`]). (While rows arrive, the same is
/// [`Accepted::gave_up`]: the pass stops reading.)
struct NeedsRows;

/// When `total` is over `limit`: the row at which the running total of
/// `sized`, in line order, first exceeds it. Only a batch over the limit
/// pays for collecting and ordering the rows; rows that are only counted
/// cannot say where (`NeedsRows`).
fn crossing<'r, 'a: 'r>(
    total: u64,
    sized: impl Iterator<Item = (&'r Row<'a>, u64)>,
    limit: u64,
) -> Result<Option<(&'r Row<'a>, u64)>, NeedsRows> {
    if total <= limit {
        return Ok(None);
    }
    let mut sized: Vec<_> = sized.collect();
    sized.sort_by_key(|(row, _)| row.line);
    let mut running = 0;
    let (row, _) = sized
        .iter()
        .find(|(_, size)| {
            running += size;
            running > limit
        })
        .ok_or(NeedsRows)?;
    Ok(Some((row, total)))
}

/// The bounds on rows and bytes (SPEC §5), from the tables' totals; each
/// error names the row where its total crosses the bound, so a pass that
/// keeps no rows stops at the first (`NeedsRows`).
fn check_bounds(
    schema: &Schema,
    options: &Options,
    tables: &[TableChecks<'_>],
    rows: &[Rows<'_>],
    sink: &mut ErrorSink,
) -> Result<(), NeedsRows> {
    let limits = &options.limits;
    let keyed = options.mode != Mode::Overwrite;
    let all = || rows.iter().flat_map(Rows::iter);
    for ((def, table), rows) in schema.types.iter().zip(tables).zip(rows) {
        if keyed && rows.len() as u64 > limits.max_table_rows {
            let row = rows.get(limits.max_table_rows as usize).ok_or(NeedsRows)?;
            sink.push_limit(
                at_row(row),
                ErrorCode::TableRowsLimit,
                LimitDetail { resource: format!("rows:{}", def.name), limit: limits.max_table_rows, actual: rows.len() as u64 },
                format!(
                    "line {}: {} {} has {} rows in this batch; the limit is {} per table: split the batch",
                    row.line,
                    def.kind.word(),
                    def.name,
                    rows.len(),
                    limits.max_table_rows
                ),
            );
        }
        let sized = rows.iter().map(|row| (row, row.arrow_bytes));
        if let Some((row, total)) = crossing(table.arrow_bytes, sized, limits.max_table_bytes)? {
            sink.push_limit(
                at_row(row),
                ErrorCode::TableBytesLimit,
                LimitDetail { resource: format!("arrow_bytes:{}", def.name), limit: limits.max_table_bytes, actual: total },
                format!(
                    "line {}: {} {} needs {total} Arrow bytes; the limit is {} per table: split the batch",
                    row.line,
                    def.kind.word(),
                    def.name,
                    limits.max_table_bytes
                ),
            );
        }
    }
    let arrow_bytes = tables.iter().map(|table| table.arrow_bytes).sum();
    let sized = all().map(|row| (row, row.arrow_bytes));
    if let Some((row, total)) = crossing(arrow_bytes, sized, limits.max_total_arrow_bytes)? {
        sink.push_limit(
            at_row(row),
            ErrorCode::TableBytesLimit,
            LimitDetail { resource: "arrow_bytes".into(), limit: limits.max_total_arrow_bytes, actual: total },
            format!(
                "line {}: the batch needs {total} Arrow bytes over all tables; the limit is {}: split the batch",
                row.line, limits.max_total_arrow_bytes
            ),
        );
    }
    if !keyed {
        return Ok(());
    }
    let keyed_bytes = tables.iter().map(|table| table.keyed_bytes).sum();
    let sized = all().map(|row| (row, keyed_parse_bytes(row)));
    if let Some((row, total)) = crossing(keyed_bytes, sized, limits.max_keyed_parse_bytes)? {
        sink.push_limit(
            at_row(row),
            ErrorCode::BatchBytesLimit,
            LimitDetail { resource: "keyed_parse_bytes".into(), limit: limits.max_keyed_parse_bytes, actual: total },
            format!(
                "line {}: applying the batch by id needs an estimated {total} bytes (Arrow bytes, ids and one map entry per row over all tables); the limit is {}: split the batch",
                row.line, limits.max_keyed_parse_bytes
            ),
        );
    }
    Ok(())
}
