//! Several hosts, one store: three `omnigraph-host serve` processes share one
//! graph root (a local directory, or an S3 prefix with
//! `OMNIGRAPH_TEST_STORE=s3`) while clients load through all of them at once,
//! on one branch and on several. Every acknowledged load is in the final
//! state exactly once, at the commit its receipt names; refused loads leave
//! nothing; a host killed (SIGKILL) while it holds the lease is recovered by
//! another host; a host SIGSTOPped mid-load past its lease is fenced when it
//! wakes; and the recovery contract (`recovery_required`,
//! `recovery_in_progress`, logged housekeeping) holds over HTTP.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::host_process::HostProcess;
use common::*;
use omnigraph_host::manifest::CommitKind;
use omnigraph_validate_wasm::Mode;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

/// A host process serving the graphs under `place`.
/// Background maintenance is off (`--maintenance-interval-ms 0`), so commit
/// sequences are exact, except where a test turns it on.
#[cfg(feature = "failpoints")]
fn start_host(place: &Place, failpoints: Option<&str>) -> HostProcess {
    start_host_with(place, failpoints, lease_ttl_ms(), &["--maintenance-interval-ms", "0"])
}

fn start_host_with(place: &Place, failpoints: Option<&str>, lease_ttl_ms: u64, extra: &[&str]) -> HostProcess {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .args(place.cli_args())
        .args(["--open", "--listen", "127.0.0.1:0", "--lease-ttl-ms", &lease_ttl_ms.to_string()])
        .args(extra);
    place.apply_env(&mut cmd);
    if let Some(points) = failpoints {
        cmd.env("FAILPOINTS", points);
    }
    HostProcess::spawn(cmd)
}

