//! Load test (docs/reliability.md): one `omnigraph-host serve` process on
//! 127.0.0.1 and many concurrent clients sending valid and invalid batches
//! of several sizes for a fixed time, then stopping by themselves.
//! Reports loads/s, MB/s, p50/p99 latency per size, answers by status (429
//! from admission, 503 from the in-flight body budget), the host's peak
//! memory, and checks that the graph holds exactly the acknowledged rows.
//! A batch refused for load (429, 503, or its connection closed by such a
//! refusal) is sent again after a back-off, as a client does: its latency
//! runs from its first send to its answer, back-offs included, so p99
//! counts every request.
//!
//! `cargo bench --profile dev -p omnigraph-host --bench load_test`
//! Knobs (environment): OMNIGRAPH_LOAD_SECONDS (60), OMNIGRAPH_LOAD_CLIENTS
//! (16, spread over ACTORS bearer tokens), OMNIGRAPH_LOAD_PER_ACTOR (the
//! host's --max-loads-per-actor, 2), OMNIGRAPH_LOAD_INFLIGHT_MIB (the host's
//! --max-inflight-bytes, 16).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::manifest::CommitKind;
use omnigraph_host::{EngineConfig, Graph, GraphRoot};

#[path = "../tests/common/host_process.rs"]
mod host_process;
#[path = "../../omnigraph-validate-wasm/benches/target_line.rs"]
mod target_line;
use host_process::HostProcess;
use target_line::{target, target_at_least};

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");
const SCHEMA: &str = "node Doc { name: String @key  body: String }\nedge Cites: Doc -> Doc";
/// Client `c` loads as actor `c % ACTORS` (admission is per actor).
const ACTORS: u64 = 4;

/// A kind of batch the clients send: rows of about `row_bytes`, and whether
/// one bad line makes the whole batch invalid. `weight` of every 20 picks.
struct Kind {
    name: &'static str,
    rows: usize,
    row_bytes: usize,
    invalid: bool,
    weight: u64,
}

const KINDS: [Kind; 5] = [
    Kind { name: "small 100 rows", rows: 100, row_bytes: 100, invalid: false, weight: 8 },
    Kind { name: "medium 1k rows", rows: 1_000, row_bytes: 500, invalid: false, weight: 5 },
    Kind { name: "large 4k rows", rows: 4_000, row_bytes: 1_000, invalid: false, weight: 2 },
    Kind { name: "invalid small", rows: 100, row_bytes: 100, invalid: true, weight: 3 },
    Kind { name: "invalid medium", rows: 1_000, row_bytes: 500, invalid: true, weight: 2 },
];

/// Batch `tag`: `rows` documents with names unique to it, each citing the
/// previous one, and a bad last line when `invalid`.
fn batch(kind: &Kind, tag: &str) -> Vec<u8> {
    let filler = "x".repeat(kind.row_bytes.saturating_sub(50));
    let mut out = String::with_capacity(kind.rows * (kind.row_bytes + 80));
    for i in 0..kind.rows {
        out.push_str(&format!("{{\"type\":\"Doc\",\"data\":{{\"name\":\"{tag}-{i}\",\"body\":\"{filler}\"}}}}\n"));
        if i > 0 {
            out.push_str(&format!("{{\"edge\":\"Cites\",\"id\":\"{tag}-e{i}\",\"from\":\"{tag}-{i}\",\"to\":\"{tag}-{}\"}}\n", i - 1));
        }
    }
    if kind.invalid {
        out.push_str("{\"type\":\"Doc\",\"data\":{\"name\":\"no body\"}}\n");
    }
    out.into_bytes()
}

