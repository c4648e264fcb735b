//! Canonical rows: what an accepted batch becomes for the host. The wasm
//! artifact returns them from `og_prepare` as Arrow's column buffers
//! ([`encode_into`]); hosts wrap those into arrays ([`decode`]) with no Arrow
//! code in the artifact (it stays small). The bound `keyed_parse_bytes`
//! counts a row's share here; its Arrow bytes are `layout.rs`'s. More in lib.rs.

#[cfg(feature = "arrow")]
use arrow_array::{RecordBatch, make_array};
#[cfg(feature = "arrow")]
use arrow_schema::DataType;

use crate::columns::Out;
#[cfg(feature = "arrow")]
use crate::layout::arrow_schema;
use crate::limits::KEYED_ENTRY_OVERHEAD_BYTES;
use crate::record::{Row, Rows};
use crate::report::TableKind;
use crate::schema::Schema;
#[cfg(feature = "arrow")]
use crate::schema::TypeDef;
#[cfg(feature = "arrow")]
use crate::words::half;

/// A rows buffer, or a result buffer, that does not follow the ABI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedBuffer(pub &'static str);

impl std::fmt::Display for MalformedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed validator result buffer: {}", self.0)
    }
}

impl std::error::Error for MalformedBuffer {}

/// One row's share of the keyed parse estimate (see
/// [`crate::Limits::max_keyed_parse_bytes`]): its Arrow bytes, its identity's
/// UTF-8 length and one map entry.
pub fn keyed_parse_bytes(row: &Row<'_>) -> u64 {
    row.arrow_bytes + row.id.as_ref().map_or(0, |id| id.len() as u64) + KEYED_ENTRY_OVERHEAD_BYTES
}


