//! Validates an NDJSON file against a schema and prints the report:
//! `cargo run --example validate -- schema.pg batch.ndjson [options.json]`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: validate SCHEMA.pg BATCH.ndjson [OPTIONS.json]");
        std::process::exit(2);
    }
    let source = std::fs::read_to_string(&args[1]).expect("read schema");
    let schema = match omnigraph_validate_wasm::Schema::compile(&source) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let batch = std::fs::read(&args[2]).expect("read batch");
    let options = match args.get(3) {
        Some(p) => omnigraph_validate_wasm::Options::from_json(&std::fs::read(p).expect("read options")).expect("options"),
        None => omnigraph_validate_wasm::Options::default(),
    };
    let report = omnigraph_validate_wasm::validate(&schema, &options, &batch);
    println!("{}", report.to_json());
    std::process::exit(if report.ok { 0 } else { 1 });
}
