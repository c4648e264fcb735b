//! Property (proptest): serializing a valid generated batch and validating
//! it yields `ok`, and `prepare` gives the same rows back.

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt64Type};
use arrow_array::{Array, RecordBatch};
use arrow_ipc::reader::StreamReader;
use omnigraph_validate_wasm::{Options, Schema, encode_base64, format_date, format_timestamp, prepare, validate};
use proptest::prelude::*;
use serde_json::{Value, json};

const SCHEMA: &str = r#"
node T {
  s: String  b: Bool?  i32: I32?  i64: I64?  u64: U64?  f32: F32?  f64: F64?
  d: Date?  dt: DateTime?  blob: Blob?  v: Vector(3)?  tags: [String]?  color: enum(red, green, dark-blue)?
}
"#;

#[derive(Debug, Clone)]
struct Row {
    s: String,
    b: Option<bool>,
    i32: Option<i32>,
    i64: Option<i64>,
    u64: Option<u64>,
    f32: Option<f32>,
    f64: Option<f64>,
    d: Option<i32>,
    d_as_int: bool,
    dt: Option<i64>,
    blob: Option<Vec<u8>>,
    v: Option<[f32; 3]>,
    tags: Option<Vec<String>>,
    color: Option<&'static str>,
}

fn finite_f32() -> impl Strategy<Value = f32> {
    any::<f32>().prop_filter("finite", |x| x.is_finite())
}

fn row() -> impl Strategy<Value = Row> {
    let days = -719_528i32..=2_932_896; // years 0000..=9999
    let micros = -62_167_219_200_000_000i64..=253_402_300_799_999_999;
    (
        (any::<String>(), any::<Option<bool>>(), any::<Option<i32>>(), any::<Option<i64>>(), any::<Option<u64>>()),
        (proptest::option::of(finite_f32()), proptest::option::of(any::<f64>().prop_filter("finite", |x| x.is_finite()))),
        (proptest::option::of(days), any::<bool>(), proptest::option::of(micros)),
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            proptest::option::of([finite_f32(), finite_f32(), finite_f32()]),
            proptest::option::of(proptest::collection::vec("[a-z]{0,5}", 0..4)),
            proptest::option::of(prop_oneof![Just("red"), Just("green"), Just("dark-blue")]),
        ),
    )
        .prop_map(|((s, b, i32, i64, u64), (f32, f64), (d, d_as_int, dt), (blob, v, tags, color))| Row {
            s,
            b,
            i32,
            i64,
            u64,
            f32,
            f64,
            d,
            d_as_int,
            dt,
            blob,
            v,
            tags,
            color,
        })
}

fn to_json(r: &Row) -> String {
    let mut data = serde_json::Map::new();
    data.insert("s".into(), json!(r.s));
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            data.insert(k.into(), v);
        }
    };
    put("b", r.b.map(Value::from));
    put("i32", r.i32.map(Value::from));
    put("i64", r.i64.map(Value::from));
    put("u64", r.u64.map(Value::from));
    // f32 is written with its own shortest form so it parses back exactly.
    put("f32", r.f32.map(|x| serde_json::from_str::<Value>(&format!("{x:e}")).unwrap()));
    put("f64", r.f64.map(Value::from));
    put("d", r.d.map(|d| if r.d_as_int { Value::from(d) } else { Value::from(format_date(d)) }));
    put("dt", r.dt.map(|t| Value::from(format_timestamp(t))));
    put("blob", r.blob.as_ref().map(|b| Value::from(format!("base64:{}", encode_base64(b)))));
    put("v", r.v.map(|v| Value::Array(v.iter().map(|x| serde_json::from_str(&format!("{x:e}")).unwrap()).collect())));
    put("tags", r.tags.clone().map(Value::from));
    put("color", r.color.map(Value::from));
    serde_json::to_string(&json!({"type": "T", "data": data})).unwrap()
}

fn read(bytes: &[u8]) -> RecordBatch {
    StreamReader::try_new(bytes, None).unwrap().next().unwrap().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn generated_batches_validate_and_round_trip(rows in proptest::collection::vec(row(), 1..20)) {
        let schema = Schema::compile(SCHEMA).unwrap();
        let batch: String = rows.iter().map(|r| to_json(r) + "\n").collect();
        let report = validate(&schema, &Options::default(), batch.as_bytes());
        prop_assert!(report.ok, "{}", report.to_json());
        prop_assert_eq!(report.stats.records, rows.len() as u64);
        let prepared = prepare(&schema, &Options::default(), batch.as_bytes()).unwrap();
        let rb = read(&prepared.into_tables()[0].ipc);
        prop_assert_eq!(rb.num_rows(), rows.len());
        let col = |n: &str| rb.column_by_name(n).unwrap().clone();
        for (i, r) in rows.iter().enumerate() {
            prop_assert_eq!(col("s").as_string::<i32>().value(i).to_owned(), r.s.clone());
            let opt = |a: &dyn Array, present: bool| present != a.is_null(i);
            prop_assert!(opt(col("b").as_ref(), r.b.is_some()));
            if let Some(v) = r.b { prop_assert_eq!(col("b").as_boolean().value(i), v); }
            if let Some(v) = r.i32 { prop_assert_eq!(col("i32").as_primitive::<Int32Type>().value(i), v); }
            if let Some(v) = r.i64 { prop_assert_eq!(col("i64").as_primitive::<Int64Type>().value(i), v); }
            if let Some(v) = r.u64 { prop_assert_eq!(col("u64").as_primitive::<UInt64Type>().value(i), v); }
            if let Some(v) = r.f32 { prop_assert_eq!(col("f32").as_primitive::<Float32Type>().value(i).to_bits(), v.to_bits()); }
            if let Some(v) = r.f64 { prop_assert_eq!(col("f64").as_primitive::<Float64Type>().value(i), v); }
            if let Some(v) = r.d { prop_assert_eq!(col("d").as_primitive::<Date32Type>().value(i), v); }
            if let Some(v) = r.dt { prop_assert_eq!(col("dt").as_primitive::<TimestampMicrosecondType>().value(i), v); }
            if let Some(v) = &r.blob { prop_assert_eq!(col("blob").as_binary::<i64>().value(i).to_vec(), v.clone()); }
            if let Some(v) = r.v {
                let got = col("v").as_fixed_size_list().value(i).as_primitive::<Float32Type>().values().to_vec();
                prop_assert_eq!(got, v.to_vec());
            }
            if let Some(v) = &r.tags {
                let list = col("tags").as_list::<i32>().value(i);
                let got: Vec<String> = list.as_string::<i32>().iter().map(|s| s.unwrap().to_owned()).collect();
                prop_assert_eq!(&got, v);
            }
            prop_assert!(opt(col("color").as_ref(), r.color.is_some()));
            prop_assert!(opt(col("tags").as_ref(), r.tags.is_some()));
            prop_assert!(opt(col("v").as_ref(), r.v.is_some()));
        }
    }
}