/// One load over HTTP: the status and the JSON answer, retrying while the
/// host answers 503 (graph busy) or 429.
async fn post_load(client: &reqwest::Client, url: &str, query: &str, body: String) -> (u16, serde_json::Value) {
    for _ in 0..40 {
        let response = client
            .post(format!("{url}/graphs/g/load/ndjson?{query}"))
            .header("content-type", "application/x-ndjson")
            .body(body.clone())
            .send()
            .await
            .expect("the host answers");
        let status = response.status().as_u16();
        let json: serde_json::Value = response.json().await.unwrap();
        if status != 503 && status != 429 {
            return (status, json);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("the graph stayed busy through 40 retries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_sharing_a_store_commit_every_acknowledged_load_exactly_once() {
    let root = place().await;
    let place = root.child("g");
    let graph = init(&place).await;
    // Two more branches, forked with their first load before the hosts start.
    for (branch, n) in [("b1", 900), ("b2", 901)] {
        graph.load(fork_request(branch, "main", Mode::Merge, &numbered_batch(n))).await.unwrap();
    }
    // Background maintenance runs on every host, every 200 ms, among the loads.
    let hosts: Arc<Vec<HostProcess>> =
        Arc::new((0..3).map(|_| start_host_with(&root, None, lease_ttl_ms(), &["--maintenance-interval-ms", "200"])).collect());

    // Six clients, three loads each, rotating over the hosts; clients 0-3
    // share main, 4 and 5 load b1 and b2. Each also sends a batch with one
    // bad line (refused whole) and an append of ids it already loaded
    // (refused as conflicts).
    let branches = ["main", "main", "main", "main", "b1", "b2"];
    let mut clients = Vec::new();
    for (c, branch) in branches.into_iter().enumerate() {
        let hosts = hosts.clone();
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut acked = Vec::new();
            for k in 0..3 {
                let n = 100 + c * 10 + k;
                let url = &hosts[(c + k) % hosts.len()].url;
                let (status, body) = post_load(&client, url, &format!("branch={branch}"), numbered_batch(n)).await;
                assert_eq!(status, 200, "{body}");
                acked.push((body["commit"]["seq"].as_u64().unwrap(), n));
            }
            let url = &hosts[c % hosts.len()].url;
            let bad = format!("{}{{\"type\":\"Person\",\"data\":{{\"age\":1}}}}\n", numbered_batch(500 + c));
            let (status, body) = post_load(&client, url, &format!("branch={branch}"), bad).await;
            assert_eq!((status, body["code"].as_str()), (422, Some("validation_failed")), "{body}");
            let again = numbered_batch(100 + c * 10).lines().skip(1).map(|l| format!("{l}\n")).collect();
            let (status, body) = post_load(&client, url, &format!("branch={branch}&mode=append"), again).await;
            assert_eq!((status, body["code"].as_str()), (409, Some("key_conflict")), "{body}");
            (branch, acked)
        }));
    }
    // Meanwhile two hosts fork the same new branch with their first loads.
    let racers: Vec<_> = (0..2)
        .map(|k| {
            let hosts = hosts.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                post_load(&client, &hosts[k].url, "branch=race&from=main", numbered_batch(700 + k)).await
            })
        })
        .collect();
    let mut acked: BTreeMap<&str, Vec<(u64, usize)>> = BTreeMap::new();
    for client in clients {
        let (branch, loads) = client.await.unwrap();
        acked.entry(branch).or_default().extend(loads);
    }
    let mut forked_at = Vec::new();
    for (k, racer) in racers.into_iter().enumerate() {
        let (status, body) = racer.await.unwrap();
        assert_eq!(status, 200, "{body}");
        if body["created"].as_bool().unwrap() {
            assert_eq!(body["base"]["branch"], "main");
            forked_at.push(body["base"]["seq"].as_u64().unwrap());
        }
        acked.entry("race").or_default().push((body["commit"]["seq"].as_u64().unwrap(), 700 + k));
    }
    assert_eq!(forked_at.len(), 1, "exactly one of the racing forks created the branch");
    // Stopped, not killed: a kill can land inside a maintenance step and
    // leave its table commits for the next load to recover.
    Arc::try_unwrap(hosts).ok().expect("no client holds the hosts").into_iter().for_each(HostProcess::stop);

    let graph = reopen(&place).await;
    assert_eq!(recovery_records(graph.root()).await, 0, "a stopped host leaves no recovery record");
    for (branch, loads) in &mut acked {
        loads.sort();
        // Maintenance commits change no rows; the loads' commits are counted.
        let log: Vec<_> = graph.log(branch).await.unwrap().into_iter().filter(|c| c.kind != CommitKind::Maintain).collect();
        let base: BTreeSet<usize> = match *branch {
            "b1" => [900].into(),
            "b2" => [901].into(),
            // What main held at the commit the race's winner forked from.
            "race" => people_per_batch_at(&graph, "main", Some(forked_at[0])).await.into_keys().collect(),
            _ => BTreeSet::new(),
        };
        // One commit per acknowledged load (plus init, or the fork; a branch
        // forked by a load starts with that load's commit).
        let forked_by_a_load = *branch == "race";
        assert_eq!(log.len(), loads.len() + usize::from(!forked_by_a_load), "{branch}: commits {:?}", log.iter().map(|c| c.seq).collect::<Vec<_>>());
        // Each receipt's commit shows exactly the loads acknowledged up to it,
        // each whole: no commit holds part or all of another host's batch.
        let mut expected = base.clone();
        for (seq, n) in loads.iter() {
            expected.insert(*n);
            let per = people_per_batch_at(&graph, branch, Some(*seq)).await;
            assert_eq!(per.keys().copied().collect::<BTreeSet<_>>(), expected, "{branch} at commit {seq}");
            assert!(per.values().all(|&people| people == 40), "{branch} at commit {seq}: {per:?}");
        }
        assert_eq!(people_per_batch_at(&graph, branch, None).await.len(), expected.len(), "{branch}: the head is the last receipt's commit");
    }
    assert_heads_published(&graph).await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_while_holding_the_lease_is_recovered_by_another() {
    let root = place().await;
    let place = root.child("g");
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &numbered_batch(1)).await.unwrap();
    // Host A stalls after its first table commit, holding the lease.
    let mut stalled = start_host(&root, Some("after-table-commit=sleep(20000)"));
    let healthy = start_host(&root, None);
    let client = reqwest::Client::new();
    let lost = tokio::spawn({
        let (client, url) = (client.clone(), stalled.url.clone());
        async move {
            client.post(format!("{url}/graphs/g/load/ndjson")).header("content-type", "application/x-ndjson").body(numbered_batch(2)).send().await
        }
    });
    // The recovery record appears once A has staged and starts committing tables.
    let store = place.root();
    let mut waited = 0;
    while recovery_records(&store).await == 0 {
        waited += 1;
        assert!(waited < 600, "host A never reached the commit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stalled.child.kill().unwrap(); // SIGKILL, lease held
    stalled.child.wait().unwrap();
    assert!(lost.await.unwrap().is_err(), "the killed host acknowledged nothing");

    let started = std::time::Instant::now();
    let (status, body) = post_load(&client, &healthy.url, "", numbered_batch(3)).await;
    assert_eq!(status, 200, "{body}");
    eprintln!("host B committed {:?} after {} ms (lease TTL {} ms)", body["commit"]["seq"], started.elapsed().as_millis(), lease_ttl_ms());

    let graph = reopen(&place).await;
    assert_eq!(recovery_records(graph.root()).await, 0, "B recovered A's commit");
    let per = people_per_batch(&graph).await;
    assert_eq!(per, BTreeMap::from([(1, 40), (3, 40)]), "A's half-committed batch was rolled back whole");
    assert_eq!(counts(&graph, "main").await["Knows"], 2 * 39);
    // init, batch 1, the rollback marker in A's slot, batch 3.
    let kinds: Vec<_> = graph.log("main").await.unwrap().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CommitKind::Load, CommitKind::Rollback, CommitKind::Load, CommitKind::Init]);
    assert_heads_published(&graph).await;
}

