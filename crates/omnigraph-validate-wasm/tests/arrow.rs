//! Arrow output: the types of SPEC §1.3, nulls, lists, vectors, dates, and
//! the IPC round trip; canonical rows give the builders' tables (every type,
//! 3,000 records); broken canonical rows are refused.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt32Type, UInt64Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::StreamReader;
use arrow_schema::{DataType, TimeUnit};
use omnigraph_validate_wasm::{
    Options, PreparedTable, Schema, arrow_schema, batches_from_rows, prepare, prepare_reference, prepare_rows, prepare_rows_after,
    tables_from_rows,
};

const SCHEMA: &str = r#"
node T {
  s: String?  b: Bool?  i32: I32?  i64: I64?  u32: U32?  u64: U64?  f32: F32?  f64: F64?
  d: Date?  dt: DateTime?  blob: Blob?  v: Vector(3)?  tags: [String]?  nums: [I64]?  days: [Date]?
  color: enum(red, green)?
}
node K { name: String @key  n: I32 }
edge E: K -> K { w: F64? }
"#;

fn read_ipc(bytes: &[u8]) -> RecordBatch {
    let mut reader = StreamReader::try_new(bytes, None).expect("IPC stream");
    let batch = reader.next().expect("one batch").expect("valid batch");
    assert!(reader.next().is_none(), "exactly one batch");
    batch
}

/// The tables of an accepted batch as the IPC bytes a host receives.
fn prepared(batch: &str) -> (Schema, Vec<PreparedTable>) {
    let schema = Schema::compile(SCHEMA).unwrap();
    let p = prepare(&schema, &Options::default(), batch.as_bytes()).unwrap_or_else(|r| panic!("{}", r.to_json()));
    (schema, p.into_tables())
}

#[test]
fn every_type_maps_to_its_arrow_type() {
    let schema = Schema::compile(SCHEMA).unwrap();
    let t = &schema.types[schema.type_index("T").unwrap()];
    let arrow = arrow_schema(t);
    let types: Vec<(String, DataType)> = arrow.fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect();
    assert_eq!(types[0], ("_id".into(), DataType::Utf8));
    let by_name = |n: &str| types.iter().find(|(name, _)| name == n).unwrap().1.clone();
    assert_eq!(by_name("b"), DataType::Boolean);
    assert_eq!(by_name("u64"), DataType::UInt64);
    assert_eq!(by_name("d"), DataType::Date32);
    assert_eq!(by_name("dt"), DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
    assert_eq!(by_name("blob"), DataType::LargeBinary);
    assert!(matches!(by_name("v"), DataType::FixedSizeList(f, 3) if f.data_type() == &DataType::Float32));
    assert!(matches!(by_name("days"), DataType::List(f) if f.data_type() == &DataType::Date32));
    assert_eq!(by_name("color"), DataType::Utf8);
    let blob = arrow.field_with_name("blob").unwrap();
    assert_eq!(blob.metadata().get("lance-encoding:blob").map(String::as_str), Some("true"));
    let e = &schema.types[schema.type_index("E").unwrap()];
    let names: Vec<_> = arrow_schema(e).fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["_id", "_src", "_dst", "w"]);
}

