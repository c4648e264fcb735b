//! OmniGraph ingest's rule book: the `.pg` schema language, the strict NDJSON
//! envelope parser and the batch validator (see `SPEC.md` §1–§3, §5).
//!
//! The core is pure: no I/O, clocks, randomness or threads, so the same code
//! gives the same report natively, in wasmtime, in Node and in browsers.
//! `std` collections are used only where their iteration order cannot reach
//! the output: the same (schema, options, batch) gives the same report bytes
//! on every platform.
//!
//! The public API: `Schema::compile`, `validate`, `prepare_rows` (and
//! `prepare_rows_after`), `Options`, `Report`. A `Scratch` is a batch's check
//! maps, row chunks and text arena kept for the next batch
//! (`Scratch::validate`, `Scratch::prepare`); `validate` and `prepare` use a
//! new one, so each wasm instance runs as before; the JS `CompiledSchema`
//! keeps one. Feature `arrow` (default; not in the artifact): `prepare`
//! (record batches; `Prepared::into_tables` serializes them as IPC),
//! `tables_from_rows`, `batches_from_rows`, and `prepare_reference` (the
//! second road the fuzz targets and tests compare `prepare` with).
//!
//! ```
//! use omnigraph_validate_wasm::{Options, Schema, validate};
//! let schema = Schema::compile("node Person { name: String @key }").unwrap();
//! let report = validate(&schema, &Options::default(), b"{\"type\":\"Person\",\"data\":{\"name\":\"Ada\"}}\n");
//! assert!(report.ok);
//! ```
//!
//! The modules compiled into the wasm artifact keep their own docs short, and
//! their detail is here: the artifact holds the line numbers of their panic
//! locations, and CI rebuilds it to the committed bytes, so a line added to
//! one of those files changes the artifact (`scripts/build-wasm.sh`). This
//! file, `limits.rs`, `options.rs` and `arrow_out.rs` (not in the artifact)
//! are free of that.
//!
//! # Data flow of a validation
//!
//! ```text
//! bytes ─► batch::run (validation: batch::pass keeping only a count of rows, Keep::Count; when a
//!           │  check must name a row it gives up, reads no further, and batch::pass runs again keeping
//!           │  rows, Keep::Nothing, in the same maps; prepare: one pass keeping rows and columns)
//!           ├─ over max_batch_bytes? → one batch_bytes_limit error, nothing parsed
//!           ├─ strict: per line: fast::accept on the bytes from the line start → ReadRow and line end
//!           │          (the line read once: no separate LF search, no separate UTF-8 pass), kept
//!           │          if the line is within max_line_bytes
//!           │            └─ not accepted → split on LF (strip one CR) → BOM? too long? blank?
//!           │               UTF-8? → json::Cursor → record::parse_record → ReadRow or errors
//!           │  compat: one Cursor over the text; records anywhere; errors resync at next line
//!           │  each ReadRow → checks::Accepted::push, kept as a Row (not in the first pass), while its
//!           │  bytes are in cache (preparing, its values go into the table's Arrow columns there and
//!           │  are not kept):
//!           │     id folded (merge: last wins, counted; append/overwrite: duplicate_id; first pass:
//!           │     a duplicate gives up, a fold is counted past)
//!           │     endpoints queued with their ids and lines, looked up among the ids so far 32 at a
//!           │     time (a node type with no id yet: all 32 unresolved, no lookup)
//!           │     @unique tuples and @card sources counted, Arrow/keyed sizes summed (first pass: a
//!           │     clash or an excess gives up)
//!           ├─ Accepted::finish: endpoints still missing looked up again (in batch / dangling in
//!           │     overwrite / external_refs for the host, ordered by one packed (line, end) key,
//!           │     each node type's misses kept apart in that order so the sort merges one run per
//!           │     node type; an empty id map answers without hashing; type names shared); a table
//!           │     in which a row died (folded, duplicate) has @unique, @card and sizes counted again
//!           │     over its survivors (first pass: only its row count lowered, see below); bounds
//!           │     (rows per table after folding; Arrow bytes per table and total) from the totals;
//!           │     the first pass gives its maps back instead when an error must name a row (a
//!           │     bound exceeded, a dangling endpoint)
//!           └─ Report {ok, rules, stats, errors (≤ cap, sorted), error_count, external_refs}
//! prepare_rows (the artifact's og_prepare) = the same run writing columns → rows::encode_into: each
//!           table's envelope columns and its property columns' buffers, written after the result
//!           header (never copied in the instance), copied once out of it by the host into an
//!           aligned buffer, which RecordBatches slice (rows::decode)
//! prepare = the same run writing columns → each table's column buffers moved into Arrow arrays
//!           (Columns::into_arrays; envelope columns from the rows) → one RecordBatch per touched
//!           table (what an in-process host stores); Prepared::into_tables → IPC bytes per table
//! prepare_reference = the same run keeping every value → arrow-rs builders → IPC bytes (the oracle)
//! ```
//!
//! `record::parse_record` (the explainer) pulls tokens: envelope members are
//! recognised by name; `data` is decoded straight into typed values when the
//! type is already known, otherwise skipped (still checked) and re-read once
//! the type is known. Both paths (the explainer and the fast acceptor) give
//! a `ReadRow` (`RowOf<Cow<str>>`: strings borrowed or owned).
//!
//! # The fast acceptor and the explainer
//!
//! Each strict line first goes to `fast::accept`, which reads the bytes once
//! against the schema (the property expected next compared first, integers
//! converted while scanned, no member sets, no error paths) and either returns
//! the row or gives up, for any reason: an error, an escape, `data` before the
//! type, a tight bound. It never reports. A line it gives up on goes to the
//! explainer as before, which produces every diagnostic (code, line, offset,
//! path, message). Every value is decoded into its row slot (`Scan::present`
//! writes a `&mut Val`; a `Val` returned and moved was copied in pieces that
//! stalled on the stores that wrote it); preparing, a blob, vector or list is
//! decoded into the buffer its property's slot kept from the last record
//! (`Scan::refill`), so it allocates per property, not per value; the depth
//! limit is checked where the depth grows; whitespace costs a token one
//! comparison (a byte above a space is a token), the skipping loop runs only
//! below it.
//!
//! Why the report cannot differ from the explainer's alone: the acceptor only
//! shortcuts lines on which the explainer would report nothing and return the
//! same row (both give it as a `ReadRow`, its Arrow size checked equal by
//! `differential`, the id with `record::canonical_id`, constraints with
//! `record::meets_constraints`, values with the same `value::` converters); a
//! line without errors contributes nothing to a report but its row, and the
//! batch checks see the same rows in the same order. The acceptor also frames
//! the lines it takes, and that cannot change a report either: it is given the
//! batch from the line start, never passes a line end (`\n` is not whitespace
//! to it, and strings stop at control characters), and takes a line only when
//! the record and the whitespace after it (space, tab, CR) end at an LF or at
//! the end of the batch, which is where the framing would have cut the line,
//! with the one CR the framing strips counted as whitespace. Its bytes outside
//! strings are ASCII by the grammar it accepts, and a string with a byte above
//! ASCII is checked with `str::from_utf8`, so a line it takes is UTF-8 (an
//! ASCII string is taken as text unchecked: `fast::ascii`, the crate's one
//! `unsafe` outside the ABI besides the vector loads of `json::lanes`, with a
//! `debug_assert` that tests and fuzzing run). A BOM, a blank line or an
//! over-long line is never taken (the first two fail its grammar; the length is
//! checked on the line it framed) and goes to the framing as before. The
//! premise is what `batch::differential` checks, line by line, giving the
//! acceptor the rest of the batch and asserting that it ends where the line
//! ends and that the line is UTF-8: `tests/fast.rs`, every fuzz target's strict
//! batches, and the `differential` fuzz target (fuzzed schemas, options and
//! lines). Compat batches always take the explainer. The fuzzers run natively;
//! the artifact in wasmtime is held to the same answers by replaying their
//! inputs (`crates/omnigraph-host/tests/parity.rs`,
//! `fuzz_inputs_get_the_native_answers_in_wasmtime`: the report and `prepare`'s
//! tables of every seed and kept input in CI, of a whole local corpus on
//! demand), so the premise checked natively holds for the wasm build too.
//!
//! # SIMD, with and without
//!
//! The one vector path is the string scan (`json::scan_plain_ascii`, used by
//! the acceptor and the explainer alike): 16 bytes at a time in
//! `json::lanes`, SSE2 natively (every x86-64 has it) and wasm `simd128` in
//! the artifact (`scripts/build-wasm.sh` builds with `+simd128`, fixed-width
//! only: relaxed SIMD may differ between engines and is never used;
//! `tests/wasm-features.json` lists `simd`), then the SWAR word loop and a
//! byte loop for the tail. Every lane operation is lane-wise, so a vector
//! test differs from the byte loop only if some byte value in some lane
//! does: `json`'s unit tests hold the native lanes to
//! `lanes::portable_attention` (the byte loop, also what other architectures
//! run) for arbitrary 16 bytes, and `parity.rs`
//! (`every_byte_at_every_string_position_gets_the_native_report`) holds the
//! artifact's `simd128` lanes to the native report for all 256 byte values
//! (and a 2-byte character) at each of a string's first 40 positions, in
//! strict and compat mode; that test fails on an artifact whose control-byte
//! comparison is off by one.
//!
//! # Validation's first pass keeps no rows, and the same report
//!
//! Rows are most of a batch's state (72 bytes each, written once and rarely
//! read), and a batch in which no check names a row does not need them. So
//! `batch::run` validates first with `Keep::Count` (`Rows` holds only a count):
//! the same framing, acceptor, explainer, sink, maps and checks, in the same
//! order; only the rows are not written. Each place that must read a row gives
//! up instead (`Accepted::gave_up`, then `finish` returns the maps): a
//! duplicate id (its error names the earlier row's line), a `@unique` clash or
//! a `@card` excess (their errors name rows), a bound exceeded (its error names
//! the row where the total crosses it, read by `Rows::get`, which has none to
//! give), a dangling endpoint in overwrite (at its edge's row). An endpoint
//! carries its id and its edge's line, so looking it up and listing it as an
//! external ref read no row. A pass that gave up reads no further, and
//! `batch::pass` runs again keeping rows, which alone writes the report (in the
//! same maps and endpoint lists; the first pass's unescaped and derived strings
//! stay in the batch's arena until the batch is done, at most once more what
//! the second pass puts there, within the per-batch memory bound that
//! `tests/limits.rs` holds). A merge's fold does not make it give up: a pass
//! that keeps rows counts a table again over its survivors once a row died, but
//! the first pass counts on (`Accepted::settle_waiting`,
//! `Tallies::count_group`, flags of the dead rows in `Dead`): a row already
//! dead when its group is counted is not counted; a `@unique` tuple whose row
//! died after it was counted passes to the next row with it (while the dead row
//! held it, any other row with it clashed, and a clash gives up, so the next
//! one clashes with no row that survives); a dead edge's `@card` source and a
//! dead row's sizes stay counted, bounds from above of the survivors' (an
//! excess or a bound they exceed is never missed; one only the dead rows cause
//! is a give-up, never a report); `finish` lowers the table's row count by its
//! dead rows and skips their endpoints, as the second pass does. The price of a
//! give-up: a batch handed on is parsed twice up to the first row that needed
//! naming (a batch whose first duplicate or clash is its last line takes about
//! twice as long; docs/lab/2026-12-06-first-pass-no-rows.md). Why the reports cannot differ: a first
//! pass that finishes ran every check the second would, over the same records
//! in the same order, and none of them read a row; where it counted differently
//! (past a fold) its counts find every clash, excess and bound the survivors'
//! would, and any of those gives up; the second pass is the code that ran alone
//! before. The corpus (`tests/vectors.rs`: every case's `validate` report equal
//! to `prepare`'s, which always keeps rows), `batch::tests` (which batches the
//! first pass finishes, folds in a row's group and in a later one included,
//! each kind of give-up handed on, the reports equal) and the fuzz harness
//! (`prepare`'s report equal to `validate`'s for every input) hold it; taking
//! out any one give-up fails the corpus.
//!
//! # Streamed batch checks and the same report
//!
//! The batch checks (SPEC §2.5) run as the rows arrive (`Accepted::push`,
//! which stores the `ReadRow` as a `Row`: owned strings, rare, are copied into
//! the batch's bumpalo arena): a table's rows wait in groups of 32
//! (`settle_waiting`: ids folded, then `@unique` tuples, `@card` sources and
//! sizes counted, each map's keys read ahead together, then inserted one by
//! one in row order), and what later rows can change is settled at the end
//! (`Accepted::finish`): fold duplicates, bounds, `@unique`, endpoints,
//! `@card`; it works in what a `Scratch` recycled (`TableMaps` per table,
//! `SpareChunks`), emptied first, and hands it back.
//!
//! The checks used to be five passes over the rows after the last line; the
//! report is the one the passes gave because (1) the error sink orders and
//! truncates errors itself, whatever order they are found in; (2) an id, once
//! seen, stays in its table's map, so an endpoint found early is found at the
//! end, and one not found yet is looked up again in `finish`; (3) an endpoint
//! of a row that dies later is skipped in `finish`; (4) `@unique`, `@card` and
//! the size totals are exact over the rows of a table in which no row died, and
//! a table in which one died (a rare, rejected or folded batch) is counted
//! again over its survivors, in line order. The corpus has a case for each
//! (`unique_clash_before_fold`, `card_over_before_fold`,
//! `edge_before_its_nodes`, `folded_edge_external_end_not_listed`,
//! `duplicate_edge_external_end_not_listed`, `table_bytes_counted_before_fold`,
//! `keyed_parse_bytes_counted_before_fold`), each failing when its part of the
//! settling is removed. (5) Rows wait in groups of 32 per table
//! (`settle_waiting`): a group's keys for one map are hashed and their first
//! slots, entries and key bytes read together (`StrMap::read_ahead`, reads
//! only), then inserted one at a time in row order, so each insert finds, folds
//! or clashes exactly as it did row by row; only when an error is found moves
//! (by up to 31 rows, which (1) absorbs), and an endpoint is looked up after
//! its node type's waiting rows are in (which (2) makes only a matter of
//! speed). `tests/batch_checks.rs` holds batches of up to 1,000 records with
//! duplicates, clashes and `@card` sources inside and across groups, in every
//! mode, to a record-by-record model; inserting a group's ids or tuples out of
//! order fails it. (6) A `Scratch` kept between batches changes no answer: each
//! map a batch takes is emptied first (`StrMap::clear`, after which it holds no
//! key, its entries and arena empty, whatever its size), tallies counted again
//! are counted in their maps emptied, and a spare chunk of rows is an empty
//! vector that only lends its memory. The corpus forwards and backwards through
//! one scratch (`tests/vectors.rs`, validate and prepare), the model's batches
//! large and small through one (`tests/batch_checks.rs`), the fuzz harness
//! (every input also through one scratch kept across inputs) and Node (one
//! `CompiledSchema` through the cases that share a schema) hold it; leaving any
//! map unemptied fails them.
//!
//! # Canonical rows: three roads to Arrow
//!
//! The artifact has no Arrow code: `og_prepare` returns canonical rows, which
//! are Arrow's own column buffers (validity bitmaps, offsets, values; ABI v4,
//! `rows::encode_into`) written by the artifact from the columns it wrote as
//! rows arrived (`columns.rs`), straight after its result header (never
//! copied in the instance), and the host wraps them into one record batch per
//! table (`batches_from_rows`: the rows are copied once, from the instance's
//! memory into one aligned Arrow buffer, and every array is a slice of it
//! (`rows::decode`); no value read or copied one by one, Arrow's validation
//! of every column between a broken buffer and a load; a load uses the
//! batches directly, with no IPC in between). The native `prepare` skips the
//! encoding: the same columns' buffers are moved into Arrow arrays
//! (`Columns::into_arrays`; envelope columns from the rows), one
//! `RecordBatch` per touched table (what an in-process host stores;
//! `Prepared::into_tables` gives IPC bytes per table), which the fuzz targets
//! hold equal to what `tables_from_rows` makes of `prepare_rows`. A third
//! road is kept as the oracle: `prepare_reference` keeps every row's values
//! and builds the tables with arrow-rs's builders; the fuzz targets (every
//! batch they validate), the seeds and kept inputs, `tests/arrow.rs` and
//! `columns::tests` (every type, nulls, rows removed as folding removes
//! them) hold `prepare` to its IPC bytes, and
//! `crates/omnigraph-host/tests/parity.rs` holds the artifact to native
//! `prepare`.
//!
//! # The modules
//!
//! * `abi`: the plain byte-buffer ABI v4 (`og_abi_version`, `og_alloc`,
//!   `og_free`, `og_validate`, `og_prepare`, and `og_compile` with
//!   `og_validate_compiled` / `og_prepare_compiled`), its buffer formats, and
//!   the decoder hosts use.
//! * `js` (wasm32 only): the wasm-bindgen API: `compileSchema`,
//!   `CompiledSchema` (keeps a `Scratch` between its batches),
//!   `SchemaCompileError`, `validate`, `rules`.
//! * `batch`: framing (strict lines, read in windows of 64 KiB, one call each;
//!   or a compat stream); each accepted row goes to the checks; validation
//!   runs a pass that keeps no rows first, and again keeping them only when a
//!   check must name a row (`run` / `pass`).
//! * `record`: the explainer: one record, envelope (SPEC §2.2), data,
//!   `@range`/`@check`, identity, every per-record diagnostic. `Rows`: a
//!   table's rows (`Row` = `RowOf<&str>`: 72 bytes, its strings into the batch
//!   or the batch's arena; one struct, two string types) and `@unique` tuples,
//!   in chunks of 64 KB of rows (growing never copies a row; no allocation per
//!   record for them; as many rows a chunk in every table that keeps no values,
//!   so `SpareChunks`, a past batch's emptied chunks, fit any table), and what
//!   they keep (`Keep`: only their count, for validation's first pass / no
//!   values / columns / the values, for the reference).
//! * `columns`: a table's property columns as Arrow buffers, written as its
//!   rows arrive (`prepare`), rewritten without the rows that die later;
//!   written out for `og_prepare` or moved into Arrow arrays for native
//!   `prepare`; `Bits` (bitmaps) and `push_offset`, which `rows`'s encoder
//!   uses too.
//! * `rows`: canonical rows: Arrow column buffers written without Arrow
//!   (`og_prepare`), wrapped into arrays by hosts; the Arrow size estimate.
//! * `strmap`: the string map of the batch checks: arena + open addressing
//!   (entries of 24 bytes, `u32` key offsets), lookups grouped so their cache
//!   misses overlap (`contains_each`; `read_ahead` before a group's inserts,
//!   which then run one by one); it falls back to a `BTreeMap` if probing
//!   degrades (hash flooding) or its keys would pass 4 GiB, so the batch
//!   checks never degrade to quadratic time on hostile ids; `clear` keeps its
//!   memory (emptying only the used slots when few are).
//! * `words`: byte slices compared 8 bytes a word (the last word
//!   overlapping), where the artifact's `==` is compiler-builtins' byte loop:
//!   keys, literals, enums; digit runs read 8 digits a word (fewer loop turns,
//!   each an epoch check in wasmtime's code); `digit_bytes`, the digit test of
//!   a word they and the date and time readers share.
//! * `value`: typed decoding (SPEC §1.3), calendar math (dates and times read
//!   a word at a time at their fixed offsets), base64 (digits from a
//!   256-entry table, four ORed to test a group at once), canonical key
//!   rendering (SPEC §2.4), float fast paths. No silent loss: integers are
//!   compared and converted exactly (never via f64); floats must be finite in
//!   their width; date-times keep microseconds and refuse non-zero digits
//!   beyond; lists never hold nulls.
//! * `report`: error codes, the bounded sorted error sink, the report (SPEC
//!   §3). Errors are kept in a bounded max-heap keyed by (line, column in
//!   line, code, path, message) and emitted sorted; the count of all errors
//!   is always exact. Suggestions break ties alphabetically. Integers only in
//!   the report; field order is the struct order. `to_json` writes
//!   `external_refs` directly, byte for byte what serde's derived `Serialize`
//!   writes (the reference; a proptest holds them equal).
//! * `schema`: the `.pg` language (SPEC §1): `ValueType`, `TypeDef`, `Schema`
//!   (lookups without hashing: a scan, or a binary search over indexes in
//!   name order); `lexer` (tokens with line/column), `parser` (syntax tree;
//!   body constraints written after a property go to the body), `compile`
//!   (names, interfaces, constraints, regexes → `TypeDef` + canonical
//!   `Catalog` + hash), `catalog`, `compiled`, `check`.
//! * `suggest`: "did you mean" (edit distance with transpositions).

