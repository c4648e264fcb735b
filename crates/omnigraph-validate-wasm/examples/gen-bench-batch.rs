//! Writes the benchmark batch so other runtimes measure the same bytes:
//! `cargo run --release -p omnigraph-validate-wasm --example gen-bench-batch -- OUT.ndjson [BYTES]`.
//! Also writes its edges alone (the worst case "a batch of only edges") to
//! `OUT.edges.ndjson`.

#[path = "../benches/batchgen.rs"]
mod batchgen;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = args.get(1).expect("usage: gen-bench-batch OUT.ndjson [BYTES]");
    let bytes = args.get(2).map_or(32 * 1024 * 1024 - 64 * 1024, |b| b.parse().expect("BYTES is a number"));
    let batch = batchgen::generate(bytes);
    std::fs::write(out, &batch).expect("write batch");
    std::fs::write(format!("{out}.options.json"), batchgen::BENCH_OPTIONS).expect("write options");
    std::fs::write(format!("{out}.edges.ndjson"), batchgen::lines_where(&batch, batchgen::is_edge)).expect("write edges");
    println!("{} bytes written to {out}", batch.len());
}
