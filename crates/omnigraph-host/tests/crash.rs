//! Atomicity under crashes: a load is stopped dead (a panic, so no cleanup
//! code runs) at every step of the commit protocol; another writer then
//! takes over the expired lease and recovers. The graph must show exactly
//! the old or exactly the new state, and no table head may hold unpublished
//! rows. Run with `--features failpoints`.
#![cfg(feature = "failpoints")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use omnigraph_host::{Graph, Recovered};
use omnigraph_validate_wasm::Mode;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// No record was left: nothing to recover.
    Nothing,
    RolledBack,
    RolledForward,
}

/// Each failpoint of `Graph::stage_and_commit`, what recovery must do and
/// whether the graph ends in the new state.
const POINTS: [(&str, Expect, bool); 6] = [
    ("after-stage", Expect::Nothing, false),
    ("after-record", Expect::RolledBack, false),
    ("after-table-commit", Expect::RolledBack, false),
    ("after-sync", Expect::RolledForward, true),
    ("after-publish", Expect::RolledForward, true),
    ("after-record-delete", Expect::Nothing, true),
];

/// Touches three tables, so a crash after the first table commit leaves
/// the others uncommitted.
fn batch() -> String {
    format!(
        "{}{}{}{}",
        person("A", 50),
        person("N", 1),
        "{\"type\":\"Company\",\"data\":{\"name\":\"Acme\"}}\n",
        knows("k2", "N", "A")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_step_leaves_the_old_or_the_new_state() {
    let scenario = fail::FailScenario::setup();
    for (point, expect, new_state) in POINTS {
        let dir = place().await;
        let graph = Arc::new(init(&dir).await);
        load(&graph, "main", Mode::Merge, &format!("{}{}{}", person("A", 1), person("B", 2), knows("k1", "A", "B")))
            .await
            .unwrap();
        let old = export(&graph, "main", None).await;

        fail::cfg(point, "panic").unwrap();
        let crashing = graph.clone();
        let crashed = tokio::spawn(async move { crashing.load(request("main", Mode::Merge, &batch())).await }).await;
        fail::remove(point);
        assert!(crashed.is_err(), "{point}: the load must have crashed");

        // A new writer (another process, after a restart) waits out the lease
        // (the panic gave it back: `with_lease`'s guard) and says what its
        // recovery did.
        let survivor = Graph::open_unrecovered(root(&dir), validator(), config()).await.unwrap();
        let outcome = survivor.recover_with_wait(Duration::from_secs(10)).await.unwrap();
        let state = export(&survivor, "main", None).await;
        let got = match outcome {
            Recovered::Nothing => Expect::Nothing,
            Recovered::RolledBack { .. } => Expect::RolledBack,
            Recovered::RolledForward { .. } => Expect::RolledForward,
        };
        assert_eq!(got, expect, "{point}");
        if new_state {
            assert!(state.contains("\"id\":\"N\"") && state.contains("\"k2\"") && state.contains("Acme"), "{point}: {state}");
        } else {
            assert_eq!(state, old, "{point}: expected the old state");
        }
        assert_heads_published(&survivor).await;

        // The graph takes the same load again and ends in the new state once.
        load(&survivor, "main", Mode::Merge, &batch()).await.unwrap();
        let after = counts(&survivor, "main").await;
        assert_eq!((after["Person"], after["Company"], after["Knows"]), (3, 1, 2), "{point}");
        assert_heads_published(&survivor).await;
    }
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_while_forking_a_branch_leaves_no_branch() {
    let scenario = fail::FailScenario::setup();
    let dir = place().await;
    let graph = Arc::new(init(&dir).await);
    load(&graph, "main", Mode::Merge, &person("A", 1)).await.unwrap();
    fail::cfg("after-table-commit", "panic").unwrap();
    let crashing = graph.clone();
    let crashed = tokio::spawn(async move {
        crashing.load(fork_request("side", "main", Mode::Merge, &batch())).await
    })
    .await;
    fail::remove("after-table-commit");
    assert!(crashed.is_err());
    let survivor = reopen(&dir).await;
    survivor.recover_with_wait(Duration::from_secs(10)).await.unwrap();
    assert!(survivor.head("side").await.unwrap().is_none());
    // The branch can then be forked for real; the leftover Lance branch is replaced.
    survivor.load(fork_request("side", "main", Mode::Merge, &batch())).await.unwrap();
    assert_eq!(counts(&survivor, "side").await["Person"], 2);
    assert_eq!(counts(&survivor, "main").await["Person"], 1);
    assert_heads_published(&survivor).await;
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// A publish that finds its sequence number taken means another writer
/// published while this one held the lease: the lease was lost. The load
/// answers `recovery_required` (SPEC §4.7) instead of retrying on top (a
/// stalled writer must not commit after a takeover); nothing of it is
/// visible, and its table versions are rolled back.
async fn a_load_that_loses_the_branch_head_answers_recovery_required_and_leaves_nothing() {
    let scenario = fail::FailScenario::setup();
    let dir = place().await;
    let graph = init(&dir).await;
    load(&graph, "main", Mode::Merge, &format!("{}{}", person("A", 1), person("B", 2))).await.unwrap();
    let (store, runtime) = (dir.root(), tokio::runtime::Handle::current());
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = fired.clone();
    fail::cfg_callback("before-publish", move || {
        if once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        // Another writer (one whose lease we never saw) publishes first: a
        // commit on top of the head, pinning the head's table versions.
        tokio::task::block_in_place(|| {
            runtime.block_on(async {
                let newest = store.list_names("_graph/branches/main").await.unwrap().into_iter().min().unwrap();
                let mut head: serde_json::Value =
                    serde_json::from_slice(&store.get(&format!("_graph/branches/main/{newest}")).await.unwrap().unwrap()).unwrap();
                let seq = head["seq"].as_u64().unwrap() + 1;
                head["seq"] = seq.into();
                head["id"] = "foreign".into();
                head["batch_id"] = "foreign".into();
                let name = format!("_graph/branches/main/{:020}.json", u64::MAX - seq);
                assert!(store.put_if_absent(&name, serde_json::to_vec(&head).unwrap()).await.unwrap());
            })
        });
    })
    .unwrap();
    let refused = load(&graph, "main", Mode::Merge, &person("C", 3)).await.unwrap_err();
    fail::remove("before-publish");
    assert!(fired.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(refused.code(), "recovery_required", "{refused}");
    assert!(refused.to_string().contains("lease was lost"), "{refused}");
    assert_eq!(graph.head("main").await.unwrap().unwrap().id, "foreign");
    assert_eq!(counts(&graph, "main").await["Person"], 2, "nothing of the losing load");
    assert_heads_published(&graph).await;
    let commit = load(&graph, "main", Mode::Merge, &person("C", 3)).await.unwrap().commit.unwrap();
    assert_eq!((commit.seq, commit.parent_id.as_deref()), (3, Some("foreign")), "the next load builds on the winner");
    assert_eq!(counts(&graph, "main").await["Person"], 3);
    scenario.teardown();
}

/// A load that takes longer than its lease (here: stalled 2.5 leases of
/// 1.5 s after staging) still commits: its lease is renewed while it runs,
/// so nobody takes it over and the load is not given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_longer_than_its_lease_renews_it_and_commits() {
    let scenario = fail::FailScenario::setup();
    let dir = place().await;
    let ttl = Duration::from_millis(1_500);
    let graph = omnigraph_host::Graph::init(dir.root(), SCHEMA, validator(), omnigraph_host::EngineConfig { lease_ttl: ttl, ..config() })
        .await
        .unwrap();
    fail::cfg("after-stage", "sleep(3750)").unwrap();
    let receipt = load(&graph, "main", Mode::Merge, &batch()).await;
    fail::remove("after-stage");
    let commit = receipt.expect("the renewed lease outlived the load").commit.unwrap();
    assert_eq!(commit.seq, 1);
    assert_eq!(counts(&graph, "main").await["Person"], 2);
    scenario.teardown();
}
