//! `cargo bench --profile dev -p omnigraph-host --bench wasm_runner`: the
//! validator in wasmtime against the same code native, on the generated
//! ~32 MiB batch, and the per-batch cost of a fresh instance with the schema
//! compiled once (a 1-line batch; 8,192 lines of the sample schema); the
//! validation step of the batch's edges alone (prepare, then the refs read).
//! Criterion's groups first, then one timed pass that ends in the issue's
//! `target` lines.

#[path = "../../omnigraph-validate-wasm/benches/batchgen.rs"]
mod batchgen;
mod common;
#[path = "../../omnigraph-validate-wasm/benches/rounds.rs"]
mod rounds;

use std::time::Duration;

use common::target_line::target_at_least;
use common::{median_time, target};
use criterion::{Criterion, Throughput, criterion_group};
use omnigraph_host::checks::ExternalRefs;
use omnigraph_host::validator::{PrepareResult, RunnerConfig, ValidateOutcome, Validator};
use omnigraph_validate_wasm::{Options, Schema, validate};
use rounds::Rounds;

const SCHEMA: &str = include_str!("../../../tests/bench/schema.pg");
const PEOPLE: &str = include_str!("../../../samples/people.pg");
const TARGET_BYTES: usize = 32 * 1024 * 1024 - 64 * 1024;
/// Rounds of the 32 MiB batch, native and wasmtime timed once each a round
/// (as the validator bench's timed pass; with five, three runs within an
/// hour read 0.50, 0.60 and 0.53).
const ROUNDS: usize = 11;
const ONE_LINE: &[u8] = b"{\"type\":\"Company\",\"data\":{\"name\":\"c\"}}\n";

fn runner(c: &mut Criterion) {
    let batch = batchgen::generate(TARGET_BYTES);
    let options_json = batchgen::BENCH_OPTIONS.as_bytes();
    let schema = Schema::compile(SCHEMA).unwrap();
    let options = Options::from_json(options_json).unwrap();
    let validator = Validator::new(RunnerConfig::default()).unwrap();
    assert_valid(validator.validate(SCHEMA, options_json, &batch).unwrap());

    let mut group = c.benchmark_group("32MiB");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(batch.len() as u64));
    group.bench_function("native_validate", |b| b.iter(|| validate(&schema, &options, &batch)));
    group.bench_function("wasmtime_validate", |b| b.iter(|| validator.validate(SCHEMA, options_json, &batch).unwrap()));
    group.finish();

    let mut group = c.benchmark_group("per_batch");
    group.bench_function("wasmtime_instantiate_only", |b| b.iter(|| validator.abi_version().unwrap()));
    group.bench_function("wasmtime_validate_1_line", |b| b.iter(|| validator.validate(SCHEMA, b"", ONE_LINE).unwrap()));
    group.bench_function("native_compile_and_validate_1_line", |b| {
        b.iter(|| validate(&Schema::compile(SCHEMA).unwrap(), &Options::default(), ONE_LINE))
    });
    group.finish();
}

fn assert_valid(outcome: ValidateOutcome) {
    match outcome {
        ValidateOutcome::Report(r) => assert!(r.starts_with("{\"ok\":true"), "{}", &r[..300.min(r.len())]),
        other => panic!("{other:?}"),
    }
}

/// 8,192 people of `samples/people.pg`, every optional property given.
fn people_batch() -> Vec<u8> {
    let mut out = String::new();
    for i in 0..8_192 {
        out.push_str(&format!(
            "{{\"type\":\"Person\",\"data\":{{\"name\":\"person-{i:06}\",\"age\":{},\"email\":\"p{i}@example.org\",\"born\":\"1990-01-{:02}\",\"tags\":[\"a\",\"b\"]}}}}\n",
            i % 150,
            1 + i % 28
        ));
    }
    out.into_bytes()
}

/// The validation step of a load (`Graph::validate`) on the commit
/// bench's batch: the artifact's `prepare` with the schema compiled once,
/// giving each table's Arrow batch; and, for comparison, the report alone.
fn commit_validation_step(validator: &Validator) -> (Duration, Duration) {
    let compiled = Schema::compile(common::SCHEMA).unwrap();
    let options = serde_json::to_vec(&Options::default()).unwrap();
    let batch = common::ndjson(0..common::BATCH_ROWS, 30);
    let step = || match validator.prepare_compiled(common::SCHEMA, &compiled, &options, &batch).unwrap() {
        PrepareResult::Accepted { tables, .. } => {
            let rows: usize = tables.iter().map(|t| t.batch.num_rows()).sum();
            assert_eq!(rows, common::BATCH_ROWS);
        }
        other => panic!("{other:?}"),
    };
    step();
    let report_only = median_time(21, || assert_valid(validator.validate(common::SCHEMA, &options, &batch).unwrap()));
    (report_only, median_time(21, step))
}

