//! Says what each input of a fuzz target reaches: the schema errors, or per
//! mode the report's error codes. For checking that a kept input (e.g.
//! `explain prepare fuzz/regressions/prepare/*`) still exercises what its
//! name says after the rule book changes.

use std::collections::BTreeSet;

use omnigraph_fuzz_harness::{DEFAULT_VECTOR, Flags, corpus_cases};
use omnigraph_validate_wasm::{Mode, Options, Schema, validate};

fn codes(schema: &Schema, options: &Options, batch: &[u8]) -> String {
    let report = validate(schema, options, batch);
    let codes: BTreeSet<&str> = report.errors.iter().map(|e| e.code.as_str()).collect();
    format!("{} records, {} errors {codes:?}", report.stats.records, report.error_count)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(target) = args.next() else {
        eprintln!("usage: explain <target> <file>…");
        std::process::exit(2);
    };
    let cases = corpus_cases();
    for path in args {
        let data = std::fs::read(&path).expect("readable input");
        let what = match target.as_str() {
            "schema" => match std::str::from_utf8(&data) {
                Err(_) => "not UTF-8 (skipped)".to_owned(),
                Ok(source) => match Schema::compile(source) {
                    Ok(schema) => format!("compiles: {} types", schema.types.len()),
                    Err(e) => format!("{} schema errors, first: {}", e.errors.len(), e.errors[0].message),
                },
            },
            "strict" | "compat" => {
                let (name, batch) = match data.iter().position(|&b| b == b'\n') {
                    Some(i) => (String::from_utf8_lossy(&data[..i]).into_owned(), &data[i + 1..]),
                    None => (String::new(), &data[..]),
                };
                let case = cases.iter().find(|c| c.name == name).unwrap_or_else(|| cases.iter().find(|c| c.name == DEFAULT_VECTOR).unwrap());
                let schema = Schema::compile(&case.schema).expect("corpus schema");
                let strict = target == "strict";
                let merge = codes(&schema, &Options { mode: Mode::Merge, strict, ..Options::default() }, batch);
                let overwrite = codes(&schema, &Options { mode: Mode::Overwrite, strict, ..Options::default() }, batch);
                format!("schema {}; merge: {merge}; overwrite: {overwrite}", case.name)
            }
            "prepare" | "differential" => match data.split_first() {
                None => "empty (skipped)".to_owned(),
                Some((&flags, rest)) => match rest.iter().position(|&b| b == 0) {
                    None => "no NUL after the schema (skipped)".to_owned(),
                    Some(split) => match std::str::from_utf8(&rest[..split]).ok().map(Schema::compile) {
                        None => "schema not UTF-8 (skipped)".to_owned(),
                        Some(Err(e)) => format!("schema refused ({} errors, skipped)", e.errors.len()),
                        Some(Ok(schema)) => {
                            let options = Flags(flags).options();
                            format!("{:?} strict={} max_errors={}: {}", options.mode, options.strict, options.max_errors, codes(&schema, &options, &rest[split + 1..]))
                        }
                    },
                },
            },
            other => panic!("unknown fuzz target {other}"),
        };
        println!("{path}: {what}");
    }
}