pub mod abi;
#[cfg(feature = "arrow")]
mod arrow_out;
mod batch;
mod checks;
mod columns;
mod fast;
mod float;
mod json;
mod layout;
pub mod limits;
mod options;
mod record;
mod report;
mod rows;
mod schema;
mod strmap;
mod suggest;
mod value;
mod words;
#[cfg(target_arch = "wasm32")]
mod js;

#[cfg(feature = "arrow")]
pub use layout::{LANCE_BLOB_METADATA, arrow_schema, arrow_type};
pub use layout::{DST_COLUMN, ID_COLUMN, SRC_COLUMN};
pub use limits::Limits;
pub use options::{Mode, Options, OptionsError};
pub use report::{
    Diagnostic, End, ErrorCode, ExternalRef, LimitDetail, Report, Rules, Stats, TableKind, TableStat,
    VALIDATOR_VERSION, echo,
};
pub use schema::{
    Bound, Catalog, CatalogAnnotation, CatalogCard, CatalogCheck, CatalogProp, CatalogRange, CatalogType, PropDef,
    RESERVED_NAMES, Schema, SchemaError, SchemaErrors, TypeDef, UniqueMember, ValueType,
};
pub use float::{format_f32, format_f64};
pub use value::{decode_base64, encode_base64, format_date, format_timestamp};

