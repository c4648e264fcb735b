//! `omnigraph-host consume` between a real nats-server (JetStream on, its
//! own store directory, restarted where a test says so) and real graphs
//! (local, or on moto with `OMNIGRAPH_TEST_STORE=s3`): every valid record
//! is committed exactly once, every refused one is in the dead-letter
//! stream exactly once with its report, whatever kills, stops or restarts
//! happen on the way.
//!
//! "Exactly once" is read from the graph itself: the people are the valid
//! ones; every load commit inserted its people and updated none (a message
//! loaded twice would update its people, or add its edges twice, as edges
//! get fresh ids); and the stream sequences the consumer's batch keys hold
//! never overlap.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::nats_server::NatsServer;
use common::*;
use omnigraph_host::manifest::CommitKind;
use omnigraph_host::nats::{Connection, REQUEST_TIMEOUT};
use omnigraph_host::LoadRequest;
use omnigraph_fuzz_harness::{CorpusCase, corpus_cases, vectors_dir};
use omnigraph_validate_wasm::{Mode, Options};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");
const DURABLE: &str = "graph";
/// The consumers' ack wait: a killed one's messages come again after it.
const ACK_WAIT_MS: u64 = 3_000;
/// One record in this many is invalid.
const INVALID_EVERY: usize = 100;

/// A stream of a test's own (tests may share one nats-server): `<name>`
/// on the subjects `<name in lower case>.>`.
struct Stream(String);

impl Stream {
    fn unique(prefix: &str) -> Stream {
        Stream(format!("{prefix}{}", ulid::Ulid::new()))
    }

    fn name(&self) -> &str {
        &self.0
    }

    fn subjects(&self) -> String {
        format!("{}.>", self.0.to_lowercase())
    }

    fn subject(&self) -> String {
        format!("{}.records", self.0.to_lowercase())
    }

    fn dead_letter(&self) -> String {
        format!("{}_DEAD_LETTER", self.0)
    }
}

/// A test's NATS server and its stream on it.
struct Feed {
    nats: NatsServer,
    stream: Stream,
}

impl Feed {
    /// On the test run's server when there is one (scripts/test.sh starts it).
    async fn shared() -> Feed {
        Feed { nats: NatsServer::shared().await, stream: Stream::unique("IN") }
    }

    /// On a server of the test's own, which it may restart.
    async fn own() -> Feed {
        Feed { nats: NatsServer::start().await, stream: Stream::unique("IN") }
    }

    fn addr(&self) -> String {
        self.nats.addr()
    }
}

/// Records as a producer would publish them, cut into messages of 1 to
/// 500 records, and what the graph and the dead-letter stream must hold.
#[derive(Default)]
struct Published {
    messages: Vec<Vec<u8>>,
    people: BTreeSet<String>,
    edges: usize,
    refused: BTreeSet<String>,
}

/// One invalid record of each kind, cycled through: an envelope that is
/// no JSON, an unknown type, a value out of its range, a value of the
/// wrong type, a failed `@check`, a missing key, and a dangling edge
/// (refused by the stateful checks against the stored graph).
fn invalid_record(i: usize) -> String {
    match (i / INVALID_EVERY) % 7 {
        0 => format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"bad-{i}\""),
        1 => format!("{{\"type\":\"Persn\",\"data\":{{\"name\":\"bad-{i}\"}}}}"),
        2 => format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"bad-{i}\",\"age\":200}}}}"),
        3 => format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"bad-{i}\",\"age\":\"old\"}}}}"),
        4 => format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"bad-{i}\",\"email\":\"no-at-sign\"}}}}"),
        5 => format!("{{\"type\":\"Person\",\"data\":{{\"email\":\"no-key-{i}@example.com\"}}}}"),
        _ => format!("{{\"edge\":\"Knows\",\"from\":\"ghost-{i}\",\"to\":\"ghost-{}\"}}", i + 1),
    }
}

