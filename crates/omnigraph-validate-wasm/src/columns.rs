//! A table's property columns written as its rows arrive (`prepare`): each
//! value goes into its column's Arrow buffers while the record is still in
//! cache, so rows keep no values, and the canonical rows (`rows::encode_into`)
//! copy the buffers out instead of walking every row again. Rows that die later
//! (folded away, refused) are dropped from the columns by
//! [`Columns::remove_flagged`], which rewrites them. More in lib.rs.

#[cfg(feature = "arrow")]
use arrow_array::{ArrayRef, make_array};
#[cfg(feature = "arrow")]
use arrow_data::ArrayData;
#[cfg(feature = "arrow")]
use arrow_schema::DataType;

#[cfg(feature = "arrow")]
use crate::layout::arrow_type;
use crate::layout::fixed_width;
use crate::schema::{TypeDef, ValueType};
use crate::value::Val;

/// Appends the parts of the encoding to `bytes`, each 8-byte aligned
/// relative to `start`, where the encoding begins (whatever `bytes` held
/// before it, such as the artifact's result header, is left as it is).
pub(crate) struct Out<'o> {
    bytes: &'o mut Vec<u8>,
    start: usize,
}

impl Out<'_> {
    /// Appends to `bytes`, the encoding starting where `bytes` ends now.
    pub(crate) fn new(bytes: &mut Vec<u8>) -> Out<'_> {
        Out { start: bytes.len(), bytes }
    }

    pub(crate) fn pair(&mut self, a: usize, b: usize) {
        self.bytes.extend_from_slice(&(a as u32).to_le_bytes());
        self.bytes.extend_from_slice(&(b as u32).to_le_bytes());
    }

    /// A buffer: its length as a `u64`, what `write` appends, zero padding.
    pub(crate) fn buffer(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&[0; 8]);
        write(self.bytes);
        let len = (self.bytes.len() - at - 8) as u64;
        self.bytes[at..at + 8].copy_from_slice(&len.to_le_bytes());
        let padded = self.start + (self.bytes.len() - self.start).next_multiple_of(8);
        self.bytes.resize(padded, 0);
    }

    /// A validity bitmap, or an empty buffer when no value is null.
    pub(crate) fn validity(&mut self, valid: &Bits) {
        self.buffer(|out| out.extend_from_slice(valid.validity().unwrap_or_default()));
    }

    /// The validity buffer of a column that has no nulls.
    pub(crate) fn no_nulls(&mut self) {
        self.buffer(|_| {});
    }

    /// Offsets (`i32`, or `i64` when `wide`) and data of variable-width values.
    pub(crate) fn variable<'v>(&mut self, wide: bool, values: impl Iterator<Item = &'v [u8]> + Clone) {
        let mut end = 0;
        self.buffer(|out| {
            push_offset(out, wide, 0);
            for v in values.clone() {
                end += v.len();
                push_offset(out, wide, end);
            }
        });
        self.buffer(|out| {
            out.reserve(end);
            values.for_each(|v| out.extend_from_slice(v));
        });
    }
}

/// An Arrow bitmap being written, least significant bit first.
#[derive(Debug, Default)]
pub(crate) struct Bits {
    bytes: Vec<u8>,
    len: usize,
    unset: usize,
}

impl FromIterator<bool> for Bits {
    fn from_iter<I: IntoIterator<Item = bool>>(flags: I) -> Bits {
        let mut bits = Bits::default();
        flags.into_iter().for_each(|flag| bits.push(flag));
        bits
    }
}

impl Bits {
    /// The bitmap as a validity buffer: none when every flag is set (a
    /// column without nulls, as Arrow's builders leave it).
    pub(crate) fn validity(&self) -> Option<&[u8]> {
        (self.unset > 0).then_some(&self.bytes)
    }

