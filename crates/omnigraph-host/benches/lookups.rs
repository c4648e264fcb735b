//! Issue 59: what a load's stateful checks cost against stored rows, at
//! 8,192 rows a table and at `LOOKUPS_ROWS` (default 1,000,000), in one
//! process, alternated round by round. SPEC §4.7: no per-load cost may grow
//! with the table.
//!
//! Each graph has `n` people (`email` `@unique`), `n` places (`@unique(city,
//! born)`), and `n` `Knows` and `n` `Follows` (`@card(0..500)`) edges, built
//! 8,192 rows a table per load and maintained after each, then reopened with
//! the key runs `serve`'s maintenance builds before loads arrive. Every
//! measured load is 8,192 rows of one kind, new in every round, into a
//! branch forked from `main` for it (so each round meets the same tables):
//! * `edges`: `Knows` edges between stored people spread over the table
//!   (external references);
//! * `card`: `Follows` edges likewise (external references and `@card`
//!   against the stored edges of their sources);
//! * `append`: new people, `--mode append` (absent ids, `@unique` email);
//! * `unique_tuple`: new places, merged (the two-member `@unique`).
//!
//! cargo bench --profile dev -p omnigraph-host --bench lookups
//! (`LOOKUPS_ROWS`, `LOOKUPS_ROUNDS` default 5; `LOOKUPS_KEY_RUN_ROWS`, the
//! graphs' `EngineConfig::key_run_rows`, default `MAX_KEY_RUN_ROWS`: the
//! large graph's runs hold 7 rows per row of a table)

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_count, median, ms, ratio, runtime_and_validator, size_tag, target};
use omnigraph_host::validator::Validator;
use omnigraph_host::{EngineConfig, Graph, GraphRoot, LoadRequest};
use omnigraph_validate_wasm::Mode;

mod common;

const SCHEMA: &str = "node Person { name: String @key  email: String? @unique  age: I32? }
node Place { name: String @key  city: String  born: I32  @unique(city, born) }
edge Knows: Person -> Person { since: Date? }
edge Follows: Person -> Person @card(0..500) { weight: I32? }";
const ROWS: usize = 8_192;
const SMALL: usize = 8_192;
const KINDS: [&str; 4] = ["edges", "card", "append", "unique_tuple"];

fn person(i: usize) -> String {
    format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"person-{i:08}\",\"email\":\"person-{i}@example.com\",\"age\":{}}}}}\n", i % 90)
}

fn place(i: usize) -> String {
    format!("{{\"type\":\"Place\",\"data\":{{\"name\":\"place-{i:08}\",\"city\":\"c{}\",\"born\":{}}}}}\n", i % 1_000, i / 1_000)
}

fn edge(kind: &str, from: usize, to: usize) -> String {
    format!("{{\"edge\":\"{kind}\",\"from\":\"person-{from:08}\",\"to\":\"person-{to:08}\"}}\n")
}

fn request(branch: &str, mode: Mode, batch: String) -> LoadRequest {
    LoadRequest {
        branch: branch.into(),
        from: None,
        mode,
        strict: true,
        actor: "bench".into(),
        batch: Arc::new(batch.into_bytes()),
        batch_key: None,
        unchanged_since: None,
    }
}

fn engine_config() -> EngineConfig {
    let key_run_rows = env_count("LOOKUPS_KEY_RUN_ROWS", omnigraph_host::limits::MAX_KEY_RUN_ROWS as usize) as u64;
    EngineConfig { key_run_rows, ..EngineConfig::default() }
}

/// A graph of `n` rows a table at `dir`, maintained, reopened warm.
async fn built(dir: &std::path::Path, validator: Arc<Validator>, n: usize) -> Graph {
    let root = GraphRoot::create(dir.to_str().unwrap(), Default::default()).unwrap();
    let graph = Graph::init(root, SCHEMA, validator.clone(), engine_config()).await.unwrap();
    for start in (0..n).step_by(ROWS) {
        let end = (start + ROWS).min(n);
        let mut batch = String::new();
        for i in start..end {
            batch.push_str(&person(i));
            batch.push_str(&place(i));
        }
        // Each person knows and follows the next one of its load.
        for i in start..end {
            let next = if i + 1 == end { start } else { i + 1 };
            batch.push_str(&edge("Knows", i, next));
            batch.push_str(&edge("Follows", i, next));
        }
        graph.load(request("main", Mode::Merge, batch)).await.unwrap();
        graph.optimize(usize::MAX).await.unwrap();
    }
    drop(graph);
    let root = GraphRoot::new(dir.to_str().unwrap(), Default::default()).unwrap();
    let graph = Graph::open(root, validator, engine_config()).await.unwrap();
    graph.warm_key_runs().await.unwrap();
    graph
}

