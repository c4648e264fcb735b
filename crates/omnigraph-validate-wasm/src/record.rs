//! One record: the envelope (SPEC §2.2), its typed `data`, per-value
//! constraints (`@range`, `@check`) and identity (SPEC §2.3). More in lib.rs.
//!
//! One file of about 880 lines of code: it is the explainer, the single source
//! of every diagnostic a line can get, and the envelope, the typed data and
//! the constraints are one reading of the line that `differential` pins whole.

use std::borrow::Cow;

use crate::columns::Columns;
use crate::json::{Cursor, JsonError, KeySet, Kind, pointer_segment};
use crate::layout::row_arrow_bytes;
use crate::report::{ErrorCode, ErrorSink, Position, TableKind, echo};
use crate::schema::{Bound, RangeRule, Schema, TypeDef, UniqueMember, is_reserved};
use crate::suggest::hint;
use crate::value::{Val, decode, key_text, render_key};

/// A record that passed every per-record check: where it is, its
/// identity and its Arrow size, with its strings as `S`. A reader (the
/// fast acceptor or the explainer) gives a [`ReadRow`]; [`Rows`] keep a
/// [`Row`].
#[derive(Debug, Clone, PartialEq)]
pub struct RowOf<S> {
    pub line: u64,
    pub offset: u64,
    /// Given or derived id; `None` when the host must generate one.
    pub id: Option<S>,
    /// Edge endpoints (empty for nodes).
    pub src: S,
    pub dst: S,
    /// The row's Arrow bytes (what `table_bytes_limit` counts).
    pub arrow_bytes: u64,
}

/// A row as [`Rows`] keep it: its strings borrowed from the batch, or from
/// the batch's arena when they were unescaped or derived
/// ([`crate::checks::Accepted::push`] puts them there). 72 bytes where
/// three `Cow`s made 96: a batch keeps one per record, and writing them is
/// most of its state's cache misses (docs/lab/2026-12-04-smaller-batch-state.md).
pub type Row<'a> = RowOf<&'a str>;

/// A row as a reader gives it: its strings borrowed from the batch or owned.
pub type ReadRow<'a> = RowOf<Cow<'a, str>>;

/// What the explainer makes of a record: its table and row when it
/// passed every per-record check, `None` when its errors went to the sink.
pub type Parsed<'a> = Result<Option<(usize, ReadRow<'a>)>, JsonError>;

/// Bytes of rows and values per chunk of [`Rows`]: under glibc's 128 KB
/// mmap threshold, so a freed chunk goes back to the heap and the next
/// batch reuses it instead of faulting fresh pages in (with chunks of
/// 150 KB the benchmark batch validated 10 % slower). A row's `@unique`
/// tuples (16 bytes each) are a buffer of their own, not counted here:
/// so every table that keeps no values has as many rows per chunk, and
/// any table's spare chunk ([`SpareChunks`]) fits any other's rows.
const CHUNK_BYTES: usize = 64 << 10;
/// Rows the first chunk starts with; it doubles up to a whole chunk, so a
/// batch of a few lines (a fresh wasm instance each) allocates little.
const FIRST_CHUNK_ROWS: usize = 8;

/// One table's rows in line order and what they keep of their values
/// ([`Keep`]): nothing when validating, Arrow columns written as the rows
/// arrive for `prepare`, the values themselves for the reference
/// `prepare`. Rows (and kept values) are in fixed-size chunks: growing
/// never moves a row, so a table of 100k rows is written once instead of
/// copied into ever larger buffers (the copies and their page faults were
/// 15 % of validating the benchmark batch), and memory stays within one
/// chunk of what the rows need. A chunk's values are one buffer, `width`
/// (the table's property count) per row. The rendered `@unique` tuples of
/// each row are kept the same way (the batch checks count them again if a
/// row of the table dies).
#[derive(Debug)]
pub struct Rows<'a> {
    keep: Keep,
    width: usize,
    /// Tuples per row: the table's `@unique` count.
    tuple_width: usize,
    /// Rows per chunk: as many as [`CHUNK_BYTES`] holds with their values.
    per_chunk: usize,
    chunks: Vec<Chunk<'a>>,
    len: usize,
    /// The rows' property columns (`Keep::Columns`).
    columns: Option<Columns>,
}

/// What a table keeps of its rows' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// No row at all, only their number: validation's first pass, which
    /// gives up for a pass that keeps rows when a check must name one
    /// ([`crate::checks::Accepted`]). Rows are most of a batch's state, and
    /// a batch whose checks name no row does not need them.
    Count,
    /// The rows without their values: validation (blobs, vectors and lists
    /// are only measured).
    Nothing,
    /// Their Arrow columns, written as the rows arrive (`prepare`).
    Columns,
    /// The values themselves, for [`crate::prepare_reference`] to build
    /// Arrow from with arrow-rs's builders.
    #[cfg(feature = "arrow")]
    Values,
}

impl Keep {
    /// Whether whole values are read (blobs, vectors and lists built).
    pub fn values(self) -> bool {
        !matches!(self, Keep::Count | Keep::Nothing)
    }

    /// Whether the rows themselves are kept.
    pub fn rows(self) -> bool {
        self != Keep::Count
    }
}

#[derive(Debug)]
struct Chunk<'a> {
    rows: Vec<Row<'a>>,
    values: Vec<Val<'a>>,
    tuples: Vec<Option<&'a str>>,
}