/// One load over HTTP, once: the status, the `Retry-After` header and the JSON answer.
#[cfg(feature = "failpoints")]
async fn post_once(client: &reqwest::Client, url: &str, body: String) -> (u16, Option<String>, serde_json::Value) {
    let response = client
        .post(format!("{url}/graphs/g/load/ndjson"))
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .expect("the host answers");
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status, retry_after, response.json().await.unwrap())
}

/// Waits until a load has written its recovery record (it is committing tables).
#[cfg(feature = "failpoints")]
async fn wait_for_record(store: &omnigraph_host::GraphRoot) {
    let mut waited = 0;
    while recovery_records(store).await == 0 {
        waited += 1;
        assert!(waited < 600, "the load never reached its table commits");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A lease holder stalls (SIGSTOP) in the middle of its table commits, past
/// its lease; another host takes over, recovers and commits. When the
/// stalled host wakes (SIGCONT) nothing of its load can become visible: its
/// next table commit or its publish is fenced, and it answers the typed
/// `recovery_required`. Safety comes from the fences, not from clocks.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_lease_holder_that_wakes_up_is_fenced() {
    let root = place().await;
    let place = root.child("g");
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &numbered_batch(1)).await.unwrap();
    // A pause after A's first table commit, so the SIGSTOP lands between two
    // table commits; and a clock that wrongly says A's lease is still valid
    // when it wakes (skew), so only the fences can stop it.
    let stalled = start_host(&root, Some("after-table-commit=sleep(1500);lease-clock-trusted=return"));
    let healthy = start_host(&root, None);
    let client = reqwest::Client::new();
    let stalled_load = tokio::spawn({
        let (client, url) = (client.clone(), stalled.url.clone());
        async move { post_once(&client, &url, numbered_batch(2)).await }
    });
    wait_for_record(&place.root()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stalled.signal(libc::SIGSTOP);

    // B waits out A's lease, rolls A's load back and commits elsewhere, so
    // main's next sequence number is held only by the rollback marker.
    let (status, body) = post_load(&client, &healthy.url, "branch=side&from=main", numbered_batch(3)).await;
    assert_eq!(status, 200, "{body}");

    stalled.signal(libc::SIGCONT);
    let (status, retry_after, answer) = stalled_load.await.unwrap();
    assert_eq!((status, answer["code"].as_str()), (503, Some("recovery_required")), "{answer}");
    assert!(retry_after.is_some(), "a 503 says when to retry");
    assert!(answer["error"].as_str().unwrap().contains("lease was lost"), "{answer}");

    // The graph still takes loads, and A's table versions never leak into them.
    let (status, body) = post_load(&client, &healthy.url, "", numbered_batch(4)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["commit"]["seq"], 3, "seq 2 is the rollback marker of A's load");
    let graph = reopen(&place).await;
    assert_eq!(people_per_batch(&graph).await, BTreeMap::from([(1, 40), (4, 40)]), "nothing of A's batch");
    assert_eq!(people_per_batch_at(&graph, "side", None).await, BTreeMap::from([(1, 40), (3, 40)]));
    assert_eq!(counts(&graph, "main").await["Knows"], 2 * 39);
    let kinds: Vec<_> = graph.log("main").await.unwrap().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CommitKind::Load, CommitKind::Rollback, CommitKind::Load, CommitKind::Init]);
    assert_eq!(recovery_records(graph.root()).await, 0);
    assert_heads_published(&graph).await;
}

