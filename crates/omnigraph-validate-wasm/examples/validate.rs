//! Validates an NDJSON file against a schema and prints the report:
//! `cargo run --example validate -- schema.pg batch.ndjson [options.json] [--prepare | --rows]`.
//! With `--prepare` it also builds the Arrow IPC of an accepted batch (for
//! profiling `prepare`) and prints each table's size; with `--rows`, the
//! canonical rows the artifact's `og_prepare` returns (`prepare_rows`), and
//! prints their size.

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let prepare = args.iter().any(|a| a == "--prepare");
    let rows = args.iter().any(|a| a == "--rows");
    args.retain(|a| a != "--prepare" && a != "--rows");
    if args.len() < 3 {
        eprintln!("usage: validate SCHEMA.pg BATCH.ndjson [OPTIONS.json] [--prepare | --rows]");
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
    let report = if rows {
        match omnigraph_validate_wasm::prepare_rows(&schema, &options, &batch) {
            Ok((report, rows)) => {
                eprintln!("{} bytes of canonical rows", rows.len());
                report
            }
            Err(report) => report,
        }
    } else if prepare {
        match omnigraph_validate_wasm::prepare(&schema, &options, &batch) {
            Ok(omnigraph_validate_wasm::Prepared { report, tables }) => {
                for table in tables.into_iter().map(omnigraph_validate_wasm::PreparedBatch::into_table) {
                    eprintln!("{}: {} bytes of Arrow IPC", table.name, table.ipc.len());
                }
                report
            }
            Err(report) => report,
        }
    } else {
        omnigraph_validate_wasm::validate(&schema, &options, &batch)
    };
    println!("{}", report.to_json());
    std::process::exit(if report.ok { 0 } else { 1 });
}