impl<'a> Chunk<'a> {
    /// This chunk's memory, emptied, for rows that borrow for `'b`.
    fn emptied<'b>(self) -> Chunk<'b> {
        Chunk { rows: emptied(self.rows), values: emptied(self.values), tuples: emptied(self.tuples) }
    }
}

/// A vector's memory, emptied, for items of another type of the same size
/// (here: the same type borrowing for another lifetime). Collecting an
/// empty `vec::IntoIter` through `map` reuses its buffer.
pub fn emptied<T, U>(mut items: Vec<T>) -> Vec<U> {
    items.clear();
    items.into_iter().map(|_| unreachable!("the vector is empty")).collect()
}

/// Emptied chunks of rows, taken before any new one when a table starts a
/// chunk: a [`crate::Scratch`] keeps a batch's chunks for the next batch.
#[derive(Debug, Default)]
pub struct SpareChunks<'a>(Vec<Chunk<'a>>);

impl<'a> SpareChunks<'a> {
    /// Takes `rows`' chunks back, emptied, for rows that borrow for `'b`.
    pub fn take_back<'b>(self, rows: impl IntoIterator<Item = Rows<'b>>) -> SpareChunks<'a> {
        let mut spare = self.0;
        spare.extend(rows.into_iter().flat_map(|rows| rows.chunks).map(Chunk::emptied));
        SpareChunks(spare)
    }

    /// The same chunks, for rows that borrow for `'b`.
    pub fn relent<'b>(self) -> SpareChunks<'b> {
        SpareChunks(emptied(self.0))
    }

    /// A chunk for `rows` rows of `tuple_width` tuples each: a spare one,
    /// if any, else a new one.
    fn take(&mut self, rows: usize, tuple_width: usize) -> Chunk<'a> {
        let mut chunk = self.0.pop().unwrap_or(Chunk { rows: Vec::new(), values: Vec::new(), tuples: Vec::new() });
        chunk.rows.reserve_exact(rows);
        chunk.tuples.reserve_exact(chunk.rows.capacity() * tuple_width);
        chunk
    }
}

impl<'a> Rows<'a> {
    /// Rows of table `def` (its `@unique` tuples kept too), keeping `keep`
    /// of their values.
    pub fn new(def: &TypeDef, keep: Keep) -> Self {
        let (width, tuple_width) = (def.props.len(), def.uniques.len());
        let chunk_values = if matches!(keep, Keep::Count | Keep::Nothing | Keep::Columns) { 0 } else { width };
        let row_bytes = std::mem::size_of::<Row>() + chunk_values * std::mem::size_of::<Val>();
        let columns = (keep == Keep::Columns).then(|| Columns::new(def));
        Rows { keep, width, tuple_width, per_chunk: (CHUNK_BYTES / row_bytes).max(1), chunks: Vec::new(), len: 0, columns }
    }

    /// The rows' columns, when they write them (`Keep::Columns`).
    pub fn columns(&self) -> Option<&Columns> {
        self.columns.as_ref()
    }

    /// Takes the rows' columns (`Keep::Columns`), leaving none.
    #[cfg(feature = "arrow")]
    pub fn take_columns(&mut self) -> Option<Columns> {
        self.columns.take()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Row `i`, unless the rows are only counted ([`Keep::Count`]).
    pub fn get(&self, i: usize) -> Option<&Row<'a>> {
        self.chunks.get(i / self.per_chunk)?.rows.get(i % self.per_chunk)
    }

    /// Appends a row of `def` (this table's type), what the rows keep of its
    /// `values` (taken from the buffer only when kept whole; otherwise left
    /// there for the next record to overwrite) and its `@unique` tuples
    /// (`tuple_width` of them); a new chunk comes from `spare` first.
    pub fn push(
        &mut self,
        def: &TypeDef,
        row: Row<'a>,
        values: &mut Vec<Val<'a>>,
        tuples: impl ExactSizeIterator<Item = Option<&'a str>>,
        spare: &mut SpareChunks<'a>,
    ) {
        match self.keep {
            Keep::Count => self.len += 1,
            Keep::Nothing => self.push_row(row, std::iter::empty(), tuples, spare),
            Keep::Columns => {
                self.columns.as_mut().expect("rows that write columns have them").push(def, values);
                self.push_row(row, std::iter::empty(), tuples, spare);
            }
            #[cfg(feature = "arrow")]
            Keep::Values => self.push_row(row, values.drain(..), tuples, spare),
        }
    }

