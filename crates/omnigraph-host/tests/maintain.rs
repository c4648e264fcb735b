//! Maintenance off the load path (SPEC §4.7): loads never compact or build
//! indexes; maintenance steps do, each one bounded and published as a
//! `maintain` commit with the same rows and the declared indexes. Crashes
//! inside a step leave every commit readable at its pinned versions, and so
//! does `optimize` SIGKILLed mid-step. The server's background maintenance,
//! and its shutdown mid-step (the step is finished, then published).

mod common;

#[cfg(feature = "failpoints")]
use std::sync::Arc;
use std::time::Duration;

use common::*;
use lance::index::DatasetIndexExt;
use omnigraph_host::manifest::{CommitKind, table_path};
use omnigraph_host::{Graph, tables};
use omnigraph_validate_wasm::{Mode, TableKind};

/// The sample schema plus an `@index` on Person.age, which no check needs.
fn schema_with_index() -> String {
    SCHEMA.replace("  tags: [String]?\n", "  tags: [String]?\n  @index(age)\n")
}

/// Fragments and index names of a table at a branch's head.
async fn layout(graph: &Graph, kind: TableKind, name: &str) -> (usize, Vec<String>) {
    let head = graph.head("main").await.unwrap().unwrap();
    let ds = tables::open_pinned(graph.root(), &table_path(kind, name), &head.tables[name]).await.unwrap();
    let mut indexes: Vec<String> = ds.load_indices().await.unwrap().iter().map(|i| i.name.clone()).collect();
    indexes.sort();
    indexes.dedup();
    (ds.get_fragments().len(), indexes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_leave_maintenance_to_maintain_commits_that_keep_every_row() {
    // Its maintenance steps must not pass another test's failpoints.
    let _serial = fail::FailScenario::setup();
    let place = place().await;
    let schema = schema_with_index();
    assert!(schema.contains("@index(age)"));
    let graph = Graph::init(place.root(), &schema, validator(), config()).await.unwrap();
    for n in 1..=12 {
        load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
    }
    // No load built an index or compacted: that is maintenance's.
    let (fragments, indexes) = layout(&graph, TableKind::Node, "Person").await;
    assert!(fragments >= 12, "{fragments} fragments");
    assert!(indexes.is_empty(), "a load built {indexes:?}");
    let before = export(&graph, "main", None).await;
    let loaded_at = graph.head("main").await.unwrap().unwrap().seq;

    let steps = graph.optimize(100).await.unwrap();
    assert!(!steps.is_empty());
    assert!(steps.iter().all(|c| c.kind == CommitKind::Maintain && c.maintenance.is_some()), "{steps:?}");
    assert!(steps.iter().all(|c| c.counts.is_empty() && c.batch_key.is_none()));
    assert!(graph.maintain_step().await.unwrap().is_none(), "optimize ran until nothing was left");
    let (fragments, indexes) = layout(&graph, TableKind::Node, "Person").await;
    assert!(fragments < 8, "small fragments compacted: {fragments}");
    assert_eq!(indexes, ["og_age_idx", "og_email_idx", "og_id_idx"], "the checks' indexes and the declared @index");
    let (_, edge_indexes) = layout(&graph, TableKind::Edge, "Knows").await;
    assert_eq!(edge_indexes, ["og_dst_idx", "og_id_idx", "og_src_idx"]);
    // The same rows, and the commit before maintenance still reads as it was.
    assert_eq!(export(&graph, "main", None).await, before);
    assert_eq!(export(&graph, "main", Some(loaded_at)).await, before);
    // Loads go on as before on the new layout.
    load(&graph, "main", Mode::Append, &person("Late", 3)).await.unwrap();
    assert_eq!(counts(&graph, "main").await["Person"], 12 * 40 + 2);
    assert_heads_published(&graph).await;
}

/// A step crashed (a panic: no cleanup) after its Lance commit or after its
/// publish: every commit stays readable at its pins, the data is unchanged,
/// and the next writer settles the table and goes on.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_inside_a_maintenance_step_loses_nothing() {
    let scenario = fail::FailScenario::setup();
    for point in ["after-maintain-commit", "after-maintain-publish"] {
        let place = place().await;
        let graph = Arc::new(init(&place).await);
        for n in 1..=3 {
            load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
        }
        let before = export(&graph, "main", None).await;
        let log_before = graph.log("main").await.unwrap();
        fail::cfg(point, "panic").unwrap();
        let crashing = graph.clone();
        let crashed = tokio::spawn(async move { crashing.maintain_step().await }).await;
        fail::remove(point);
        assert!(crashed.is_err(), "{point}: the step must have crashed");

        let survivor = reopen(&place).await;
        survivor.recover_with_wait(Duration::from_secs(10)).await.unwrap();
        assert_heads_published(&survivor).await;
        assert_eq!(export(&survivor, "main", None).await, before, "{point}");
        for commit in &log_before {
            assert_eq!(
                export(&survivor, "main", Some(commit.seq)).await,
                export(&graph, "main", Some(commit.seq)).await,
                "{point}: commit {} reads as before",
                commit.seq
            );
        }
        let published = survivor.log("main").await.unwrap().len() - log_before.len();
        assert_eq!(published, usize::from(point == "after-maintain-publish"), "{point}");
        survivor.optimize(100).await.unwrap();
        load(&survivor, "main", Mode::Merge, &numbered_batch(9)).await.unwrap();
        assert_eq!(people_per_batch(&survivor).await.len(), 4, "{point}");
        assert_heads_published(&survivor).await;
    }
    scenario.teardown();
}

/// The server maintains graphs in the background, on a thread of its own at
/// `MAINTENANCE_NICE`: after loads over HTTP, `maintain` commits appear
/// without any request asking for them, and the loads' rows are all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_maintains_loaded_graphs_in_the_background() {
    // Its maintenance steps must not pass another test's failpoints.
    let _serial = fail::FailScenario::setup();
    let mut s = start(omnigraph_host::auth::Auth::Open, |c| c.maintenance_interval = Some(Duration::from_millis(200))).await;
    let client = reqwest::Client::new();
    for n in 1..=3 {
        let r = client
            .post(format!("{}/graphs/g/load/ndjson", s.url))
            .header("content-type", "application/x-ndjson")
            .body(numbered_batch(n))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let mut waited = 0;
    let maintained = loop {
        let log: serde_json::Value = client.get(format!("{}/graphs/g/commits", s.url)).send().await.unwrap().json().await.unwrap();
        let steps: Vec<_> = log["commits"].as_array().unwrap().iter().filter(|c| c["kind"] == "maintain").cloned().collect();
        if !steps.is_empty() {
            break steps;
        }
        waited += 1;
        assert!(waited < 100, "no maintenance within 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(maintained.iter().all(|c| c["actor"] == "maintenance" && c["maintenance"].is_string()), "{maintained:?}");
    // On a thread of its own that yields the cores to loads.
    #[cfg(target_os = "linux")]
    {
        let nices = maintenance_thread_nices();
        assert!(!nices.is_empty() && nices.iter().all(|&n| n == omnigraph_host::limits::MAINTENANCE_NICE as i64), "{nices:?}");
    }
    let metrics = client.get(format!("{}/metrics", s.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l.starts_with("omnigraph_maintenance_steps_total ") && !l.ends_with(" 0")), "{metrics}");
    // Stopped, the server has finished any step it was in.
    s.shut_down().await;
    let graph = reopen(&s.place.child("g")).await;
    assert_eq!(people_per_batch(&graph).await.len(), 3);
    assert_heads_published(&graph).await;
}

/// The nice value of every thread of this process named `maintenance`
/// (field 19 of `/proc/self/task/*/stat`).
#[cfg(target_os = "linux")]
fn maintenance_thread_nices() -> Vec<i64> {
    let mut nices = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let (Ok(comm), Ok(stat)) = (std::fs::read_to_string(task.path().join("comm")), std::fs::read_to_string(task.path().join("stat"))) else {
            continue;
        };
        if comm.trim() == "maintenance" {
            let after_name = &stat[stat.rfind(')').unwrap() + 1..];
            nices.push(after_name.split_whitespace().nth(16).unwrap().parse().unwrap());
        }
    }
    nices
}

/// A server shut down while a maintenance step has committed its table
/// version but not yet published it finishes the step before it stops:
/// no table is left above its published version.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_shut_down_mid_step_finishes_the_step() {
    let scenario = fail::FailScenario::setup();
    // Loaded without a server: its indexes are still to be built.
    let place = place().await;
    let graph = init(&place.child("g")).await;
    for n in 1..=3 {
        load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
    }
    let (in_step, step_reached) = std::sync::mpsc::channel();
    let in_step = std::sync::Mutex::new(Some(in_step));
    fail::cfg_callback("after-maintain-commit", move || {
        if let Some(in_step) = in_step.lock().unwrap().take() {
            in_step.send(()).unwrap();
            // The shutdown arrives while the step is here.
            std::thread::sleep(Duration::from_millis(1_000));
        }
    })
    .unwrap();
    let mut s = start_at(place, omnigraph_host::auth::Auth::Open, |c| {
        c.maintenance_interval = Some(Duration::from_millis(100))
    })
    .await;
    // The first request opens the graph, which maintenance then finds due.
    let r = reqwest::get(format!("{}/graphs/g/commits", s.url)).await.unwrap();
    assert_eq!(r.status(), 200);
    tokio::task::spawn_blocking(move || step_reached.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("a maintenance step within 20 s");
    s.shut_down().await;
    let graph = reopen(&s.place.child("g")).await;
    let log = graph.log("main").await.unwrap();
    assert!(log.iter().any(|c| c.kind == CommitKind::Maintain), "the step was published");
    assert_eq!(people_per_batch(&graph).await.len(), 3);
    assert_heads_published(&graph).await;
    scenario.teardown();
}

/// `omnigraph-host optimize` SIGKILLed in the middle of a step (its table
/// version committed, its `maintain` commit not published): every commit
/// still reads as before, the next writer settles the table, and a second
/// `optimize` finishes the work.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimize_killed_mid_step_loses_nothing() {
    let place = place().await;
    let graph = init(&place).await;
    for n in 1..=3 {
        load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
    }
    let before: Vec<(u64, String)> = {
        let mut out = Vec::new();
        for commit in graph.log("main").await.unwrap() {
            out.push((commit.seq, export(&graph, "main", Some(commit.seq)).await));
        }
        out
    };
    let head = graph.head("main").await.unwrap().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_omnigraph-host"));
    cmd.arg("optimize")
        .args(place.cli_args())
        .env("OMNIGRAPH_LEASE_TTL_MS", lease_ttl_ms().to_string())
        .env("FAILPOINTS", "after-maintain-commit=sleep(30000)")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    place.apply_env(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    // The first step (an index, on whichever table comes first) has
    // committed its table version: some table's Lance head is above its pin.
    let mut waited = 0;
    loop {
        let mut above = false;
        for def in &graph.schema().types {
            // A fresh root each time: a root's Lance session may cache what it read.
            let latest = tables::latest_on(&place.root(), &table_path(def.kind, &def.name), None).await.unwrap().unwrap();
            above |= latest.version().version > head.tables[&def.name].version;
        }
        if above {
            break;
        }
        waited += 1;
        assert!(waited < 600, "optimize never reached its first commit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap(); // SIGKILL, lease held
    child.wait().unwrap();

    let survivor = reopen(&place).await;
    survivor.recover_with_wait(Duration::from_secs(30)).await.unwrap();
    assert_heads_published(&survivor).await;
    assert_eq!(survivor.head("main").await.unwrap().unwrap().seq, head.seq, "the killed step published nothing");
    for (seq, text) in &before {
        assert_eq!(&export(&survivor, "main", Some(*seq)).await, text, "commit {seq}");
    }
    let steps = survivor.optimize(100).await.unwrap();
    assert!(!steps.is_empty());
    let (_, indexes) = layout(&survivor, TableKind::Node, "Person").await;
    assert!(indexes.contains(&"og_id_idx".to_owned()), "{indexes:?}");
    assert_eq!(export(&survivor, "main", None).await, before[0].1);
}

/// An index fold reads the whole index, so it is built without the writer
/// lock: a load commits while the fold is held at the point where it is
/// built but not committed, and the fold then lands on top of that load,
/// leaving every row findable through the index.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fold_is_built_without_the_lock_and_lands_on_top_of_loads() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = indexed_graph_of_one_person(&place).await;
    // More unindexed rows than MAX_UNINDEXED_ROWS, in batches of 8,192.
    let many = omnigraph_host::limits::MAX_UNINDEXED_ROWS as usize + 1;
    let ids: Vec<usize> = (0..many).collect();
    for chunk in ids.chunks(8_192) {
        let batch: String = chunk.iter().map(|i| person(&format!("p{i}"), 2)).collect();
        load(&graph, "main", Mode::Merge, &batch).await.unwrap();
    }
    // Their small fragments are compacted first, then the fold is due.
    let compacted = graph.maintain_step().await.unwrap().expect("a step");
    assert_eq!(compacted.maintenance.as_deref(), Some("compact small fragments"));

    step_built_while_a_load_commits(&graph, "fold new rows into og_id_idx").await;
    assert_eq!(counts(&graph, "main").await["Person"], many as u64 + 2);
    assert_ids_found(&graph).await;
    assert_heads_published(&graph).await;
    scenario.teardown();
}

/// A missing index reads its whole column (after an overwrite of a large
/// table, all of it), so it is built without the writer lock: a load
/// commits while the creation is held built but not committed, and the
/// index then lands on top of that load. It covers the rows of its snapshot
/// (the load's are folded in later) and every row is found.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_index_is_created_without_the_lock_and_lands_on_top_of_loads() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = Arc::new(init(&place).await);
    // Every table indexed; then an overwrite replaces Person's, indexes and all.
    graph.optimize(100).await.unwrap();
    let people: String = (0..100).map(|i| person(&format!("p{i}"), 2)).collect();
    load(&graph, "main", Mode::Overwrite, &format!("{}{people}", person("First", 1))).await.unwrap();

    step_built_while_a_load_commits(&graph, "create index og_id_idx").await;
    let head = graph.head("main").await.unwrap().unwrap();
    // Built on the snapshot before the load: the load's fragment is not covered.
    let ds = tables::open_pinned(graph.root(), &table_path(TableKind::Node, "Person"), &head.tables["Person"]).await.unwrap();
    let segments = tables::id_segments(&ds).await.unwrap();
    assert_eq!(segments.len(), 1);
    let covered = tables::covered_fragments(&segments);
    let uncovered = ds.get_fragments().iter().filter(|f| !covered.contains(f.id() as u32)).count();
    assert_eq!(uncovered, 1, "the load's fragment, written after the snapshot the index was built on");
    assert_ids_found(&graph).await;
    assert_ids_found(&reopen(&place).await).await;
    assert_heads_published(&graph).await;
    scenario.teardown();
}

/// A compaction rewrites rows, so it is built without the writer lock: a
/// load replaces rows of every fragment being rewritten while the step is
/// held between building and committing, and the compaction then lands on top of it
/// with those rows deleted from the new fragments too: every id once, with
/// the load's values. The new fragments' key runs are built with it.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compaction_is_built_without_the_lock_and_keeps_what_loads_replaced_meanwhile() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = indexed_graph_of_one_person(&place).await;
    // MIN_SMALL_FRAGMENTS small unindexed fragments: a compaction is due.
    let fragments = omnigraph_host::limits::MIN_SMALL_FRAGMENTS;
    for f in 0..fragments {
        let batch: String = (0..10).map(|i| person(&format!("p{f}-{i}"), 1)).collect();
        load(&graph, "main", Mode::Merge, &batch).await.unwrap();
    }
    // Row 5 of each already replaced before the snapshot: deleted there too.
    let earlier: String = (0..fragments).map(|f| person(&format!("p{f}-5"), 3)).collect();
    load(&graph, "main", Mode::Merge, &earlier).await.unwrap();
    let before = layout(&graph, TableKind::Node, "Person").await.0;
    graph.warm_key_runs().await.unwrap();

    let (step, release) = hold_a_step_once_prepared(&graph).await;
    // Rows 3 and 7 of every small fragment replaced, one new row.
    let replaced: String = (0..fragments).flat_map(|f| [3, 7].map(|i| person(&format!("p{f}-{i}"), 2))).chain([person("During", 2)]).collect();
    let during = tokio::time::timeout(Duration::from_secs(60), load(&graph, "main", Mode::Merge, &replaced)).await;
    release.send(()).unwrap();
    fail::remove("step-prepared");
    let receipt = during.expect("the load did not wait for the compaction").unwrap();
    assert_eq!(receipt.commit.unwrap().counts["Person"].updated, 2 * fragments as u64);

    let step = step.await.unwrap().unwrap().expect("a step");
    assert_eq!(step.maintenance.as_deref(), Some("compact small fragments"));
    assert_eq!(graph.commit_at("main", step.seq - 1).await.unwrap().kind, CommitKind::Load, "the compaction published after the load");
    assert!(layout(&graph, TableKind::Node, "Person").await.0 < before, "fragments were merged");
    // The compacted fragments' key runs were built with the compaction, so
    // the merges after its publish do not read them.
    assert_eq!(graph.warm_key_runs().await.unwrap(), 0, "a key run was missing after the compaction");
    assert_eq!(counts(&graph, "main").await["Person"], 1 + 10 * fragments as u64 + 1);
    let state = export(&graph, "main", None).await;
    for f in 0..fragments {
        for i in 0..10 {
            let age = match i {
                3 | 7 => 2,
                5 => 3,
                _ => 1,
            };
            let row = format!("\"data\":{{\"name\":\"p{f}-{i}\",\"age\":{age}}}");
            assert_eq!(state.matches(&format!("\"name\":\"p{f}-{i}\"")).count(), 1, "p{f}-{i} once");
            assert!(state.contains(&row), "{row}");
        }
    }
    assert_heads_published(&graph).await;
    scenario.teardown();
}

/// A step commits only onto the table it was built from: a compaction
/// built off the lock on main's Person is dropped when a multi-batch
/// overwrite replaced the table meanwhile, and every row the overwrite
/// wrote stays as it wrote it.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compaction_built_before_an_overwrite_is_dropped() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = indexed_graph_of_one_person(&place).await;
    for f in 0..omnigraph_host::limits::MIN_SMALL_FRAGMENTS {
        load(&graph, "main", Mode::Merge, &(0..10).map(|i| person(&format!("old{f}-{i}"), 1)).collect::<String>()).await.unwrap();
    }
    let (step, release) = hold_a_step_once_prepared(&graph).await;
    let base_seq = graph.create_work_branch("ow", "main", &["Person".into(), "Knows".into()], "tester").await.unwrap().parent.unwrap().seq;
    for f in 0..3 {
        load(&graph, "ow", Mode::Append, &(0..10).map(|i| person(&format!("new{f}-{i}"), 2)).collect::<String>()).await.unwrap();
    }
    let publish = omnigraph_host::OverwritePublish {
        branch: "main".into(),
        work: "ow".into(),
        base_seq,
        types: vec!["Person".into(), "Knows".into()],
        actor: "tester".into(),
        batch_key: None,
    };
    graph.publish_overwrite(publish).await.unwrap();
    release.send(()).unwrap();
    fail::remove("step-prepared");
    let step = step.await.unwrap().unwrap();
    assert!(step.as_ref().is_none_or(|c| c.maintenance.as_deref() != Some("compact small fragments")), "{step:?}");
    let state = export(&graph, "main", None).await;
    assert_eq!(state.lines().count(), 30, "{state}");
    for f in 0..3 {
        for i in 0..10 {
            assert!(state.contains(&format!("\"data\":{{\"name\":\"new{f}-{i}\",\"age\":2}}")), "new{f}-{i}: {state}");
        }
    }
    assert_heads_published(&graph).await;
    scenario.teardown();
}

