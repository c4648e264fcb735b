//! `cargo bench -p omnigraph-validate-wasm --bench validate`: validator
//! throughput on a generated ~32 MiB batch, next to serde_json baselines, in
//! one run. Figures are recorded in docs/performance.md.

mod batchgen;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use omnigraph_validate_wasm::{Options, Schema, prepare, validate};

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
    group.bench_function("serde_json_ignored_any", |b| {
        b.iter(|| {
            for line in batch.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
                serde_json::from_slice::<serde::de::IgnoredAny>(line).expect("valid json");
            }
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for line in batch.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
                std::hint::black_box(serde_json::from_slice::<serde_json::Value>(line).expect("valid json"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