    /// Appends a row, its values (`width` of them, or none when they are
    /// not kept whole) and its tuples to the last chunk.
    fn push_row(
        &mut self,
        row: Row<'a>,
        values: impl ExactSizeIterator<Item = Val<'a>>,
        tuples: impl ExactSizeIterator<Item = Option<&'a str>>,
        spare: &mut SpareChunks<'a>,
    ) {
        debug_assert!(values.len() == self.width || values.len() == 0, "a row has every value or none");
        debug_assert!(tuples.len() == self.tuple_width, "a row has every tuple");
        let per_chunk = self.per_chunk;
        let first = self.chunks.is_empty();
        let chunk = match self.chunks.last_mut() {
            Some(chunk) if chunk.rows.len() < per_chunk => chunk,
            _ => {
                let rows = if first { FIRST_CHUNK_ROWS.min(per_chunk) } else { per_chunk };
                self.chunks.push(spare.take(rows, self.tuple_width));
                self.chunks.last_mut().expect("just pushed")
            }
        };
        let n = chunk.rows.len();
        if n == chunk.rows.capacity() {
            // Only the first chunk grows: every later one starts whole.
            chunk.rows.reserve_exact((2 * n).min(per_chunk) - n);
            chunk.tuples.reserve_exact(chunk.rows.capacity() * self.tuple_width - chunk.tuples.len());
        }
        if values.len() != 0 && chunk.values.capacity() < chunk.rows.capacity() * self.width {
            chunk.values.reserve_exact(chunk.rows.capacity() * self.width - chunk.values.len());
        }
        chunk.rows.push(row);
        chunk.values.extend(values);
        chunk.tuples.extend(tuples);
        self.len += 1;
    }

    pub fn iter(&self) -> impl Iterator<Item = &Row<'a>> + Clone {
        self.chunks.iter().flat_map(|chunk| &chunk.rows)
    }

    /// Each row with its values (`Keep::Values` only).
    #[cfg(feature = "arrow")]
    pub fn with_values(&self) -> impl Iterator<Item = (&Row<'a>, &[Val<'a>])> + Clone {
        self.with_each(self.width, |chunk| &chunk.values)
    }

    /// Each row with its `@unique` tuples.
    pub fn with_tuples(&self) -> impl Iterator<Item = (&Row<'a>, &[Option<&'a str>])> + Clone {
        self.with_each(self.tuple_width, |chunk| &chunk.tuples)
    }

    /// Each row with its `width` items of the chunk buffer `buffer` picks.
    fn with_each<'r, T: 'r>(
        &'r self,
        width: usize,
        buffer: fn(&'r Chunk<'a>) -> &'r [T],
    ) -> impl Iterator<Item = (&'r Row<'a>, &'r [T])> + Clone {
        self.chunks.iter().flat_map(move |chunk| {
            let items = buffer(chunk);
            chunk.rows.iter().enumerate().map(move |(j, row)| (row, &items[j * width..(j + 1) * width]))
        })
    }

    /// Keeps the rows (of table `def`) whose flag (one per row) is false,
    /// with what they keep of their values and their tuples.
    pub fn remove_flagged(&mut self, def: &TypeDef, flags: &[bool]) {
        if self.keep == Keep::Count {
            self.len -= flags.iter().filter(|&&flag| flag).count();
            return;
        }
        if let Some(columns) = &mut self.columns {
            columns.remove_flagged(def, flags);
        }
        let mut kept = Rows { columns: self.columns.take(), ..Rows::new(def, self.keep) };
        let mut flags = flags.iter();
        let spare = &mut SpareChunks::default();
        for chunk in std::mem::take(&mut self.chunks) {
            let (mut values, mut tuples) = (chunk.values.into_iter(), chunk.tuples.into_iter());
            for row in chunk.rows {
                let row_values: Vec<Val<'a>> = values.by_ref().take(self.width).collect();
                let row_tuples: Vec<Option<&'a str>> = tuples.by_ref().take(self.tuple_width).collect();
                if !*flags.next().expect("one flag per row") {
                    kept.push_row(row, row_values.into_iter(), row_tuples.into_iter(), spare);
                }
            }
        }
        *self = kept;
    }
}

impl<'a> std::ops::Index<usize> for Rows<'a> {
    type Output = Row<'a>;

    fn index(&self, i: usize) -> &Row<'a> {
        self.get(i).expect("a kept row")
    }
}

/// Where a record is and where its errors go.
pub struct RecordCtx<'s, 'e> {
    pub schema: &'s Schema,
    pub compat: bool,
    /// Legacy identity (SPEC §2.3): `data.id` may carry the identity.
    pub legacy_identity: bool,
    pub sink: &'e mut ErrorSink,
    pub line: u64,
    /// Byte offset of the line's start in the batch.
    pub offset: u64,
    /// The line's start in the cursor's coordinates.
    pub line_start: usize,
}

impl RecordCtx<'_, '_> {
    pub fn at(&self, pos: usize) -> Position {
        Position { line: self.line, offset: self.offset, column: pos.saturating_sub(self.line_start) as u64 }
    }

    fn emit(&mut self, pos: usize, code: ErrorCode, path: &str, message: impl FnOnce() -> String) {
        let line = self.line;
        self.sink.push(self.at(pos), code, path, || format!("line {line}: {}", message()));
    }

    fn flush_duplicates(&mut self, cur: &mut Cursor<'_>, prefix: &str) {
        for d in std::mem::take(&mut cur.duplicates) {
            let path = format!("{prefix}{}", d.path);
            self.emit(d.pos, ErrorCode::DuplicateMember, &path, || {
                format!("duplicate member at {}; every object member name must be unique", echo(&path))
            });
        }
    }
}

const ENVELOPE_MEMBERS: [&str; 6] = ["type", "edge", "id", "from", "to", "data"];

