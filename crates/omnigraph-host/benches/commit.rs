//! The commit engine against raw Lance (docs/performance.md):
//! an 8,192-row merge load (4,096 updates + 4,096 new rows) into tables of
//! 0, 100k and 1M rows, through the engine (with and without fsync) and as
//! a raw Lance `merge_insert` of the same Arrow batch on a table with the
//! same schema and `_id` index; then p50/p99 of 200 sequential 100-row loads.
//!
//! `cargo bench -p omnigraph-host --bench commit` (OG_BENCH_SIZES=0,100000
//! to run fewer sizes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int32Array, RecordBatch, StringArray};
use lance::dataset::{InsertBuilder, MergeInsertBuilder, WhenMatched, WhenNotMatched, WriteMode, WriteParams};
use lance::index::DatasetIndexExt;
use lance_index::IndexType;
use lance_index::scalar::ScalarIndexParams;
use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::{EngineConfig, Graph, GraphRoot, LoadRequest, tables};
use omnigraph_validate_wasm::{Mode, Schema};

const SCHEMA: &str = "node Person { name: String @key  age: I32? }";
const BATCH_ROWS: usize = 8_192;
const ROUNDS: usize = 16;
const SMALL_LOADS: usize = 200;
const SMALL_ROWS: usize = 100;

fn name(i: usize) -> String {
    format!("person-{i:09}")
}

/// Rows `lo..hi` as NDJSON.
fn ndjson(ids: impl Iterator<Item = usize>, age: i32) -> Vec<u8> {
    let mut out = String::new();
    for i in ids {
        out.push_str(&format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{}\",\"age\":{age}}}}}\n", name(i)));
    }
    out.into_bytes()
}

fn arrow(schema: &arrow_schema::SchemaRef, ids: impl Iterator<Item = usize>, age: i32) -> RecordBatch {
    let names: Vec<String> = ids.map(name).collect();
    let ages = Int32Array::from(vec![age; names.len()]);
    RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(names.clone())), Arc::new(StringArray::from(names)), Arc::new(ages)])
        .expect("batch")
}