/// The same when the branch a compaction was built on is deleted, created
/// again and loaded meanwhile: its new fragments carry the same ids as the
/// old ones, and the compaction must not put the old branch's rows in
/// their place.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compaction_built_before_its_branch_was_deleted_and_created_again_is_dropped() {
    let scenario = fail::FailScenario::setup();
    let place = place().await;
    let graph = indexed_graph_of_one_person(&place).await;
    let fragments = omnigraph_host::limits::MIN_SMALL_FRAGMENTS;
    let small = |name: &str, f: usize| (0..10).map(|i| person(&format!("{name}{f}-{i}"), 1)).collect::<String>();
    graph.create_branch("x", "main", "tester").await.unwrap();
    for f in 0..fragments {
        load(&graph, "x", Mode::Merge, &small("old", f)).await.unwrap();
    }
    let (step, release) = hold_a_step_once_prepared(&graph).await;
    graph.delete_branch("x", "tester").await.unwrap();
    graph.create_branch("x", "main", "tester").await.unwrap();
    for f in 0..fragments {
        load(&graph, "x", Mode::Merge, &small("new", f)).await.unwrap();
    }
    release.send(()).unwrap();
    fail::remove("step-prepared");
    step.await.unwrap().unwrap();
    let state = export(&graph, "x", None).await;
    assert!(!state.contains("\"name\":\"old"), "the deleted branch's rows came back: {state}");
    assert_eq!(state.lines().count(), 1 + 10 * fragments, "{state}");
    for f in 0..fragments {
        for i in 0..10 {
            assert_eq!(state.matches(&format!("\"name\":\"new{f}-{i}\"")).count(), 1, "new{f}-{i}");
        }
    }
    assert_heads_published(&graph).await;
    scenario.teardown();
}