#[derive(Default)]
struct Envelope<'a> {
    node_type: Option<(Cow<'a, str>, usize)>,
    edge: Option<(Cow<'a, str>, usize)>,
    id: Option<(Cow<'a, str>, usize)>,
    from: Option<(Cow<'a, str>, usize)>,
    to: Option<(Cow<'a, str>, usize)>,
    /// Where `data` starts when it came before the type was known.
    data_at: Option<usize>,
    data_pos: Option<usize>,
    /// `data` was parsed into the values buffer as this type (known in time).
    data_parsed_as: Option<usize>,
    /// `data.id` in legacy identity mode, where its value starts.
    data_id: Option<(Cow<'a, str>, usize)>,
}


/// Parses one record at the cursor. `Ok(None)`: the record had errors (all
/// reported). `Err`: the JSON could not be parsed; the caller reports it.
/// `values` is a buffer reused across records (validation alone keeps no
/// values, so it allocates nothing per record).
pub fn parse_record<'a>(
    cur: &mut Cursor<'a>,
    cx: &mut RecordCtx,
    values: &mut Vec<Val<'a>>,
) -> Parsed<'a> {
    let start = cur.pos;
    let errors_before = cx.sink.total();
    let kind = cur.peek_kind()?;
    if kind != Kind::Object {
        cur.skip_value(&mut String::new())?;
        cx.emit(start, ErrorCode::NotAnObject, "", || format!("a record must be a JSON object, got {}", kind.article()));
        return Ok(None);
    }
    cur.begin_object()?;
    let mut env = Envelope::default();
    // Envelope members are tracked by bit; other names only when present.
    let mut seen_members = 0u8;
    let mut seen_other = KeySet::default();
    let mut first = true;
    while let Some((key, at)) = cur.next_key(&mut first)? {
        let (bit, slot) = match key.as_ref() {
            "type" => (1, Some(&mut env.node_type)),
            "edge" => (2, Some(&mut env.edge)),
            "id" => (4, Some(&mut env.id)),
            "from" => (8, Some(&mut env.from)),
            "to" => (16, Some(&mut env.to)),
            "data" => (32, None),
            _ => (0, None),
        };
        let duplicate = if bit != 0 {
            let again = seen_members & bit != 0;
            seen_members |= bit;
            again
        } else {
            !seen_other.insert(key.clone())
        };
        if duplicate && !cx.compat {
            let path = member_path("", &key);
            cx.emit(at, ErrorCode::DuplicateMember, &path, || format!("member {} appears twice", echo(&key)));
        }
        if let Some(slot) = slot {
            let vpos = cur.pos;
            let kind = cur.peek_kind()?;
            if kind == Kind::String {
                let value_at = cur.pos;
                *slot = Some((cur.parse_string()?, value_at));
            } else {
                let path = member_path("", &key);
                cur.skip_value(&mut path.clone())?;
                cx.emit(vpos, ErrorCode::WrongJsonType, &path, || {
                    format!("member \"{}\" must be a string, got {}", &path[1..], kind.article())
                });
            }
            continue;
        }
        if bit == 32 {
            let vpos = cur.pos;
            let kind = cur.peek_kind()?;
            env.data_pos = Some(vpos);
            if kind != Kind::Object {
                cur.skip_value(&mut String::from("/data"))?;
                if !cx.compat {
                    cx.emit(vpos, ErrorCode::WrongJsonType, "/data", || format!("member \"data\" must be an object, got {}", kind.article()));
                }
                continue;
            }
            // Compat keeps the last of duplicate members, so a later "type"
            // may still change the type: there `data` is decoded at the end.
            let known = match (&env.node_type, &env.edge) {
                _ if cx.compat => None,
                (Some((t, _)), None) => resolve_type(cx.schema, t, TableKind::Node),
                (None, Some((e, _))) => resolve_type(cx.schema, e, TableKind::Edge),
                _ => None,
            };
            match known {
                Some(t) => {
                    env.data_id = parse_data(cur, cx, &cx.schema.types[t], values)?;
                    env.data_parsed_as = Some(t);
                }
                None => {
                    env.data_at = Some(vpos);
                    cur.skip_value(&mut String::from("/data"))?;
                }
            }
            continue;
        }
        let path = member_path("", &key);
        cur.skip_value(&mut path.clone())?;
        if cx.compat {
            continue;
        }
        if is_reserved(&key) {
            cx.emit(at, ErrorCode::ReservedField, &path, || {
                format!("{} is a reserved system name and cannot be sent", echo(&key))
            });
        } else {
            // Messages (and their suggestions) are built only for errors the report keeps.
            cx.emit(at, ErrorCode::UnknownField, &path, || {
                format!(
                    "unknown member {}{}; records have \"type\" or \"edge\", \"id\", \"from\", \"to\" and \"data\"",
                    echo(&key),
                    hint(&key, ENVELOPE_MEMBERS.into_iter())
                )
            });
        }
    }
    cx.flush_duplicates(cur, "");

    let (name, name_at, kind) = match (&env.node_type, &env.edge) {
        (Some((t, at)), None) => (t.clone(), *at, TableKind::Node),
        (None, Some((e, at))) => (e.clone(), *at, TableKind::Edge),
        (Some(_), Some(_)) => {
            cx.emit(start, ErrorCode::EnvelopeKind, "", || {
                "a record has exactly one of \"type\" (a node) or \"edge\" (an edge); this one has both".into()
            });
            return Ok(None);
        }
        (None, None) => {
            cx.emit(start, ErrorCode::EnvelopeKind, "", || {
                "a record needs \"type\" (a node) or \"edge\" (an edge); this one has neither".into()
            });
            return Ok(None);
        }
    };
    let resolved = env.data_parsed_as.filter(|&t| cx.schema.types[t].name == *name).or_else(|| resolve_type(cx.schema, &name, kind));
    let Some(t) = resolved else {
        report_unknown_type(cx, &name, name_at, kind);
        return Ok(None);
    };
    let def = &cx.schema.types[t];
    if kind == TableKind::Node {
        for (member, value) in [("from", &env.from), ("to", &env.to)] {
            if let Some((_, at)) = value
                && !cx.compat
            {
                cx.emit(*at, ErrorCode::UnknownField, &format!("/{member}"), || {
                    format!("node records have no \"{member}\"; only edges connect nodes")
                });
            }
        }
    } else {
        for (member, value) in [("from", &env.from), ("to", &env.to)] {
            if value.is_none() {
                cx.emit(start, ErrorCode::MissingField, &format!("/{member}"), || {
                    format!("edge {} needs \"{member}\", the id of its {} node", def.name, if member == "from" { "source" } else { "target" })
                });
            }
        }
    }
    match (env.data_parsed_as, env.data_at) {
        (Some(_), _) => {}
        (None, Some(at)) => {
            let mut again = cur.reread(at);
            env.data_id = parse_data(&mut again, cx, def, values)?;
        }
        (None, None) => missing_data(cx, def, env.data_pos.unwrap_or(start), values),
    }
    if cx.sink.total() != errors_before {
        return Ok(None);
    }
    let id = identity(cx, def, values, env.id, env.data_id);
    if cx.sink.total() != errors_before {
        return Ok(None);
    }
    let endpoint = |e: Option<(Cow<'a, str>, usize)>| e.map(|(s, _)| s).unwrap_or(Cow::Borrowed(""));
    let (src, dst) = (endpoint(env.from), endpoint(env.to));
    Ok(Some((t, ReadRow::new(cx.line, cx.offset, def, id, src, dst, values))))
}

impl<'a> RowOf<Cow<'a, str>> {
    /// The explainer's row of a record that passed every per-record check,
    /// whose values are `values` (the fast acceptor sums the Arrow bytes
    /// as it reads and gives its row with [`ReadRow::measured`]).
    pub(crate) fn new(
        line: u64,
        offset: u64,
        def: &TypeDef,
        id: Option<Cow<'a, str>>,
        src: Cow<'a, str>,
        dst: Cow<'a, str>,
        values: &[Val<'a>],
    ) -> ReadRow<'a> {
        let arrow_bytes = row_arrow_bytes(def, id.as_deref(), &src, &dst, values);
        ReadRow::measured(line, offset, id, src, dst, arrow_bytes)
    }

    /// A row whose Arrow bytes its reader has already summed (the fast
    /// acceptor, as it reads each value; `differential` checks the sum).
    pub(crate) fn measured(
        line: u64,
        offset: u64,
        id: Option<Cow<'a, str>>,
        src: Cow<'a, str>,
        dst: Cow<'a, str>,
        arrow_bytes: u64,
    ) -> ReadRow<'a> {
        RowOf { line, offset, id, src, dst, arrow_bytes }
    }
}

/// A `@unique` tuple rendered like a key (SPEC §2.4): one member as its
/// canonical string, several as a compact JSON array. `None`: a null member.
pub(crate) fn unique_key<'a>(members: &[UniqueMember], values: &[Val<'a>], src: &'a str, dst: &'a str) -> Option<Cow<'a, str>> {
    let part = |m: &UniqueMember| match m {
        UniqueMember::Prop(i) => key_text(&values[*i]),
        UniqueMember::Src => Some(Cow::Borrowed(src)),
        UniqueMember::Dst => Some(Cow::Borrowed(dst)),
    };
    // A single member (the usual `@unique` on one property) is its own key:
    // nothing to collect.
    if let [single] = members {
        return part(single);
    }
    let parts: Vec<Cow<'a, str>> = members.iter().map(part).collect::<Option<_>>()?;
    Some(Cow::Owned(serde_json::to_string(&parts).expect("strings serialize")))
}

