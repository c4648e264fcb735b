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
