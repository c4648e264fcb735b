//! Version cleanup never removes a version a commit of a live branch pins
//! (SPEC §4.7), checked as a property: random sequences of loads, forks,
//! branch deletions, overwrites, maintenance steps and cleanups (seeded, so
//! a failure reproduces), after which every commit of every live branch
//! still reads exactly as it did when it was made. Also: loads go on while a
//! cleanup reads the history, and keep their versions; a deleted branch's
//! Lance branches go unless live commits need them.

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
    for &seed in property_seeds(&[7, 1_234, 99_991]) {
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
        // Held here (at most 20 s) while the test loads; block_in_place
        // hands this worker's queued tasks (an S3 connection's, say) to
        // another thread, so the loads do not wait for them.
        tokio::task::block_in_place(|| {
            let _ = resumed.lock().unwrap().recv_timeout(Duration::from_secs(20));
        });
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

/// Every Lance branch of every table, as `Table:lance-branch`.
async fn lance_branches(graph: &Graph) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for def in &graph.schema().types {
        let ds = graph.root().open_table(&omnigraph_host::manifest::table_path(def.kind, &def.name)).await.unwrap();
        out.extend(ds.list_branches().await.unwrap().into_keys().map(|b| format!("{}:{b}", def.name)));
    }
    out
}

/// A deleted graph branch's Lance branches are removed by the next cleanup,
/// except those a live branch's commits still pin (a fork that has not
/// written a table reads it from its base's Lance branch) or that Lance
/// created another branch from; once nothing needs them, they go too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_branches_lance_branches_are_removed_unless_live_commits_need_them() {
    let place = place().await;
    let graph = init(&place).await;
    load(&graph, "main", Mode::Merge, &numbered_batch(0)).await.unwrap();
    // b and d write Person and Knows; c, forked from b, writes Person only.
    graph.load(fork_request("b", "main", Mode::Merge, &numbered_batch(1))).await.unwrap();
    graph.load(fork_request("d", "main", Mode::Merge, &numbered_batch(2))).await.unwrap();
    graph.load(fork_request("c", "b", Mode::Merge, &person("OnlyC", 3))).await.unwrap();
    let all = lance_branches(&graph).await;
    let of = |set: &std::collections::BTreeSet<String>, table: &str, branch: &str| {
        set.iter().filter(|b| b.starts_with(&format!("{table}:{branch}-"))).count()
    };
    assert_eq!((of(&all, "Person", "b"), of(&all, "Knows", "b"), of(&all, "Person", "c"), of(&all, "Knows", "c")), (1, 1, 1, 0));
    assert_eq!((of(&all, "Person", "d"), of(&all, "Knows", "d")), (1, 1));

    graph.delete_branch("b", "tester").await.unwrap();
    graph.delete_branch("d", "tester").await.unwrap();
    let before = snapshot(&graph).await;
    let cleaned = graph.cleanup_versions(Duration::ZERO).await.unwrap();
    let left = lance_branches(&graph).await;
    assert_eq!(cleaned.lance_branches, 2, "d's two Lance branches: {left:?}");
    assert_eq!((of(&left, "Person", "d"), of(&left, "Knows", "d")), (0, 0), "{left:?}");
    // c pins b's Knows branch; c's Person branch was created from b's.
    assert_eq!((of(&left, "Person", "b"), of(&left, "Knows", "b"), of(&left, "Person", "c")), (1, 1, 1), "{left:?}");
    assert_eq!(snapshot(&reopen(&place).await).await, before, "every live commit reads as before");

    graph.delete_branch("c", "tester").await.unwrap();
    assert_eq!(graph.cleanup_versions(Duration::ZERO).await.unwrap().lance_branches, 3);
    assert!(lance_branches(&graph).await.is_empty());
    assert_eq!(snapshot(&reopen(&place).await).await, snapshot(&graph).await);
    // A retention keeps young Lance branches.
    graph.load(fork_request("e", "main", Mode::Merge, &numbered_batch(4))).await.unwrap();
    graph.delete_branch("e", "tester").await.unwrap();
    assert_eq!(graph.cleanup_versions(Duration::from_secs(3600)).await.unwrap().lance_branches, 0);
    assert_eq!(lance_branches(&graph).await.len(), 2);
}