#[test]
fn values_and_nulls_survive_the_ipc_round_trip() {
    let batch = concat!(
        r#"{"type":"T","id":"t1","data":{"s":"é\"x","b":true,"i32":-2147483648,"i64":9223372036854775807,"u32":4294967295,"u64":18446744073709551615,"f32":0.1,"f64":-2.5e-300,"d":"2024-02-29","dt":"2026-01-02T03:04:05.123456+01:00","blob":"base64:AAEC","v":[1,2.5,-3],"tags":["a",""],"nums":[],"days":["1970-01-01",1],"color":"green"}}"#,
        "\n",
        r#"{"type":"T","data":{}}"#,
        "\n"
    );
    let (schema, p) = prepared(batch);
    assert_eq!(p.len(), 1);
    let rb = read_ipc(&p[0].ipc);
    let def = &schema.types[schema.type_index("T").unwrap()];
    assert_eq!(rb.schema(), arrow_schema(def));
    assert_eq!(rb.num_rows(), 2);
    let col = |n: &str| rb.column_by_name(n).unwrap().clone();

    let ids = col("_id");
    assert_eq!(ids.as_string::<i32>().value(0), "t1");
    assert!(ids.is_null(1), "a missing id is null: the host generates it");
    assert_eq!(col("s").as_string::<i32>().value(0), "é\"x");
    assert!(col("b").as_boolean().value(0));
    assert_eq!(col("i32").as_primitive::<Int32Type>().value(0), i32::MIN);
    assert_eq!(col("i64").as_primitive::<Int64Type>().value(0), i64::MAX);
    assert_eq!(col("u32").as_primitive::<UInt32Type>().value(0), u32::MAX);
    assert_eq!(col("u64").as_primitive::<UInt64Type>().value(0), u64::MAX);
    assert_eq!(col("f32").as_primitive::<Float32Type>().value(0), 0.1f32);
    assert_eq!(col("f64").as_primitive::<Float64Type>().value(0), -2.5e-300);
    assert_eq!(col("d").as_primitive::<Date32Type>().value(0), 19782);
    assert_eq!(col("dt").as_primitive::<TimestampMicrosecondType>().value(0), 1_767_319_445_123_456);
    assert_eq!(col("blob").as_binary::<i64>().value(0), [0u8, 1, 2]);
    let v = col("v");
    let v = v.as_fixed_size_list();
    assert_eq!(v.value(0).as_primitive::<Float32Type>().values().to_vec(), vec![1.0, 2.5, -3.0]);
    let tags = col("tags");
    let tags = tags.as_list::<i32>();
    let first = tags.value(0);
    assert_eq!(first.as_string::<i32>().iter().collect::<Vec<_>>(), vec![Some("a"), Some("")]);
    assert_eq!(col("nums").as_list::<i32>().value(0).len(), 0, "an empty list is empty, not null");
    assert_eq!(col("days").as_list::<i32>().value(0).as_primitive::<Date32Type>().values().to_vec(), vec![0, 1]);
    assert_eq!(col("color").as_string::<i32>().value(0), "green");
    for name in ["s", "b", "i32", "u64", "f32", "d", "dt", "blob", "v", "tags", "nums", "color"] {
        assert!(col(name).is_null(1), "{name} of the empty record is null");
    }
}

#[test]
fn keyed_nodes_and_edges_carry_ids_and_endpoints() {
    let batch = concat!(
        r#"{"type":"K","data":{"name":"a","n":1}}"#,
        "\n",
        r#"{"type":"K","data":{"name":"b","n":2}}"#,
        "\n",
        r#"{"edge":"E","from":"a","to":"b","data":{"w":0.5}}"#,
        "\n",
        r#"{"type":"K","data":{"name":"a","n":3}}"#,
        "\n"
    );
    let (schema, p) = prepared(batch);
    let names: Vec<_> = p.iter().map(|t| (t.name.as_str(), t.rows)).collect();
    assert_eq!(names, [("K", 2), ("E", 1)]);
    let lines: Vec<_> = p.iter().map(|t| t.lines.clone()).collect();
    assert_eq!(lines, [vec![2, 4], vec![3]], "each row's batch line; a folded id keeps the last record's");
    let (_, rows) = prepare_rows(&schema, &Options::default(), batch.as_bytes()).unwrap();
    assert_eq!(tables_from_rows(&schema, &rows).unwrap(), p, "canonical rows carry the lines too");
    let k = read_ipc(&p[0].ipc);
    let ids: Vec<_> = k.column(0).as_string::<i32>().iter().map(|s| s.unwrap().to_owned()).collect();
    assert_eq!(ids, ["b", "a"], "merge folds: the last 'a' wins and rows keep line order");
    assert_eq!(k.column_by_name("n").unwrap().as_primitive::<Int32Type>().values().to_vec(), vec![2, 3]);
    assert!(!k.schema().field(0).is_nullable() || k.column(0).null_count() == 0);
    let e = read_ipc(&p[1].ipc);
    assert!(e.column(0).is_null(0));
    assert_eq!(e.column_by_name("_src").unwrap().as_string::<i32>().value(0), "a");
    assert_eq!(e.column_by_name("_dst").unwrap().as_string::<i32>().value(0), "b");
}