/// The differential check of the fast acceptor against the explainer (see
/// `batch::differential`), for tests and fuzz targets only.
#[doc(hidden)]
pub use batch::differential;
use bumpalo::Bump;
use record::Keep;

/// Validates a batch and returns the report (SPEC §3).
pub fn validate(schema: &Schema, options: &Options, batch: &[u8]) -> Report {
    Scratch::default().validate(schema, options, batch)
}

/// What validating a batch allocates for its checks (each table's id,
/// `@unique` and `@card` maps, the chunks of its rows, the arena of ids
/// that are not the batch's own bytes), kept for the next batch. A native
/// caller that validates batch after batch keeps one: its batches run in
/// memory already mapped and sized, instead of growing maps afresh (and
/// faulting their pages in) each time. It holds what the largest batch it
/// has seen needed; drop it to give that back. Reports do not depend on
/// it: [`Scratch::validate`] gives what [`validate`] gives, whatever
/// batches came before.
#[derive(Default)]
pub struct Scratch {
    texts: Bump,
    recycled: checks::Recycled<'static>,
}

impl Scratch {
    /// [`validate`], in this scratch's memory.
    pub fn validate(&mut self, schema: &Schema, options: &Options, batch: &[u8]) -> Report {
        self.run(schema, options, batch, Keep::Nothing, |report, _| report)
    }

