//! Validates an NDJSON file against a schema and prints the report:
//! `cargo run --example validate -- schema.pg batch.ndjson [options.json] [--prepare | --rows]`.
//! With `--prepare` it also builds the Arrow IPC of an accepted batch (for
//! profiling `prepare`) and prints each table's size; with `--rows`, the
//! canonical rows the artifact's `og_prepare` returns (`prepare_rows`), and
//! prints their size. With `--time N` it validates N times and prints only
//! the median and fastest time (the native side of web/bench's paired
//! ratios: a run of this between a JS runtime's calls); with `--time N
//! --scratch`, through one kept `Scratch` (as a native service validates),
//! and with `--time N --scratch --prepare`, `Scratch::prepare` likewise.

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let prepare = args.iter().any(|a| a == "--prepare");
    let rows = args.iter().any(|a| a == "--rows");
    let kept_scratch = args.iter().any(|a| a == "--scratch");
    args.retain(|a| a != "--prepare" && a != "--rows" && a != "--scratch");
    let times = match args.iter().position(|a| a == "--time") {
        Some(at) => {
            let n: usize = args.get(at + 1).and_then(|n| n.parse().ok()).filter(|&n| n > 0).unwrap_or_else(|| {
                eprintln!("--time takes a positive number of runs");
                std::process::exit(2)
            });
            args.drain(at..at + 2);
            Some(n)
        }
        None => None,
    };
    if args.len() < 3 {
        eprintln!("usage: validate SCHEMA.pg BATCH.ndjson [OPTIONS.json] [--prepare | --rows | --time N [--scratch [--prepare]]]");
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
    if let Some(n) = times {
        let mut scratch = omnigraph_validate_wasm::Scratch::default();
        let mut ms: Vec<f64> = (0..n)
            .map(|_| {
                let start = std::time::Instant::now();
                if kept_scratch && prepare {
                    drop(std::hint::black_box(scratch.prepare(&schema, &options, &batch)));
                } else if kept_scratch {
                    std::hint::black_box(scratch.validate(&schema, &options, &batch));
                } else {
                    std::hint::black_box(omnigraph_validate_wasm::validate(&schema, &options, &batch));
                }
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        let pass = if kept_scratch && prepare { "prepare" } else { "validate" };
        println!("native {pass}: median {:.1} ms, fastest {:.1} ms, of {n}", ms[n / 2], ms[0]);
        return;
    }
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
