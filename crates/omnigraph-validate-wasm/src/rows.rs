//! Canonical rows: what an accepted batch becomes before it is Arrow. The
//! wasm artifact returns them from `og_prepare` in the binary form below;
//! hosts decode them and build Arrow natively (the artifact stays small).
//! The bounds `table_bytes_limit` and `keyed_parse_bytes` count their sizes,
//! estimated here.
//!
//! Encoding (little-endian): `u32 tables`, then per table `u32 type index,
//! u32 rows`, then per row `u64 line` (the batch line the row comes from),
//! `id` (u8 present + str), `src` and `dst` (str), `u32 values`, each value
//! a tag byte and its payload. A str is `u32 len` and UTF-8 bytes.

#[cfg(feature = "arrow")]
use crate::abi::MalformedBuffer;
use crate::limits::KEYED_ENTRY_OVERHEAD_BYTES;
use crate::record::{Row, Rows};
use crate::report::TableKind;
use crate::schema::{TypeDef, ValueType};
#[cfg(feature = "arrow")]
use crate::schema::Schema;
use crate::value::Val;

/// Column names of the envelope (SPEC §4.1).
pub const ID_COLUMN: &str = "_id";
pub const SRC_COLUMN: &str = "_src";
pub const DST_COLUMN: &str = "_dst";

fn fixed_width(ty: &ValueType) -> u64 {
    match ty {
        ValueType::Bool => 1,
        ValueType::I32 | ValueType::U32 | ValueType::F32 | ValueType::Date => 4,
        ValueType::I64 | ValueType::U64 | ValueType::F64 | ValueType::DateTime => 8,
        ValueType::Vector(n) => 4 * *n as u64,
        // Offsets of variable-width columns.
        ValueType::String | ValueType::Enum(_) | ValueType::List(_) => 4,
        ValueType::Blob => 8,
    }
}

/// A value's Arrow data bytes beyond its type's fixed width (strings,
/// blobs, list items); zero for nulls.
#[inline]
pub(crate) fn data_bytes(ty: &ValueType, v: &Val<'_>) -> u64 {
    match (ty, v) {
        (_, Val::Str(s)) => s.len() as u64,
        (_, Val::Sized(data)) => *data,
        (_, Val::Blob(b)) => b.len() as u64,
        (ValueType::List(item), Val::List(items)) => list_bytes(item, items),
        _ => 0,
    }
}