/// Holds a maintenance step once it is built off the lock while a load of
/// `During` commits, then lets it finish: it must be the step `described`,
/// published after the load.
#[cfg(feature = "failpoints")]
async fn step_built_while_a_load_commits(graph: &Arc<Graph>, described: &str) {
    let (step, release) = hold_a_step_once_prepared(graph).await;
    let during = tokio::time::timeout(Duration::from_secs(60), load(graph, "main", Mode::Merge, &person("During", 3))).await;
    release.send(()).unwrap();
    fail::remove("step-prepared");
    during.expect("the load waited for the step").unwrap();
    let step = step.await.unwrap().unwrap().expect("a step");
    assert_eq!(step.maintenance.as_deref(), Some(described));
    let head = graph.head("main").await.unwrap().unwrap();
    assert_eq!(head.seq, step.seq, "the step published after the load");
    assert_eq!(graph.commit_at("main", step.seq - 1).await.unwrap().kind, CommitKind::Load);
}

/// Ids from before a step's snapshot (`First`, `p17`), and after it
/// (`During`) are all found: an append of them is refused for exactly those.
#[cfg(feature = "failpoints")]
async fn assert_ids_found(graph: &Graph) {
    let clash = format!("{}{}{}{}", person("First", 1), person("p17", 1), person("During", 1), person("fresh", 1));
    let refused = load(graph, "main", Mode::Append, &clash).await.unwrap_err();
    let omnigraph_host::EngineError::Rejected { conflicts, .. } = refused else { panic!("{refused:?}") };
    let mut ids: Vec<_> = conflicts.iter().map(|c| c.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["During", "First", "p17"]);
}

