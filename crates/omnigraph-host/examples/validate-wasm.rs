//! Validates an NDJSON file in wasmtime CALLS times, each call a fresh
//! instance as the host runs batches: `validate-wasm SCHEMA.pg BATCH.ndjson
//! OPTIONS.json CALLS`; exits 1 unless the last report is ok. For
//! scripts/count-wasm.sh, which counts its instructions under cachegrind:
//! one pooling slot (valgrind cannot map the address space the host's 16
//! slots reserve).

use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let calls = args.get(4).and_then(|n| n.parse::<usize>().ok()).filter(|&n| n > 0);
    let (Some(calls), 5) = (calls, args.len()) else {
        eprintln!("usage: validate-wasm SCHEMA.pg BATCH.ndjson OPTIONS.json CALLS (CALLS > 0)");
        std::process::exit(2)
    };
    let schema = std::fs::read_to_string(&args[1]).expect("read schema");
    let batch = std::fs::read(&args[2]).expect("read batch");
    let options = std::fs::read(&args[3]).expect("read options");
    let validator = Validator::new(RunnerConfig { max_instances: 1, ..RunnerConfig::default() }).expect("validator");
    let mut ok = false;
    for _ in 0..calls {
        ok = match validator.validate(&schema, &options, &batch).expect("validate") {
            ValidateOutcome::Report(report) => report.starts_with("{\"ok\":true"),
            other => panic!("{other:?}"),
        };
    }
    println!("{calls} calls, last report ok: {ok}");
    std::process::exit(if ok { 0 } else { 1 });
}