    /// A vector column's item validity: each row's flag once per item, or
    /// no flags at all when every row is valid (`validity` is then none).
    fn per_item(&self, items: u32) -> Bits {
        match self.unset {
            0 => Bits::default(),
            _ => (0..self.len).flat_map(|i| std::iter::repeat_n(self.get(i), items as usize)).collect(),
        }
    }

    fn push(&mut self, flag: bool) {
        if self.len.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if let Some(last) = self.bytes.last_mut() {
            *last |= u8::from(flag) << (self.len % 8);
        }
        self.len += 1;
        self.unset += usize::from(!flag);
    }

    fn get(&self, i: usize) -> bool {
        self.bytes[i / 8] >> (i % 8) & 1 == 1
    }
}

/// A column's buffers after its validity, by Arrow type.
#[derive(Debug)]
enum Payload {
    /// Utf8 and enums (`i32` offsets) or LargeBinary (`wide`: `i64`), each
    /// offset written as it is final; a null adds an empty value.
    Variable { wide: bool, offsets: Vec<u8>, data: Vec<u8> },
    Bool(Bits),
    /// Fixed-width scalars and a vector's items: `width` bytes per value,
    /// zeros where null (as Arrow's builders write).
    Fixed { width: usize, bytes: Vec<u8> },
    /// A list's item offsets (`i32`) and its items, never null.
    List { offsets: Vec<u8>, len: usize, items: Box<Payload> },
}

impl Payload {
    fn new(ty: &ValueType) -> Payload {
        match ty {
            ValueType::String | ValueType::Enum(_) => Payload::Variable { wide: false, offsets: 0i32.to_le_bytes().to_vec(), data: Vec::new() },
            ValueType::Blob => Payload::Variable { wide: true, offsets: 0i64.to_le_bytes().to_vec(), data: Vec::new() },
            ValueType::Bool => Payload::Bool(Bits::default()),
            ValueType::List(item) => Payload::List { offsets: 0i32.to_le_bytes().to_vec(), len: 0, items: Box::new(Payload::new(item)) },
            fixed => Payload::Fixed { width: fixed_width(fixed) as usize, bytes: Vec::new() },
        }
    }

    fn push(&mut self, ty: &ValueType, v: &Val<'_>) {
        match self {
            Payload::Variable { wide, offsets, data } => {
                match v {
                    Val::Str(s) => data.extend_from_slice(s.as_bytes()),
                    Val::Blob(b) => data.extend_from_slice(b),
                    _ => {}
                }
                push_offset(offsets, *wide, data.len());
            }
            Payload::Bool(bits) => bits.push(matches!(v, Val::Bool(true))),
            Payload::Fixed { width, bytes } => match v {
                Val::Vector(items) => items.iter().for_each(|f| bytes.extend_from_slice(&f.to_le_bytes())),
                Val::Null => bytes.resize(bytes.len() + *width, 0),
                // A copy of a constant size each, not a call to `memcpy` of `width` bytes.
                _ if *width == 4 => bytes.extend_from_slice(&scalar_bytes(ty, v)[..4]),
                _ => bytes.extend_from_slice(&scalar_bytes(ty, v)),
            },
            Payload::List { offsets, len, items } => {
                let ValueType::List(item) = ty else { unreachable!("a list column holds lists") };
                if let Val::List(list) = v {
                    list.iter().for_each(|i| items.push(item, i));
                    *len += list.len();
                }
                push_offset(offsets, false, *len);
            }
        }
    }

