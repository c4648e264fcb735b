//! Canonical output for the host (issue: Arrow output): one Arrow record
//! batch per touched table, serialized as Arrow IPC stream bytes. Here: the
//! Arrow schema per table; a table's record batch from its envelope columns
//! and given property arrays; and property arrays made by arrow-rs's
//! builders from kept values, for `prepare_reference` (feature `arrow`).

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, FixedSizeListBuilder, Float32Builder, Float64Builder, Int32Builder, Int64Builder,
    LargeBinaryBuilder, ListBuilder, StringBuilder, TimestampMicrosecondBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::ArrowError;

use crate::layout::arrow_schema;
use crate::record::Rows;
use crate::report::TableKind;
use crate::schema::{TypeDef, ValueType};
use crate::value::Val;

/// A string column, its buffers sized once (a count of the lengths first,
/// instead of growing and copying them as they fill).
fn strings<'r, 'a: 'r>(rows: impl Iterator<Item = Option<&'r str>> + Clone) -> ArrayRef {
    let (count, bytes) = rows.clone().fold((0, 0), |(n, bytes), s| (n + 1, bytes + s.map_or(0, str::len)));
    let mut b = StringBuilder::with_capacity(count, bytes);
    for s in rows {
        b.append_option(s);
    }
    Arc::new(b.finish())
}

macro_rules! primitive_column {
    ($builder:ty, $rows:expr, $i:expr, $pat:pat => $val:expr) => {{
        let mut b = <$builder>::with_capacity($rows.len());
        for (_, values) in $rows.with_values() {
            match &values[$i] {
                $pat => b.append_value($val),
                _ => b.append_null(),
            }
        }
        Arc::new(b.finish()) as ArrayRef
    }};
}

fn column(ty: &ValueType, rows: &Rows<'_>, i: usize) -> ArrayRef {
    match ty {
        ValueType::String | ValueType::Enum(_) => strings(rows.with_values().map(|(_, values)| match &values[i] {
            Val::Str(s) => Some(s.as_ref()),
            _ => None,
        })),
        ValueType::Bool => primitive_column!(BooleanBuilder, rows, i, Val::Bool(v) => *v),
        ValueType::I32 => primitive_column!(Int32Builder, rows, i, Val::Int(v) => *v as i32),
        ValueType::I64 => primitive_column!(Int64Builder, rows, i, Val::Int(v) => *v),
        ValueType::U32 => primitive_column!(UInt32Builder, rows, i, Val::Int(v) => *v as u32),
        ValueType::U64 => primitive_column!(UInt64Builder, rows, i, Val::UInt(v) => *v),
        ValueType::F32 => primitive_column!(Float32Builder, rows, i, Val::F32(v) => *v),
        ValueType::F64 => primitive_column!(Float64Builder, rows, i, Val::F64(v) => *v),
        ValueType::Date => primitive_column!(Date32Builder, rows, i, Val::Date(v) => *v),
        ValueType::DateTime => {
            let mut b = TimestampMicrosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
            for (_, values) in rows.with_values() {
                match &values[i] {
                    Val::Timestamp(v) => b.append_value(*v),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        ValueType::Blob => {
            let bytes = rows.with_values().map(|(_, values)| if let Val::Blob(v) = &values[i] { v.len() } else { 0 }).sum();
            let mut b = LargeBinaryBuilder::with_capacity(rows.len(), bytes);
            for (_, values) in rows.with_values() {
                match &values[i] {
                    Val::Blob(v) => b.append_value(v),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        ValueType::Vector(n) => {
            let mut b = FixedSizeListBuilder::with_capacity(Float32Builder::new(), *n as i32, rows.len());
            for (_, values) in rows.with_values() {
                match &values[i] {
                    Val::Vector(items) => {
                        b.values().append_slice(items);
                        b.append(true);
                    }
                    _ => {
                        b.values().append_nulls(*n as usize);
                        b.append(false);
                    }
                }
            }
            Arc::new(b.finish())
        }
        ValueType::List(item) => list_column(item, rows, i),
    }
}

fn list_column(item: &ValueType, rows: &Rows<'_>, i: usize) -> ArrayRef {
    macro_rules! list_of {
        ($builder:expr, $pat:pat => $val:expr) => {{
            let mut b = ListBuilder::new($builder);
            for (_, values) in rows.with_values() {
                match &values[i] {
                    Val::List(items) => {
                        for it in items {
                            match it {
                                $pat => b.values().append_value($val),
                                _ => unreachable!("list items were decoded as the item type"),
                            }
                        }
                        b.append(true);
                    }
                    _ => b.append(false),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    match item {
        ValueType::String | ValueType::Enum(_) => list_of!(StringBuilder::new(), Val::Str(s) => s.as_ref()),
        ValueType::Bool => list_of!(BooleanBuilder::new(), Val::Bool(v) => *v),
        ValueType::I32 => list_of!(Int32Builder::new(), Val::Int(v) => *v as i32),
        ValueType::I64 => list_of!(Int64Builder::new(), Val::Int(v) => *v),
        ValueType::U32 => list_of!(UInt32Builder::new(), Val::Int(v) => *v as u32),
        ValueType::U64 => list_of!(UInt64Builder::new(), Val::UInt(v) => *v),
        ValueType::F32 => list_of!(Float32Builder::new(), Val::F32(v) => *v),
        ValueType::F64 => list_of!(Float64Builder::new(), Val::F64(v) => *v),
        ValueType::Date => list_of!(Date32Builder::new(), Val::Date(v) => *v),
        ValueType::DateTime => {
            list_of!(TimestampMicrosecondBuilder::new().with_timezone("UTC"), Val::Timestamp(v) => *v)
        }
        ValueType::Blob | ValueType::Vector(_) | ValueType::List(_) => {
            unreachable!("the schema compiler refuses lists of {}", item.canonical())
        }
    }
}

/// Room for an IPC stream's schema and batch messages beyond the buffers.
const IPC_MESSAGE_RESERVE: usize = 4096;

/// The rows of one table as an Arrow record batch: their envelope columns,
/// then `properties` (one array per property of `def`).
pub fn record_batch(def: &TypeDef, rows: &Rows<'_>, properties: Vec<ArrayRef>) -> Result<RecordBatch, ArrowError> {
    let mut columns: Vec<ArrayRef> = vec![strings(rows.iter().map(|r| r.id))];
    if def.kind == TableKind::Edge {
        columns.push(strings(rows.iter().map(|r| Some(r.src))));
        columns.push(strings(rows.iter().map(|r| Some(r.dst))));
    }
    columns.extend(properties);
    RecordBatch::try_new(arrow_schema(def), columns)
}

/// The property columns of rows that kept their values (`Keep::Values`),
/// made by arrow-rs's builders.
pub fn value_columns(def: &TypeDef, rows: &Rows<'_>) -> Vec<ArrayRef> {
    def.props.iter().enumerate().map(|(i, p)| column(&p.ty, rows, i)).collect()
}

/// Arrow IPC stream bytes of one record batch.
pub fn ipc_stream(batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
    // The stream is about the batch's buffers plus its messages: reserving
    // that once saves growing (and copying) the output as it is written.
    let reserve = batch.get_array_memory_size() + IPC_MESSAGE_RESERVE;
    let mut writer = StreamWriter::try_new(Vec::with_capacity(reserve), &batch.schema())?;
    writer.write(batch)?;
    writer.finish()?;
    writer.into_inner()
}
