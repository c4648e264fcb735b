//! Validates a batch the way the host does: the embedded artifact in
//! wasmtime. `cargo run -p omnigraph-host --example validate -- SCHEMA.pg BATCH.ndjson [OPTIONS.json]`
//! prints the report (SPEC §3); exit 0 valid, 1 invalid, 2 operational error.

use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: validate SCHEMA.pg BATCH.ndjson [OPTIONS.json]");
        std::process::exit(2);
    }
    let read = |path: &str| {
        std::fs::read(path).unwrap_or_else(|e| {
            eprintln!("{path}: {e}");
            std::process::exit(2)
        })
    };
    let schema = String::from_utf8(read(&args[1])).unwrap_or_else(|_| {
        eprintln!("{}: not UTF-8", args[1]);
        std::process::exit(2)
    });
    let batch = read(&args[2]);
    let options = args.get(3).map(|p| read(p)).unwrap_or_default();
    let validator = Validator::new(RunnerConfig::default()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    eprintln!("validator artifact sha256 {}", validator.artifact_sha256());
    match validator.validate(&schema, &options, &batch) {
        Ok(ValidateOutcome::Report(report)) => {
            println!("{report}");
            std::process::exit(if report.starts_with("{\"ok\":true") { 0 } else { 1 });
        }
        Ok(ValidateOutcome::SchemaError(e)) => eprintln!("schema error: {e}"),
        Ok(ValidateOutcome::OptionsError(e)) => eprintln!("options error: {e}"),
        Err(e) => eprintln!("{e}"),
    }
    std::process::exit(2);
}