    /// [`prepare`], in this scratch's memory (the record batches are new).
    #[cfg(feature = "arrow")]
    pub fn prepare(&mut self, schema: &Schema, options: &Options, batch: &[u8]) -> Result<Prepared, Report> {
        self.prepare_by(schema, options, batch, Keep::Columns, |def, rows| {
            rows.take_columns().expect("prepared rows write their columns").into_arrays(def)
        })
    }

    /// Runs the batch in this scratch's memory and gives `then` its report
    /// and its rows per table; then keeps what they were in.
    fn run<T>(
        &mut self,
        schema: &Schema,
        options: &Options,
        batch: &[u8],
        keep: Keep,
        then: impl FnOnce(Report, &mut [record::Rows<'_>]) -> T,
    ) -> T {
        self.texts.reset();
        let recycled = std::mem::take(&mut self.recycled);
        let batch::Outcome { report, mut tables, recycled } = batch::run(schema, options, batch, keep, &self.texts, recycled);
        let result = then(report, &mut tables);
        self.recycled = recycled.relent(tables);
        result
    }
}

/// One touched table of an accepted batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTable {
    pub kind: TableKind,
    pub name: String,
    pub rows: u64,
    /// The batch line of each row, in the record batch's row order (for a
    /// merge-folded id, the line of the record that won: the last).
    pub lines: Vec<u64>,
    /// Arrow IPC stream: one record batch with the columns of
    /// [`arrow_schema`]. A null `_id` asks the host to generate one.
    pub ipc: Vec<u8>,
}

/// An accepted batch: its report and its rows as Arrow record batches, per
/// touched table (nodes first, then edges, each by name). A host in the
/// same process hands these to its store as they are;
/// [`Prepared::into_tables`] serializes them for one that is not.
#[cfg(feature = "arrow")]
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub report: Report,
    pub tables: Vec<PreparedBatch>,
}