/// `count` records from number `first` on: people `p<i>`, every tenth an
/// edge between the two people before it when `edges` (so an edge's
/// people are published before it), every `INVALID_EVERY`th invalid.
fn publishable(first: usize, count: usize, edges: bool, seed: u64) -> Published {
    let mut out = Published::default();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut message = Vec::new();
    let mut in_message = 0;
    let mut size = 1;
    let mut last_two: Vec<String> = Vec::new();
    for i in first..first + count {
        let record = if i % INVALID_EVERY == INVALID_EVERY / 2 {
            let record = invalid_record(i);
            out.refused.insert(record.clone());
            record
        } else if edges && i % 10 == 3 && last_two.len() == 2 {
            out.edges += 1;
            format!("{{\"edge\":\"Knows\",\"from\":\"{}\",\"to\":\"{}\"}}", last_two[0], last_two[1])
        } else {
            let name = format!("p{i}");
            out.people.insert(name.clone());
            last_two.push(name.clone());
            if last_two.len() > 2 {
                last_two.remove(0);
            }
            format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\",\"age\":{}}}}}", i % 90)
        };
        message.extend_from_slice(record.as_bytes());
        message.push(b'\n');
        in_message += 1;
        if in_message == size {
            out.messages.push(std::mem::take(&mut message));
            in_message = 0;
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            size = 1 + (state >> 33) as usize % 500;
        }
    }
    if !message.is_empty() {
        out.messages.push(message);
    }
    out
}

impl Published {
    fn and(mut self, more: Published) -> Published {
        self.messages.extend(more.messages);
        self.people.extend(more.people);
        self.edges += more.edges;
        self.refused.extend(more.refused);
        self
    }
}

/// Publishes `messages` into the stream (created if missing), each
/// acknowledged by JetStream; `tag` keeps their message ids apart.
async fn publish(feed: &Feed, messages: &[Vec<u8>], tag: &str) {
    let mut c = Connection::connect(&feed.addr(), REQUEST_TIMEOUT).await.unwrap();
    c.ensure_stream(feed.stream.name(), &[&feed.stream.subjects()]).await.unwrap();
    for (i, message) in messages.iter().enumerate() {
        c.publish_durably(&feed.stream.subject(), &format!("{tag}-{i}"), message).await.unwrap();
    }
}

/// A fresh graph, and `published` in `feed`'s stream (message ids tagged `tag`).
async fn started_with(feed: Feed, published: &Published, tag: &str) -> (Feed, Place) {
    let place = place().await;
    drop(init(&place).await);
    publish(&feed, &published.messages, tag).await;
    (feed, place)
}

/// A consumer process on the test graph, exiting once the stream has been
/// idle for `idle_ms`.
fn consumer(place: &Place, feed: &Feed, idle_ms: u64, failpoints: Option<&str>) -> Command {
    consumer_with(place, feed, idle_ms, failpoints, &[])
}

fn consumer_with(place: &Place, feed: &Feed, idle_ms: u64, failpoints: Option<&str>, more: &[&str]) -> Command {
    consumer_on(&feed.stream, place, &feed.nats, idle_ms, failpoints, more)
}