    /// Appends value `i` of `self` to `into` (a payload of the same type).
    fn copy_value(&self, i: usize, into: &mut Payload) {
        match (self, into) {
            (Payload::Variable { wide, offsets, data }, Payload::Variable { offsets: to_offsets, data: to_data, .. }) => {
                let (start, end) = (offset_at(offsets, *wide, i), offset_at(offsets, *wide, i + 1));
                to_data.extend_from_slice(&data[start..end]);
                push_offset(to_offsets, *wide, to_data.len());
            }
            (Payload::Bool(bits), Payload::Bool(to)) => to.push(bits.get(i)),
            (Payload::Fixed { width, bytes }, Payload::Fixed { bytes: to, .. }) => {
                to.extend_from_slice(&bytes[i * width..(i + 1) * width]);
            }
            (Payload::List { offsets, items, .. }, Payload::List { offsets: to_offsets, len: to_len, items: to_items }) => {
                let (start, end) = (offset_at(offsets, false, i), offset_at(offsets, false, i + 1));
                (start..end).for_each(|j| items.copy_value(j, to_items));
                *to_len += end - start;
                push_offset(to_offsets, false, *to_len);
            }
            _ => unreachable!("values are copied between columns of one type"),
        }
    }

    /// The buffers, as `rows::decode` reads them after the validity.
    fn write(&self, out: &mut Out) {
        match self {
            Payload::Variable { offsets, data, .. } => {
                out.buffer(|o| o.extend_from_slice(offsets));
                out.buffer(|o| o.extend_from_slice(data));
            }
            Payload::Bool(bits) => out.buffer(|o| o.extend_from_slice(&bits.bytes)),
            Payload::Fixed { bytes, .. } => out.buffer(|o| o.extend_from_slice(bytes)),
            Payload::List { offsets, items, .. } => {
                out.buffer(|o| o.extend_from_slice(offsets));
                // The items' validity: none is null.
                out.no_nulls();
                items.write(out);
            }
        }
    }
}

/// A present fixed-width scalar's little-endian bytes (the first
/// `fixed_width` of them: 4 or 8).
fn scalar_bytes(ty: &ValueType, v: &Val<'_>) -> [u8; 8] {
    let mut out = [0; 8];
    let mut put = |bytes: &[u8]| out[..bytes.len()].copy_from_slice(bytes);
    match (ty, v) {
        (ValueType::I32, Val::Int(i)) => put(&(*i as i32).to_le_bytes()),
        (ValueType::U32, Val::Int(i)) => put(&(*i as u32).to_le_bytes()),
        (ValueType::I64, Val::Int(i)) => put(&i.to_le_bytes()),
        (ValueType::U64, Val::UInt(u)) => put(&u.to_le_bytes()),
        (ValueType::F32, Val::F32(f)) => put(&f.to_le_bytes()),
        (ValueType::F64, Val::F64(f)) => put(&f.to_le_bytes()),
        (ValueType::Date, Val::Date(d)) => put(&d.to_le_bytes()),
        (ValueType::DateTime, Val::Timestamp(t)) => put(&t.to_le_bytes()),
        _ => unreachable!("a validated {} value", ty.canonical()),
    }
    out
}

/// Appends an offset of a variable-width column: `i64` when `wide`, else `i32`.
pub(crate) fn push_offset(offsets: &mut Vec<u8>, wide: bool, end: usize) {
    match wide {
        true => offsets.extend_from_slice(&(end as i64).to_le_bytes()),
        false => {
            let end = i32::try_from(end).expect("an Arrow string or list column holds under 2 GiB");
            offsets.extend_from_slice(&end.to_le_bytes());
        }
    }
}

fn offset_at(offsets: &[u8], wide: bool, i: usize) -> usize {
    match wide {
        true => i64::from_le_bytes(offsets[8 * i..8 * i + 8].try_into().expect("8 bytes")) as usize,
        false => i32::from_le_bytes(offsets[4 * i..4 * i + 4].try_into().expect("4 bytes")) as usize,
    }
}

#[derive(Debug)]
struct Column {
    valid: Bits,
    payload: Payload,
}

/// The property columns of one table, in catalog order.
#[derive(Debug)]
pub struct Columns {
    columns: Vec<Column>,
}

impl Columns {
    pub fn new(def: &TypeDef) -> Columns {
        let columns = def.props.iter().map(|p| Column { valid: Bits::default(), payload: Payload::new(&p.ty) }).collect();
        Columns { columns }
    }

