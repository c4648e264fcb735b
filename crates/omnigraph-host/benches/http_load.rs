//! End to end over HTTP (docs/lab/2026-11-30-http-end-to-end.md): a ~30 MiB strict load, then
//! 100 sequential 1 MiB loads, into a local graph served on 127.0.0.1.
//! Latency p50/p99, MB/s, and the split into validate / stateful checks /
//! commit from the server's own metrics.
//!
//! `cargo bench --profile dev -p omnigraph-host --bench http_load`

use std::time::{Duration, Instant};

use omnigraph_host::auth::Auth;
use omnigraph_host::http::{AppState, ServerConfig};
use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::{EngineConfig, Graph, GraphRoot};

const SCHEMA: &str = "node Doc { name: String @key  body: String }";
const SMALL_LOADS: usize = 100;

/// `rows` documents of about `row_bytes` bytes each, names from `first`.
fn batch(first: usize, rows: usize, row_bytes: usize) -> Vec<u8> {
    let filler = "x".repeat(row_bytes.saturating_sub(60));
    let mut out = String::with_capacity(rows * row_bytes);
    for i in first..first + rows {
        out.push_str(&format!("{{\"type\":\"Doc\",\"data\":{{\"name\":\"doc-{i:010}\",\"body\":\"{filler}\"}}}}\n"));
    }
    out.into_bytes()
}

/// `(count, sum)` of each histogram the server exports.
fn histograms(metrics: &str) -> [(f64, f64); 3] {
    let value = |name: &str| {
        metrics.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok())).unwrap_or(0.0)
    };
    ["omnigraph_validation_seconds", "omnigraph_checks_seconds", "omnigraph_commit_seconds"]
        .map(|h| (value(&format!("{h}_count ")), value(&format!("{h}_sum "))))
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let validator = std::sync::Arc::new(Validator::new(RunnerConfig::default()).unwrap());
        let root = GraphRoot::create(dir.path().join("bench").to_str().unwrap(), Default::default()).unwrap();
        Graph::init(root, SCHEMA, validator.clone(), EngineConfig::default()).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = AppState::new(ServerConfig::new(dir.path().to_str().unwrap().to_owned(), Auth::Open), validator);
        tokio::spawn(omnigraph_host::http::serve(listener, state, std::future::pending()));
        let client = reqwest::Client::new();
        let load = |body: Vec<u8>| {
            client
                .post(format!("{url}/graphs/bench/load/ndjson"))
                .header("content-type", "application/x-ndjson")
                .body(body)
                .send()
        };
        let metrics = || async { client.get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap() };

        let split = |before: [(f64, f64); 3], after: [(f64, f64); 3]| {
            let per = |i: usize| (after[i].1 - before[i].1) / (after[i].0 - before[i].0).max(1.0) * 1e3;
            format!("validate {:.1} ms, checks {:.1} ms, commit {:.1} ms", per(0), per(1), per(2))
        };

        let big = batch(0, 8_000, 3_900);
        let before = histograms(&metrics().await);
        let started = Instant::now();
        let response = load(big.clone()).await.unwrap();
        let took = started.elapsed();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
        let after = histograms(&metrics().await);
        println!(
            "one {:.1} MiB load (8,000 rows): {} ms, {:.1} MB/s; per load: {}",
            big.len() as f64 / (1 << 20) as f64,
            ms(took),
            big.len() as f64 / 1e6 / took.as_secs_f64(),
            split(before, after)
        );

        let before = histograms(&metrics().await);
        let mut times = Vec::with_capacity(SMALL_LOADS);
        let mut bytes = 0;
        for n in 0..SMALL_LOADS {
            let body = batch(1_000_000 + n * 8_000, 8_000, 131);
            bytes += body.len();
            let started = Instant::now();
            let response = load(body).await.unwrap();
            times.push(started.elapsed());
            assert_eq!(response.status(), 200);
        }
        let after = histograms(&metrics().await);
        let total: Duration = times.iter().sum();
        times.sort();
        println!(
            "{SMALL_LOADS} sequential {:.2} MiB loads (8,000 rows each, table grows to {}k rows): p50 {} ms, p99 {} ms, {:.1} MB/s; per load: {}",
            bytes as f64 / SMALL_LOADS as f64 / (1 << 20) as f64,
            SMALL_LOADS * 8,
            ms(times[SMALL_LOADS / 2]),
            ms(times[SMALL_LOADS * 99 / 100]),
            bytes as f64 / 1e6 / total.as_secs_f64(),
            split(before, after)
        );
    });
}
