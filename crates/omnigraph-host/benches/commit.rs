//! The commit engine against raw Lance (docs/performance.md; the runs:
//! docs/lab/2026-12-01-commit-engine-vs-raw-lance.md), on the same
//! base: a graph of 8k, 100k or 1M people is built and maintained, its
//! Person table copied byte for byte for raw Lance, and the graph copied
//! once more. Then every round sends the same 8,192-row merge (4,096 updates
//! spread over the table, 4,096 new rows) to all three, interleaved: raw
//! Lance `merge_insert` of the Arrow batch the engine writes, the engine
//! without any fsync, and the engine with fsync (as shipped). The engine's
//! per-step timers come from its receipts.
//!
//! `cargo bench --profile dev -p omnigraph-host --bench commit`
//! (`OG_BENCH_SIZES=8192,100000` for fewer sizes, `OG_BENCH_ROUNDS=16`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int32Array, RecordBatch, StringArray};
use common::*;
use lance::Dataset;
use lance::dataset::{MergeInsertBuilder, WhenMatched, WhenNotMatched};
use omnigraph_host::{LoadTimings, tables};
use omnigraph_validate_wasm::Schema;

fn arrow(schema: &arrow_schema::SchemaRef, ids: &[usize], age: i32) -> RecordBatch {
    let names: Vec<String> = ids.iter().copied().map(name).collect();
    let ages = Int32Array::from(vec![age; names.len()]);
    let columns = vec![
        Arc::new(StringArray::from(names.clone())) as _,
        Arc::new(StringArray::from(names)) as _,
        Arc::new(ages) as _,
    ];
    RecordBatch::try_new(schema.clone(), columns).expect("batch")
}

/// Writes out every dirty page (untimed, before each timed merge): an fsync
/// of the engine's would otherwise also flush what the merge before it,
/// raw Lance's or the other engine's, left in the page cache, a cost of
/// interleaving the three that a host alone does not pay.
fn flush_dirty_pages() {
    assert!(std::process::Command::new("sync").status().expect("sync").success());
}

/// The engine's own work: everything after the head is known, validation
/// excluded (it has no raw Lance counterpart).
fn engine_work(t: &LoadTimings) -> Duration {
    t.checks + t.writing()
}

struct Engine {
    whole: Vec<Duration>,
    steps: Vec<LoadTimings>,
}

impl Engine {
    fn median_of(&self, f: impl Fn(&LoadTimings) -> Duration) -> Duration {
        median(&self.steps.iter().map(f).collect::<Vec<_>>())
    }
}

fn main() {
    let (runtime, validator) = runtime_and_validator();
    let sizes: Vec<usize> = std::env::var("OG_BENCH_SIZES")
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("size"))
                .collect()
        })
        .unwrap_or_else(|_| vec![8_192, 100_000, 1_000_000]);
    let rounds = env_count("OG_BENCH_ROUNDS", 16);
    let schema = Schema::compile(SCHEMA).unwrap();
    let stored = tables::stored_schema(&schema.types[0]);
    let mut targets = Vec::new();
    let mut whole_sync = Vec::new();
    println!("Medians of {rounds} rounds (after one warm-up round each), in ms.");
    runtime.block_on(async {
        for &base in &sizes {
            let tmp = tempfile::tempdir().unwrap();
            let (nosync_dir, sync_dir) = (tmp.path().join("nosync"), tmp.path().join("sync"));
            drop(built_graph(&nosync_dir, validator.clone(), base).await);
            copy_tree(&nosync_dir, &sync_dir);
            let raw_uri = tmp.path().join("raw.lance");
            copy_tree(&nosync_dir.join("nodes/Person.lance"), &raw_uri);
            let nosync = reopen(&nosync_dir, validator.clone(), false).await;
            let synced = reopen(&sync_dir, validator.clone(), true).await;
            let mut raw = Arc::new(Dataset::open(raw_uri.to_str().unwrap()).await.unwrap());
            let (mut raw_times, mut engines) = (Vec::new(), [Engine { whole: vec![], steps: vec![] }, Engine { whole: vec![], steps: vec![] }]);
            let mut rows = base;
            for r in 0..=rounds {
                let ids = merge_ids(rows, r);
                rows += BATCH_ROWS / 2;
                let age = 2 + r as i32;
                let batch = arrow(&stored, &ids, age);
                flush_dirty_pages();
                let started = Instant::now();
                let mut job = MergeInsertBuilder::try_new(raw.clone(), vec!["_id".into()]).unwrap();
                job.when_matched(WhenMatched::UpdateAll).when_not_matched(WhenNotMatched::InsertAll);
                let (next, _) = job.try_build().unwrap().execute_batches(vec![batch]).await.unwrap();
                let raw_time = started.elapsed();
                raw = next;
                for (graph, engine) in [&nosync, &synced].into_iter().zip(engines.iter_mut()) {
                    flush_dirty_pages();
                    let started = Instant::now();
                    let receipt = graph.load(merge(ndjson(ids.iter().copied(), age))).await.unwrap();
                    if r > 0 {
                        engine.whole.push(started.elapsed());
                        engine.steps.push(receipt.timings);
                    }
                }
                if r > 0 {
                    raw_times.push(raw_time);
                }
            }
            let raw = median(&raw_times);
            println!();
            println!("Table of {base} rows (raw Lance merge_insert: {} ms):", ms(raw));
            println!();
            println!("| engine | whole load | validate | lease | head | checks | stage | record | commit | sync | publish | checks+commit | ÷ raw |");
            println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
            for (label, engine) in ["no fsync", "fsync"].into_iter().zip(&engines) {
                let work = engine.median_of(engine_work);
                println!(
                    "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2}× |",
                    ms(median(&engine.whole)),
                    ms(engine.median_of(|t| t.validate)),
                    ms(engine.median_of(|t| t.lease)),
                    ms(engine.median_of(|t| t.head)),
                    ms(engine.median_of(|t| t.checks)),
                    ms(engine.median_of(|t| t.stage)),
                    ms(engine.median_of(|t| t.record)),
                    ms(engine.median_of(|t| t.commit)),
                    ms(engine.median_of(|t| t.sync)),
                    ms(engine.median_of(|t| t.publish)),
                    ms(work),
                    ratio(work, raw),
                );
            }
            let tag = size_tag(base);
            targets.push(target(&format!("commit_vs_raw_nosync_{tag}"), ratio(engines[0].median_of(engine_work), raw), 1.25));
            targets.push(target(&format!("commit_vs_raw_sync_{tag}"), ratio(engines[1].median_of(engine_work), raw), 1.35));
            whole_sync.push((base, median(&engines[1].whole)));
        }
    });
    if let (Some(&(small, a)), Some(&(large, b))) = (whole_sync.first(), whole_sync.last())
        && large > small
    {
        targets.push(target(
            &format!("load_{}_vs_{}", size_tag(large), size_tag(small)),
            ratio(b, a),
            1.2,
        ));
    }
    println!();
    for line in targets {
        println!("{line}");
    }
}