pub(crate) fn resolve_type(schema: &Schema, name: &str, kind: TableKind) -> Option<usize> {
    schema.type_index(name).filter(|&t| schema.types[t].kind == kind)
}

fn report_unknown_type(cx: &mut RecordCtx, name: &str, at: usize, kind: TableKind) {
    let member = if kind == TableKind::Node { "type" } else { "edge" };
    let path = format!("/{member}");
    let schema = cx.schema;
    let message = || {
        if let Some(other) = schema.type_index(name) {
            let other = &schema.types[other];
            let right = if other.kind == TableKind::Node { "type" } else { "edge" };
            format!("{} is a {} type; write it as \"{right}\": {}", echo(name), other.kind.word(), echo(name))
        } else if schema.is_interface(name) {
            format!("{} is an interface; interfaces are never stored, name a node type that implements it", echo(name))
        } else {
            let candidates = schema.types.iter().filter(|t| t.kind == kind).map(|t| t.name.as_str());
            format!("unknown {} type {}{}", kind.word(), echo(name), hint(name, candidates))
        }
    };
    cx.emit(at, ErrorCode::UnknownType, &path, message);
}

/// All properties absent (no `data`): non-nullable ones are errors.
fn missing_data(cx: &mut RecordCtx, def: &TypeDef, pos: usize, values: &mut Vec<Val<'_>>) {
    report_missing(cx, def, |_| false, pos);
    values.clear();
    values.resize(def.props.len(), Val::Null);
}