#[cfg(feature = "arrow")]
impl Prepared {
    /// Each table as Arrow IPC stream bytes.
    pub fn into_tables(self) -> Vec<PreparedTable> {
        self.tables.into_iter().map(PreparedBatch::into_table).collect()
    }
}

/// Validates a batch and, if it is accepted, returns its report and its
/// canonical rows (the encoding of `rows.rs`; what the wasm artifact's
/// `og_prepare` returns). A rejected batch gives its report and no output.
pub fn prepare_rows(schema: &Schema, options: &Options, batch: &[u8]) -> Result<(Report, Vec<u8>), Report> {
    prepare_rows_after(schema, options, batch, |_, _| Vec::new())
}

/// [`prepare_rows`] with the rows appended to `head(&report, rows_bytes)`,
/// where `rows_bytes` is what the rows are expected to take (for the
/// head's capacity): the artifact writes its result buffer's header first,
/// so the rows, about the size of the batch, are written once and never
/// copied.
pub fn prepare_rows_after(
    schema: &Schema,
    options: &Options,
    batch: &[u8],
    head: impl FnOnce(&Report, usize) -> Vec<u8>,
) -> Result<(Report, Vec<u8>), Report> {
    Scratch::default().run(schema, options, batch, Keep::Columns, |report, tables| {
        if !report.ok {
            return Err(report);
        }
        let mut out = head(&report, rows::encoded_capacity(schema, tables));
        rows::encode_into(schema, tables, &mut out);
        Ok((report, out))
    })
}