/// A graph whose Person table holds `First` and is indexed: the start of
/// both off-lock tests.
#[cfg(feature = "failpoints")]
async fn indexed_graph_of_one_person(place: &Place) -> Arc<Graph> {
    let graph = Arc::new(init(place).await);
    load(&graph, "main", Mode::Merge, &person("First", 1)).await.unwrap();
    graph.optimize(100).await.unwrap();
    graph
}

/// Starts a maintenance step and holds it at `step-prepared` (built off the
/// lock, not committed) until `release` is sent; returns once it is held.
/// The caller removes the failpoint after releasing it.
#[cfg(feature = "failpoints")]
async fn hold_a_step_once_prepared(
    graph: &Arc<Graph>,
) -> (tokio::task::JoinHandle<Result<Option<omnigraph_host::manifest::Commit>, omnigraph_host::EngineError>>, std::sync::mpsc::Sender<()>) {
    let (entered, held) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = std::sync::Mutex::new(released);
    let entered = std::sync::Mutex::new(entered);
    fail::cfg_callback("step-prepared", move || {
        entered.lock().unwrap().send(()).unwrap();
        released.lock().unwrap().recv().unwrap();
    })
    .unwrap();
    let maintaining = graph.clone();
    let step = tokio::spawn(async move { maintaining.maintain_step().await });
    tokio::task::spawn_blocking(move || held.recv_timeout(Duration::from_secs(120)).expect("the step was built"))
        .await
        .unwrap();
    (step, release)
}
