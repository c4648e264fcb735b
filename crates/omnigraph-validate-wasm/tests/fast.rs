//! The fast acceptor against the explainer (`differential`, in three modes:
//! values measured, whole and taken, whole and left for the next line to
//! refill): every line the acceptor takes, the explainer must accept alone
//! with the same row, so a report cannot depend on which of the two read a
//! line. Run over the conformance corpus, every single-byte mutation of its
//! accepted lines, number and shape edge cases, and the benchmark batch
//! (which the acceptor must take whole, or it would not be the fast path at
//! all).

// The bench's generator; this test uses only the batch, not its filters.
#[allow(dead_code)]
#[path = "../benches/batchgen.rs"]
mod batchgen;

use std::fs;
use std::path::{Path, PathBuf};

use omnigraph_validate_wasm::{Options, Schema, differential, validate};

fn corpus() -> Vec<(PathBuf, Schema, Options, Vec<u8>)> {
    // From the directory cargo gives the running test, not the one compiled in
    // (a shared target dir may keep a build made in another checkout).
    let root = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo runs the tests")).join("../../tests/vectors");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let schema = Schema::compile(&fs::read_to_string(dir.join("schema.pg")).unwrap()).unwrap();
            let options = Options::from_json(&fs::read(dir.join("options.json")).unwrap()).unwrap();
            let input = fs::read(dir.join("input.ndjson")).unwrap_or_default();
            (dir, schema, Options { strict: true, ..options }, input)
        })
        .collect()
}

#[test]
fn the_acceptor_takes_only_what_the_explainer_accepts_in_the_corpus() {
    let (mut accepted, mut lines) = (0, 0);
    for (_, schema, options, input) in corpus() {
        let (a, n) = differential(&schema, &options, &input);
        accepted += a;
        lines += n;
    }
    eprintln!("the acceptor took {accepted} of {lines} corpus lines");
    // Most corpus lines are refused on purpose; the valid ones are not rare.
    assert!(accepted > 100, "the acceptor took only {accepted} corpus lines");
}

/// Bytes that turn a valid line into a near miss: structure, quotes,
/// escapes, number parts, whitespace, literals, a control, a line end (the
/// acceptor frames lines itself), a lead byte without its continuation and
/// a byte that is never UTF-8.
const MUTANTS: &[u8] = b"\"\\{}[],:0129-+.eE ntf\r\x01\n\xc3\xff";

#[test]
fn no_single_byte_mutation_of_an_accepted_line_splits_them() {
    let mut checked = 0u64;
    let mut still_accepted = 0u64;
    for (_, schema, options, input) in corpus() {
        for line in input.split(|&b| b == b'\n') {
            if differential(&schema, &options, line).0 == 0 {
                continue;
            }
            for at in 0..line.len() {
                let mut deleted = line.to_vec();
                deleted.remove(at);
                still_accepted += differential(&schema, &options, &deleted).0;
                for &byte in MUTANTS {
                    let mut replaced = line.to_vec();
                    replaced[at] = byte;
                    let mut inserted = line.to_vec();
                    inserted.insert(at, byte);
                    still_accepted += differential(&schema, &options, &replaced).0;
                    still_accepted += differential(&schema, &options, &inserted).0;
                    checked += 2;
                }
                checked += 1;
            }
        }
    }
    eprintln!("{checked} mutated lines checked, {still_accepted} still accepted");
    assert!(checked > 10_000, "only {checked} mutations");
}

const ALL_INTEGERS: &str = "node N { k: String @key  a: I32?  b: I64?  c: U32?  d: U64?  f: F32?  g: F64?  l: [I64]?  v: Vector(2)? }";

