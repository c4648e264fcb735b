//! Validates an NDJSON file in wasmtime CALLS times, each call a fresh
//! instance as the host runs batches, and prints whether the last report
//! was ok: `validate-wasm SCHEMA.pg BATCH.ndjson [OPTIONS.json] [--calls N]`.
//! For scripts/count-wasm.sh, which counts its instructions under
//! cachegrind: one pooling slot (valgrind cannot map the 16 slots' address
//! space the host reserves) and no clock.

use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let calls = match args.iter().position(|a| a == "--calls") {
        Some(at) => {
            let n = args.get(at + 1).and_then(|n| n.parse::<usize>().ok()).filter(|&n| n > 0);
            let Some(n) = n else {
                eprintln!("--calls takes a positive number");
                std::process::exit(2)
            };
            args.drain(at..at + 2);
            n
        }
        None => 1,
    };
    if args.len() < 3 {
        eprintln!("usage: validate-wasm SCHEMA.pg BATCH.ndjson [OPTIONS.json] [--calls N]");
        std::process::exit(2);
    }
    let schema = std::fs::read_to_string(&args[1]).expect("read schema");
    let batch = std::fs::read(&args[2]).expect("read batch");
    let options = args.get(3).map(|p| std::fs::read(p).expect("read options")).unwrap_or_default();
    let validator = Validator::new(RunnerConfig { max_instances: 1, ..RunnerConfig::default() }).expect("validator");
    let mut ok = false;
    for _ in 0..calls {
        ok = match validator.validate(&schema, &options, &batch).expect("validate") {
            ValidateOutcome::Report(report) => report.starts_with("{\"ok\":true"),
            other => panic!("{other:?}"),
        };
    }
    println!("{calls} calls, last report ok: {ok}");
}
