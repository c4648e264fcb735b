//! Version cleanup never removes a version a commit of a live branch pins
//! (SPEC §4.7), checked as a property: random sequences of loads, forks,
//! branch deletions, overwrites, maintenance steps and cleanups (seeded, so
//! a failure reproduces), after which every commit of every live branch
//! still reads exactly as it did when it was made.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use omnigraph_host::Graph;
use omnigraph_validate_wasm::Mode;

/// A small deterministic generator (xorshift64*): no dependency, replayable.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Every commit of every live branch, read now: `(branch, seq) → export`.
async fn snapshot(graph: &Graph) -> BTreeMap<(String, u64), String> {
    let mut out = BTreeMap::new();
    for head in graph.branches().await.unwrap() {
        for commit in graph.log(&head.branch).await.unwrap() {
            if commit.branch == head.branch {
                out.insert((head.branch.clone(), commit.seq), export(graph, &head.branch, Some(commit.seq)).await);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_never_removes_a_version_a_live_commit_pins() {
    let mut removed = 0;
    for seed in [7u64, 1_234, 99_991] {
        let place = place().await;
        let graph = init(&place).await;
        let mut rng = Rng(seed);
        let mut read: BTreeMap<(String, u64), String> = BTreeMap::new();
        for step in 0..24 {
            let branches: Vec<String> = graph.branches().await.unwrap().into_iter().map(|c| c.branch).collect();
            let branch = branches[rng.below(branches.len() as u64) as usize].clone();
            match rng.below(8) {
                0..=2 => {
                    load(&graph, &branch, Mode::Merge, &numbered_batch(step)).await.unwrap();
                }
                3 => {
                    let name = format!("b{step}");
                    graph.load(fork_request(&name, &branch, Mode::Merge, &numbered_batch(step))).await.unwrap();
                }
                4 if branch != "main" => {
                    graph.delete_branch(&branch, "test").await.unwrap();
                }
                4 | 5 => {
                    load(&graph, &branch, Mode::Overwrite, &numbered_batch(step)).await.unwrap();
                }
                6 => {
                    graph.optimize(6).await.unwrap();
                }
                _ => {
                    let before = snapshot(&graph).await;
                    removed += graph.cleanup_versions(Duration::ZERO).await.unwrap().versions;
                    let after = snapshot(&graph).await;
                    assert_eq!(before.len(), after.len(), "seed {seed} step {step}");
                    for (at, text) in &before {
                        assert_eq!(&after[at], text, "seed {seed} step {step}: commit {at:?} reads differently after cleanup");
                    }
                }
            }
            // Each commit reads, now and later, as it did when it was made.
            for (at, text) in snapshot(&graph).await {
                let first = read.entry(at.clone()).or_insert_with(|| text.clone());
                assert_eq!(first, &text, "seed {seed} step {step}: commit {at:?} changed");
            }
        }
        let cleaned = graph.cleanup_versions(Duration::ZERO).await.unwrap();
        removed += cleaned.versions;
        for (at, text) in snapshot(&graph).await {
            assert_eq!(read[&at], text, "seed {seed}: commit {at:?} after the last cleanup");
        }
        assert_heads_published(&graph).await;
    }
    assert!(removed > 0, "the sequences left unpinned versions to remove (maintenance's intermediate versions)");
}

/// A retention keeps recent unpinned versions; the newest version of a
/// table is never removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_keeps_versions_younger_than_the_retention() {
    let place = place().await;
    let graph = init(&place).await;
    for n in 0..10 {
        load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
    }
    graph.optimize(20).await.unwrap();
    assert_eq!(graph.cleanup_versions(Duration::from_secs(3600)).await.unwrap().versions, 0, "all younger than an hour");
    assert!(graph.cleanup_versions(Duration::ZERO).await.unwrap().versions > 0, "maintenance left unpinned versions");
    assert_eq!(people_per_batch(&graph).await.len(), 10);
}

/// The history is read before the lease is taken: loads go on while a
/// cleanup walks it, and the commits they publish meanwhile are read under
/// the lease, so their versions are kept even with no retention at all.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_go_on_while_cleanup_reads_the_history_and_keep_their_versions() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = std::sync::Arc::new(init(&place).await);
    for n in 0..4 {
        load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
    }
    let (walked, history_read) = std::sync::mpsc::channel();
    let (resume, resumed) = std::sync::mpsc::channel::<()>();
    let walked = std::sync::Mutex::new(walked);
    let resumed = std::sync::Mutex::new(resumed);
    fail::cfg_callback("cleanup-history-read", move || {
        walked.lock().unwrap().send(()).unwrap();
        // Held here (at most 20 s) while the test loads.
        let _ = resumed.lock().unwrap().recv_timeout(Duration::from_secs(20));
    })
    .unwrap();
    let cleaning = tokio::spawn({
        let graph = graph.clone();
        async move { graph.cleanup_versions(Duration::ZERO).await }
    });
    tokio::task::spawn_blocking(move || history_read.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("cleanup read the history");
    // Two loads while the cleanup holds its walk: neither waits for it, and
    // the first one's version is no longer the table's newest afterwards.
    for n in 4..6 {
        tokio::time::timeout(Duration::from_secs(10), load(&graph, "main", Mode::Merge, &numbered_batch(n)))
            .await
            .expect("a load did not wait for the cleanup's walk")
            .unwrap();
    }
    let before = snapshot(&graph).await;
    resume.send(()).unwrap();
    cleaning.await.unwrap().unwrap();
    assert_eq!(snapshot(&reopen(&place).await).await, before, "every commit reads as before");
    scenario.teardown();
}