fn report_missing(cx: &mut RecordCtx, def: &TypeDef, present: impl Fn(usize) -> bool, pos: usize) {
    for (i, p) in def.props.iter().enumerate() {
        if !present(i) && !p.nullable {
            cx.emit(pos, ErrorCode::NullNotAllowed, &member_path("/data", &p.name), || {
                format!("{} {} requires property '{}' ({}); it is missing", def.kind.word(), def.name, p.name, p.ty.canonical())
            });
        }
    }
}

/// Which properties a record gave, without allocating for common sizes.
enum Present {
    Small(u128),
    Large(Vec<bool>),
}

impl Present {
    fn new(n: usize) -> Self {
        if n <= 128 { Present::Small(0) } else { Present::Large(vec![false; n]) }
    }

    /// Marks `i`; true if it was already marked.
    fn mark(&mut self, i: usize) -> bool {
        match self {
            Present::Small(bits) => {
                let again = *bits & (1 << i) != 0;
                *bits |= 1 << i;
                again
            }
            Present::Large(flags) => std::mem::replace(&mut flags[i], true),
        }
    }

    fn has(&self, i: usize) -> bool {
        match self {
            Present::Small(bits) => *bits & (1 << i) != 0,
            Present::Large(flags) => flags[i],
        }
    }
}

/// `prefix` + `/name` as a JSON Pointer; built only when a path is needed.
fn member_path(prefix: &str, name: &str) -> String {
    let mut path = String::with_capacity(prefix.len() + name.len() + 1);
    path.push_str(prefix);
    pointer_segment(&mut path, name);
    path
}

/// Decodes `data` into `values`. Returns `data.id` when it carries the
/// identity (legacy identity mode, a type without a property `id`).
fn parse_data<'a>(
    cur: &mut Cursor<'a>,
    cx: &mut RecordCtx,
    def: &TypeDef,
    values: &mut Vec<Val<'a>>,
) -> Result<Option<(Cow<'a, str>, usize)>, JsonError> {
    let data_pos = cur.pos;
    cur.begin_object()?;
    values.clear();
    values.resize(def.props.len(), Val::Null);
    let mut present = Present::new(def.props.len());
    let mut unknown = KeySet::default();
    let mut data_id = None;
    let mut first = true;
    while let Some((key, at)) = cur.next_key(&mut first)? {
        let Some(i) = def.prop(&key) else {
            let path = member_path("/data", &key);
            let legacy_id = cx.legacy_identity && key == "id";
            let vpos = cur.pos;
            let kind = cur.peek_kind()?;
            if legacy_id && kind == Kind::String {
                data_id = Some((cur.parse_string()?, vpos));
            } else {
                cur.skip_value(&mut path.clone())?;
                cx.flush_duplicates(cur, "");
            }
            if !cx.compat && !unknown.insert(key.clone()) {
                cx.emit(at, ErrorCode::DuplicateMember, &path, || format!("member {} appears twice in data", echo(&key)));
            }
            if legacy_id {
                if kind != Kind::String {
                    cx.emit(vpos, ErrorCode::WrongJsonType, &path, || {
                        format!("\"data.id\" carries the record's identity (legacy identity mode) and must be a string, got {}", kind.article())
                    });
                }
            } else if !cx.compat {
                report_unknown_property(cx, def, &key, at, &path);
            }
            continue;
        };
        let prop = &def.props[i];
        if present.mark(i) && !cx.compat {
            cx.emit(at, ErrorCode::DuplicateMember, &member_path("/data", &prop.name), || {
                format!("property '{}' appears twice in data", prop.name)
            });
        }
        let vpos = cur.pos;
        let decoded = decode(cur, &prop.ty, cx.compat)?;
        if !cur.duplicates.is_empty() {
            cx.flush_duplicates(cur, &member_path("/data", &prop.name));
        }
        match decoded {
            Ok(Val::Null) if !prop.nullable => {
                cx.emit(vpos, ErrorCode::NullNotAllowed, &member_path("/data", &prop.name), || {
                    format!("{} {} property '{}' ({}) cannot be null", def.kind.word(), def.name, prop.name, prop.ty.canonical())
                });
            }
            Ok(v) => {
                check_constraints(cx, def, i, &v, vpos);
                values[i] = v;
            }
            Err(e) => {
                let full = format!("{}{}", member_path("/data", &prop.name), e.path);
                cx.emit(e.pos, e.code, &full, || {
                    format!("{} {} property '{}': {}", def.kind.word(), def.name, prop.name, e.message)
                });
            }
        }
    }
    report_missing(cx, def, |i| present.has(i), data_pos);
    Ok(data_id)
}