fn list_bytes(item: &ValueType, items: &[Val<'_>]) -> u64 {
    items.iter().map(|i| value_bytes(item, i)).sum()
}

pub(crate) fn value_bytes(ty: &ValueType, v: &Val<'_>) -> u64 {
    fixed_width(ty) + data_bytes(ty, v)
}

/// The Arrow bytes of a row of `def` that do not depend on its values.
pub(crate) fn fixed_bytes(def: &TypeDef) -> u64 {
    def.props.iter().map(|p| fixed_width(&p.ty)).sum()
}

/// The Arrow bytes of a row's envelope columns (`_id`, `_src`, `_dst`).
pub(crate) fn envelope_bytes(def: &TypeDef, id: Option<&str>, src: &str, dst: &str) -> u64 {
    let mut n = 4 + id.map_or(0, |id| id.len() as u64);
    if def.kind == TableKind::Edge {
        n += 8 + src.len() as u64 + dst.len() as u64;
    }
    n
}

/// The Arrow bytes one row adds to its table: value and offset buffers
/// (validity bitmaps excluded). The bound `table_bytes_limit` counts these.
pub fn row_arrow_bytes(def: &TypeDef, id: Option<&str>, src: &str, dst: &str, values: &[Val<'_>]) -> u64 {
    let data: u64 = def.props.iter().zip(values).map(|(p, v)| data_bytes(&p.ty, v)).sum();
    envelope_bytes(def, id, src, dst) + fixed_bytes(def) + data
}

/// One row's share of the keyed parse estimate (see
/// [`crate::Limits::max_keyed_parse_bytes`]): its Arrow bytes, its identity's
/// UTF-8 length and one map entry.
pub fn keyed_parse_bytes(row: &Row<'_>) -> u64 {
    row.arrow_bytes + row.id.as_ref().map_or(0, |id| id.len() as u64) + KEYED_ENTRY_OVERHEAD_BYTES
}

mod tag {
    pub const NULL: u8 = 0;
    pub const BOOL: u8 = 1;
    pub const INT: u8 = 2;
    pub const UINT: u8 = 3;
    pub const F32: u8 = 4;
    pub const F64: u8 = 5;
    pub const STR: u8 = 6;
    pub const DATE: u8 = 7;
    pub const TIMESTAMP: u8 = 8;
    pub const BLOB: u8 = 9;
    pub const VECTOR: u8 = 10;
    pub const LIST: u8 = 11;
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b.len());
    out.extend_from_slice(b);
}

/// A fixed-width value: its tag, then its little-endian bytes.
fn put_tagged(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(bytes);
}

fn put_value(out: &mut Vec<u8>, v: &Val<'_>) {
    match v {
        Val::Null => out.push(tag::NULL),
        Val::Bool(b) => out.extend_from_slice(&[tag::BOOL, *b as u8]),
        Val::Int(i) => put_tagged(out, tag::INT, &i.to_le_bytes()),
        Val::UInt(u) => put_tagged(out, tag::UINT, &u.to_le_bytes()),
        Val::F32(f) => put_tagged(out, tag::F32, &f.to_le_bytes()),
        Val::F64(f) => put_tagged(out, tag::F64, &f.to_le_bytes()),
        Val::Str(s) => {
            out.push(tag::STR);
            put_bytes(out, s.as_bytes());
        }
        Val::Date(d) => put_tagged(out, tag::DATE, &d.to_le_bytes()),
        Val::Timestamp(t) => put_tagged(out, tag::TIMESTAMP, &t.to_le_bytes()),
        Val::Blob(b) => {
            out.push(tag::BLOB);
            put_bytes(out, b);
        }
        Val::Vector(items) => {
            out.push(tag::VECTOR);
            put_len(out, items.len());
            for f in items {
                out.extend_from_slice(&f.to_le_bytes());
            }
        }
        Val::List(items) => {
            out.push(tag::LIST);
            put_len(out, items.len());
            for item in items {
                put_value(out, item);
            }
        }
        Val::Sized(_) => unreachable!("rows keep their values whole when they are encoded"),
    }
}

/// Encodes the rows of every touched table (rows kept with their values).
pub fn encode(tables: &[Rows<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    put_len(&mut out, tables.iter().filter(|rows| !rows.is_empty()).count());
    for (t, rows) in tables.iter().enumerate().filter(|(_, rows)| !rows.is_empty()) {
        put_len(&mut out, t);
        put_len(&mut out, rows.len());
        for (row, values) in rows.with_values() {
            out.extend_from_slice(&row.line.to_le_bytes());
            match &row.id {
                Some(id) => {
                    out.push(1);
                    put_bytes(&mut out, id.as_bytes());
                }
                None => out.push(0),
            }
            put_bytes(&mut out, row.src.as_bytes());
            put_bytes(&mut out, row.dst.as_bytes());
            put_len(&mut out, values.len());
            for v in values {
                put_value(&mut out, v);
            }
        }
    }
    out
}

#[cfg(feature = "arrow")]
struct Reader<'b> {
    bytes: &'b [u8],
    pos: usize,
}

#[cfg(feature = "arrow")]
impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], MalformedBuffer> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(MalformedBuffer("truncated"))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], MalformedBuffer> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn len(&mut self) -> Result<usize, MalformedBuffer> {
        Ok(u32::from_le_bytes(self.array()?) as usize)
    }

    fn str(&mut self) -> Result<&'b str, MalformedBuffer> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).map_err(|_| MalformedBuffer("text is not UTF-8"))
    }

    fn value(&mut self, depth: u32) -> Result<Val<'b>, MalformedBuffer> {
        Ok(match self.take(1)?[0] {
            tag::NULL => Val::Null,
            tag::BOOL => Val::Bool(self.take(1)?[0] != 0),
            tag::INT => Val::Int(i64::from_le_bytes(self.array()?)),
            tag::UINT => Val::UInt(u64::from_le_bytes(self.array()?)),
            tag::F32 => Val::F32(f32::from_le_bytes(self.array()?)),
            tag::F64 => Val::F64(f64::from_le_bytes(self.array()?)),
            tag::STR => Val::Str(std::borrow::Cow::Borrowed(self.str()?)),
            tag::DATE => Val::Date(i32::from_le_bytes(self.array()?)),
            tag::TIMESTAMP => Val::Timestamp(i64::from_le_bytes(self.array()?)),
            tag::BLOB => {
                let n = self.len()?;
                Val::Blob(self.take(n)?.to_vec())
            }
            tag::VECTOR => {
                let n = self.len()?;
                let raw = self.take(n.checked_mul(4).ok_or(MalformedBuffer("vector too long"))?)?;
                Val::Vector(raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
            }
            tag::LIST if depth == 0 => {
                let n = self.len()?;
                let mut items = Vec::with_capacity(n.min(self.bytes.len()));
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Val::List(items)
            }
            _ => return Err(MalformedBuffer("unknown value tag")),
        })
    }
}

/// Decodes [`encode`]'s output (hosts only: they build Arrow from it): per
/// table, its index in `schema.types` and its rows (text borrowed from
/// `bytes`, with their lines; offsets and batch-check fields are not carried).
#[cfg(feature = "arrow")]
pub fn decode<'b>(schema: &Schema, bytes: &'b [u8]) -> Result<Vec<(usize, Rows<'b>)>, MalformedBuffer> {
    let mut r = Reader { bytes, pos: 0 };
    let count = r.len()?;
    let mut tables = Vec::with_capacity(count.min(schema.types.len()));
    for _ in 0..count {
        let t = r.len()?;
        let def: &TypeDef = schema.types.get(t).ok_or(MalformedBuffer("unknown table"))?;
        let n = r.len()?;
        let mut rows = Rows::new(def.props.len(), 0);
        let mut values = Vec::with_capacity(def.props.len());
        for _ in 0..n {
            let line = u64::from_le_bytes(r.array()?);
            let id = match r.take(1)?[0] {
                0 => None,
                _ => Some(std::borrow::Cow::Borrowed(r.str()?)),
            };
            let (src, dst) = (std::borrow::Cow::Borrowed(r.str()?), std::borrow::Cow::Borrowed(r.str()?));
            let count = r.len()?;
            if count != def.props.len() {
                return Err(MalformedBuffer("row does not match its table"));
            }
            for _ in 0..count {
                values.push(r.value(0)?);
            }
            rows.push(Row { line, offset: 0, id, src, dst, arrow_bytes: 0 }, values.drain(..), std::iter::empty());
        }
        tables.push((t, rows));
    }
    if r.pos != bytes.len() {
        return Err(MalformedBuffer("trailing bytes"));
    }
    Ok(tables)
}