#[test]
fn numbers_at_every_boundary_agree() {
    let schema = Schema::compile(ALL_INTEGERS).unwrap();
    let options = Options::default();
    let numbers = [
        "0", "-0", "1", "-1", "01", "-01", "1.0", "1e2", "1E+2", "-1e-2", "1.", ".5", "-", "1.5e", "2147483647", "2147483648",
        "-2147483648", "-2147483649", "4294967295", "4294967296", "9223372036854775807", "9223372036854775808",
        "-9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
        "9999999999999999999", "10000000000000000000", "99999999999999999999", "123456789012345678901234567890",
        "3.4028235e38", "3.5e38", "1e309", "0.1", "-0.0", "16777217", "9007199254740993", "1e-400",
    ];
    let mut accepted = 0;
    for member in ["a", "b", "c", "d", "f", "g"] {
        for n in numbers {
            let line = format!(r#"{{"type":"N","data":{{"k":"x","{member}":{n}}}}}"#);
            accepted += differential(&schema, &options, line.as_bytes()).0;
            for wrapped in [format!("[{n}]"), format!("[{n},{n}]"), format!("[ {n} , 1 ]")] {
                for list in ["l", "v"] {
                    let line = format!(r#"{{"type":"N","data":{{"k":"x","{list}":{wrapped}}}}}"#);
                    accepted += differential(&schema, &options, line.as_bytes()).0;
                }
            }
        }
    }
    // Valid forms are taken by the acceptor, not all left to the explainer.
    assert!(accepted > 100, "the acceptor took only {accepted} number lines");
}

#[test]
fn shapes_the_acceptor_leaves_to_the_explainer_still_validate() {
    let schema = Schema::compile("node P { name: String @key  age: I32? }\nedge E: P -> P { w: F64? }").unwrap();
    let options = Options::default();
    // (line, taken by the acceptor)
    let cases: &[(&str, bool)] = &[
        (r#"{"type":"P","data":{"name":"a","age":3}}"#, true),
        (r#" { "type" : "P" , "data" : { "age" : 3 , "name" : "a" } } "#, true),
        (r#"{"type":"P","id":"a","data":{"name":"a"}}"#, true),
        (r#"{"type":"P","id":"b","data":{"name":"a"}}"#, false),
        (r#"{"data":{"name":"a"},"type":"P"}"#, false),
        (r#"{"type":"P","data":{"name":"a\u0062"}}"#, false),
        (r#"{"typ\u0065":"P","data":{"name":"a"}}"#, false),
        (r#"{"type":"P","data":{"name":"a","name":"a"}}"#, false),
        (r#"{"type":"P","type":"P","data":{"name":"a"}}"#, false),
        (r#"{"type":"P","data":{"name":"a"}} x"#, false),
        (r#"{"type":"P","data":{"name":"a","x":1}}"#, false),
        (r#"{"type":"P","data":{"age":1}}"#, false),
        (r#"{"type":"P","from":"a","data":{"name":"a"}}"#, false),
        (r#"{"edge":"E","from":"a","to":"b"}"#, true),
        (r#"{"edge":"E","from":"a"}"#, false),
        (r#"{"edge":"E","from":"a","to":"b","data":{"w":null}}"#, true),
        (r#"{"edge":"P","from":"a","to":"b"}"#, false),
        ("{\"type\":\"P\",\"data\":{\"name\":\"é\u{1F600}\"}}", true),
        ("{\"type\":\"P\",\"data\":{\"name\":\"a\u{1}\"}}", false),
    ];
    for &(line, taken) in cases {
        assert_eq!(differential(&schema, &options, line.as_bytes()).0 == 1, taken, "{line}");
    }
    // The tight bounds are the explainer's to report, even on valid lines.
    let line = br#"{"type":"P","data":{"name":"a","age":3}}"#;
    for (limits, refused) in [(r#"{"max_json_depth":1}"#, "json_too_complex"), (r#"{"max_json_structure":9}"#, "json_too_complex")] {
        let tight = Options::from_json(format!(r#"{{"limits":{limits}}}"#).as_bytes()).unwrap();
        assert_eq!(differential(&schema, &tight, line).0, 0, "{limits}");
        let report = validate(&schema, &tight, line);
        assert_eq!(report.errors[0].code.as_str(), refused, "{limits}");
    }
    let at_bound = Options::from_json(br#"{"limits":{"max_json_depth":2,"max_json_structure":10}}"#).unwrap();
    assert_eq!(differential(&schema, &at_bound, line).0, 1);
    assert!(validate(&schema, &at_bound, line).ok);
}

#[test]
fn the_acceptor_takes_the_whole_benchmark_batch() {
    let schema = Schema::compile(include_str!("../../../tests/bench/schema.pg")).unwrap();
    let options = Options::from_json(batchgen::BENCH_OPTIONS.as_bytes()).unwrap();
    let batch = batchgen::generate(512 * 1024);
    let (accepted, lines) = differential(&schema, &options, &batch);
    // The batch ends in a line end: its last "line" is empty.
    assert_eq!(accepted, lines - 1, "every record of the benchmark batch takes the fast path");
}

/// The acceptor finds a line's end itself (where the record and the
/// whitespace after it stop) and checks UTF-8 only inside strings: each
/// batch here is framed as the explainer's framing would, line for line.
#[test]
fn the_acceptor_frames_lines_as_the_framing_does() {
    let schema = Schema::compile("node P { name: String @key  age: I32? }").unwrap();
    let options = Options::default();
    let a = r#"{"type":"P","data":{"name":"a","age":3}}"#;
    let b = r#"{"type":"P","data":{"name":"b"}}"#;
    // (batch, lines the acceptor takes, error codes of the report)
    let cases: Vec<(Vec<u8>, u64, &[&str])> = vec![
        (format!("{a}\n{b}\n").into(), 2, &[]),
        (format!("{a}\r\n{b}\r\n").into(), 2, &[]),
        (format!("{a}\r\r\n{b} \t\r\n").into(), 2, &[]),
        (format!("{a}\n{b}").into(), 2, &[]),
        (format!("{a}\n{b}\r").into(), 2, &[]),
        (format!("{a}\n\n \r\n{b}\n").into(), 2, &[]),
        (format!("{a}\r{b}\n").into(), 0, &["trailing_content"]),
        (format!("{a}\x0b\n{b}\n").into(), 1, &["trailing_content"]),
        (format!("{}{a}\n{b}\n", '\u{feff}').into(), 1, &["byte_order_mark"]),
        ("{\"type\":\"P\",\"data\":{\"name\":\"\u{e9}\u{1F600}\"}}\n".into(), 1, &[]),
        (b"{\"type\":\"P\",\"data\":{\"name\":\"\xc3\"}}\n".to_vec(), 0, &["invalid_utf8"]),
        (b"{\"type\":\"P\",\"data\":{\"name\":\"\xed\xa0\x80\"}}\n".to_vec(), 0, &["invalid_utf8"]),
        (b"{\"type\":\"P\",\"data\":{\"name\":\"a\"}}\xc3\xa9\n".to_vec(), 0, &["trailing_content"]),
        (b"{\"type\":\"P\",\"data\":{\"name\":\"a\"}}\xff\n".to_vec(), 0, &["invalid_utf8"]),
    ];
    for (batch, taken, codes) in cases {
        let shown = String::from_utf8_lossy(&batch).into_owned();
        assert_eq!(differential(&schema, &options, &batch).0, taken, "{shown:?}");
        let report = validate(&schema, &options, &batch);
        let found: Vec<&str> = report.errors.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(found, codes, "{shown:?}");
    }
    // A line over the line bound is refused as such, though the acceptor
    // would take its record.
    let tight = Options::from_json(br#"{"limits":{"max_line_bytes":39}}"#).unwrap();
    let batch = format!("{b}\n{a}\n");
    let report = validate(&schema, &tight, batch.as_bytes());
    let found: Vec<&str> = report.errors.iter().map(|e| e.code.as_str()).collect();
    assert_eq!(found, ["line_too_long"]);
    assert_eq!(report.errors[0].line, 2);
}

/// Strict batches are read in windows of about 64 KiB (`batch::strict_window`):
/// a record spread over lines across a window's end, and lines after it,
/// keep their line numbers and counts.
#[test]
fn windows_keep_lines_and_counts() {
    let schema = Schema::compile("node P { name: String @key  age: I32? }").unwrap();
    let options = Options::default();
    let mut batch = String::new();
    let mut lines = 0u64;
    let mut spread_at = None;
    while batch.len() < 200 * 1024 {
        lines += 1;
        if spread_at.is_none() && batch.len() > 64 * 1024 - 40 {
            // Three lines, the first of which starts just before 64 KiB.
            spread_at = Some(lines);
            batch.push_str(&format!("{{\"type\":\"P\",\n\"data\":{{\"name\":\"p{lines}\"}}\n}}\n"));
            lines += 2;
        } else if lines.is_multiple_of(1000) {
            batch.push_str(&format!("{{\"type\":\"P\",\"data\":{{\"name\":\"p{lines}\",\"age\":\"x\"}}}}\n"));
        } else {
            batch.push_str(&format!("{{\"type\":\"P\",\"data\":{{\"name\":\"p{lines}\"}}}}\n"));
        }
    }
    let report = validate(&schema, &options, batch.as_bytes());
    assert_eq!(report.stats.lines, lines);
    let errors: Vec<(u64, &str)> = report.errors.iter().map(|e| (e.line, e.code.as_str())).collect();
    let mut expected: Vec<(u64, &str)> = (1..=lines).filter(|l| l % 1000 == 0).map(|l| (l, "type_mismatch")).collect();
    expected.push((spread_at.unwrap(), "multiline_record"));
    expected.sort();
    assert_eq!(errors, expected);
    assert_eq!(report.stats.records, lines - 2, "a record over three lines counts once");
}