#[test]
fn a_rejected_batch_has_no_output() {
    let schema = Schema::compile(SCHEMA).unwrap();
    let report = prepare(&schema, &Options::default(), b"{\"type\":\"K\",\"data\":{\"name\":\"a\"}}\n").unwrap_err();
    assert!(!report.ok);
    assert_eq!(report.errors[0].code.as_str(), "null_not_allowed");
}

/// `n` records of every type and both tables, each property null in some
/// rows (a different pattern per property), strings with escapes and
/// non-ASCII text, lists empty or not.
fn every_type_batch(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let mut data = Vec::new();
        let mut put = |name: &str, every: usize, value: String| {
            if i % every != 0 {
                data.push(format!("\"{name}\":{value}"));
            }
        };
        put("s", 3, format!("\"s{i}\\\"é\""));
        put("b", 4, (i % 2 == 0).to_string());
        put("i32", 5, format!("{}", -(i as i64)));
        put("i64", 6, format!("{}", (i as i64) << 33));
        put("u32", 7, format!("{}", i * 7));
        put("u64", 2, format!("{}", u64::MAX - i as u64));
        put("f32", 9, format!("{}.5", i));
        put("f64", 10, format!("-{}e-3", i));
        put("d", 11, format!("\"2024-02-{:02}\"", 1 + i % 28));
        put("dt", 12, format!("\"2026-01-02T03:04:{:02}Z\"", i % 60));
        put("blob", 13, if i % 5 == 0 { "\"base64:\"".into() } else { "\"base64:aGk=\"".into() });
        put("v", 14, format!("[{i},1.5,-3]"));
        put("tags", 15, if i % 4 == 0 { "[]".into() } else { format!("[\"a{i}\",\"\",\"ü\"]") });
        put("nums", 16, format!("[{i},-2]"));
        put("days", 17, format!("[\"2024-02-29\",{i}]"));
        put("color", 18, if i % 2 == 0 { "\"red\"".into() } else { "\"green\"".into() });
        out.push_str(&format!("{{\"type\":\"T\",\"data\":{{{}}}}}\n", data.join(",")));
        out.push_str(&format!("{{\"type\":\"K\",\"data\":{{\"name\":\"k{i}\",\"n\":{i}}}}}\n"));
        if i % 3 == 0 {
            out.push_str(&format!("{{\"edge\":\"E\",\"from\":\"k{i}\",\"to\":\"k{}\",\"data\":{{}}}}\n", i / 2));
        }
    }
    out
}

