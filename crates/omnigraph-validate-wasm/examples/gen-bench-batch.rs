//! Writes the benchmark batch so other runtimes measure the same bytes:
//! `cargo run --release -p omnigraph-validate-wasm --example gen-bench-batch -- OUT.ndjson [BYTES]`.

#[path = "../benches/batchgen.rs"]
mod batchgen;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = args.get(1).expect("usage: gen-bench-batch OUT.ndjson [BYTES]");
    let bytes = args.get(2).map_or(32 * 1024 * 1024 - 64 * 1024, |b| b.parse().expect("BYTES is a number"));
    let batch = batchgen::generate(bytes);
    std::fs::write(out, &batch).expect("write batch");
    std::fs::write(format!("{out}.options.json"), batchgen::BENCH_OPTIONS).expect("write options");
    println!("{} bytes written to {out}", batch.len());
}
