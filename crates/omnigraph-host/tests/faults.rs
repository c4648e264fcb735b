//! What clients that go away, a store call that fails, a store that ignores
//! conditional creates and one graph's slow open must not break
//! (docs/reliability.md, "Promises"). Real servers on 127.0.0.1, real
//! sockets closed at each phase of a load (held there by failpoints), real
//! Lance tables behind a store wrapper that fails chosen requests. Run with
//! `--features failpoints`. The cases: clients closing sockets at each phase
//! of a load, a queued load's client leaving, a dropped load future, a
//! writer stalled past its lease at its branch step, failed renewals,
//! retried overwrite publishes, a one-batch CLI load's lost answer, a store
//! ignoring conditional creates, one graph's slow open.
#![cfg(feature = "failpoints")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::faulty_store::{Faults, Faulty};
use common::*;
use omnigraph_host::auth::Auth;
use omnigraph_host::{EngineConfig, EngineError, Graph};
use omnigraph_validate_wasm::Mode;

/// A lease far longer than any wait below: a lease left held would make the
/// next load wait for `LEASE_WAIT` and answer 503, never 200.
const LEASE_TTL: Duration = Duration::from_secs(60);
const LEASE_WAIT: Duration = Duration::from_secs(5);

/// How fast the next load must be answered once the closed one is done: a
/// small batch's load takes tens of milliseconds locally, about a second
/// on moto.
fn next_load_within() -> Duration {
    if on_s3() { Duration::from_secs(5) } else { Duration::from_secs(1) }
}

fn long_lease(c: &mut omnigraph_host::http::ServerConfig) {
    c.engine.lease_ttl = LEASE_TTL;
    c.engine.lease_wait = LEASE_WAIT;
}

/// A strict load's request: its head, and its body `batch` keyed `key`.
fn load_request(batch: &str, key: &str) -> Vec<u8> {
    format!(
        "POST /graphs/g/load/ndjson?batch_key={key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n{batch}",
        batch.len()
    )
    .into_bytes()
}

/// Holds the load that reaches failpoint `point` there until released
/// (once: later loads pass), telling the test it arrived.
struct Held {
    arrived: mpsc::Receiver<()>,
    release: mpsc::Sender<()>,
}

fn hold_at(point: &'static str) -> Held {
    hold_at_after(point, || {})
}

/// [`hold_at`], running `first` when the load arrives (before the test hears of it).
fn hold_at_after(point: &'static str, first: impl FnOnce() + Send + 'static) -> Held {
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let once = std::sync::Mutex::new(Some((arrived_tx, release_rx, first)));
    fail::cfg_callback(point, move || {
        // Taken out of the lock first: a later load passing the point must
        // not wait on it while the first one is held.
        let taken = once.lock().unwrap().take();
        if let Some((arrived, release, first)) = taken {
            first();
            let _ = arrived.send(());
            // Held at most this long, whatever the test does; a tokio worker
            // hands its queued tasks to another thread first, so the held
            // load stops nothing but itself.
            tokio::task::block_in_place(|| release.recv_timeout(Duration::from_secs(60))).ok();
        }
    })
    .unwrap();
    Held { arrived, release }
}

impl Held {
    fn wait_arrived(&self) {
        self.arrived.recv_timeout(Duration::from_secs(30)).expect("the load reached its failpoint");
    }
}

/// The newest lease generation is released (or there is none): no writer
/// holds the graph.
async fn lease_free(place: &Place) -> bool {
    let root = place.root();
    let names = root.list_names("_graph/lease").await.unwrap();
    let newest = names.iter().filter(|n| n.ends_with(".json")).max();
    newest.is_none_or(|n| names.contains(&n.replace(".json", ".released")))
}

async fn load_over_http(s: &Server, batch: &str) -> (u16, Duration) {
    let started = Instant::now();
    let r = reqwest::Client::new()
        .post(format!("{}/graphs/g/load/ndjson", s.url))
        .header("content-type", "application/x-ndjson")
        .body(batch.to_owned())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let _ = r.bytes().await;
    (status, started.elapsed())
}

