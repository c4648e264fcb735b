//! What the engine benchmarks share: the Person table, its merge mix, a
//! graph built and maintained to a given size, and how results are printed.

#![allow(dead_code)] // each bench uses its own part

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use omnigraph_host::validator::Validator;
use omnigraph_host::{EngineConfig, Graph, GraphRoot, LoadRequest};
use omnigraph_validate_wasm::Mode;

#[path = "../../../omnigraph-validate-wasm/benches/target_line.rs"]
pub mod target_line;
pub use target_line::target;

pub const SCHEMA: &str = "node Person { name: String @key  age: I32? }";
/// Rows per load: half updates of stored rows, half new ones.
pub const BATCH_ROWS: usize = 8_192;

/// What every engine bench starts with: a multi-threaded runtime and the
/// validator the host runs.
pub fn runtime_and_validator() -> (tokio::runtime::Runtime, Arc<Validator>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let validator = Arc::new(Validator::new(omnigraph_host::validator::RunnerConfig::default()).unwrap());
    (runtime, validator)
}

/// A count from environment variable `var` (a bench's size knob), else `default`.
pub fn env_count(var: &str, default: usize) -> usize {
    std::env::var(var).map(|n| n.parse().unwrap_or_else(|_| panic!("{var}: {n} is not a count"))).unwrap_or(default)
}

pub fn name(i: usize) -> String {
    format!("person-{i:09}")
}

/// The people `ids` as NDJSON, all of them `age` years old.
pub fn ndjson(ids: impl Iterator<Item = usize>, age: i32) -> Vec<u8> {
    let mut out = String::new();
    for i in ids {
        out.push_str(&format!(
            "{{\"type\":\"Person\",\"data\":{{\"name\":\"{}\",\"age\":{age}}}}}\n",
            name(i)
        ));
    }
    out.into_bytes()
}

/// Round `r`'s ids on a table of `stored` rows (`0..stored`): 4,096 updates
/// spread evenly over the stored rows, then 4,096 new rows.
pub fn merge_ids(stored: usize, r: usize) -> Vec<usize> {
    let half = BATCH_ROWS / 2;
    let stride = (stored / half).max(1);
    let updates = (0..stored).skip(r % stride).step_by(stride).take(half);
    updates.chain(stored..stored + half).collect()
}

pub fn merge(batch: Vec<u8>) -> LoadRequest {
    LoadRequest {
        branch: "main".into(),
        from: None,
        mode: Mode::Merge,
        strict: true,
        actor: "bench".into(),
        batch: Arc::new(batch),
        batch_key: None,
        unchanged_since: None,
    }
}

pub fn config(durable: bool) -> EngineConfig {
    EngineConfig {
        durable,
        ..EngineConfig::default()
    }
}

/// A fresh graph of `rows` people at `dir`, loaded 8,192 new rows at a time
/// and maintained until no step is left (as a host keeps it between loads).
pub async fn built_graph(dir: &Path, validator: Arc<Validator>, rows: usize) -> Graph {
    let root = GraphRoot::create(dir.to_str().unwrap(), Default::default()).unwrap();
    let graph = Graph::init(root, SCHEMA, validator, config(false))
        .await
        .unwrap();
    for start in (0..rows).step_by(BATCH_ROWS) {
        graph
            .load(merge(ndjson(start..(start + BATCH_ROWS).min(rows), 1)))
            .await
            .unwrap();
        graph.optimize(usize::MAX).await.unwrap();
    }
    graph
}

/// Opens the graph at `dir` again with `durable` on or off, with the key
/// runs `serve`'s maintenance would have built before loads arrive.
pub async fn reopen(dir: &Path, validator: Arc<Validator>, durable: bool) -> Graph {
    let root = GraphRoot::new(dir.to_str().unwrap(), Default::default()).unwrap();
    let graph = Graph::open(root, validator, config(durable)).await.unwrap();
    graph.warm_key_runs().await.unwrap();
    graph
}

/// `cp -a from to`: a byte-identical copy of a graph or table.
pub fn copy_tree(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

pub fn median(v: &[Duration]) -> Duration {
    quantile(v, 0.5)
}

/// The `q` quantile (nearest rank) of `v`.
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    let mut sorted = v.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

pub fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// The median time of `runs` calls of `f` (after one warm-up call).
pub fn median_time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    std::hint::black_box(f());
    let times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        })
        .collect();
    median(&times)
}

/// `8k`, `100k`, `1m`: a size as target names spell it.
pub fn size_tag(rows: usize) -> String {
    match rows {
        r if r >= 1_000_000 && r % 1_000_000 == 0 => format!("{}m", r / 1_000_000),
        r if r % 1_000 == 0 || r == 8_192 => format!("{}k", r / 1_000),
        r => r.to_string(),
    }
}
