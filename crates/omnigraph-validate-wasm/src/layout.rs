//! A table's Arrow layout, known without Arrow's code (which the artifact
//! does not carry): its column names, each type's fixed width, and the
//! bytes a row adds, which the bound `table_bytes_limit` counts. With the
//! `arrow` feature, its Arrow types and schema too. Below the modules that
//! write rows and columns (`record`, `columns`, `rows`, `arrow_out`).

#[cfg(feature = "arrow")]
use std::sync::Arc;

#[cfg(feature = "arrow")]
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef, TimeUnit};

use crate::report::TableKind;
use crate::schema::{TypeDef, ValueType};
use crate::value::Val;

/// Column names of the envelope (SPEC §4.1).
pub const ID_COLUMN: &str = "_id";
pub const SRC_COLUMN: &str = "_src";
pub const DST_COLUMN: &str = "_dst";

pub(crate) fn fixed_width(ty: &ValueType) -> u64 {
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

/// Field metadata that makes Lance store a LargeBinary column as blobs.
#[cfg(feature = "arrow")]
pub const LANCE_BLOB_METADATA: (&str, &str) = ("lance-encoding:blob", "true");

#[cfg(feature = "arrow")]
pub fn arrow_type(ty: &ValueType) -> DataType {
    match ty {
        ValueType::String | ValueType::Enum(_) => DataType::Utf8,
        ValueType::Bool => DataType::Boolean,
        ValueType::I32 => DataType::Int32,
        ValueType::I64 => DataType::Int64,
        ValueType::U32 => DataType::UInt32,
        ValueType::U64 => DataType::UInt64,
        ValueType::F32 => DataType::Float32,
        ValueType::F64 => DataType::Float64,
        ValueType::Date => DataType::Date32,
        ValueType::DateTime => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        ValueType::Blob => DataType::LargeBinary,
        ValueType::Vector(n) => {
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), *n as i32)
        }
        ValueType::List(item) => DataType::List(Arc::new(Field::new("item", arrow_type(item), true))),
    }
}

/// The Arrow schema of a table as the validator emits it: `_id` (nullable:
/// null means "the host generates a ULID"), `_src`/`_dst` for edges, then
/// the declared properties in catalog order.
#[cfg(feature = "arrow")]
pub fn arrow_schema(def: &TypeDef) -> SchemaRef {
    let mut fields = vec![Field::new(ID_COLUMN, DataType::Utf8, true)];
    if def.kind == TableKind::Edge {
        fields.push(Field::new(SRC_COLUMN, DataType::Utf8, false));
        fields.push(Field::new(DST_COLUMN, DataType::Utf8, false));
    }
    for p in &def.props {
        let mut field = Field::new(&p.name, arrow_type(&p.ty), p.nullable);
        if p.ty == ValueType::Blob {
            field = field.with_metadata([(LANCE_BLOB_METADATA.0.into(), LANCE_BLOB_METADATA.1.into())].into());
        }
        fields.push(field);
    }
    Arc::new(ArrowSchema::new(fields))
}
