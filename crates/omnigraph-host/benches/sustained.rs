//! Sustained loading with maintenance running (docs/performance.md; the
//! runs: docs/lab/2026-12-01-sustained-merges.md): 1,000
//! sequential 8,192-row merges (4,096 updates spread over the table, 4,096
//! new rows) into a table growing from empty, while a background task runs
//! maintenance steps the way `serve` does. Each load's latency is timed by
//! its caller (p99/p50); at the end the table must hold exactly the rows
//! loaded.
//!
//! `cargo bench --profile dev -p omnigraph-host --bench sustained`
//! (`OG_SUSTAINED_LOADS=1000`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use omnigraph_host::{EngineError, Graph, GraphRoot};

/// How often the background task looks for work, as `serve` does by default.
const MAINTENANCE_INTERVAL: Duration = omnigraph_host::limits::MAINTENANCE_INTERVAL;
const MAX_UNINDEXED_ROWS: u64 = omnigraph_host::limits::MAX_UNINDEXED_ROWS;

/// `serve`'s maintenance rounds for one graph (`Graph::maintain_if_due`):
/// when loads happened, steps until none is left; on maintenance's own
/// thread and runtime, as `serve` runs them.
async fn maintain(graph: Arc<Graph>, stop: Arc<AtomicBool>, steps: Arc<AtomicUsize>) {
    while !stop.load(Ordering::Acquire) {
        tokio::time::sleep(MAINTENANCE_INTERVAL).await;
        let stopping = || stop.load(Ordering::Acquire);
        let counted = |commit: &omnigraph_host::manifest::Commit| {
            if std::env::var_os("OG_VERBOSE").is_some() {
                eprintln!("step {:?}", commit.maintenance);
            }
            steps.fetch_add(1, Ordering::AcqRel);
        };
        match graph.maintain_if_due(stopping, counted).await {
            Ok(()) | Err(EngineError::LeaseBusy { .. }) => {}
            Err(e) => panic!("maintenance failed: {e}"),
        }
    }
}

fn main() {
    let (runtime, validator) = runtime_and_validator();
    let loads = env_count("OG_SUSTAINED_LOADS", 1_000);
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let root = GraphRoot::create(tmp.path().to_str().unwrap(), Default::default()).unwrap();
        let graph = Arc::new(Graph::init(root, SCHEMA, validator, config(true)).await.unwrap());
        let (stop, steps) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let maintenance = omnigraph_host::graph::spawn_maintenance(maintain(graph.clone(), stop.clone(), steps.clone())).unwrap();
        let mut times = Vec::with_capacity(loads);
        let mut rows = 0;
        let started = Instant::now();
        for r in 0..loads {
            let ids = merge_ids(rows, r);
            rows = rows.max(*ids.iter().max().unwrap() + 1);
            let began = Instant::now();
            let receipt = graph.load(merge(ndjson(ids.into_iter(), r as i32))).await.unwrap();
            times.push(began.elapsed());
            if std::env::var_os("OG_VERBOSE").is_some() {
                eprintln!("load {r} {} ms {:?}", ms(times[r]), receipt.timings);
            }
            if (r + 1) % 100 == 0 {
                eprintln!("{} loads, {rows} rows, last {} ms, {} maintenance steps", r + 1, ms(times[r]), steps.load(Ordering::Acquire));
            }
        }
        let total = started.elapsed();
        stop.store(true, Ordering::Release);
        maintenance.await.unwrap();
        let stored = graph.row_counts("main", None).await.unwrap()["Person"];
        assert_eq!(stored, rows as u64, "every loaded row exactly once");
        // Maintenance kept folding the index, not only compacting (each fold
        // covers at least MAX_UNINDEXED_ROWS new rows, often a few times that).
        let folds = graph.log("main").await.unwrap().iter().filter(|c| c.maintenance.as_deref().is_some_and(|m| m.starts_with("fold"))).count();
        assert!(folds * MAX_UNINDEXED_ROWS as usize >= rows / 4, "{folds} index folds for {rows} rows");
        let (p50, p99, avg) = (median(&times), quantile(&times, 0.99), mean(&times));
        let deciles: Vec<String> = times.chunks(loads.div_ceil(10)).map(|c| ms(median(c))).collect();
        println!("{loads} sequential merges of {BATCH_ROWS} rows in {:.1} s, table 0 → {rows} rows, {} maintenance steps", total.as_secs_f64(), steps.load(Ordering::Acquire));
        println!("p50 {} ms, p99 {} ms, max {} ms, mean {} ms; median per tenth of the run: {}", ms(p50), ms(p99), ms(quantile(&times, 1.0)), ms(avg), deciles.join(", "));
        println!();
        println!("{}", target("sustained_p99_vs_p50", ratio(p99, p50), 2.0));
        println!("{}", target("sustained_mean_vs_median", ratio(avg, p50), 1.2));
    });
}
