//! A load's cost against the graph's age (docs/performance.md; the runs:
//! docs/lab/2026-12-01-history-bench.md): two graphs
//! with the same 100k-row Person table, one 10 commits old, the other with
//! 10,000 more (one-row updates of the same person, so the table keeps its
//! size while its Lance history grows to 10,000 versions), both maintained.
//! Then rounds of the same 8,192-row merge to each, interleaved.
//!
//! `cargo bench --profile dev -p omnigraph-host --bench history`
//! (`OG_HISTORY_COMMITS=10000`, `OG_BENCH_ROUNDS=16`).

mod common;

use std::time::Instant;

use common::*;

const BASE_ROWS: usize = 100_000;

fn main() {
    let (runtime, validator) = runtime_and_validator();
    let commits = env_count("OG_HISTORY_COMMITS", 10_000);
    let rounds = env_count("OG_BENCH_ROUNDS", 16);
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let (young_dir, old_dir) = (tmp.path().join("young"), tmp.path().join("old"));
        drop(built_graph(&young_dir, validator.clone(), BASE_ROWS).await);
        copy_tree(&young_dir, &old_dir);
        let young = reopen(&young_dir, validator.clone(), true).await;
        let old = reopen(&old_dir, validator.clone(), true).await;
        let started = Instant::now();
        for n in 0..commits {
            old.load(merge(ndjson(std::iter::once(0), n as i32)))
                .await
                .unwrap();
        }
        old.optimize(usize::MAX).await.unwrap();
        let young_seq = young.head("main").await.unwrap().unwrap().seq;
        let old_seq = old.head("main").await.unwrap().unwrap().seq;
        println!(
            "{commits} one-row commits in {:.1} s; heads: young seq {young_seq}, old seq {old_seq}",
            started.elapsed().as_secs_f64()
        );
        let (mut young_times, mut old_times) = (Vec::new(), Vec::new());
        let mut rows = BASE_ROWS;
        for r in 0..=rounds {
            let ids = merge_ids(rows, r);
            rows += BATCH_ROWS / 2;
            for (graph, times) in [(&young, &mut young_times), (&old, &mut old_times)] {
                let started = Instant::now();
                graph
                    .load(merge(ndjson(ids.iter().copied(), 1_000_000 + r as i32)))
                    .await
                    .unwrap();
                if r > 0 {
                    times.push(started.elapsed());
                }
            }
        }
        let (a, b) = (median(&young_times), median(&old_times));
        println!();
        println!("| graph | commits | 8,192-row merge into 100k rows, median of {rounds} |");
        println!("|---|---|---|");
        println!("| young | {young_seq} | {} ms |", ms(a));
        println!("| old | {old_seq} | {} ms |", ms(b));
        println!();
        println!(
            "{}",
            target(
                &format!("load_after_{commits}_vs_10_commits"),
                ratio(b, a),
                1.1
            )
        );
    });
}