fn report_unknown_property(cx: &mut RecordCtx, def: &TypeDef, key: &str, at: usize, path: &str) {
    let kind = def.kind.word();
    if key == "id" {
        cx.emit(at, ErrorCode::UnknownField, path, || {
            format!("{kind} {} has no property 'id'; a record's identity goes in the top-level \"id\"", def.name)
        });
    } else if is_reserved(key) {
        cx.emit(at, ErrorCode::ReservedField, path, || format!("{} is a reserved system name and cannot be sent", echo(key)));
    } else {
        cx.emit(at, ErrorCode::UnknownProperty, path, || {
            format!("{kind} {} has no property {}{}", def.name, echo(key), hint(key, def.props.iter().map(|p| p.name.as_str())))
        });
    }
}

/// Whether `v` meets every `@range` and `@check` on property `i` (what
/// [`check_constraints`] reports on).
pub(crate) fn meets_constraints(def: &TypeDef, i: usize, v: &Val<'_>) -> bool {
    *v == Val::Null
        || (def.ranges.iter().filter(|r| r.prop == i).all(|rule| in_range(rule, v))
            && def.checks.iter().filter(|r| r.prop == i).all(|rule| !matches!(v, Val::Str(s) if !rule.is_match(s))))
}

fn check_constraints(cx: &mut RecordCtx, def: &TypeDef, i: usize, v: &Val<'_>, pos: usize) {
    if *v == Val::Null {
        return;
    }
    for rule in def.ranges.iter().filter(|r| r.prop == i) {
        if !in_range(rule, v) {
            let shown = render_key(v).unwrap_or_default();
            cx.emit(pos, ErrorCode::RangeViolation, &member_path("/data", &def.props[i].name), || {
                format!(
                    "{} {} property '{}' is {shown}, outside @range({}, {})",
                    def.kind.word(),
                    def.name,
                    def.props[i].name,
                    def.props[i].name,
                    rule.text
                )
            });
        }
    }
    for rule in def.checks.iter().filter(|r| r.prop == i) {
        if let Val::Str(s) = v
            && !rule.is_match(s)
        {
            cx.emit(pos, ErrorCode::CheckViolation, &member_path("/data", &def.props[i].name), || {
                format!(
                    "{} {} property '{}' = {} does not match @check pattern {:?}",
                    def.kind.word(),
                    def.name,
                    def.props[i].name,
                    echo(s),
                    rule.pattern
                )
            });
        }
    }
}

/// Exact comparison: integers as integers, floats in the property's width.
fn in_range(rule: &RangeRule, v: &Val<'_>) -> bool {
    let cmp = |b: &Bound| -> Option<std::cmp::Ordering> {
        match (v, b) {
            (Val::Int(x), Bound::Int(y)) => Some((*x as i128).cmp(y)),
            (Val::UInt(x), Bound::Int(y)) => Some((*x as i128).cmp(y)),
            (Val::F32(x), Bound::Float(y)) => (*x as f64).partial_cmp(y),
            (Val::F64(x), Bound::Float(y)) => x.partial_cmp(y),
            _ => None,
        }
    };
    let above_min = rule.min.as_ref().is_none_or(|m| cmp(m).is_some_and(|o| o.is_ge()));
    let below_max = rule.max.as_ref().is_none_or(|m| cmp(m).is_some_and(|o| o.is_le()));
    above_min && below_max
}

/// The id a keyed node derives from its `@key` values (SPEC §2.3); `None`
/// for a type without `@key`.
pub(crate) fn canonical_id<'a>(def: &TypeDef, values: &[Val<'a>]) -> Option<Cow<'a, str>> {
    let key = def.key.as_ref()?;
    Some(match key.as_slice() {
        [single] => match &values[*single] {
            Val::Str(s) => s.clone(),
            v => Cow::Owned(render_key(v).unwrap_or_default()),
        },
        many => {
            let parts: Vec<String> = many.iter().map(|&i| render_key(&values[i]).unwrap_or_default()).collect();
            Cow::Owned(serde_json::to_string(&parts).expect("strings serialize"))
        }
    })
}