/// The error contract (SPEC §4.7) over HTTP: a failure after the recovery
/// record is written answers 503 `recovery_required` (never a claimed
/// rollback) and the host then finishes it; a failure to delete the record
/// after the publish does not turn a committed load into an error.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_after_the_record_answer_recovery_required_and_housekeeping_never_fails_a_load() {
    let root = place().await;
    let place = root.child("g");
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &numbered_batch(1)).await.unwrap();
    let client = reqwest::Client::new();

    let failing = start_host(&root, Some("table-commit-error=1*return"));
    let (status, retry_after, answer) = post_once(&client, &failing.url, numbered_batch(2)).await;
    assert_eq!((status, answer["code"].as_str()), (503, Some("recovery_required")), "{answer}");
    assert!(retry_after.is_some());
    assert!(answer["error"].as_str().unwrap().contains("injected table commit failure"), "{answer}");
    // The host finished it while it held the lease: rolled back, its slot taken.
    assert_eq!(recovery_records(&place.root()).await, 0);
    let graph = reopen(&place).await;
    assert_eq!(people_per_batch(&graph).await, BTreeMap::from([(1, 40)]));
    assert_eq!(graph.head("main").await.unwrap().unwrap().kind, CommitKind::Rollback);
    drop(failing);

    let forgetful = start_host(&root, Some("record-delete-error=1*return"));
    let (status, _, answer) = post_once(&client, &forgetful.url, numbered_batch(3)).await;
    assert_eq!(status, 200, "the load is committed although its record stayed: {answer}");
    assert_eq!(recovery_records(&place.root()).await, 1, "the record stayed");
    let (status, _, answer) = post_once(&client, &forgetful.url, numbered_batch(4)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(recovery_records(&place.root()).await, 0, "the next load's recovery removed it");
    let graph = reopen(&place).await;
    assert_eq!(people_per_batch(&graph).await, BTreeMap::from([(1, 40), (3, 40), (4, 40)]), "batch 3 once, not rolled back");
    assert_heads_published(&graph).await;
}

/// While one host finishes an interrupted load, loads elsewhere get 503
/// `recovery_in_progress` with `Retry-After`, not a generic busy answer.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_during_another_hosts_recovery_get_recovery_in_progress() {
    let root = place().await;
    let place = root.child("g");
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &numbered_batch(1)).await.unwrap();
    let client = reqwest::Client::new();
    // A dies holding the lease, its record written.
    let mut crashed = start_host(&root, Some("after-table-commit=sleep(20000)"));
    let lost = tokio::spawn({
        let (client, url) = (client.clone(), crashed.url.clone());
        async move { post_once(&client, &url, numbered_batch(2)).await }
    });
    wait_for_record(&place.root()).await;
    crashed.child.kill().unwrap();
    crashed.child.wait().unwrap();
    let _ = lost.await;
    // B takes the lease over and spends a while in recovery (well within its own lease).
    let slow = format!("during-recovery=sleep({})", lease_ttl_ms() + 3_000);
    let recovering = start_host_with(&root, Some(&slow), 60_000, &["--maintenance-interval-ms", "0"]);
    let b = tokio::spawn({
        let (client, url) = (client.clone(), recovering.url.clone());
        async move { post_once(&client, &url, numbered_batch(3)).await }
    });
    tokio::time::sleep(Duration::from_millis(lease_ttl_ms() + 1_000)).await;
    // C waits briefly for the lease, then answers.
    let impatient = start_host_with(&root, None, lease_ttl_ms(), &["--lease-wait-ms", "200", "--maintenance-interval-ms", "0"]);
    let (status, retry_after, answer) = post_once(&client, &impatient.url, numbered_batch(5)).await;
    assert_eq!((status, answer["code"].as_str()), (503, Some("recovery_in_progress")), "{answer}");
    assert!(retry_after.is_some());
    let (status, _, answer) = b.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    let graph = reopen(&place).await;
    assert_eq!(people_per_batch(&graph).await, BTreeMap::from([(1, 40), (3, 40)]));
}
