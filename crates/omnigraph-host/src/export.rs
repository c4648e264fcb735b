//! Stored rows back to strict NDJSON records (SPEC §2.2) that re-load
//! unchanged: every value is rendered in the validator's canonical form.

use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use omnigraph_validate_wasm::{
    DST_COLUMN, ID_COLUMN, SRC_COLUMN, TableKind, TypeDef, encode_base64, format_date, format_f32, format_f64,
    format_timestamp,
};

/// Appends one value as JSON text; `None` for null. Floats use the shortest
/// text that reads back to the same value, blobs the `base64:` form.
fn write_cell(out: &mut String, array: &ArrayRef, row: usize) -> bool {
    if array.is_null(row) {
        return false;
    }
    match array.data_type() {
        DataType::Utf8 => json_string(out, array.as_string::<i32>().value(row)),
        DataType::Boolean => out.push_str(if array.as_boolean().value(row) { "true" } else { "false" }),
        DataType::Int32 => write!(out, "{}", array.as_primitive::<Int32Type>().value(row)).expect("write to String"),
        DataType::Int64 => write!(out, "{}", array.as_primitive::<Int64Type>().value(row)).expect("write to String"),
        DataType::UInt32 => write!(out, "{}", array.as_primitive::<UInt32Type>().value(row)).expect("write to String"),
        DataType::UInt64 => write!(out, "{}", array.as_primitive::<UInt64Type>().value(row)).expect("write to String"),
        DataType::Float32 => out.push_str(&format_f32(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => out.push_str(&format_f64(array.as_primitive::<Float64Type>().value(row))),
        DataType::Date32 => json_string(out, &format_date(array.as_primitive::<Date32Type>().value(row))),
        DataType::Timestamp(_, _) => {
            json_string(out, &format_timestamp(array.as_primitive::<TimestampMicrosecondType>().value(row)))
        }
        DataType::LargeBinary => {
            json_string(out, &format!("base64:{}", encode_base64(array.as_binary::<i64>().value(row))))
        }
        DataType::Binary => json_string(out, &format!("base64:{}", encode_base64(array.as_binary::<i32>().value(row)))),
        DataType::FixedSizeList(_, _) => list(out, &array.as_fixed_size_list().value(row)),
        DataType::List(_) => list(out, &array.as_list::<i32>().value(row)),
        other => unreachable!("the catalog never stores {other}"),
    }
    true
}

fn list(out: &mut String, items: &ArrayRef) {
    out.push('[');
    for i in 0..items.len() {
        if i > 0 {
            out.push(',');
        }
        if !write_cell(out, items, i) {
            out.push_str("null");
        }
    }
    out.push(']');
}

fn json_string(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).expect("strings serialize"));
}

/// Appends the batch's rows as NDJSON records of type `def`.
pub fn write_records(out: &mut String, def: &TypeDef, batch: &RecordBatch) {
    let column = |name: &str| batch.column_by_name(name).expect("stored column");
    let id = column(ID_COLUMN);
    let ends = (def.kind == TableKind::Edge).then(|| (column(SRC_COLUMN), column(DST_COLUMN)));
    let props: Vec<(&str, &ArrayRef)> = def.props.iter().map(|p| (p.name.as_str(), column(&p.name))).collect();
    for row in 0..batch.num_rows() {
        match def.kind {
            TableKind::Node => out.push_str("{\"type\":"),
            TableKind::Edge => out.push_str("{\"edge\":"),
        }
        json_string(out, &def.name);
        out.push_str(",\"id\":");
        write_cell(out, id, row);
        if let Some((src, dst)) = ends {
            out.push_str(",\"from\":");
            write_cell(out, src, row);
            out.push_str(",\"to\":");
            write_cell(out, dst, row);
        }
        out.push_str(",\"data\":{");
        let mut first = true;
        for (name, array) in &props {
            if array.is_null(row) {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            json_string(out, name);
            out.push(':');
            write_cell(out, array, row);
        }
        out.push_str("}}\n");
    }
}
