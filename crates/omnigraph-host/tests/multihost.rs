//! Several hosts, one store: `omnigraph-host serve` processes share one graph
//! root (a local directory, or an S3 prefix with `OMNIGRAPH_TEST_STORE=s3`)
//! while clients load through all of them at once, on one branch and on
//! several. Every acknowledged load is in the final state exactly once, at
//! the commit its receipt names; refused loads leave nothing; a host killed
//! while it holds the lease is recovered by another host.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::host_process::HostProcess;
use common::*;
use omnigraph_validate_wasm::Mode;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

/// A host process serving the graphs under `place`.
fn start_host(place: &Place, failpoints: Option<&str>) -> HostProcess {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .args(place.cli_args())
        .args(["--open", "--listen", "127.0.0.1:0", "--lease-ttl-ms", &lease_ttl_ms().to_string()]);
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
    let hosts: Arc<Vec<HostProcess>> = Arc::new((0..3).map(|_| start_host(&root, None)).collect());

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
    drop(hosts);

    let graph = reopen(&place).await;
    for (branch, loads) in &mut acked {
        loads.sort();
        let log = graph.log(branch).await.unwrap();
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
    while !store.exists("_graph/recovery.json").await.unwrap() {
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
    assert!(!graph.root().exists("_graph/recovery.json").await.unwrap(), "B recovered A's commit");
    let per = people_per_batch(&graph).await;
    assert_eq!(per, BTreeMap::from([(1, 40), (3, 40)]), "A's half-committed batch was rolled back whole");
    assert_eq!(counts(&graph, "main").await["Knows"], 2 * 39);
    assert_eq!(graph.log("main").await.unwrap().len(), 3);
    assert_heads_published(&graph).await;
}