/// The row's id (SPEC §2.3): keyed nodes derive it and a supplied one must
/// match byte for byte; others use the supplied id or leave it to the host.
/// The id is supplied as the top-level `id` or, in legacy identity mode, as
/// `data.id` (`data_id`); never both.
fn identity<'a>(
    cx: &mut RecordCtx,
    def: &TypeDef,
    values: &[Val<'a>],
    top_id: Option<(Cow<'a, str>, usize)>,
    data_id: Option<(Cow<'a, str>, usize)>,
) -> Option<Cow<'a, str>> {
    let (supplied, (path, member)) = match (top_id, data_id) {
        (Some(_), Some((_, at))) => {
            cx.emit(at, ErrorCode::AmbiguousId, "/data/id", || {
                format!(
                    "{} {} has both a top-level \"id\" and \"data.id\"; in legacy identity mode \"data.id\" is the identity only when the top-level \"id\" is absent: send one of them",
                    def.kind.word(),
                    def.name
                )
            });
            return None;
        }
        (None, Some(given)) => (Some(given), ("/data/id", "data.id")),
        (given, None) => (given, ("/id", "id")),
    };
    let Some(canonical) = canonical_id(def, values) else { return supplied.map(|(s, _)| s) };
    if let Some((given, at)) = supplied
        && given != canonical
    {
        cx.emit(at, ErrorCode::NoncanonicalId, path, || {
            format!(
                "node {} derives its id from @key; the supplied {member} differs from the canonical rendering {}",
                def.name,
                echo(&canonical)
            )
        });
    }
    Some(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(line: u64) -> Row<'static> {
        Row {
            line,
            offset: 0,
            id: None,
            src: "",
            dst: "",
            arrow_bytes: 0,
        }
    }

    fn table() -> Schema {
        Schema::compile("node T { a: U64? @unique  b: I64? }").expect("compiles")
    }

    #[test]
    #[cfg(feature = "arrow")]
    fn rows_keep_line_order_and_values_across_chunks() {
        let schema = table();
        let def = &schema.types[0];
        let values = |line: u64| [Val::UInt(line), Val::Int(-(line as i64))];
        let mut rows = Rows::new(def, Keep::Values);
        let n = rows.per_chunk as u64 * 3 + 7;
        let texts: Vec<String> = (0..n).map(|line| line.to_string()).collect();
        let tuple = |line: u64| [Some(texts[line as usize].as_str())];
        for line in 0..n {
            rows.push(def, row(line), &mut values(line).to_vec(), tuple(line).into_iter(), &mut SpareChunks::default());
        }
        assert_eq!(rows.len() as u64, n);
        assert!((0..n).all(|i| rows[i as usize].line == i));
        assert!(rows.with_values().all(|(row, v)| v == values(row.line)));
        assert!(rows.with_tuples().all(|(row, t)| t == tuple(row.line)));
        let flags: Vec<bool> = (0..n).map(|i| i % 3 == 1).collect();
        rows.remove_flagged(def, &flags);
        let kept: Vec<u64> = (0..n).filter(|i| i % 3 != 1).collect();
        assert_eq!(rows.len(), kept.len());
        assert!(rows.iter().map(|r| r.line).eq(kept.iter().copied()));
        assert!(kept.iter().enumerate().all(|(i, &line)| rows[i].line == line));
        assert!(rows.with_values().all(|(row, v)| v == values(row.line)));
        assert!(rows.with_tuples().all(|(row, t)| t == tuple(row.line)));
    }

    /// Rows written into the chunks another table's rows left (of another
    /// width, across several chunks) are the rows written into new ones,
    /// and the chunks' memory is reused, not reallocated.
    #[test]
    #[cfg(feature = "arrow")]
    fn rows_in_spare_chunks_are_the_rows_in_new_ones() {
        let wide = Schema::compile("node W { a: U64 @unique  b: I64 @unique  c: String @unique }").expect("compiles");
        let schema = table();
        let def = &schema.types[0];
        let texts: Vec<String> = (0..3000).map(|line| line.to_string()).collect();
        fn fill<'t>(def: &TypeDef, texts: &'t [String], rows: &mut Rows<'t>, n: u64, spare: &mut SpareChunks<'t>) {
            for line in 0..n {
                let tuple = [Some(texts[line as usize].as_str())];
                rows.push(def, row(line), &mut vec![Val::UInt(line), Val::Null], tuple.into_iter(), spare);
            }
        }
        let mut left = Rows::new(&wide.types[0], Keep::Nothing);
        let n = left.per_chunk as u64 * 2 + 5;
        let mut spare = SpareChunks::default();
        for line in 0..n {
            let tuples = [Some(texts[line as usize].as_str()); 3];
            left.push(&wide.types[0], row(line), &mut Vec::new(), tuples.into_iter(), &mut spare);
        }
        let buffers: Vec<usize> = left.chunks.iter().map(|chunk| chunk.rows.as_ptr() as usize).collect();
        let mut spare: SpareChunks<'_> = SpareChunks::default().take_back([left]);
        assert_eq!(spare.0.len(), 3);
        for keep in [Keep::Values, Keep::Nothing] {
            let (mut reused, mut new) = (Rows::new(def, keep), Rows::new(def, keep));
            let n = reused.per_chunk as u64 * 3 + 7;
            fill(def, &texts, &mut reused, n, &mut spare);
            fill(def, &texts, &mut new, n, &mut SpareChunks::default());
            assert!(reused.iter().eq(new.iter()));
            assert!(reused.with_tuples().eq(new.with_tuples()));
            if keep == Keep::Values {
                assert!(reused.with_values().eq(new.with_values()));
            }
            assert!((0..n as usize).all(|i| reused[i] == new[i]));
            spare = spare.take_back([reused]);
        }
        let now: Vec<usize> = spare.0.iter().map(|chunk| chunk.rows.as_ptr() as usize).collect();
        assert!(buffers.iter().all(|b| now.contains(b)), "the first rows' chunks are still in use");
    }

    #[test]
    fn rows_validated_or_written_as_columns_keep_no_values() {
        let schema = table();
        let def = &schema.types[0];
        for keep in [Keep::Nothing, Keep::Columns] {
            let mut rows = Rows::new(def, keep);
            let n = rows.per_chunk + 1;
            let mut values = vec![Val::UInt(1), Val::Null];
            for line in 0..n as u64 {
                rows.push(def, row(line), &mut values, [None].into_iter(), &mut SpareChunks::default());
                assert_eq!(values.len(), 2, "values not kept whole stay for the next record");
            }
            assert_eq!(rows.chunks.len(), 2);
            assert!(rows.chunks.iter().all(|chunk| chunk.values.capacity() == 0));
            rows.remove_flagged(def, &vec![false; n]);
            assert_eq!(rows.len(), n);
            assert_eq!(rows.columns().is_some(), keep == Keep::Columns);
        }
    }
}