/// Each phase a load can be in when its client closes the connection: the
/// failpoint that holds it there (none: the body is still being sent).
const PHASES: [(&str, Option<&str>); 5] = [
    ("body", None),
    ("validation", Some("validating")),
    ("checks", Some("checking")),
    ("recovery record", Some("after-record")),
    ("publish", Some("before-publish")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_whose_client_goes_away_runs_to_its_end_and_leaves_the_graph_writable() {
    let scenario = fail::FailScenario::setup();
    let s = start(Auth::Open, long_lease).await;
    let place = s.place.child("g");
    for (n, (phase, point)) in PHASES.into_iter().enumerate() {
        let batch = format!("{}{}{}", person(&format!("gone{n}a"), 1), person(&format!("gone{n}b"), 2), knows(&format!("kg{n}"), &format!("gone{n}a"), &format!("gone{n}b")));
        let key = format!("closed-{n}");
        let request = load_request(&batch, &key);
        let held = point.map(hold_at);
        let addr = s.addr;
        let closed = tokio::task::spawn_blocking(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            match point {
                // Half the body, then the connection goes.
                None => stream.write_all(&request[..request.len() - batch.len() / 2]).unwrap(),
                Some(_) => stream.write_all(&request).unwrap(),
            }
            stream
        });
        let stream = closed.await.unwrap();
        if let Some(held) = &held {
            let waited = held;
            tokio::task::block_in_place(|| waited.wait_arrived());
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(stream);
        // Give the server time to see the connection gone while the load is held.
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(held) = held {
            held.release.send(()).unwrap();
        }
        if let Some(point) = point {
            // Once the closed load has passed its point, later loads pass.
            tokio::time::sleep(Duration::from_millis(100)).await;
            fail::remove(point);
        }
        // The next load from another client: the closed one's lease and
        // writer lock are free by now, or about to be.
        let (status, took) = load_over_http(&s, &person(&format!("next{n}"), 3)).await;
        assert_eq!(status, 200, "{phase}: the next load after a closed connection");
        assert!(took < next_load_within(), "{phase}: the next load took {took:?}");
        assert!(lease_free(&place).await, "{phase}: a lease stays held after the loads");
        let graph = reopen(&place).await;
        assert_eq!(recovery_records(graph.root()).await, 0, "{phase}: a recovery record stays behind");
        assert_heads_published(&graph).await;
        // What the closed connection's load committed is in the log and the
        // export, whole; what it did not, is nowhere.
        let committed = graph.log("main").await.unwrap().iter().any(|c| c.batch_key.as_deref() == Some(key.as_str()));
        let state = export(&graph, "main", None).await;
        let visible = [format!("gone{n}a"), format!("gone{n}b"), format!("kg{n}")].map(|id| state.contains(&format!("\"id\":\"{id}\"")));
        assert_eq!(visible, [committed; 3], "{phase}: committed {committed}, rows {visible:?}");
        if phase != "body" && phase != "validation" {
            assert!(committed, "{phase}: a load whose client left after it had the lease runs to its end");
        }
    }
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_whose_client_goes_away_while_queued_gives_its_place_back() {
    let scenario = fail::FailScenario::setup();
    let s = start(Auth::Open, long_lease).await;
    let place = s.place.child("g");
    // Load A holds the writer lock (and the lease) at its recovery record.
    let held = hold_at("after-record");
    let a = {
        let url = format!("{}/graphs/g/load/ndjson", s.url);
        tokio::spawn(async move {
            let r = reqwest::Client::new().post(url).header("content-type", "application/x-ndjson").body(person("A", 1)).send().await.unwrap();
            r.status().as_u16()
        })
    };
    tokio::task::block_in_place(|| held.wait_arrived());
    // Load B is validated, then waits behind A; its client goes away.
    let addr = s.addr;
    let b = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(&load_request(&person("B", 2), "queued")).unwrap();
        stream
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(b);
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.release.send(()).unwrap();
    assert_eq!(a.await.unwrap(), 200);
    fail::remove("after-record");
    // Nobody waits any more: A's tenure gives the lease up, so another host
    // takes it at once (without waiting for it).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lease_free(&place).await && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other_host = Graph::open(place.root(), validator(), EngineConfig { lease_wait: Duration::ZERO, ..config() }).await.unwrap();
    let r = other_host.load(request("main", Mode::Merge, &person("C", 3))).await;
    assert!(r.is_ok(), "another host's load after the burst: {r:?}");
    let state = export(&other_host, "main", None).await;
    assert!(!state.contains("\"id\":\"B\""), "the queued load whose client left was not written: {state}");
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_future_dropped_mid_commit_gives_its_lease_back() {
    // A library caller (not the server) drops a load once it has written its
    // recovery record: the lease is released, and the next load finishes
    // the cut one first (all or nothing), without waiting for the lease.
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = Arc::new(Graph::init(place.root(), SCHEMA, validator(), EngineConfig { lease_ttl: LEASE_TTL, lease_wait: LEASE_WAIT, ..config() }).await.unwrap());
    let held = hold_at("after-record");
    let cut = {
        let graph = graph.clone();
        tokio::spawn(async move { graph.load(request("main", Mode::Merge, &numbered_batch(1))).await })
    };
    tokio::task::block_in_place(|| held.wait_arrived());
    cut.abort();
    held.release.send(()).unwrap();
    assert!(cut.await.unwrap_err().is_cancelled());
    fail::remove("after-record");
    let started = Instant::now();
    let next = graph.load(request("main", Mode::Merge, &numbered_batch(2))).await;
    assert!(next.is_ok(), "{next:?}");
    assert!(started.elapsed() < LEASE_WAIT, "the next load waited {:?} for the cut load's lease", started.elapsed());
    let per = people_per_batch(&graph).await;
    assert!(per.get(&1).is_none_or(|&n| n == 40), "the cut load is all or nothing: {per:?}");
    assert_eq!(per.get(&2), Some(&40));
    assert_eq!(recovery_records(graph.root()).await, 0);
    assert_heads_published(&graph).await;
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn lease_renewal_rides_out_failed_store_calls() {
    let scenario = fail::FailScenario::setup();
    for failures in [1, 3] {
        let place = place().await;
        let faults = Arc::new(Faults::default());
        let root = place.root().with_store_wrapper(Arc::new(Faulty(faults.clone())));
        let ttl = Duration::from_millis(if on_s3() { 8_000 } else { 3_000 });
        let graph = Graph::init(root, SCHEMA, validator(), EngineConfig { lease_ttl: ttl, ..config() }).await.unwrap();
        // A long write: held past one and a half lease lengths, with the
        // store failing the renewals' puts `failures` times in a row.
        let armed = faults.clone();
        fail::cfg_callback("after-stage", move || {
            armed.fail_puts("_graph/lease/", failures);
            tokio::task::block_in_place(|| std::thread::sleep(ttl * 3 / 2));
        })
        .unwrap();
        let loaded = graph.load(request("main", Mode::Merge, &numbered_batch(1))).await;
        fail::remove("after-stage");
        assert_eq!(faults.failed_puts.load(Ordering::Acquire), failures, "the renewals met the failures");
        assert!(loaded.is_ok(), "{failures} failed renewal(s) cost the load its lease: {loaded:?}");
        assert_eq!(people_per_batch(&graph).await.get(&1), Some(&40));
    }
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_ignores_conditional_creates_is_refused_at_init_and_serve() {
    let place = place().await;
    // The store under test (a directory, or moto) passes.
    place.root().prove_conditional_create().await.expect("this store refuses a second conditional create");
    let faults = Arc::new(Faults::default());
    faults.ignore_create_condition.store(true, Ordering::Release);
    let wrapped = place.child("g").root().with_store_wrapper(Arc::new(Faulty(faults.clone())));
    let refused = Graph::init(wrapped, SCHEMA, validator(), config()).await;
    assert!(matches!(refused, Err(EngineError::UnsafeStore(_))), "init: {:?}", refused.err());
    assert!(place.child("g").root().list_names("_graph").await.unwrap().is_empty(), "init wrote nothing");

    let mut server = omnigraph_host::http::ServerConfig::new(place.uri.clone(), Auth::Open);
    server.storage = place.options.clone();
    server.store_wrapper = Some(Arc::new(Faulty(faults)));
    // What `omnigraph-host serve` does before it binds its listener.
    let state = omnigraph_host::http::AppState::new(server, validator());
    let refused = state.check_store().await;
    assert!(matches!(&refused, Err(EngineError::UnsafeStore(_))), "serve: {refused:?}");
    assert!(refused.unwrap_err().to_string().contains("docs/reliability.md"));
}

/// The body of an HTTP answer read from a raw stream, `None` if none came.
fn status_of(mut stream: TcpStream) -> Option<u16> {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut answer = vec![0u8; 64];
    let n = stream.read(&mut answer).ok()?;
    String::from_utf8_lossy(&answer[..n]).split(' ').nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_graphs_slow_open_blocks_no_other_graph() {
    let scenario = fail::FailScenario::setup();
    let s = start(Auth::Open, |_| {}).await;
    // Graph g is open; graph "empty" is opened next, and its open is held.
    let (status, _) = load_over_http(&s, &person("before", 1)).await;
    assert_eq!(status, 200);
    let held = hold_at("graph-open");
    let addr: SocketAddr = s.addr;
    let slow = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"GET /graphs/empty/commits HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        status_of(stream)
    });
    tokio::task::block_in_place(|| held.wait_arrived());
    let (status, took) = load_over_http(&s, &person("meanwhile", 2)).await;
    assert_eq!(status, 200);
    let export = reqwest::get(format!("{}/graphs/g/export", s.url)).await.unwrap();
    assert_eq!(export.status(), 200);
    assert!(export.text().await.unwrap().contains("meanwhile"));
    assert!(!slow.is_finished(), "the held open answered before the other graph's requests (they took {took:?})");
    assert!(took < Duration::from_secs(5), "graph g's load waited {took:?} for graph empty's open");
    held.release.send(()).unwrap();
    assert_eq!(slow.await.unwrap(), Some(200), "the held open finishes");
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_stalled_past_its_lease_cannot_touch_the_fork_another_host_published() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &person("Base", 1)).await.unwrap();
    // Host A's store fails its lease renewals once A has stopped, as a host
    // stopped dead (SIGSTOP) renews nothing.
    let faults = Arc::new(Faults::default());
    let host_a = Arc::new(Graph::open(place.root().with_store_wrapper(Arc::new(Faulty(faults.clone()))), validator(), config()).await.unwrap());
    let host_b = Graph::open(place.root(), validator(), config()).await.unwrap();
    // A stops between its checks and its Lance branch step.
    let stopped = faults.clone();
    let held = hold_at_after("before-table-branch", move || stopped.fail_puts("_graph/lease/", usize::MAX));
    let stalled = {
        let host_a = host_a.clone();
        let batch = format!("{}{}{}", person("A1", 1), person("A2", 2), knows("ka", "A1", "A2"));
        tokio::spawn(async move { host_a.load(fork_request("x", "main", Mode::Merge, &batch)).await })
    };
    tokio::task::block_in_place(|| held.wait_arrived());
    // A's clock stops: it believes its lease still holds when it wakes.
    fail::cfg("lease-clock-trusted", "return").unwrap();
    // B waits out A's lease, forks x and loads it.
    let batch_b = format!("{}{}{}", person("B1", 1), person("B2", 2), knows("kb", "B1", "B2"));
    let b = host_b.load(fork_request("x", "main", Mode::Merge, &batch_b)).await.expect("B's fork and load");
    let b_seq = b.commit.as_ref().unwrap().seq;
    held.release.send(()).unwrap();
    let a = stalled.await.unwrap();
    assert!(
        matches!(a, Err(EngineError::RecoveryRequired { .. } | EngineError::LeaseExpired | EngineError::SlotTaken { .. } | EngineError::Fenced { .. })),
        "A must answer recovery_required or lease lost: {a:?}"
    );
    fail::remove("lease-clock-trusted");
    fail::remove("before-table-branch");
    faults.fail_puts("", 0);

    // B's commit holds exactly B's rows (and the base's), at its head and
    // at its own sequence number, after any recovery of A's leftovers.
    let reader = reopen(&place).await;
    reader.recover_with_wait(Duration::from_secs(30)).await.unwrap();
    for at in [None, Some(b_seq)] {
        let state = export(&reader, "x", at).await;
        for id in ["Base", "B1", "B2", "kb"] {
            assert!(state.contains(&format!("\"id\":\"{id}\"")), "{id} missing at {at:?}: {state}");
        }
        for id in ["A1", "A2", "ka"] {
            assert!(!state.contains(&format!("\"id\":\"{id}\"")), "{id} of the stalled writer at {at:?}: {state}");
        }
    }
    assert_heads_published(&reader).await;
    assert_eq!(recovery_records(reader.root()).await, 0);
    // Writable afterwards: every host, any branch.
    host_a.load(request("x", Mode::Merge, &person("LaterA", 3))).await.expect("A loads x");
    host_b.load(request("main", Mode::Merge, &person("LaterB", 3))).await.expect("B loads main");
    host_a.load(fork_request("y", "x", Mode::Merge, &person("Y", 3))).await.expect("A forks y");
    let state = export(&reader, "x", None).await;
    assert!(state.contains("\"id\":\"LaterA\"") && state.contains("\"id\":\"B1\"") && !state.contains("\"id\":\"A1\""), "{state}");
    assert_heads_published(&reader).await;
    scenario.teardown();
}

async fn post_json(s: &Server, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new().post(format!("{}{path}", s.url)).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_publish_rolled_back_or_answered_late_is_finished_by_its_retry() {
    let scenario = fail::FailScenario::setup();
    let s = start(Auth::Open, |_| {}).await;
    let (status, _) = load_over_http(&s, &person("Old", 1)).await;
    assert_eq!(status, 200);
    let (status, created) = post_json(&s, "/graphs/g/branches", serde_json::json!({"name": "ow", "from": "main", "clear": ["Person", "Knows"]})).await;
    assert_eq!(status, 201, "{created}");
    let base_seq = created["base"]["seq"].as_u64().unwrap();
    let r = reqwest::Client::new()
        .post(format!("{}/graphs/g/load/ndjson?branch=ow&mode=append", s.url))
        .header("content-type", "application/x-ndjson")
        .body(format!("{}{}", person("New1", 1), person("New2", 2)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let publish = serde_json::json!({"branch": "main", "from": "ow", "base_seq": base_seq, "types": ["Person", "Knows"], "batch_key": "run:publish"});
    // The first publish fails at its first table commit, after its recovery
    // record: recovery rolls it back.
    fail::cfg("table-commit-error", "1*return").unwrap();
    let (status, failed) = post_json(&s, "/graphs/g/overwrite", publish.clone()).await;
    fail::remove("table-commit-error");
    assert_eq!((status, failed["code"].as_str()), (503, Some("recovery_required")), "{failed}");
    let graph = reopen(&s.place.child("g")).await;
    assert!(export(&graph, "main", None).await.contains("\"id\":\"Old\""), "the rolled-back publish left the target as it was");
    // Its retry publishes (the rollback marker changed no row).
    let (status, published) = post_json(&s, "/graphs/g/overwrite", publish.clone()).await;
    assert_eq!(status, 200, "{published}");
    let seq = published["commit"]["seq"].as_u64().unwrap();
    // A retry after it landed (its answer lost), even once the target moved on, answers that publish.
    let (status, _) = load_over_http(&s, &person("After", 3)).await;
    assert_eq!(status, 200);
    let (status, again) = post_json(&s, "/graphs/g/overwrite", publish).await;
    assert_eq!((status, again["commit"]["seq"].as_u64()), (200, Some(seq)), "{again}");
    let state = export(&graph, "main", None).await;
    assert!(!state.contains("\"id\":\"Old\"") && state.contains("\"id\":\"New1\"") && state.contains("\"id\":\"After\""), "{state}");
    let publishes = graph.log("main").await.unwrap().iter().filter(|c| c.batch_key.as_deref() == Some("run:publish")).count();
    assert_eq!(publishes, 1, "published once");
    scenario.teardown();
}

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

/// Runs the CLI on `place` with `args` and failpoints `points` (if any):
/// its exit code and standard error.
fn cli(place: &Place, args: &[&str], points: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["load"]).args(place.cli_args()).args(args).env("OMNIGRAPH_LEASE_TTL_MS", lease_ttl_ms().to_string());
    if let Some(points) = points {
        cmd.env("FAILPOINTS", points);
    }
    place.apply_env(&mut cmd);
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_resumes_a_multi_batch_overwrite_whose_publish_was_rolled_back() {
    let place = place().await;
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &person("Old", 1)).await.unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("people.ndjson");
    std::fs::write(&file, (0..120).map(|i| person(&format!("P{i}"), 1)).collect::<String>()).unwrap();
    let file = file.to_str().unwrap();
    // Three batches of 50 lines onto the work branch, one table commit each;
    // the fourth table commit, the publish's first, fails.
    let (code, stderr) = cli(&place, &["--mode", "overwrite", "--batch-rows", "50", file], Some("table-commit-error=3*off->1*return"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("publish may have been committed") && stderr.contains("--resume"), "{stderr}");
    assert!(export(&graph, "main", None).await.contains("\"id\":\"Old\""), "the target is unchanged");
    let (code, stderr) = cli(&place, &["--mode", "overwrite", "--resume", file], None);
    assert_eq!(code, Some(0), "{stderr}");
    let state = export(&graph, "main", None).await;
    assert!(!state.contains("\"id\":\"Old\""), "{state}");
    assert_eq!(counts(&graph, "main").await["Person"], 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_batch_cli_load_whose_answer_was_lost_is_finished_exactly_once_by_resume() {
    let place = place().await;
    init(&place.child("g")).await;
    // The host commits the batch, then its answer is lost (the load's task
    // panics after the publish: a 500).
    let mut serve = std::process::Command::new(BIN);
    serve
        .arg("serve")
        .args(place.cli_args())
        .args(["--open", "--listen", "127.0.0.1:0", "--lease-ttl-ms", &lease_ttl_ms().to_string(), "--maintenance-interval-ms", "0"])
        .env("FAILPOINTS", "after-publish=1*panic");
    place.apply_env(&mut serve);
    let host = common::host_process::HostProcess::spawn(serve);
    // Edges without ids: a second copy of the batch would add 20 more.
    let mut text: String = (0..10).map(|i| person(&format!("P{i}"), 1)).collect();
    for i in 0..20 {
        text.push_str(&format!("{{\"edge\":\"Knows\",\"from\":\"P{}\",\"to\":\"P{}\"}}\n", i % 10, (i + 1) % 10));
    }
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("one.ndjson");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let run = |resume: bool| {
        let (url, file) = (host.url.clone(), file.clone());
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new(BIN);
            cmd.args(["load", "--server", &url, "--graph", "g"]);
            if resume {
                cmd.arg("--resume");
            }
            let out = cmd.arg(&file).output().unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        })
    };
    let (code, stderr) = run(false).await.unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("the file (one batch) may have been committed") && stderr.contains("--resume"), "{stderr}");
    let (code, stderr) = run(true).await.unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    let graph = reopen(&place.child("g")).await;
    let rows = counts(&graph, "main").await;
    assert_eq!((rows["Person"], rows["Knows"]), (10, 20), "every record exactly once");
    host.stop();
}