#[test]
fn canonical_rows_give_the_builders_tables_for_every_type_over_many_chunks() {
    let options = Options::from_json(br#"{"limits":{"max_table_rows":100000}}"#).unwrap();
    let batch = every_type_batch(3_000);
    let schema = Schema::compile(SCHEMA).unwrap();
    // The builders' tables: every value kept, arrow-rs builds the columns.
    let p = prepare_reference(&schema, &options, batch.as_bytes()).unwrap_or_else(|r| panic!("{}", r.to_json()));
    let (_, rows) = prepare_rows(&schema, &options, batch.as_bytes()).unwrap();
    let tables = tables_from_rows(&schema, &rows).unwrap();
    assert_eq!(tables.iter().map(|t| t.rows).collect::<Vec<_>>(), [3_000, 3_000, 1_000]);
    for (from_rows, built) in tables.iter().zip(&p.into_tables()) {
        assert!(from_rows == built, "table {}: canonical rows and Arrow's builders differ", built.name);
    }
    // Native `prepare`'s record batches, unserialized, are the host's own
    // (`batches_from_rows` of the artifact's rows).
    let native = prepare(&schema, &options, batch.as_bytes()).unwrap_or_else(|r| panic!("{}", r.to_json()));
    assert!(native.tables == batches_from_rows(&schema, &rows[..]).unwrap(), "native record batches differ from the host's");
    let t = read_ipc(&tables.iter().find(|t| t.name == "T").unwrap().ipc);
    assert!(t.column_by_name("s").unwrap().is_null(2_997) && !t.column_by_name("s").unwrap().is_null(2_998));
    assert_eq!(t.column_by_name("tags").unwrap().as_list::<i32>().value(1).as_string::<i32>().value(2), "ü");
}

/// The artifact writes its result header and then the rows into one
/// buffer: the rows' bytes do not depend on what precedes them, and a host
/// wraps them into arrays without copying them (each array's buffers lie
/// inside the one it was given).
#[test]
fn canonical_rows_follow_any_head_unchanged_and_decode_in_place() {
    let batch = every_type_batch(200);
    let schema = Schema::compile(SCHEMA).unwrap();
    let (_, rows) = prepare_rows(&schema, &Options::default(), batch.as_bytes()).unwrap();
    for head in 0..9 {
        let (_, out) = prepare_rows_after(&schema, &Options::default(), batch.as_bytes(), |_, _| vec![0xa5; head]).unwrap();
        assert_eq!(out[..head], vec![0xa5; head]);
        assert!(out[head..] == rows[..], "the rows after a {head}-byte head differ");
    }
    let given = arrow_buffer::Buffer::from(&rows[..]);
    let inside = given.as_ptr() as usize..given.as_ptr() as usize + given.len();
    let mut parts = Vec::new();
    for table in batches_from_rows(&schema, given.clone()).unwrap() {
        table.batch.columns().iter().for_each(|column| array_buffers(&column.to_data(), &mut parts));
    }
    assert!(parts.len() > 30, "every column's buffers are seen ({})", parts.len());
    for (at, len) in parts {
        assert!(inside.contains(&at) && at + len <= inside.end, "a column's buffer was copied out of the rows");
    }
}

/// The address and length of every non-empty buffer of `data`, its
/// validity and its children's.
fn array_buffers(data: &arrow_data::ArrayData, parts: &mut Vec<(usize, usize)>) {
    let nulls = data.nulls().map(|n| n.buffer());
    for buffer in data.buffers().iter().chain(nulls).filter(|b| !b.is_empty()) {
        parts.push((buffer.as_ptr() as usize, buffer.len()));
    }
    data.child_data().iter().for_each(|child| array_buffers(child, parts));
}

/// Every truncation of a canonical rows buffer is refused, and no change
/// of one byte makes decoding panic: what reaches the host from the
/// artifact is checked like any input.
#[test]
fn broken_canonical_rows_are_refused_not_trusted() {
    let batch = every_type_batch(20);
    let schema = Schema::compile(SCHEMA).unwrap();
    let (_, rows) = prepare_rows(&schema, &Options::default(), batch.as_bytes()).unwrap();
    for len in 0..rows.len() {
        assert!(tables_from_rows(&schema, &rows[..len]).is_err(), "a buffer cut at {len} decodes");
    }
    let mut extended = rows.clone();
    extended.extend_from_slice(&[0; 8]);
    assert!(tables_from_rows(&schema, &extended).is_err(), "trailing bytes are refused");
    let mut refused = 0;
    for at in 0..rows.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut broken = rows.clone();
            broken[at] ^= flip;
            refused += usize::from(tables_from_rows(&schema, &broken).is_err());
        }
    }
    assert!(refused > rows.len(), "most changes of lengths, offsets and text are caught ({refused})");
}
