//! `omnigraph-host load` of files larger than one batch: streamed (a file
//! whose every table fits is one commit), nodes before edges, maintenance
//! only after the last batch, split further when a batch is over a validator
//! bound (halving past the Arrow bound), and an overwrite of many batches
//! that is one overwrite (SPEC §4.3, §5, §7), into a local root and through a
//! server.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use common::*;
use omnigraph_host::auth::Auth;
use omnigraph_host::manifest::CommitKind;
use omnigraph_validate_wasm::Mode;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

fn cli(place: &Place, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg(args[0]).args(place.cli_args()).args(&args[1..]);
    place.apply_env(&mut cmd);
    cmd.output().unwrap()
}

fn server_cli(url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("load")
        .args(["--server", url, "--graph", "g"])
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every file's edges first, then its nodes: a split file whose edges
/// point at nodes of later batches.
fn edges_first(people: usize) -> String {
    let mut text = String::new();
    for i in 1..people {
        text.push_str(&knows(&format!("k{i}"), &format!("p{}", i - 1), &format!("p{i}")));
    }
    for i in 0..people {
        text.push_str(&person(&format!("p{i}"), 1));
    }
    text
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

async fn people_and_edges(g: &omnigraph_host::Graph, branch: &str) -> BTreeMap<String, u64> {
    let mut c = counts(g, branch).await;
    c.retain(|t, _| t == "Person" || t == "Knows");
    c
}

/// The kinds of `branch`'s commits, oldest first.
async fn kinds(g: &omnigraph_host::Graph, branch: &str) -> Vec<CommitKind> {
    g.log(branch).await.unwrap().into_iter().rev().map(|c| c.kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_file_loads_nodes_before_edges_and_maintains_after_its_last_batch() {
    let dir = place().await;
    drop(init(&dir).await);
    let files = tempfile::tempdir().unwrap();
    let file = write(files.path(), "edges-first.ndjson", &edges_first(30));
    ok(&cli(&dir, &["load", "--batch-rows", "7", &file]));
    let g = reopen(&dir).await;
    assert_eq!(
        people_and_edges(&g, "main").await,
        [("Knows".to_owned(), 29), ("Person".to_owned(), 30)].into()
    );
    // init, 30 nodes and 29 edges in batches of 7 one after another, then
    // the run's maintenance: never a step between two of its batches.
    let kinds = kinds(&g, "main").await;
    let loads = kinds.iter().filter(|k| **k == CommitKind::Load).count();
    assert_eq!(loads, 5 + 5, "{kinds:?}");
    assert!(kinds[1..=loads].iter().all(|k| *k == CommitKind::Load), "{kinds:?}");
    assert!(kinds.len() > 1 + loads && kinds[1 + loads..].iter().all(|k| *k == CommitKind::Maintain), "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_whose_every_table_fits_is_one_commit_however_many_lines() {
    let dir = place().await;
    drop(init(&dir).await);
    let files = tempfile::tempdir().unwrap();
    // 30 people, 29 Knows, 3 companies and 10 WorksAt: 72 lines, at most 30
    // rows of any one table.
    let mut text = edges_first(30);
    for c in 0..3 {
        text.push_str(&format!("{{\"type\":\"Company\",\"data\":{{\"name\":\"c{c}\"}}}}\n"));
    }
    for i in 0..10 {
        text.push_str(&format!("{{\"edge\":\"WorksAt\",\"from\":\"p{i}\",\"to\":\"c{}\"}}\n", i % 3));
    }
    let file = write(files.path(), "whole.ndjson", &text);
    ok(&cli(&dir, &["load", "--batch-rows", "30", &file]));
    let g = reopen(&dir).await;
    let log = g.log("main").await.unwrap();
    let loads: Vec<_> = log.iter().filter(|c| c.kind == CommitKind::Load).collect();
    assert_eq!(loads.len(), 1, "one commit for the whole file");
    let key = loads[0].batch_key.as_deref().unwrap();
    assert!(key.ends_with(&format!(":a:0-{}", text.len())), "the whole file, pass a: {key}");
    let c = counts(&g, "main").await;
    assert_eq!((c["Person"], c["Knows"], c["Company"], c["WorksAt"]), (30, 29, 3, 10));
    // One more row of one table, and the file is split (its edges after its
    // nodes, which they point to), into a fresh graph.
    text.push_str(&person("p30", 1));
    let file = write(files.path(), "over.ndjson", &text);
    let fresh = place().await;
    drop(init(&fresh).await);
    ok(&cli(&fresh, &["load", "--batch-rows", "30", &file]));
    let g = reopen(&fresh).await;
    let loads = g.log("main").await.unwrap().iter().filter(|c| c.kind == CommitKind::Load).count();
    assert_eq!(loads, 2 + 1, "two node batches (31 people) and one edge batch");
    assert_eq!(counts(&g, "main").await["WorksAt"], 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_the_arrow_bound_is_split_until_it_fits() {
    let dir = place().await;
    drop(init(&dir).await);
    let files = tempfile::tempdir().unwrap();
    // ~120 Arrow bytes per person with a long tag list; 2,000 bytes per table.
    let limits = write(
        files.path(),
        "limits.json",
        "{\"max_table_bytes\": 2000, \"max_total_arrow_bytes\": 2000}",
    );
    let heavy: String = (0..40)
        .map(|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"h{i}\",\"tags\":[\"aaaaaaaaaaaaaaaaaaaa\",\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\",\"c\",\"d\",\"e\"]}}}}\n"))
        .collect();
    let file = write(files.path(), "heavy.ndjson", &heavy);
    let out = cli(&dir, &["load", "--limits", &limits, "--batch-rows", "40", &file]);
    ok(&out);
    let g = reopen(&dir).await;
    assert_eq!(counts(&g, "main").await["Person"], 40);
    assert!(
        g.log("main").await.unwrap().len() > 2,
        "the 40-line batch did not fit: it was split"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_batch_overwrite_is_one_overwrite() {
    let dir = place().await;
    let g = init(&dir).await;
    let old: String = (0..20).map(|i| person(&format!("old{i}"), 1)).collect::<String>() + &knows("ko", "old0", "old1");
    load(&g, "main", Mode::Merge, &old).await.unwrap();
    load(
        &g,
        "main",
        Mode::Merge,
        "{\"type\":\"Company\",\"data\":{\"name\":\"Acme\"}}\n",
    )
    .await
    .unwrap();
    drop(g);
    let files = tempfile::tempdir().unwrap();

    let file = write(files.path(), "new.ndjson", &edges_first(12));
    ok(&cli(
        &dir,
        &["load", "--mode", "overwrite", "--batch-rows", "5", &file],
    ));
    let g = reopen(&dir).await;
    assert_eq!(
        people_and_edges(&g, "main").await,
        [("Knows".to_owned(), 11), ("Person".to_owned(), 12)].into()
    );
    assert_eq!(
        counts(&g, "main").await["Company"],
        1,
        "types the file does not name are kept"
    );
    // One commit on the target (maintenance commits, same rows, aside).
    let changes: Vec<_> =
        g.log("main").await.unwrap().into_iter().filter(|c| c.kind != CommitKind::Maintain).collect();
    assert_eq!(changes.len(), 4, "init, two loads, the overwrite");
    assert_eq!(changes[0].mode.as_deref(), Some("overwrite"), "one commit on the target");
    let branches: Vec<String> = g.branches().await.unwrap().into_iter().map(|c| c.branch).collect();
    assert_eq!(branches, ["main"], "the work branch is gone");

    // A refused batch (the 3rd line of the third node batch) leaves the target as it was.
    let mut bad = edges_first(12);
    bad.push_str("{\"type\":\"Person\",\"data\":{\"name\":\"x\",\"age\":999}}\n");
    let bad = write(files.path(), "bad.ndjson", &bad);
    let before = export(&g, "main", None).await;
    let out = cli(&dir, &["load", "--mode", "overwrite", "--batch-rows", "5", &bad]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is line 24 of the file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        export(&reopen(&dir).await, "main", None).await,
        before,
        "nothing of a refused overwrite is visible"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_batch_overwrite_through_a_server() {
    let s = start(Auth::Open, |_| {}).await;
    let g = reopen(&s.place.child("g")).await;
    load(
        &g,
        "main",
        Mode::Merge,
        &(0..10).map(|i| person(&format!("old{i}"), 1)).collect::<String>(),
    )
    .await
    .unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = write(files.path(), "new.ndjson", &edges_first(9));
    ok(&server_cli(
        &s.url,
        &["--mode", "overwrite", "--batch-rows", "4", &file],
    ));
    assert_eq!(
        people_and_edges(&g, "main").await,
        [("Knows".to_owned(), 8), ("Person".to_owned(), 9)].into()
    );
    assert!(
        !export(&g, "main", None).await.contains("old"),
        "the old people are removed"
    );
    assert_eq!(g.branches().await.unwrap().len(), 1);
}