/// Encodes the rows of every touched table (rows that wrote their columns,
/// `Keep::Columns`) as Arrow columns: what the host wraps into arrays without reading a
/// value (ABI v4; v3 tagged every value and the host decoded them one by
/// one into rows, then built Arrow from those).
///
/// Layout (little-endian; every part 8-byte aligned from the start):
/// `u32 tables, u32 0`, then per table `u32 type index, u32 rows`, a buffer
/// of the rows' batch lines (`u64` each), then each column of its Arrow
/// schema (`_id`, `_src`/`_dst` for edges, the properties in catalog order).
/// A buffer is a `u64` length and its bytes, zero-padded to 8. A column is a
/// validity buffer (empty when no value is null), then by type: Utf8 (and
/// enums) `i32` offsets and data; LargeBinary `i64` offsets and data;
/// Boolean a bitmap; other scalars their values (zeros where null);
/// FixedSizeList the child validity and the `f32` items; List `i32` offsets
/// and the child column.
///
/// The encoding is appended to `bytes` (the artifact writes its result
/// header first, so the rows are never copied into a second buffer).
pub fn encode_into(schema: &Schema, tables: &[Rows<'_>], bytes: &mut Vec<u8>) {
    // Exact: `reserve` would double a buffer that already holds a large
    // report (every external reference listed) instead of adding the rows.
    bytes.reserve_exact(encoded_capacity(schema, tables));
    let mut out = Out::new(bytes);
    out.pair(tables.iter().filter(|rows| !rows.is_empty()).count(), 0);
    for ((t, rows), def) in tables.iter().enumerate().zip(&schema.types).filter(|((_, rows), _)| !rows.is_empty()) {
        out.pair(t, rows.len());
        out.buffer(|out| rows.iter().for_each(|row| out.extend_from_slice(&row.line.to_le_bytes())));
        out.validity(&rows.iter().map(|row| row.id.is_some()).collect());
        out.variable(false, rows.iter().map(|row| row.id.unwrap_or("").as_bytes()));
        if def.kind == TableKind::Edge {
            out.no_nulls();
            out.variable(false, rows.iter().map(|row| row.src.as_bytes()));
            out.no_nulls();
            out.variable(false, rows.iter().map(|row| row.dst.as_bytes()));
        }
        rows.columns().expect("prepared rows write their columns").write(def, &mut out);
    }
}

/// The bytes [`encode_into`] is expected to append (an estimate from the
/// rows' Arrow sizes, so the output is allocated once).
pub fn encoded_capacity(schema: &Schema, tables: &[Rows<'_>]) -> usize {
    let rows: u64 = tables.iter().flat_map(Rows::iter).map(|row| row.arrow_bytes + 16).sum();
    rows as usize + 64 * schema.types.len()
}

/// Reads [`encode_into`]'s output. Buffers are slices of one Arrow buffer: no
/// value is copied or read one by one, and Arrow's validation of each
/// column (offsets, UTF-8, lengths) stands between a broken buffer and the
/// host.
#[cfg(feature = "arrow")]
struct Reader {
    bytes: arrow_buffer::Buffer,
    pos: usize,
}

#[cfg(feature = "arrow")]
impl Reader {
    fn take(&mut self, n: usize) -> Result<arrow_buffer::Buffer, MalformedBuffer> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(MalformedBuffer("truncated"))?;
        let part = self.bytes.slice_with_length(self.pos, n);
        self.pos = end.next_multiple_of(8).min(self.bytes.len());
        Ok(part)
    }

    fn pair(&mut self) -> Result<(usize, usize), MalformedBuffer> {
        let pair = self.take(8)?;
        Ok((half(&pair, 0) as usize, half(&pair, 4) as usize))
    }

    fn buffer(&mut self) -> Result<arrow_buffer::Buffer, MalformedBuffer> {
        let len = u64::from_le_bytes(self.take(8)?.as_slice().try_into().expect("8 bytes"));
        self.take(usize::try_from(len).map_err(|_| MalformedBuffer("truncated"))?)
    }

    /// A buffer that must hold exactly `bytes` (Arrow panics on typed
    /// buffers of the wrong size, before validating).
    fn sized(&mut self, bytes: usize) -> Result<arrow_buffer::Buffer, MalformedBuffer> {
        let buffer = self.buffer()?;
        if buffer.len() != bytes {
            return Err(MalformedBuffer("a buffer does not fit its column"));
        }
        Ok(buffer)
    }

    /// The `len + 1` offsets, `N` bytes each, of a variable-width column.
    fn offsets<const N: usize>(&mut self, len: usize) -> Result<arrow_buffer::Buffer, MalformedBuffer> {
        self.sized(len.checked_add(1).and_then(|n| n.checked_mul(N)).ok_or(MalformedBuffer("column too long"))?)
    }

    /// A column of `len` values of `data_type`, as [`column`] wrote it.
    fn column(&mut self, data_type: &DataType, len: usize) -> Result<arrow_data::ArrayData, MalformedBuffer> {
        let validity = self.buffer()?;
        // Arrow panics on a bitmap shorter than its array, before validating.
        if !validity.is_empty() && validity.len() != len.div_ceil(8) {
            return Err(MalformedBuffer("a validity bitmap does not fit its column"));
        }
        let mut data = arrow_data::ArrayData::builder(data_type.clone())
            .len(len)
            .null_bit_buffer((!validity.is_empty()).then_some(validity))
            .align_buffers(true);
        data = match data_type {
            DataType::Utf8 => data.add_buffer(self.offsets::<4>(len)?).add_buffer(self.buffer()?),
            DataType::LargeBinary => data.add_buffer(self.offsets::<8>(len)?).add_buffer(self.buffer()?),
            DataType::Boolean => data.add_buffer(self.sized(len.div_ceil(8))?),
            DataType::FixedSizeList(item, n) => {
                let items = len.checked_mul(*n as usize).ok_or(MalformedBuffer("vector too long"))?;
                data.add_child_data(self.column(item.data_type(), items)?)
            }
            DataType::List(item) => {
                let offsets = self.offsets::<4>(len)?;
                let items = i32::from_le_bytes(offsets[4 * len..].try_into().expect("4 bytes"));
                let items = usize::try_from(items).map_err(|_| MalformedBuffer("negative list offset"))?;
                data.add_buffer(offsets).add_child_data(self.column(item.data_type(), items)?)
            }
            other => {
                let width = other.primitive_width().expect("the Arrow schema's other types are fixed-width");
                data.add_buffer(self.sized(len.checked_mul(width).ok_or(MalformedBuffer("column too long"))?)?)
            }
        };
        data.build().map_err(|_| MalformedBuffer("a column is not valid Arrow of its type"))
    }
}

/// Decodes [`encode_into`]'s output (hosts only: they wrap it into Arrow):
/// per touched table, its record batch and each row's batch line. The
/// arrays are slices of `bytes`, which is not copied (a part that is not
/// aligned for its type, as when `bytes` does not start 8-aligned, is).
#[cfg(feature = "arrow")]
pub fn decode(schema: &Schema, bytes: arrow_buffer::Buffer) -> Result<Vec<(usize, Vec<u64>, RecordBatch)>, MalformedBuffer> {
    let mut r = Reader { bytes, pos: 0 };
    let (count, _) = r.pair()?;
    let mut tables = Vec::with_capacity(count.min(schema.types.len()));
    for _ in 0..count {
        let (t, n) = r.pair()?;
        let def: &TypeDef = schema.types.get(t).ok_or(MalformedBuffer("unknown table"))?;
        let lines = r.sized(n.checked_mul(8).ok_or(MalformedBuffer("column too long"))?)?;
        let lines = lines.chunks_exact(8).map(|l| u64::from_le_bytes(l.try_into().expect("8 bytes"))).collect();
        let arrow_schema = arrow_schema(def);
        let columns = arrow_schema
            .fields()
            .iter()
            .map(|field| Ok(make_array(r.column(field.data_type(), n)?)))
            .collect::<Result<Vec<_>, MalformedBuffer>>()?;
        let batch = RecordBatch::try_new(arrow_schema, columns).map_err(|_| MalformedBuffer("row does not match its table"))?;
        tables.push((t, lines, batch));
    }
    if r.pos != r.bytes.len() {
        return Err(MalformedBuffer("trailing bytes"));
    }
    Ok(tables)
}