/// Round `round`'s load of `kind` into a graph of `n` rows a table.
fn batch(kind: &str, n: usize, round: usize) -> (Mode, String) {
    let stride = (n / ROWS).max(1);
    let spread = |j: usize| (j * stride + round + 3) % n;
    let fresh = |j: usize| n + round * ROWS + j;
    let mut out = String::new();
    let mode = match kind {
        "edges" => {
            (0..ROWS).for_each(|j| out.push_str(&edge("Knows", spread(j), (spread(j) + 2 + round) % n)));
            Mode::Merge
        }
        "card" => {
            (0..ROWS).for_each(|j| out.push_str(&edge("Follows", spread(j), (spread(j) + 3 + round) % n)));
            Mode::Merge
        }
        "append" => {
            (0..ROWS).for_each(|j| out.push_str(&person(fresh(j))));
            Mode::Append
        }
        _ => {
            (0..ROWS).for_each(|j| out.push_str(&place(fresh(j))));
            Mode::Merge
        }
    };
    (mode, out)
}

/// The phases of a load the engine times (`LoadTimings`), by name.
const PHASES: [&str; 9] = ["validate", "lease", "head", "checks", "stage", "record", "commit", "sync", "publish"];

/// How long the load took, and each of its [`PHASES`].
async fn timed_load(graph: &Graph, kind: &str, n: usize, round: usize) -> (Duration, [Duration; 9]) {
    let branch = format!("{}-{round}", kind.replace('_', "-"));
    graph.create_branch(&branch, "main", "bench").await.unwrap();
    let (mode, batch) = batch(kind, n, round);
    let start = Instant::now();
    let receipt = graph.load(request(&branch, mode, batch)).await;
    let took = start.elapsed();
    let t = receipt.unwrap_or_else(|e| panic!("{kind} into {n}: {e}")).timings;
    (took, [t.validate, t.lease, t.head, t.checks, t.stage, t.record, t.commit, t.sync, t.publish])
}

fn main() {
    let large = env_count("LOOKUPS_ROWS", 1_000_000);
    let rounds = env_count("LOOKUPS_ROUNDS", 5);
    let (runtime, validator) = runtime_and_validator();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let small_graph = built(&dir.path().join("small"), validator.clone(), SMALL).await;
        let large_graph = built(&dir.path().join("large"), validator.clone(), large).await;
        println!("built graphs of {SMALL} and {large} rows a table in {:.0} s", started.elapsed().as_secs_f64());
        let mut times: Vec<[Vec<Duration>; 2]> = KINDS.iter().map(|_| [Vec::new(), Vec::new()]).collect();
        let mut phases: Vec<[Vec<[Duration; 9]>; 2]> = KINDS.iter().map(|_| [Vec::new(), Vec::new()]).collect();
        for round in 0..rounds {
            for (k, kind) in KINDS.iter().enumerate() {
                // Alternated: which size goes first changes every round.
                for side in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
                    let (graph, n) = if side == 0 { (&small_graph, SMALL) } else { (&large_graph, large) };
                    let (took, phased) = timed_load(graph, kind, n, round).await;
                    times[k][side].push(took);
                    phases[k][side].push(phased);
                }
            }
        }
        let tag = size_tag(large);
        let mut lines = Vec::new();
        for (k, kind) in KINDS.iter().enumerate() {
            let (small, big) = (median(&times[k][0]), median(&times[k][1]));
            println!("{kind}: {ROWS} rows into {SMALL} {} ms, into {large} {} ms (medians of {rounds})", ms(small), ms(big));
            // Where the difference is: each phase's median at both sizes.
            let phase = |side: usize, p: usize| ms(median(&phases[k][side].iter().map(|t| t[p]).collect::<Vec<_>>()));
            let split: Vec<String> = PHASES.iter().enumerate().map(|(p, name)| format!("{name} {}/{}", phase(0, p), phase(1, p))).collect();
            println!("  phases, ms into {SMALL}/{large}: {}", split.join(", "));
            lines.push(target(&format!("{kind}_into_{tag}_vs_8k"), ratio(big, small), 1.2));
        }
        for line in lines {
            println!("{line}");
        }
    });
}