    /// Appends a row's values (one per property of `def`).
    pub fn push(&mut self, def: &TypeDef, values: &[Val<'_>]) {
        debug_assert_eq!(values.len(), self.columns.len(), "a row has every value");
        for ((column, p), v) in self.columns.iter_mut().zip(&def.props).zip(values) {
            column.valid.push(!matches!(v, Val::Null));
            column.payload.push(&p.ty, v);
        }
    }

    /// Keeps the rows whose flag (one per row) is false.
    pub fn remove_flagged(&mut self, def: &TypeDef, flags: &[bool]) {
        for (column, p) in self.columns.iter_mut().zip(&def.props) {
            let mut kept = Column { valid: Bits::default(), payload: Payload::new(&p.ty) };
            for (i, _) in flags.iter().enumerate().filter(|(_, dead)| !**dead) {
                kept.valid.push(column.valid.get(i));
                column.payload.copy_value(i, &mut kept.payload);
            }
            *column = kept;
        }
    }

    /// Writes each column as `rows::decode` reads it: its validity (empty
    /// when no value is null), then its buffers; a vector's items are a
    /// child column, null where the row's vector is.
    pub fn write(&self, def: &TypeDef, out: &mut Out) {
        for (column, p) in self.columns.iter().zip(&def.props) {
            out.validity(&column.valid);
            if let ValueType::Vector(n) = p.ty {
                out.validity(&column.valid.per_item(n));
            }
            column.payload.write(out);
        }
    }

    /// The columns as Arrow arrays of `def`'s property types, their buffers
    /// moved, not copied: the arrays `rows::decode` makes of [`Columns::write`]'s
    /// output, without writing it (native `prepare`).
    #[cfg(feature = "arrow")]
    pub fn into_arrays(self, def: &TypeDef) -> Vec<ArrayRef> {
        let columns = self.columns.into_iter().zip(&def.props);
        columns.map(|(column, p)| make_array(column.payload.into_data(&arrow_type(&p.ty), column.valid.len, &column.valid))).collect()
    }
}

#[cfg(feature = "arrow")]
impl Payload {
    /// This payload as the Arrow data of `len` values of `data_type`, null
    /// where `valid` says (an empty `Bits`: none is).
    fn into_data(self, data_type: &DataType, len: usize, valid: &Bits) -> ArrayData {
        let data = ArrayData::builder(data_type.clone())
            .len(len)
            .null_bit_buffer(valid.validity().map(arrow_buffer::Buffer::from))
            .align_buffers(true);
        let data = match (self, data_type) {
            (Payload::Variable { offsets, data: bytes, .. }, _) => data.add_buffer(offsets.into()).add_buffer(bytes.into()),
            (Payload::Bool(bits), _) => data.add_buffer(bits.bytes.into()),
            (Payload::Fixed { width, bytes }, DataType::FixedSizeList(item, n)) => {
                let (n, items) = (*n as u32, Payload::Fixed { width: width / *n as usize, bytes });
                data.add_child_data(items.into_data(item.data_type(), len * n as usize, &valid.per_item(n)))
            }
            (Payload::Fixed { bytes, .. }, _) => data.add_buffer(bytes.into()),
            (Payload::List { offsets, len: items_len, items }, DataType::List(item)) => {
                data.add_buffer(offsets.into()).add_child_data(items.into_data(item.data_type(), items_len, &Bits::default()))
            }
            (Payload::List { .. }, other) => unreachable!("a list column of Arrow type {other}"),
        };
        data.build().expect("the validator's own columns are valid Arrow of their types")
    }
}

#[cfg(all(test, feature = "arrow"))]
mod tests {
    use std::borrow::Cow;

    use crate::record::{Keep, Row, Rows, SpareChunks};
    use crate::schema::Schema;
    use crate::value::Val;