/// Round `r`'s batch: half updates of stored rows (when there are any), half new.
fn round_ids(base: usize, r: usize) -> Vec<usize> {
    let fresh = (base + r * BATCH_ROWS..).take(if base == 0 { BATCH_ROWS } else { BATCH_ROWS / 2 });
    let updates = (0..base).step_by((base / (BATCH_ROWS / 2)).max(1)).take(if base == 0 { 0 } else { BATCH_ROWS / 2 });
    updates.chain(fresh).collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

async fn engine_graph(dir: &std::path::Path, validator: Arc<Validator>, durable: bool, base: usize) -> Graph {
    let config = EngineConfig { durable, ..EngineConfig::default() };
    let root = GraphRoot::create(dir.to_str().unwrap(), Default::default()).unwrap();
    let graph = Graph::init(root, SCHEMA, validator, config).await.unwrap();
    for chunk in (0..base).collect::<Vec<_>>().chunks(BATCH_ROWS) {
        graph.load(request(ndjson(chunk.iter().copied(), 1))).await.unwrap();
    }
    graph
}

fn request(batch: Vec<u8>) -> LoadRequest {
    LoadRequest { branch: "main".into(), from: None, mode: Mode::Merge, strict: true, actor: "bench".into(), batch: Arc::new(batch), batch_key: None }
}

async fn raw_lance(dir: &std::path::Path, base: usize) -> Arc<lance::Dataset> {
    let schema = Schema::compile(SCHEMA).unwrap();
    let stored = tables::stored_schema(&schema.types[0]);
    let uri = dir.join("raw.lance");
    let params = WriteParams { mode: WriteMode::Create, ..Default::default() };
    let mut batches = vec![RecordBatch::new_empty(stored.clone())];
    for chunk in (0..base).collect::<Vec<_>>().chunks(65_536) {
        batches.push(arrow(&stored, chunk.iter().copied(), 1));
    }
    let mut ds = InsertBuilder::new(uri.to_str().unwrap()).with_params(&params).execute(batches).await.unwrap();
    ds.create_index(&["_id"], IndexType::BTree, Some("og_id_idx".into()), &ScalarIndexParams::default(), true).await.unwrap();
    Arc::new(ds)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let sizes: Vec<usize> = std::env::var("OG_BENCH_SIZES")
        .map(|s| s.split(',').map(|n| n.trim().parse().expect("size")).collect())
        .unwrap_or_else(|_| vec![0, 100_000, 1_000_000]);
    let validator = Arc::new(Validator::new(RunnerConfig::default()).unwrap());
    let schema = Schema::compile(SCHEMA).unwrap();
    let stored = tables::stored_schema(&schema.types[0]);
    println!("Medians of {ROUNDS} rounds (mean in brackets: includes the compaction and index merges a round may trigger).");
    println!();
    println!("| table rows | raw Lance merge_insert | engine, no fsync: checks+commit | engine, no fsync: whole load | engine, fsync: whole load (sync) | validate |");
    println!("|---|---|---|---|---|---|");
    runtime.block_on(async {
        for &base in &sizes {
            let tmp = tempfile::tempdir().unwrap();
            let mut raw = raw_lance(tmp.path(), base).await;
            let mut raw_times = Vec::new();
            for r in 0..ROUNDS {
                let batch = arrow(&stored, round_ids(base, r).into_iter(), 2);
                let started = Instant::now();
                let mut job = MergeInsertBuilder::try_new(raw.clone(), vec!["_id".into()]).unwrap();
                job.when_matched(WhenMatched::UpdateAll).when_not_matched(WhenNotMatched::InsertAll);
                let (next, _) = job.try_build().unwrap().execute_batches(vec![batch]).await.unwrap();
                raw_times.push(started.elapsed());
                raw = next;
            }
            let mut rows = Vec::new();
            for durable in [false, true] {
                let dir = tmp.path().join(if durable { "sync" } else { "nosync" });
                let graph = engine_graph(&dir, validator.clone(), durable, base).await;
                let (mut whole, mut core, mut validate, mut sync) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for r in 0..ROUNDS {
                    let batch = ndjson(round_ids(base, r).into_iter(), 2);
                    let started = Instant::now();
                    let receipt = graph.load(request(batch)).await.unwrap();
                    whole.push(started.elapsed());
                    core.push(receipt.timings.checks + receipt.timings.commit);
                    validate.push(receipt.timings.validate);
                    sync.push(receipt.timings.sync);
                }
                rows.push((median(whole.clone()), median(core.clone()), median(validate), median(sync), mean(&whole), mean(&core)));
            }
            let (raw, raw_mean) = (median(raw_times.clone()), mean(&raw_times));
            let (nosync, synced) = (rows[0], rows[1]);
            let ratio = |d: Duration| d.as_secs_f64() / raw.as_secs_f64();
            println!(
                "| {base} | {} ms [{}] | {} ms ({:.2}×) [{} ms] | {} ms ({:.2}×) [{} ms] | {} ms ({:.2}×) ({} ms) | {} ms |",
                ms(raw),
                ms(raw_mean),
                ms(nosync.1),
                ratio(nosync.1),
                ms(nosync.5),
                ms(nosync.0),
                ratio(nosync.0),
                ms(nosync.4),
                ms(synced.0),
                ratio(synced.0),
                ms(synced.3),
                ms(nosync.2),
            );
        }

        let tmp = tempfile::tempdir().unwrap();
        let graph = engine_graph(tmp.path(), validator.clone(), true, 100_000).await;
        let mut times = Vec::new();
        for n in 0..SMALL_LOADS {
            let batch = ndjson((0..SMALL_ROWS).map(|i| 10_000_000 + n * SMALL_ROWS + i), 3);
            let started = Instant::now();
            graph.load(request(batch)).await.unwrap();
            times.push(started.elapsed());
        }
        times.sort();
        println!();
        println!(
            "{SMALL_LOADS} sequential {SMALL_ROWS}-row loads into a 100k-row table (fsync on): p50 {} ms, p99 {} ms",
            ms(times[times.len() / 2]),
            ms(times[times.len() * 99 / 100])
        );
    });
}