#[derive(Default)]
struct Tally {
    /// Status → count, per kind.
    statuses: BTreeMap<(&'static str, u16), u64>,
    /// Latencies of answered loads, per kind: first send to answer, the
    /// refused tries and their back-offs included.
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    acked_docs: u64,
    acked_edges: u64,
    acked_loads: u64,
    acked_bytes: u64,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1e3
}

/// The host's resident memory now and at its peak (kB), from /proc.
fn memory_kb(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)?.trim().strip_suffix(" kB")?.trim().parse().ok());
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn main() {
    let seconds = env_u64("OMNIGRAPH_LOAD_SECONDS", 60);
    let clients = env_u64("OMNIGRAPH_LOAD_CLIENTS", 16);
    let per_actor = env_u64("OMNIGRAPH_LOAD_PER_ACTOR", 2);
    let inflight_mib = env_u64("OMNIGRAPH_LOAD_INFLIGHT_MIB", 16);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let place = dir.path().join("g");
    let validator = Arc::new(Validator::new(RunnerConfig::default()).unwrap());
    runtime.block_on(async {
        Graph::init(GraphRoot::create(place.to_str().unwrap(), Default::default()).unwrap(), SCHEMA, validator.clone(), EngineConfig::default())
            .await
            .unwrap();
    });

    let tokens: String = (0..ACTORS)
        .map(|a| {
            let digest = omnigraph_host::auth::sha256_hex(format!("token-{a}").as_bytes());
            format!("[[token]]\nactor = \"loader-{a}\"\nsha256 = \"{digest}\"\ngraphs = {{ g = [\"change\"] }}\n")
        })
        .collect();
    let auth = dir.path().join("tokens.toml");
    std::fs::write(&auth, tokens).unwrap();
    let mut serve = Command::new(BIN);
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--root", dir.path().to_str().unwrap(), "--auth", auth.to_str().unwrap()])
        .args(["--max-inflight-bytes", &(inflight_mib << 20).to_string(), "--max-loads-per-actor", &per_actor.to_string()]);
    let host = HostProcess::spawn(serve);
    let (pid, url) = (host.child.id(), host.url.clone());
    let (idle_kb, _) = memory_kb(pid).unwrap();

    // Sample the host's memory while the clients run.
    let running = Arc::new(AtomicBool::new(true));
    let peak_sampled = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (running, peak) = (running.clone(), peak_sampled.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                if let Some((rss, _)) = memory_kb(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };

    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let tally = runtime.block_on(async {
        let client = reqwest::Client::new();
        let tally = Arc::new(tokio::sync::Mutex::new(Tally::default()));
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (client, url, tally) = (client.clone(), url.clone(), tally.clone());
            tasks.push(tokio::spawn(async move {
                let total_weight: u64 = KINDS.iter().map(|k| k.weight).sum();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    // A fixed pseudo-random walk over the kinds, per client.
                    let mut pick = (c * 7919 + n * 104_729) % total_weight;
                    let kind = KINDS.iter().find(|k| pick < k.weight || { pick -= k.weight; false }).unwrap();
                    let body = batch(kind, &format!("c{c}-{n}"));
                    n += 1;
                    let bytes = body.len() as u64;
                    let sent = Instant::now();
                    let status = loop {
                        let sent_request = client
                            .post(format!("{url}/graphs/g/load/ndjson"))
                            .header("content-type", "application/x-ndjson")
                            .bearer_auth(format!("token-{}", c % ACTORS))
                            .body(body.clone())
                            .send()
                            .await;
                        // A host that refuses before reading the body (503 from the
                        // in-flight budget) may close the connection while a large
                        // body is still being sent: status 0, never a commit.
                        let status = match sent_request {
                            Ok(response) => {
                                let status = response.status().as_u16();
                                let _ = response.bytes().await;
                                status
                            }
                            Err(e) if e.is_request() && !e.is_connect() => 0,
                            Err(e) => panic!("the host is unreachable: {e}"),
                        };
                        *tally.lock().await.statuses.entry((kind.name, status)).or_default() += 1;
                        if !matches!(status, 0 | 429 | 503) || Instant::now() >= deadline {
                            break status;
                        }
                        // Honour Retry-After's spirit without stalling the test.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    };
                    let took = sent.elapsed();
                    let mut t = tally.lock().await;
                    match status {
                        200 => {
                            assert!(!kind.invalid, "an invalid batch was acknowledged");
                            t.latencies.entry(kind.name).or_default().push(took);
                            t.acked_loads += 1;
                            t.acked_bytes += bytes;
                            t.acked_docs += kind.rows as u64;
                            t.acked_edges += kind.rows as u64 - 1;
                        }
                        422 => {
                            assert!(kind.invalid, "a valid batch was refused");
                            t.latencies.entry(kind.name).or_default().push(took);
                        }
                        // Still refused when the test's time ran out.
                        0 | 429 | 503 => {}
                        other => panic!("unexpected status {other}"),
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        Arc::try_unwrap(tally).ok().unwrap().into_inner()
    });
    let elapsed = started.elapsed();
    running.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    let (_, hwm_kb) = memory_kb(pid).unwrap();
    host.stop();

    // The graph holds exactly the acknowledged rows: names are unique per
    // batch, so a lost, duplicated or partly applied batch changes a count.
    let (counts, commits) = runtime.block_on(async {
        let graph = Graph::open(GraphRoot::new(place.to_str().unwrap(), Default::default()).unwrap(), validator, EngineConfig::default())
            .await
            .unwrap();
        // Maintenance runs in the host meanwhile: its `maintain` commits move no row.
        let loads = graph.log("main").await.unwrap().iter().filter(|c| c.kind == CommitKind::Load).count() as u64;
        (graph.row_counts("main", None).await.unwrap(), loads)
    });
    let exactly_once = counts["Doc"] == tally.acked_docs && counts["Cites"] == tally.acked_edges && commits == tally.acked_loads;

    let secs = elapsed.as_secs_f64();
    println!(
        "load test: {clients} clients as {ACTORS} actors for {secs:.1} s against one host \
         (--max-loads-per-actor {per_actor}, --max-inflight-bytes {inflight_mib} MiB)"
    );
    println!(
        "acknowledged: {} loads ({:.1} loads/s), {:.1} MB ({:.1} MB/s), {} Doc + {} Cites rows; graph verified: exactly these rows, {} load commits",
        tally.acked_loads,
        tally.acked_loads as f64 / secs,
        tally.acked_bytes as f64 / 1e6,
        tally.acked_bytes as f64 / 1e6 / secs,
        counts["Doc"],
        counts["Cites"],
        commits
    );
    let mut targets = Vec::new();
    println!("| batch kind | answers by status (0: connection closed by a refusal while sending) | p50 ms | p99 ms |");
    println!("|---|---|---|---|");
    for kind in &KINDS {
        let mut times = tally.latencies.get(kind.name).cloned().unwrap_or_default();
        times.sort();
        let statuses: Vec<String> =
            tally.statuses.iter().filter(|((k, _), _)| *k == kind.name).map(|((_, s), n)| format!("{s}: {n}")).collect();
        println!("| {} | {} | {:.0} | {:.0} |", kind.name, statuses.join(", "), percentile(&times, 0.5), percentile(&times, 0.99));
        if !kind.invalid && !times.is_empty() {
            targets.push((kind.name, percentile(&times, 0.99) / percentile(&times, 0.5)));
        }
    }
    println!(
        "host memory: idle {:.0} MiB, peak RSS sampled {:.0} MiB, VmHWM {:.0} MiB",
        idle_kb as f64 / 1024.0,
        peak_sampled.load(Ordering::Relaxed) as f64 / 1024.0,
        hwm_kb as f64 / 1024.0
    );
    println!();
    for (kind, ratio) in targets {
        let name = kind.split(' ').next().unwrap_or(kind);
        println!("{}", target(&format!("load_test_p99_vs_p50_{name}"), ratio, 3.0));
    }
    println!("{}", target_at_least("load_test_acknowledged_rows_exactly_once", f64::from(u8::from(exactly_once)), 1.0));
    assert!(
        exactly_once,
        "the graph holds {} Doc, {} Cites rows in {commits} load commits; acknowledged {} Doc, {} Cites in {} loads",
        counts["Doc"],
        counts["Cites"],
        tally.acked_docs,
        tally.acked_edges,
        tally.acked_loads
    );
}