/// Validates a batch and, if it is accepted, converts it to Arrow for the
/// host: the record batches [`batches_from_rows`] makes of its canonical
/// rows ([`prepare_rows`]), here made from the columns directly (their
/// buffers moved into the arrays, not encoded and read back). A rejected
/// batch gives its report and no output.
#[cfg(feature = "arrow")]
pub fn prepare(schema: &Schema, options: &Options, batch: &[u8]) -> Result<Prepared, Report> {
    Scratch::default().prepare(schema, options, batch)
}

/// [`prepare`] by another road, for tests and fuzz targets to compare
/// with: every row keeps its values and arrow-rs's builders make the
/// columns from them (`arrow_out`), where `prepare` writes Arrow's buffers
/// itself as rows arrive (`columns`).
#[cfg(feature = "arrow")]
#[doc(hidden)]
pub fn prepare_reference(schema: &Schema, options: &Options, batch: &[u8]) -> Result<Prepared, Report> {
    Scratch::default().prepare_by(schema, options, batch, Keep::Values, |def, rows| arrow_out::value_columns(def, rows))
}

#[cfg(feature = "arrow")]
impl Scratch {
    /// Validates a batch keeping `keep` of its rows and, if it is accepted,
    /// makes each touched table's record batch with `properties` (its
    /// property columns).
    fn prepare_by(
        &mut self,
        schema: &Schema,
        options: &Options,
        batch: &[u8],
        keep: Keep,
        properties: impl Fn(&TypeDef, &mut record::Rows<'_>) -> Vec<arrow_array::ArrayRef>,
    ) -> Result<Prepared, Report> {
        self.run(schema, options, batch, keep, |report, tables| {
            if !report.ok {
                return Err(report);
            }
            let tables = schema
                .types
                .iter()
                .zip(tables)
                .filter(|(_, rows)| !rows.is_empty())
                .map(|(def, rows)| {
                    let properties = properties(def, rows);
                    let batch =
                        arrow_out::record_batch(def, rows, properties).expect("validated rows match the table's Arrow schema");
                    PreparedBatch::new(def, rows.iter().map(|row| row.line).collect(), batch)
                })
                .collect();
            Ok(Prepared { report, tables })
        })
    }
}

/// One touched table of an accepted batch as an Arrow record batch: what
/// [`PreparedTable::ipc`] serializes.
#[cfg(feature = "arrow")]
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedBatch {
    pub kind: TableKind,
    pub name: String,
    /// The batch line of each row, as [`PreparedTable::lines`].
    pub lines: Vec<u64>,
    pub batch: arrow_array::RecordBatch,
}

#[cfg(feature = "arrow")]
impl PreparedBatch {
    fn new(def: &TypeDef, lines: Vec<u64>, batch: arrow_array::RecordBatch) -> PreparedBatch {
        PreparedBatch { kind: def.kind, name: def.name.clone(), lines, batch }
    }