    /// A value of every property type, null for some rows.
    fn value(row: usize, prop: usize) -> Val<'static> {
        if (row + prop).is_multiple_of(4) {
            return Val::Null;
        }
        match prop {
            0 => Val::Str(Cow::Owned(format!("s{row}"))),
            1 => Val::Str(Cow::Borrowed(if row.is_multiple_of(2) { "x" } else { "yy" })),
            2 => Val::Blob(vec![row as u8; row % 5]),
            3 => Val::Bool(row % 3 == 1),
            4 => Val::Int(row as i64 * 7 - 100),
            5 => Val::UInt(u64::MAX - row as u64),
            6 => Val::F32(row as f32 / 3.0),
            7 => Val::Date(row as i32 * 1000 - 5000),
            8 => Val::Timestamp(row as i64 * 1_000_003),
            9 => Val::Vector(vec![row as f32, 1.5, -2.0]),
            10 => Val::List((0..row % 4).map(|j| Val::Str(Cow::Owned(format!("{row}.{j}")))).collect()),
            11 => Val::List((0..row % 3).map(|j| Val::Int(j as i64 - row as i64)).collect()),
            _ => Val::List((0..row % 5).map(|j| Val::Bool(j % 2 == 1)).collect()),
        }
    }

    /// Columns written as rows arrive, some rows removed afterwards (as
    /// folding does), decode to the record batch arrow-rs's builders make
    /// of the same rows' values, and so do their buffers moved into arrays.
    #[test]
    fn written_columns_are_arrow_rs_columns_after_removals() {
        let schema = Schema::compile(
            "node T { s: String?  e: enum(x, yy)?  b: Blob?  t: Bool?  i: I32?  u: U64?  f: F32?  d: Date?  \
             ts: DateTime?  v: Vector(3)?  l: [String]?  n: [I64]?  z: [Bool]? }",
        )
        .expect("compiles");
        let def = &schema.types[0];
        let n = 61;
        let (mut written, mut kept) = (Rows::new(def, Keep::Columns), Rows::new(def, Keep::Values));
        let ids: Vec<String> = (0..n).map(|r| format!("id{r}")).collect();
        for (r, id) in ids.iter().enumerate() {
            let row = Row {
                line: r as u64 + 1,
                offset: 0,
                id: (r % 5 != 0).then_some(id.as_str()),
                src: "",
                dst: "",
                arrow_bytes: 0,
            };
            let mut values: Vec<Val> = (0..def.props.len()).map(|p| value(r, p)).collect();
            let spare = &mut SpareChunks::default();
            written.push(def, row.clone(), &mut values.clone(), std::iter::empty(), spare);
            kept.push(def, row, &mut values, std::iter::empty(), spare);
        }
        let expected = |rows: &Rows| {
            crate::arrow_out::record_batch(def, rows, crate::arrow_out::value_columns(def, rows)).expect("builds")
        };
        let decoded = |rows: &Rows| {
            let mut bytes = Vec::new();
            crate::rows::encode_into(&schema, std::slice::from_ref(rows), &mut bytes);
            crate::rows::decode(&schema, bytes.into()).expect("decodes").remove(0).2
        };
        assert_eq!(decoded(&written), expected(&kept));
        let dead: Vec<bool> = (0..n).map(|r| r % 3 == 0 || r == n - 1).collect();
        written.remove_flagged(def, &dead);
        kept.remove_flagged(def, &dead);
        assert_eq!(written.len(), kept.len());
        assert_eq!(decoded(&written), expected(&kept));
        // Native `prepare`'s road: the buffers moved into arrays, no encoding.
        // Arrow's equality skips what hides under a null (a null vector's
        // item validity); the IPC bytes, which hosts receive, do not.
        let moved = written.take_columns().expect("written").into_arrays(def);
        let moved = crate::arrow_out::record_batch(def, &written, moved).expect("builds");
        let ipc = |batch: &arrow_array::RecordBatch| crate::arrow_out::ipc_stream(batch).expect("writes");
        assert_eq!(ipc(&moved), ipc(&expected(&kept)));
    }
}
