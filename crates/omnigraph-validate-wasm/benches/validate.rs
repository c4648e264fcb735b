//! `cargo bench -p omnigraph-validate-wasm --bench validate`: validator
//! throughput (`validate` and `prepare`) on a generated ~32 MiB batch, next
//! to serde_json baselines, in one run: criterion's group, then one timed
//! pass (rounds of every contender, `rounds.rs`) that ends in the issue's
//! `target` lines. Figures are recorded in docs/performance.md.

mod batchgen;
mod rounds;
mod target_line;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group};
use omnigraph_validate_wasm::{Options, Schema, Scratch, prepare, prepare_rows, validate};
use rounds::Rounds;
use target_line::target_at_least;

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
    let mut scratch = Scratch::default();
    group.bench_function("validate", |b| b.iter(|| scratch.validate(&schema, &options, &batch)));
    group.bench_function("validate_fresh_scratch", |b| b.iter(|| validate(&schema, &options, &batch)));
    group.bench_function("prepare", |b| b.iter(|| scratch.prepare(&schema, &options, &batch).expect("valid")));
    group.bench_function("prepare_ipc", |b| b.iter(|| scratch.prepare(&schema, &options, &batch).expect("valid").into_tables()));
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
        black_box(serde_json::from_slice::<serde_json::Value>(line).expect("valid json"));
    }
}

/// Rounds of the timed pass: each times every contender once.
const ROUNDS: usize = 11;

fn targets() {
    let batch = batchgen::generate(TARGET_BYTES);
    let schema = Schema::compile(SCHEMA).expect("bench schema compiles");
    let options = Options::from_json(batchgen::BENCH_OPTIONS.as_bytes()).expect("bench options");
    let (validating, preparing, preparing_ipc, preparing_rows, syntax, dom, validating_fresh, preparing_fresh) = (0, 1, 2, 3, 4, 5, 6, 7);
    // A native caller that validates batch after batch keeps a scratch
    // (its checks' maps), as a service would; each contender its own.
    let (mut validate_scratch, mut prepare_scratch, mut ipc_scratch) = (Scratch::default(), Scratch::default(), Scratch::default());
    let rounds = Rounds::run(ROUNDS, &mut [
        &mut || drop(black_box(validate_scratch.validate(&schema, &options, &batch))),
        // Record batches, what an in-process host stores (the host's own
        // road, `batches_from_rows`, makes the same); then those serialized
        // as Arrow IPC.
        &mut || drop(black_box(prepare_scratch.prepare(&schema, &options, &batch).expect("valid"))),
        &mut || drop(black_box(ipc_scratch.prepare(&schema, &options, &batch).expect("valid").into_tables())),
        // What the artifact's `og_prepare` runs: canonical rows, no Arrow.
        &mut || drop(black_box(prepare_rows(&schema, &options, &batch).expect("valid"))),
        &mut || ignored_any(&batch),
        &mut || value_dom(&batch),
        // Each call in new memory, as the wasm artifact's fresh instances run.
        &mut || drop(black_box(validate(&schema, &options, &batch))),
        &mut || drop(black_box(prepare(&schema, &options, &batch).expect("valid"))),
    ]);
    let mib = batch.len() as f64 / (1024.0 * 1024.0);
    let speed = |i| mib / rounds.median_secs(i);
    println!();
    println!("Timed pass ({ROUNDS} rounds, each contender timed once a round; medians, MiB/s): validate {:.1}, prepare {:.1}, \
        prepare + IPC {:.1}, prepare_rows {:.1}, IgnoredAny {:.1}, Value {:.1}",
        speed(validating), speed(preparing), speed(preparing_ipc), speed(preparing_rows), speed(syntax), speed(dom));
    println!("Ratios (medians over rounds of each round's ratio): prepare + IPC / validate {:.2}, prepare_rows (the artifact's og_prepare) / validate {:.2}",
        rounds.speed(preparing_ipc, validating), rounds.speed(preparing_rows, validating));
    println!("Without a kept scratch (each call in new memory): validate {:.1} MiB/s, prepare {:.1}; validate / IgnoredAny {:.2}, validate / Value {:.2}, prepare / validate {:.2}",
        speed(validating_fresh), speed(preparing_fresh), rounds.speed(validating_fresh, syntax),
        rounds.speed(validating_fresh, dom), rounds.speed(preparing_fresh, validating_fresh));
    // The worst cases, against the same syntax check of their own bytes:
    // a batch of only edges (every endpoint external) and one in which every
    // line is invalid (each record goes through the acceptor and then the
    // explainer).
    let edges = batchgen::lines_where(&batch, batchgen::is_edge);
    let errors = batchgen::lines_where(&batch, |_| true).replace("\"data\":{", "\"data\":{\"nope\":1,");
    assert!(!validate(&schema, &options, errors.as_bytes()).ok, "every line of the errors batch is invalid");
    for (name, worst) in [("edges_only", edges.as_bytes()), ("errors_only", errors.as_bytes())] {
        let (mut scratch, mut json_scratch) = (Scratch::default(), Scratch::default());
        let rounds = Rounds::run(ROUNDS, &mut [
            &mut || drop(black_box(scratch.validate(&schema, &options, worst))),
            // What the artifact's `og_validate` returns: the report as JSON
            // (a batch of edges whose nodes are stored lists two refs per line).
            &mut || drop(black_box(json_scratch.validate(&schema, &options, worst).to_json())),
            &mut || ignored_any(worst),
        ]);
        let mib = worst.len() as f64 / (1024.0 * 1024.0);
        println!("worst case {name}: {} bytes, validate {:.1} MiB/s, {name}_vs_ignoredany {:.2}; with the report's JSON {:.1} MiB/s, {:.2}",
            worst.len(), mib / rounds.median_secs(0), rounds.speed(0, 2), mib / rounds.median_secs(1), rounds.speed(1, 2));
    }
    // Throughput ratios: time of the baseline over time of the validator.
    println!("{}", target_at_least("validate_vs_ignoredany", rounds.speed(validating, syntax), 1.0));
    println!("{}", target_at_least("validate_vs_value", rounds.speed(validating, dom), 3.0));
    println!("{}", target_at_least("prepare_vs_validate", rounds.speed(preparing, validating), 0.8));
}

criterion_group!(benches, throughput);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    targets();
}
