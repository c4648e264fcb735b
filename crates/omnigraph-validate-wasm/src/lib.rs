//! OmniGraph ingest's rule book: the `.pg` schema language, the strict NDJSON
//! envelope parser and the batch validator (see `SPEC.md` §1–§3, §5).
//!
//! The core is pure: no I/O, clocks, randomness or threads, so the same code
//! gives the same report natively, in wasmtime, in Node and in browsers.
//!
//! ```
//! use omnigraph_validate_wasm::{Options, Schema, validate};
//! let schema = Schema::compile("node Person { name: String @key }").unwrap();
//! let report = validate(&schema, &Options::default(), b"{\"type\":\"Person\",\"data\":{\"name\":\"Ada\"}}\n");
//! assert!(report.ok);
//! ```

pub mod abi;
#[cfg(feature = "arrow")]
mod arrow_out;
mod batch;
mod checks;
mod columns;
mod fast;
mod json;
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
pub use arrow_out::{LANCE_BLOB_METADATA, arrow_schema, arrow_type};
pub use rows::{DST_COLUMN, ID_COLUMN, SRC_COLUMN};
pub use limits::Limits;
pub use options::{Mode, Options, OptionsError};
pub use report::{
    Diagnostic, End, ErrorCode, ExternalRef, LimitDetail, Report, Rules, Stats, TableKind, TableStat, echo,
};
pub use schema::{
    Bound, Catalog, CatalogAnnotation, CatalogCard, CatalogCheck, CatalogProp, CatalogRange, CatalogType, PropDef,
    RESERVED_NAMES, Schema, SchemaError, SchemaErrors, TypeDef, UniqueMember, ValueType,
};
pub use value::{decode_base64, encode_base64, format_date, format_f32, format_f64, format_timestamp};

/// The rule book's version; part of every report's `rules`.
pub const VALIDATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

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
pub fn tables_from_rows(schema: &Schema, rows: &[u8]) -> Result<Vec<PreparedTable>, abi::MalformedBuffer> {
    Ok(batches_from_rows(schema, rows)?.into_iter().map(PreparedBatch::into_table).collect())
}

/// [`tables_from_rows`] without the IPC encoding: the record batches. Their
/// arrays are slices of `rows`: an Arrow `Buffer` is used as it is, a byte
/// slice is copied once into an aligned one.
#[cfg(feature = "arrow")]
pub fn batches_from_rows(
    schema: &Schema,
    rows: impl Into<arrow_buffer::Buffer>,
) -> Result<Vec<PreparedBatch>, abi::MalformedBuffer> {
    Ok(rows::decode(schema, rows.into())?
        .into_iter()
        .map(|(t, lines, batch)| PreparedBatch::new(&schema.types[t], lines, batch))
        .collect())
}
