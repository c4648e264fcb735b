//! `cargo bench -p omnigraph-host --bench wasm_runner`: the validator in
//! wasmtime against the same code native, on the generated ~32 MiB batch,
//! and the per-batch overhead of a fresh instance (1-line batch).

#[path = "../../omnigraph-validate-wasm/benches/batchgen.rs"]
mod batchgen;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};
use omnigraph_validate_wasm::{Options, Schema, validate};

const SCHEMA: &str = include_str!("../../../tests/bench/schema.pg");
const TARGET_BYTES: usize = 32 * 1024 * 1024 - 64 * 1024;

fn runner(c: &mut Criterion) {
    let batch = batchgen::generate(TARGET_BYTES);
    let options_json = batchgen::BENCH_OPTIONS.as_bytes();
    let schema = Schema::compile(SCHEMA).unwrap();
    let options = Options::from_json(options_json).unwrap();
    let validator = Validator::new(RunnerConfig::default()).unwrap();
    match validator.validate(SCHEMA, options_json, &batch).unwrap() {
        ValidateOutcome::Report(r) => assert!(r.starts_with("{\"ok\":true"), "{}", &r[..300.min(r.len())]),
        other => panic!("{other:?}"),
    }

    let mut group = c.benchmark_group("32MiB");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("native_validate", |b| b.iter(|| validate(&schema, &options, &batch)));
    group.bench_function("wasmtime_validate", |b| b.iter(|| validator.validate(SCHEMA, options_json, &batch).unwrap()));
    group.finish();

    let line = b"{\"type\":\"Company\",\"data\":{\"name\":\"c\"}}\n";
    let mut group = c.benchmark_group("per_batch");
    group.bench_function("wasmtime_instantiate_only", |b| b.iter(|| validator.abi_version().unwrap()));
    group.bench_function("wasmtime_validate_1_line", |b| b.iter(|| validator.validate(SCHEMA, b"", line).unwrap()));
    group.bench_function("native_compile_and_validate_1_line", |b| {
        b.iter(|| validate(&Schema::compile(SCHEMA).unwrap(), &Options::default(), line))
    });
    group.finish();
}

criterion_group!(benches, runner);
criterion_main!(benches);
