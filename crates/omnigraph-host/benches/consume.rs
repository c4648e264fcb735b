//! `omnigraph-host consume` from a real nats-server into fresh graphs:
//! * throughput: the records of a file published in messages of 100, then
//!   consumed (the process, less its idle exit wait), against
//!   `omnigraph-host load` of the file (the process), alternated round by
//!   round;
//! * end to end: 1,000 records a second offered for `CONSUME_SECONDS` (10
//!   records every 10 ms) to a running consumer with a linger of 100 ms;
//!   a message is visible when the graph's head holds a commit whose batch
//!   key holds its stream sequence (the head polled every 5 ms from this
//!   process).
//!
//! cargo bench --profile dev -p omnigraph-host --bench consume
//! (`CONSUME_ROUNDS`, default 3; `CONSUME_RECORDS`, default 100,000)

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::target_line::target_at_least;
use common::{env_count, median, ms, quantile, ratio, runtime_and_validator, target};
use omnigraph_fuzz_harness::samples_dir;
use omnigraph_host::nats::{Connection, REQUEST_TIMEOUT};
use omnigraph_host::validator::Validator;
use omnigraph_host::{EngineConfig, Graph, GraphRoot};

mod common;
#[path = "../tests/common/nats_server.rs"]
mod nats_server;

use nats_server::NatsServer;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");
const RECORDS_PER_MESSAGE: usize = 100;
/// The consumer's `--exit-when-idle-ms` in the throughput runs, taken off its time.
const IDLE_EXIT: Duration = Duration::from_millis(300);

fn people(records: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..records {
        out.push_str(&format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i:07}\",\"age\":{},\"email\":\"p{i}@example.com\"}}}}\n", i % 90));
    }
    out.into_bytes()
}

fn run(cmd: &mut Command) -> Duration {
    let started = Instant::now();
    let out = cmd.stderr(Stdio::piped()).stdout(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    started.elapsed()
}

fn init(root: &Path) {
    run(Command::new(BIN).args(["init", "--root", root.to_str().unwrap(), samples_dir().join("people.pg").to_str().unwrap()]));
}

fn consume(root: &Path, nats: &NatsServer, stream: &str, idle: Option<Duration>) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["consume", "--root", root.to_str().unwrap(), "--nats", &nats.addr(), "--stream", stream, "--subjects", &format!("{stream}.>")]);
    if let Some(idle) = idle {
        cmd.args(["--exit-when-idle-ms", &idle.as_millis().to_string()]);
    }
    cmd
}

async fn publish(nats: &NatsServer, stream: &str, file: &[u8]) {
    let mut c = Connection::connect(&nats.addr(), REQUEST_TIMEOUT).await.unwrap();
    c.ensure_stream(stream, &[&format!("{stream}.>")]).await.unwrap();
    let lines: Vec<&[u8]> = file.split_inclusive(|&b| b == b'\n').collect();
    for (i, chunk) in lines.chunks(RECORDS_PER_MESSAGE).enumerate() {
        c.publish_durably(&format!("{stream}.in"), &format!("{stream}-{i}"), &chunk.concat()).await.unwrap();
    }
}