    /// The same table as Arrow IPC stream bytes.
    pub fn into_table(self) -> PreparedTable {
        PreparedTable {
            kind: self.kind,
            name: self.name,
            rows: self.lines.len() as u64,
            lines: self.lines,
            ipc: arrow_out::ipc_stream(&self.batch).expect("writing IPC to memory cannot fail"),
        }
    }
}

/// Turns canonical rows (from [`prepare_rows`] or the wasm artifact's
/// `og_prepare`) into Arrow tables, exactly as [`prepare`] would.
#[cfg(feature = "arrow")]
pub fn tables_from_rows(schema: &Schema, rows: &[u8]) -> Result<Vec<PreparedTable>, rows::MalformedBuffer> {
    Ok(batches_from_rows(schema, rows)?.into_iter().map(PreparedBatch::into_table).collect())
}

/// [`tables_from_rows`] without the IPC encoding: the record batches. Their
/// arrays are slices of `rows`: an Arrow `Buffer` is used as it is, a byte
/// slice is copied once into an aligned one.
#[cfg(feature = "arrow")]
pub fn batches_from_rows(
    schema: &Schema,
    rows: impl Into<arrow_buffer::Buffer>,
) -> Result<Vec<PreparedBatch>, rows::MalformedBuffer> {
    Ok(rows::decode(schema, rows.into())?
        .into_iter()
        .map(|(t, lines, batch)| PreparedBatch::new(&schema.types[t], lines, batch))
        .collect())
}
