//! `cargo bench -p omnigraph-validate-wasm --bench validate`: validator
//! throughput on a generated ~32 MiB batch, next to serde_json baselines, in
//! one run: criterion's group, then one timed pass (medians of 5) that ends
//! in the issue's `target` lines. Figures are recorded in docs/performance.md.

mod batchgen;

use criterion::{Criterion, Throughput, criterion_group};
use omnigraph_validate_wasm::{Options, Schema, prepare, prepare_rows, validate};

const SCHEMA: &str = include_str!("../../../tests/bench/schema.pg");
const TARGET_BYTES: usize = 32 * 1024 * 1024 - 64 * 1024;

fn throughput(c: &mut Criterion) {
    let batch = batchgen::generate(TARGET_BYTES);
    let schema = Schema::compile(SCHEMA).expect("bench schema compiles");
    let options = Options::from_json(batchgen::BENCH_OPTIONS.as_bytes()).expect("bench options");
    let report = validate(&schema, &options, &batch);
    assert!(report.ok, "bench batch must be valid: {}", report.to_json());
    eprintln!("batch: {} bytes, {} records", batch.len(), report.stats.records);

    let mut group = c.benchmark_group("32MiB");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("validate", |b| b.iter(|| validate(&schema, &options, &batch)));
    group.bench_function("prepare", |b| b.iter(|| prepare(&schema, &options, &batch).expect("valid")));
    group.bench_function("prepare_rows", |b| b.iter(|| prepare_rows(&schema, &options, &batch).expect("valid")));
    group.bench_function("serde_json_ignored_any", |b| b.iter(|| ignored_any(&batch)));
    group.bench_function("serde_json_value", |b| b.iter(|| value_dom(&batch)));
    group.finish();
}

/// serde_json's bare syntax check of every line.
fn ignored_any(batch: &[u8]) {
    for line in batch.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<serde::de::IgnoredAny>(line).expect("valid json");
    }
}

/// A serde_json DOM of every line.
fn value_dom(batch: &[u8]) {
    for line in batch.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        std::hint::black_box(serde_json::from_slice::<serde_json::Value>(line).expect("valid json"));
    }
}

fn median_secs(mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let start = std::time::Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

/// A floor target: met when `measured >= goal`.
fn target(name: &str, measured: f64, goal: f64) {
    println!("target {name} {measured:.2} {goal} {}", if measured >= goal { "met" } else { "not met" });
}

fn targets() {
    let batch = batchgen::generate(TARGET_BYTES);
    let schema = Schema::compile(SCHEMA).expect("bench schema compiles");
    let options = Options::from_json(batchgen::BENCH_OPTIONS.as_bytes()).expect("bench options");
    let validating = median_secs(|| drop(std::hint::black_box(validate(&schema, &options, &batch))));
    let preparing = median_secs(|| drop(std::hint::black_box(prepare(&schema, &options, &batch).expect("valid"))));
    // What the artifact's `og_prepare` runs: canonical rows, no Arrow IPC.
    let preparing_rows = median_secs(|| drop(std::hint::black_box(prepare_rows(&schema, &options, &batch).expect("valid"))));
    let syntax = median_secs(|| ignored_any(&batch));
    let dom = median_secs(|| value_dom(&batch));
    let mib = batch.len() as f64 / (1024.0 * 1024.0);
    println!();
    println!("Timed pass (medians of 5, MiB/s): validate {:.1}, prepare {:.1}, prepare_rows {:.1}, IgnoredAny {:.1}, Value {:.1}",
        mib / validating, mib / preparing, mib / preparing_rows, mib / syntax, mib / dom);
    println!("prepare_rows (the artifact's og_prepare) / validate: {:.2}", validating / preparing_rows);
    // The worst cases, against the same syntax check of their own bytes:
    // a batch of only edges (every endpoint external) and one in which every
    // line is invalid (each record goes through the acceptor and then the
    // explainer).
    let edges = batchgen::lines_where(&batch, |line| batchgen::is_edge(line));
    let errors = batchgen::lines_where(&batch, |_| true).replace("\"data\":{", "\"data\":{\"nope\":1,");
    assert!(!validate(&schema, &options, errors.as_bytes()).ok, "every line of the errors batch is invalid");
    for (name, worst) in [("edges_only", edges.as_bytes()), ("errors_only", errors.as_bytes())] {
        let validating = median_secs(|| drop(std::hint::black_box(validate(&schema, &options, worst))));
        // What the artifact's `og_validate` returns: the report as JSON (a
        // batch of edges whose nodes are stored lists two refs per line).
        let reporting = median_secs(|| drop(std::hint::black_box(validate(&schema, &options, worst).to_json())));
        let syntax = median_secs(|| ignored_any(worst));
        let mib = worst.len() as f64 / (1024.0 * 1024.0);
        println!("worst case {name}: {} bytes, validate {:.1} MiB/s, {name}_vs_ignoredany {:.2}; with the report's JSON {:.1} MiB/s, {:.2}",
            worst.len(), mib / validating, syntax / validating, mib / reporting, syntax / reporting);
    }
    // Throughput ratios: time of the baseline over time of the validator.
    target("validate_vs_ignoredany", syntax / validating, 1.0);
    target("validate_vs_value", dom / validating, 3.0);
    target("prepare_vs_validate", validating / preparing, 0.8);
}

criterion_group!(benches, throughput);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    targets();
}