/// Publishes 10 records every 10 ms for `seconds` into a running consumer;
/// each message's publish-to-visible time.
async fn end_to_end(nats: &NatsServer, root: &Path, validator: &Arc<Validator>, seconds: usize) -> Vec<Duration> {
    let stream = "LIVE";
    let mut consumer = consume(root, nats, stream, None).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut c = Connection::connect(&nats.addr(), REQUEST_TIMEOUT).await.unwrap();
    c.ensure_stream(stream, &[&format!("{stream}.>")]).await.unwrap();
    let graph = Graph::open(GraphRoot::new(root.to_str().unwrap(), Default::default()).unwrap(), validator.clone(), EngineConfig::default())
        .await
        .unwrap();
    let published: Arc<std::sync::Mutex<BTreeMap<u64, Instant>>> = Arc::default();
    let publisher = {
        let published = published.clone();
        let addr = nats.addr();
        tokio::spawn(async move {
            let mut c = Connection::connect(&addr, REQUEST_TIMEOUT).await.unwrap();
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            for m in 0..seconds * 100 {
                tick.tick().await;
                let message: String = (0..10)
                    .map(|r| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"live-{m}-{r}\",\"age\":{r}}}}}\n"))
                    .collect();
                let at = Instant::now();
                let seq = c.publish_durably("LIVE.in", &format!("live-{m}"), message.as_bytes()).await.unwrap();
                published.lock().unwrap().insert(seq, at);
            }
        })
    };
    let mut visible: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut seen_seq = 0;
    let deadline = Instant::now() + Duration::from_secs(seconds as u64 + 30);
    let total = seconds * 100;
    while visible.len() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let head = graph.head("main").await.unwrap().unwrap();
        if head.seq == seen_seq {
            continue;
        }
        let now = Instant::now();
        for commit in graph.log_matching("main", (head.seq - seen_seq) as usize, |_| true).await.unwrap() {
            let Some(key) = commit.batch_key.as_deref() else { continue };
            let held = key.split('/').nth(3).unwrap_or_default();
            for part in held.split(',').filter(|p| !p.is_empty()) {
                let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                for seq in lo.parse::<u64>().unwrap()..=hi.parse::<u64>().unwrap() {
                    visible.entry(seq).or_insert(now);
                }
            }
        }
        seen_seq = head.seq;
    }
    publisher.await.unwrap();
    consumer.kill().unwrap();
    consumer.wait().unwrap();
    let published = published.lock().unwrap();
    assert_eq!(visible.len(), total, "every message became visible");
    published.iter().map(|(seq, at)| visible[seq].duration_since(*at)).collect()
}

fn main() {
    let rounds = env_count("CONSUME_ROUNDS", 3);
    let records = env_count("CONSUME_RECORDS", 100_000);
    let seconds = env_count("CONSUME_SECONDS", 10);
    let dir = tempfile::tempdir().unwrap();
    let (runtime, validator) = runtime_and_validator();
    let file = dir.path().join("people.ndjson");
    let bytes = people(records);
    std::fs::write(&file, &bytes).unwrap();
    let nats = runtime.block_on(NatsServer::start());

    let (mut consumed, mut loaded) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let stream = format!("T{round}");
        runtime.block_on(publish(&nats, &stream, &bytes));
        let root = dir.path().join(format!("consume-{round}"));
        init(&root);
        consumed.push(run(&mut consume(&root, &nats, &stream, Some(IDLE_EXIT))).saturating_sub(IDLE_EXIT));
        let root = dir.path().join(format!("load-{round}"));
        init(&root);
        loaded.push(run(Command::new(BIN).args(["load", "--root", root.to_str().unwrap(), file.to_str().unwrap()])));
    }
    let (consume_time, load_time) = (median(&consumed), median(&loaded));
    let rate = |took: Duration| records as f64 / took.as_secs_f64();
    println!(
        "{records} records ({} bytes, messages of {RECORDS_PER_MESSAGE}): consume {} ms ({:.0} records/s), load {} ms ({:.0} records/s), medians of {rounds}",
        bytes.len(),
        ms(consume_time),
        rate(consume_time),
        ms(load_time),
        rate(load_time)
    );

    let root = dir.path().join("live");
    init(&root);
    let latencies = runtime.block_on(end_to_end(&nats, &root, &validator, seconds));
    let (p50, p99) = (quantile(&latencies, 0.5), quantile(&latencies, 0.99));
    println!("end to end at 1,000 records/s for {seconds} s, linger 100 ms: p50 {} ms, p99 {} ms over {} messages", ms(p50), ms(p99), latencies.len());
    println!("{}", target_at_least("consume_vs_cli_load_throughput", ratio(load_time, consume_time), 0.8));
    println!("{}", target("consume_end_to_end_p99_ms", p99.as_secs_f64() * 1e3, 500.0));
}