fn consumer_on(stream: &Stream, place: &Place, nats: &NatsServer, idle_ms: u64, failpoints: Option<&str>, more: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("consume").args(place.cli_args()).args([
        "--nats",
        &nats.addr(),
        "--stream",
        stream.name(),
        "--subjects",
        &stream.subjects(),
        "--durable",
        DURABLE,
        "--ack-wait-ms",
        &ACK_WAIT_MS.to_string(),
        "--lease-ttl-ms",
        &lease_ttl_ms().to_string(),
        "--exit-when-idle-ms",
        &idle_ms.to_string(),
    ]);
    cmd.args(more);
    if let Some(failpoints) = failpoints {
        cmd.env("FAILPOINTS", failpoints);
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    place.apply_env(&mut cmd);
    cmd
}

/// A process's run succeeded (its standard error shown if not).
fn assert_succeeded(out: &std::process::Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A consumer that runs until the stream is drained: idle for longer than
/// the ack wait, so messages a killed consumer held are delivered to it.
fn run_to_idle(place: &Place, feed: &Feed) {
    let out = consumer(place, feed, ACK_WAIT_MS + 2_000, None).output().unwrap();
    assert_succeeded(&out, "consume");
}

/// Every dead letter of `stream`, read through a consumer of its own.
async fn dead_letters(nats: &NatsServer, stream: &Stream) -> Vec<Value> {
    let dead_letter_stream = &stream.dead_letter();
    let mut c = Connection::connect(&nats.addr(), REQUEST_TIMEOUT).await.unwrap();
    c.ensure_pull_consumer(dead_letter_stream, "check", Duration::from_secs(60), 1_000_000).await.unwrap();
    let mut out = Vec::new();
    loop {
        let pulled = c.fetch(dead_letter_stream, "check", 512, 8 << 20, Duration::from_millis(300)).await.unwrap();
        if pulled.is_empty() {
            return out;
        }
        out.extend(pulled.iter().map(|m| serde_json::from_slice::<Value>(&m.payload).unwrap()));
    }
}

/// The graph holds exactly `published`'s valid records, each loaded once,
/// and the dead-letter stream exactly its refused ones, each with a report.
async fn assert_exactly_once(place: &Place, feed: &Feed, published: &Published) {
    let graph = reopen(place).await;
    let exported = export(&graph, "main", None).await;
    let mut people = BTreeSet::new();
    let mut edges = 0;
    for line in exported.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        match record["type"].as_str() {
            Some("Person") => assert!(people.insert(record["id"].as_str().unwrap().to_owned()), "{line} twice"),
            _ if record["edge"] == "Knows" => edges += 1,
            _ => panic!("unexpected record {line}"),
        }
    }
    assert_eq!(people.len(), published.people.len(), "people in the graph");
    assert!(people == published.people, "the graph's people are the valid ones");
    assert_eq!(edges, published.edges, "edges in the graph (an edge loaded twice gets a second id)");

    let keys = omnigraph_keys(&feed.stream);
    let mut held: BTreeMap<u64, u64> = BTreeMap::new();
    let mut inserted = 0;
    for commit in graph.log("main").await.unwrap().iter().filter(|c| c.kind == CommitKind::Load) {
        let person = commit.counts.get("Person").cloned().unwrap_or_default();
        assert_eq!(person.updated, 0, "commit {} updated people: a message loaded twice", commit.seq);
        inserted += person.inserted;
        let key = commit.batch_key.as_deref().expect("every consumer commit has a batch key");
        let ranges = keys(key);
        for (lo, hi) in ranges {
            if let Some((&before_lo, &before_hi)) = held.range(..=hi).next_back() {
                assert!(before_hi < lo, "commit {} holds {lo}-{hi}, which overlaps {before_lo}-{before_hi}", commit.seq);
            }
            held.insert(lo, hi);
        }
    }
    assert_eq!(inserted as usize, published.people.len(), "people inserted over all commits");

    let letters = dead_letters(&feed.nats, &feed.stream).await;
    let mut refused = BTreeSet::new();
    for letter in &letters {
        assert!(!letter["errors"].as_array().unwrap().is_empty(), "a dead letter without its report: {letter}");
        assert!(letter["stream_seq"].as_u64().is_some() && letter["line"].as_u64().is_some(), "{letter}");
        assert!(refused.insert(letter["record"].as_str().unwrap().to_owned()), "dead-lettered twice: {letter}");
    }
    assert!(refused == published.refused, "dead letters: {} of {} refused records", refused.len(), published.refused.len());

    // No gap: every message is held by a commit, or every record of it was dead-lettered.
    let lettered: BTreeSet<u64> = letters.iter().map(|letter| letter["stream_seq"].as_u64().unwrap()).collect();
    for seq in 1..=published.messages.len() as u64 {
        let in_commit = held.range(..=seq).next_back().is_some_and(|(_, &hi)| hi >= seq);
        assert!(in_commit || lettered.contains(&seq), "message {seq} is in no commit's key and has no dead letter");
    }
}

/// The stream-sequence ranges a consumer key (any durable's) says its commit holds.
fn omnigraph_keys(stream: &Stream) -> impl Fn(&str) -> Vec<(u64, u64)> {
    let prefix = format!("jetstream/{}/", stream.name());
    move |key: &str| {
        let held = key.strip_prefix(&prefix).and_then(|rest| rest.split('/').nth(1)).expect("a consumer key");
        held.split(',')
            .map(|part| {
                let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                (lo.parse().unwrap(), hi.parse().unwrap())
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_committed_exactly_once_with_refusals_dead_lettered() {
    let published = publishable(0, 100_000, true, 1);
    let (feed, place) = started_with(Feed::shared().await, &published, "a").await;
    run_to_idle(&place, &feed);
    assert_exactly_once(&place, &feed, &published).await;
    let log = reopen(&place).await.log("main").await.unwrap();
    assert!(log.iter().any(|c| c.kind == CommitKind::Maintain), "the consumer maintained the graph it loads (no server does)");
    // Nothing new: a second run commits nothing.
    let graph = reopen(&place).await;
    let head = graph.head("main").await.unwrap().unwrap().seq;
    run_to_idle(&place, &feed);
    let loads = |log: &[omnigraph_host::manifest::Commit]| log.iter().filter(|c| c.kind == CommitKind::Load).count();
    let after = reopen(&place).await.log("main").await.unwrap();
    assert_eq!(loads(&after), loads(&log), "a drained stream commits nothing (head was {head})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_restart_mid_run_loses_and_duplicates_nothing() {
    let published = publishable(0, 40_000, false, 2);
    let (mut feed, place) = started_with(Feed::own().await, &published, "r").await;
    let running = consumer(&place, &feed, 4_000, None).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    feed.nats.restart().await;
    let out = running.wait_with_output().unwrap();
    assert_succeeded(&out, "consume");
    run_to_idle(&place, &feed);
    assert_exactly_once(&place, &feed, &published).await;
}

/// Widens the commit protocol's window so kills and stops land inside it.
#[cfg(feature = "failpoints")]
const SLOW_COMMITS: &str = "after-record=sleep(100);after-table-commit=sleep(100);after-sync=sleep(50)";

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_killed_at_random_instants_commit_each_message_once() {
    use std::hash::{BuildHasher, RandomState};
    let (feed, place) = started_with(Feed::shared().await, &Published::default(), "k").await;
    let random = RandomState::new();
    let mut published = Published::default();
    let runs = fault_runs(20, 4);
    for n in 0..runs {
        let more = publishable(n * 3_000, 3_000, false, n as u64);
        publish(&feed, &more.messages, &format!("k{n}")).await;
        published = published.and(more);
        let mut child = consumer(&place, &feed, 60_000, Some(SLOW_COMMITS)).spawn().unwrap();
        let after = 200 + random.hash_one(n) % 1_500;
        tokio::time::sleep(Duration::from_millis(after)).await;
        child.kill().unwrap();
        child.wait().unwrap();
    }
    run_to_idle(&place, &feed);
    assert_exactly_once(&place, &feed, &published).await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_one_stopped_past_its_lease_commit_each_message_once() {
    let published = publishable(0, 30_000, false, 3);
    let (feed, place) = started_with(Feed::shared().await, &published, "s").await;
    let stopped = consumer(&place, &feed, 3_000, Some(SLOW_COMMITS)).spawn().unwrap();
    let other = consumer(&place, &feed, 3_000, Some(SLOW_COMMITS)).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = stopped.id() as i32;
    // SAFETY: signals to a child this test started and still owns.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Past its lease and its messages' ack wait: the other takes both over.
    tokio::time::sleep(Duration::from_millis(lease_ttl_ms() + ACK_WAIT_MS + 1_000)).await;
    unsafe { libc::kill(pid, libc::SIGCONT) };
    for child in [stopped, other] {
        let out = child.wait_with_output().unwrap();
        assert_succeeded(&out, "consume");
    }
    run_to_idle(&place, &feed);
    assert_exactly_once(&place, &feed, &published).await;
}

/// The case `unchanged_since` exists for, made certain: a consumer killed
/// with its batch's tables committed and its graph commit not yet
/// published; the next consumer (smaller batches, so other batch keys)
/// reads the branch before recovery rolls that commit forward under its
/// own load's lease. Its load must be refused (`target_moved`) and the
/// messages found done when it reads the branch again, never loaded twice.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_recovered_under_the_next_consumer_is_not_loaded_again() {
    let published = publishable(0, 2_000, false, 4);
    let (feed, place) = started_with(Feed::shared().await, &published, "u").await;
    let mut stalled = consumer(&place, &feed, 60_000, Some("after-sync=sleep(60000)")).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while recovery_records(&place.root()).await == 0 {
        assert!(std::time::Instant::now() < deadline, "the first consumer never reached its commit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // From its recovery record to the pause after its tables' commits and sync.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stalled.kill().unwrap();
    stalled.wait().unwrap();
    // Idle for longer than the ack wait: the stalled one's messages come
    // again to this one, which must find them done.
    let out = consumer_with(&place, &feed, 6_000, None, &["--batch-rows", "100"]).output().unwrap();
    assert_succeeded(&out, "consume");
    assert_exactly_once(&place, &feed, &published).await;
}

/// A nats-server with `published` in the stream, and a host serving a
/// fresh graph `g` (consuming the stream itself when `consuming`).
async fn served_with(feed: Feed, published: &Published, tag: &str, consuming: bool) -> (Feed, Place, common::host_process::HostProcess) {
    let place = place().await;
    let graph = place.child("g");
    drop(init(&graph).await);
    publish(&feed, &published.messages, tag).await;
    let mut serve = Command::new(BIN);
    serve.arg("serve").args(place.cli_args()).args(["--open", "--listen", "127.0.0.1:0"]);
    if consuming {
        serve.args(["--consume", &format!("g={}", feed.stream.name()), "--nats", &feed.addr()]);
    }
    place.apply_env(&mut serve);
    (feed, graph, common::host_process::HostProcess::spawn(serve))
}

/// The value of one `/metrics` line (0 if the line is absent).
async fn metric(url: &str, name: &str) -> u64 {
    let text = reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0)
}

/// `serve --consume g=IN`: the stream arrives in the served graph and is
/// counted in `/metrics`, across a restart of the NATS server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_consumes_its_stream_and_counts_it_in_metrics() {
    let mut published = publishable(0, 5_000, false, 5);
    let (mut feed, graph, host) = served_with(Feed::own().await, &published, "v", true).await;
    let stream = feed.stream.name().to_owned();
    let committed = format!("omnigraph_consumed_records_total{{stream=\"{stream}\",outcome=\"committed\"}}");
    let dead = format!("omnigraph_consumed_records_total{{stream=\"{stream}\",outcome=\"dead_lettered\"}}");
    for round in 0..2 {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let want = (published.people.len() as u64, published.refused.len() as u64);
        while (metric(&host.url, &committed).await, metric(&host.url, &dead).await) != want {
            assert!(std::time::Instant::now() < deadline, "round {round}: /metrics never counted {want:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if round == 0 {
            feed.nats.restart().await;
            let more = publishable(5_000, 5_000, false, 6);
            publish(&feed, &more.messages, "w").await;
            published = published.and(more);
        }
    }
    assert!(metric(&host.url, &format!("omnigraph_nats_disconnects_total{{stream=\"{stream}\"}}")).await >= 1, "the restart was counted");
    host.stop();
    assert_exactly_once(&graph, &feed, &published).await;
}

/// `consume --server`: the same consumer through a host's HTTP API (its
/// `/commits?batch_key_prefix=` read of the done set, its
/// `unchanged_since` loads), exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_through_a_host_commits_exactly_once() {
    let published = publishable(0, 10_000, true, 7);
    let (feed, graph, host) = served_with(Feed::shared().await, &published, "h", false).await;
    let through_host = |more: &[&str]| {
        let out = Command::new(BIN)
            .args(["consume", "--server", &host.url, "--graph", "g", "--nats", &feed.addr(), "--stream", feed.stream.name(), "--durable", DURABLE])
            .args(more)
            .output()
            .unwrap();
        assert_succeeded(&out, "consume");
    };
    through_host(&["--ack-wait-ms", &ACK_WAIT_MS.to_string(), "--exit-when-idle-ms", "2000"]);
    // A second pass through the host finds everything done.
    through_host(&["--exit-when-idle-ms", "1000"]);
    host.stop();
    assert_exactly_once(&graph, &feed, &published).await;
}

/// The conformance corpus's cases a consumer can meet: a refusal, with
/// the validator's default options in a mode a consumer loads in (the
/// size bounds' cases lower a bound; a consumer splits a batch over a
/// bound instead of refusing a record). One case per set of codes.
/// Also every code the corpus's reports have.
fn corpus_refusals() -> (Vec<(CorpusCase, Mode)>, BTreeSet<String>) {
    let mut codes_seen = BTreeSet::new();
    let mut cases = Vec::new();
    let mut every_code = BTreeSet::new();
    for case in corpus_cases() {
        let Some(codes) = case.name.split_once("__").map(|(_, codes)| codes.to_owned()) else { continue };
        if codes == "ok" {
            continue;
        }
        every_code.extend(codes.split('+').map(str::to_owned));
        let consumable = [Mode::Merge, Mode::Append].into_iter().find(|&mode| case.options == Some(Options { mode, ..Options::default() }));
        if let Some(mode) = consumable
            && codes_seen.insert(codes)
        {
            cases.push((case, mode));
        }
    }
    (cases, every_code)
}

/// A graph's records with the ids the engine made up for edges that had
/// none taken out (two loads of one batch make different ones).
async fn records_without_edge_ids(graph: &omnigraph_host::Graph) -> Vec<String> {
    let mut records: Vec<String> = export(graph, "main", None)
        .await
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).unwrap();
            if record.get("edge").is_some() {
                record.as_object_mut().unwrap().remove("id");
            }
            record.to_string()
        })
        .collect();
    records.sort();
    records
}

/// Every kind of refusal the corpus has, each case's input published as
/// one message into a stream of its own and consumed into a graph of its
/// schema: the dead letters carry the corpus's report for each line it
/// names, byte for byte (moved from the batch to the message), and the
/// graph holds exactly the rest, as a direct load of the lines not
/// dead-lettered gives it. Lines the corpus does not name are
/// dead-lettered only with a report of their own: the stateful checks'
/// (a dangling edge against an empty graph), or what a line is once the
/// line before it went (a record over several lines).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_the_corpus_has_is_dead_lettered_with_its_report() {
    use futures::StreamExt;
    let nats = NatsServer::shared().await;
    let places = place().await;
    let (cases, every_code) = corpus_refusals();
    let kinds: BTreeSet<String> = futures::stream::iter(cases.iter().enumerate())
        .map(|(n, (case, mode))| consume_corpus_case(&nats, places.child(&format!("case{n}")), n, case, *mode))
        .buffer_unordered(4)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .flatten()
        .collect();
    // What a consumer cannot meet: the batch's size bounds (it splits a
    // batch instead), a line over the line bound (as long as the batch
    // bound: no NATS message is), legacy identity (a graph's schema
    // decides identity), and a dangling edge of an overwrite (the corpus
    // has it only there; the stateful checks' own is dead-lettered above
    // and in the 100,000-record test).
    let unreachable = ["batch_bytes_limit", "table_bytes_limit", "table_rows_limit", "line_too_long", "ambiguous_id", "dangling_endpoint"];
    let missing: Vec<&String> = every_code.iter().filter(|c| !kinds.contains(*c) && !unreachable.contains(&c.as_str())).collect();
    assert!(missing.is_empty(), "corpus codes no consumed case refused with: {missing:?}");
}

/// One corpus case through a consumer (see the test above); the codes of
/// its report.
async fn consume_corpus_case(nats: &NatsServer, place: Place, n: usize, case: &CorpusCase, mode: Mode) -> BTreeSet<String> {
    let (name, schema, input) = (case.name.as_str(), &case.schema, &case.input);
    let report: Value = serde_json::from_slice(&std::fs::read(vectors_dir().join(name).join("report.json")).unwrap()).unwrap();
    omnigraph_host::Graph::init(place.root(), schema, validator(), config()).await.expect("init");
    let stream = Stream::unique(&format!("C{n}X"));
    let mut c = Connection::connect(&nats.addr(), REQUEST_TIMEOUT).await.unwrap();
    c.ensure_stream(stream.name(), &[&stream.subjects()]).await.unwrap();
    c.publish_durably(&stream.subject(), name, input).await.unwrap();
    let mode_arg = if mode == Mode::Append { "append" } else { "merge" };
    let mut consumer = consumer_on(&stream, &place, nats, 300, None, &["--mode", mode_arg]);
    let out = tokio::task::spawn_blocking(move || consumer.output()).await.unwrap().unwrap();
    assert_succeeded(&out, &format!("{name}: consume"));

    let mut kinds = BTreeSet::new();
    let mut named: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for error in report["errors"].as_array().unwrap() {
        kinds.insert(error["code"].as_str().unwrap().to_owned());
        if let Some(line) = error["line"].as_u64() {
            named.entry(line).or_default().push(error.clone());
        }
    }
    assert!(!named.is_empty(), "{name}: a refusal that names no line");
    let lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    let mut dead_lines = BTreeSet::new();
    for letter in dead_letters(nats, &stream).await {
        assert_eq!(letter["stream_seq"], 1, "{name}: {letter}");
        let line = letter["line"].as_u64().unwrap();
        assert!(dead_lines.insert(line), "{name}: line {line} dead-lettered twice");
        let errors = letter["errors"].as_array().unwrap();
        match named.get(&line) {
            Some(expected) => assert_eq!(errors, expected, "{name}: line {line}'s dead letter carries the corpus's report for it"),
            None => assert!(!errors.is_empty(), "{name}: line {line} dead-lettered without a report"),
        }
        let record = String::from_utf8_lossy(lines[line as usize - 1]);
        assert_eq!(letter["record"].as_str().unwrap(), record, "{name}: line {line}'s record");
    }
    for line in named.keys() {
        assert!(dead_lines.contains(line), "{name}: line {line}, refused by the corpus's report, is not dead-lettered");
    }

    let rest: Vec<&[u8]> = lines.iter().enumerate().filter(|(i, _)| !dead_lines.contains(&(*i as u64 + 1))).map(|(_, line)| *line).collect();
    let rest = rest.join(&b'\n');
    let reference_dir = tempfile::tempdir().unwrap();
    let reference_root = omnigraph_host::GraphRoot::create(reference_dir.path().to_str().unwrap(), Default::default()).unwrap();
    let reference = omnigraph_host::Graph::init(reference_root, schema, validator(), config()).await.expect("init");
    if rest.iter().any(|b| !b.is_ascii_whitespace()) {
        let request = LoadRequest { batch: std::sync::Arc::new(rest), ..request("main", mode, "") };
        reference.load(request).await.unwrap_or_else(|e| panic!("{name}: the lines not dead-lettered load: {e}"));
    }
    let consumed = reopen(&place).await;
    assert_eq!(records_without_edge_ids(&consumed).await, records_without_edge_ids(&reference).await, "{name}: the graph holds the lines not dead-lettered");
    kinds
}