/// The validation step of a load on a batch of edges whose nodes are
/// stored, as every edge pass of a split load is (here the bench batch's
/// edges): the artifact's `prepare`, then the report's external refs read
/// as the host reads them. Gives both times and the number of refs.
fn edges_validation_step(validator: &Validator, schema: &Schema, batch: &[u8]) -> (Duration, Duration, usize) {
    let edges = batchgen::lines_where(batch, batchgen::is_edge);
    let options = batchgen::BENCH_OPTIONS.as_bytes();
    let prepare = || match validator.prepare_compiled(SCHEMA, schema, options, edges.as_bytes()).unwrap() {
        PrepareResult::Accepted { report_json, .. } => report_json,
        other => panic!("{other:?}"),
    };
    let report = prepare();
    let refs = ExternalRefs::from_report(&report, schema).unwrap().len();
    assert!(refs > 0, "every endpoint of an edges-only batch is outside it");
    (median_time(5, prepare), median_time(11, || ExternalRefs::from_report(&report, schema).unwrap()), refs)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn targets() {
    let batch = batchgen::generate(TARGET_BYTES);
    let options_json = batchgen::BENCH_OPTIONS.as_bytes();
    let schema = Schema::compile(SCHEMA).unwrap();
    let options = Options::from_json(options_json).unwrap();
    // A validator that has never seen the schemas: its first call compiles.
    let validator = Validator::new(RunnerConfig::default()).unwrap();
    validator.ready().unwrap();
    let first = std::time::Instant::now();
    assert_valid(validator.validate(SCHEMA, b"", ONE_LINE).unwrap());
    let first = first.elapsed();
    let one_line = median_time(501, || validator.validate(SCHEMA, b"", ONE_LINE).unwrap());
    let instance = median_time(501, || validator.abi_version().unwrap());
    let people = people_batch();
    assert_valid(validator.validate(PEOPLE, b"", &people).unwrap());
    let people_time = median_time(21, || validator.validate(PEOPLE, b"", &people).unwrap());
    let (step_validate, step) = commit_validation_step(&validator);
    let (edges_prepare, edges_refs, refs) = edges_validation_step(&validator, &schema, &batch);
    let rounds = Rounds::run(ROUNDS, &mut [
        &mut || drop(std::hint::black_box(validate(&schema, &options, &batch))),
        &mut || drop(std::hint::black_box(validator.validate(SCHEMA, options_json, &batch).unwrap())),
    ]);
    let (native, wasm) = (Duration::from_secs_f64(rounds.median_secs(0)), Duration::from_secs_f64(rounds.median_secs(1)));
    let mib = batch.len() as f64 / (1024.0 * 1024.0);
    println!();
    println!("Timed pass (medians):");
    println!("  32 MiB batch ({ROUNDS} rounds): native {:.0} ms ({:.1} MiB/s), wasmtime {:.0} ms ({:.1} MiB/s)",
        native.as_secs_f64() * 1e3, mib / native.as_secs_f64(), wasm.as_secs_f64() * 1e3, mib / wasm.as_secs_f64());
    let per_round: Vec<String> = rounds.speeds(1, 0).iter().map(|r| format!("{r:.2}")).collect();
    println!("  wasmtime / native, each round: {}", per_round.join(" "));
    println!("  fresh instance, one call: {:.1} µs", us(instance));
    println!("  1-line batch, first call (compiles the schema once): {:.1} µs", us(first));
    println!("  1-line batch, schema compiled: {:.1} µs", us(one_line));
    println!("  8,192 people of samples/people.pg ({} bytes): {:.2} ms", people.len(), people_time.as_secs_f64() * 1e3);
    println!("  the commit bench's validation step, {} rows of its schema: {:.2} ms (report only: {:.2} ms)",
        common::BATCH_ROWS, step.as_secs_f64() * 1e3, step_validate.as_secs_f64() * 1e3);
    println!("  the validation step of its edges alone (nodes stored, {refs} external refs): prepare {:.1} ms, refs read {:.1} ms",
        edges_prepare.as_secs_f64() * 1e3, edges_refs.as_secs_f64() * 1e3);
    println!();
    println!("{}", target("wasmtime_one_line_batch_us", us(one_line), 100.0));
    println!("{}", target("commit_validation_step_ms", step.as_secs_f64() * 1e3, 5.0));
    println!("{}", target_at_least("wasmtime_vs_native", rounds.speed(1, 0), 0.8));
}

criterion_group!(benches, runner);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    targets();
}
