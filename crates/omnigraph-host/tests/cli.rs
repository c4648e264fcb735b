//! The `omnigraph-host` binary: offline validation (its output and exit
//! codes), a multi-batch load killed mid-way and resumed (nothing lost,
//! nothing repeated), `log`, `branch list|create|delete`, and `recover` after
//! a crashed load (with `--features failpoints`); only commands that validate
//! compile the artifact.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
#[cfg(feature = "failpoints")]
use omnigraph_validate_wasm::Mode;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

#[test]
fn validate_prints_file_lines_and_codes_and_exits_by_verdict() {
    let run = |file: &str, json: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["validate", "--schema", &sample("people.pg"), &sample(file)]);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let good = run("people.ndjson", false);
    assert_eq!(good.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&good.stdout).contains("people.ndjson: valid (5 records)"));
    let bad = run("people-bad.ndjson", false);
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8_lossy(&bad.stdout);
    assert!(text.lines().any(|l| l.contains("people-bad.ndjson:2: unknown_type:")), "{text}");
    assert!(text.contains("invalid ("), "{text}");
    let json = run("people-bad.ndjson", true);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!((json.status.code(), report["ok"].as_bool()), (Some(1), Some(false)));
    let missing = Command::new(BIN).args(["validate", "--schema", "/nonexistent.pg", "x"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2), "operational errors exit 2");
}

/// Batch `n` of the big file: 40 people and 10 edges without ids (a repeated
/// batch would add its edges again under new ULIDs).
fn file_batch(n: usize) -> String {
    let mut text = String::new();
    for i in 0..40 {
        text.push_str(&person(&format!("f{n}-{i}"), 1));
    }
    for i in 0..10 {
        text.push_str(&format!("{{\"edge\":\"Knows\",\"from\":\"f{n}-{i}\",\"to\":\"f{n}-{}\"}}\n", i + 1));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_multi_batch_load_resumes_without_loss_or_repeats() {
    let dir = place().await;
    drop(init(&dir).await);
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("big.ndjson");
    let batches = 24;
    std::fs::write(&file, (0..batches).map(file_batch).collect::<String>()).unwrap();
    let checkpoint = files.path().join("big.ndjson.omnigraph-checkpoint");
    let load = |resume: bool, batch_rows: &str| {
        let mut cmd = Command::new(BIN);
        cmd.arg("load").args(dir.cli_args()).args(["--batch-rows", batch_rows, file.to_str().unwrap()])
            .env("OMNIGRAPH_LEASE_TTL_MS", lease_ttl_ms().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        dir.apply_env(&mut cmd);
        if resume {
            cmd.arg("--resume");
        }
        cmd
    };

    let mut child = load(false, "50").spawn().unwrap();
    let started = Instant::now();
    let file_len = std::fs::metadata(&file).unwrap().len();
    loop {
        let progress: Option<serde_json::Value> =
            std::fs::read(&checkpoint).ok().and_then(|b| serde_json::from_slice(&b).ok());
        // Killed a few batches into the nodes pass (the checkpoint holds the
        // committed prefix of the pass as a byte offset).
        if progress.is_some_and(|p| p["next"]["offset"].as_u64().unwrap() >= file_len / 8) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the load never got going");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // Other bounds on the resumed run do not shift batch boundaries: the
    // checkpoint's are used.
    let out = load(true, "7").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!checkpoint.exists(), "a finished load removes its checkpoint");
    let graph = reopen(&dir).await;
    let rows = counts(&graph, "main").await;
    assert_eq!((rows["Person"], rows["Knows"]), (40 * batches as u64, 10 * batches as u64));
    let log = graph.log("main").await.unwrap();
    use omnigraph_host::manifest::CommitKind;
    let count = |kind: CommitKind| log.iter().filter(|c| c.kind == kind).count();
    // 960 people in batches of 50, then 240 edges in batches of 50. A kill
    // that lands between a batch's recovery record and its publish leaves
    // that batch to be rolled back (a `rollback` marker) and loaded again.
    assert_eq!((count(CommitKind::Init), count(CommitKind::Load)), (1, 20 + 5), "one commit per batch, plus init");
    assert!(count(CommitKind::Rollback) <= 1, "only the batch the kill interrupted is rolled back");
    assert!(count(CommitKind::Maintain) > 0, "the CLI maintained the local graph after its run");
    assert_heads_published(&graph).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_sends_batches_to_a_server_with_a_token() {
    let config = format!(
        "[[token]]\nactor = \"cli\"\nsha256 = \"{}\"\ngraphs = {{ g = [\"read\", \"change\"] }}\n",
        omnigraph_host::auth::sha256_hex(b"t0ken")
    );
    let s = start(omnigraph_host::auth::Auth::from_toml(&config).unwrap(), |_| {}).await;
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("f.ndjson");
    std::fs::write(&file, (0..3).map(file_batch).collect::<String>()).unwrap();
    let run = |token: &str| {
        let (url, file, token) = (s.url.clone(), file.clone(), token.to_owned());
        tokio::task::spawn_blocking(move || {
            Command::new(BIN)
                .args(["load", "--server", &url, "--graph", "g", "--token", &token, "--batch-rows", "50"])
                .arg(&file)
                .output()
                .unwrap()
        })
    };
    let denied = run("wrong").await.unwrap();
    assert_eq!(denied.status.code(), Some(2), "{}", String::from_utf8_lossy(&denied.stderr));
    let out = run("t0ken").await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let graph = reopen(&s.place.child("g")).await;
    let log = graph.log("main").await.unwrap();
    assert_eq!(log.len(), 5, "120 people in three batches of 50, then 30 edges in one, plus init");
    assert!(log.iter().take(4).all(|c| c.actor == "cli" && c.batch_key.is_some()));
    assert_eq!(counts(&graph, "main").await["Knows"], 30);
}

/// Runs the binary on `place` (`--root` and, on S3, its flags and credentials
/// follow the subcommand words): exit code, stdout, stderr.
fn host(place: &Place, words: &[&str], rest: &[&str]) -> (Option<i32>, String, String) {
    host_with_env(place, words, rest, &[])
}

fn host_with_env(place: &Place, words: &[&str], rest: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(words).args(place.cli_args()).args(rest).env("OMNIGRAPH_LEASE_TTL_MS", lease_ttl_ms().to_string());
    for (k, v) in env {
        cmd.env(k, v);
    }
    place.apply_env(&mut cmd);
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs the binary and demands exit 0; its stdout as JSON lines.
fn host_json_lines(place: &Place, words: &[&str], rest: &[&str]) -> Vec<serde_json::Value> {
    let (code, stdout, stderr) = host(place, words, rest);
    assert_eq!(code, Some(0), "{words:?} {rest:?}: {stderr}");
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{words:?}: not a JSON line ({e}): {l}"))).collect()
}

fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The names `branch list` prints, sorted.
fn listed_branches(place: &Place) -> Vec<String> {
    let mut names: Vec<String> =
        host_json_lines(place, &["branch"], &["list"]).iter().map(|h| h["branch"].as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

#[test]
fn log_prints_every_commit_newest_first_with_seq_and_parent() {
    let dir = tokio::runtime::Runtime::new().unwrap().block_on(place());
    let files = tempfile::tempdir().unwrap();
    let (code, _, stderr) = host(&dir, &["init"], &[&sample("people.pg")]);
    assert_eq!(code, Some(0), "{stderr}");
    let loads = 3;
    for n in 0..loads {
        let file = write_file(&files, &format!("{n}.ndjson"), &format!("{}{}", person(&format!("p{n}"), n), person("Shared", n)));
        let (code, _, stderr) = host(&dir, &["load"], &["--actor", &format!("loader-{n}"), &file]);
        assert_eq!(code, Some(0), "load {n}: {stderr}");
    }

    let log = host_json_lines(&dir, &["log"], &[]);
    assert_eq!(log.len(), loads as usize + 1, "one commit per load, plus init: {log:?}");
    let seqs: Vec<u64> = log.iter().map(|c| c["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..=loads as u64).rev().collect::<Vec<_>>(), "newest first");
    for pair in log.windows(2) {
        let (newer, older) = (&pair[0], &pair[1]);
        assert_eq!(newer["branch"], "main");
        assert_eq!(newer["kind"], "load");
        assert_eq!(newer["parent_id"], older["id"], "each commit's parent is the next line: {newer}");
        assert_eq!(newer["parent"], serde_json::json!({"branch": "main", "seq": older["seq"]}));
    }
    for (i, commit) in log.iter().take(loads as usize).enumerate() {
        assert_eq!(commit["actor"], format!("loader-{}", loads as usize - 1 - i), "the loads in order, newest first");
        assert_eq!(commit["counts"]["Person"]["inserted"], if i == loads as usize - 1 { 2 } else { 1 }, "{commit}");
    }
    let init = log.last().unwrap();
    assert_eq!((init["kind"].as_str(), init["seq"].as_u64(), &init["parent"]), (Some("init"), Some(0), &serde_json::Value::Null));
    let ids: std::collections::BTreeSet<&str> = log.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), log.len(), "commit ids are unique");

    // A fork's log goes back to the fork commit, whose parent is the base's head.
    assert_eq!(host(&dir, &["branch"], &["create", "side"]).0, Some(0));
    let side_file = write_file(&files, "side.ndjson", &person("OnlySide", 1));
    assert_eq!(host(&dir, &["load"], &["--branch", "side", &side_file]).0, Some(0));
    let side = host_json_lines(&dir, &["log"], &["--branch", "side"]);
    let kinds: Vec<&str> = side.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["load", "fork"], "{side:?}");
    assert_eq!(side[1]["parent"], serde_json::json!({"branch": "main", "seq": loads}));
    assert_eq!(side[1]["parent_id"], log[0]["id"]);
    assert_eq!(host_json_lines(&dir, &["log"], &[]), log, "main's log is unchanged by the branch");

    let (code, stdout, stderr) = host(&dir, &["log"], &["--branch", "nope"]);
    assert_eq!((code, stdout.as_str()), (Some(2), ""), "a missing branch is an operational error");
    assert!(stderr.contains("branch_not_found"), "{stderr}");
}

#[test]
fn branch_list_create_and_delete() {
    let dir = tokio::runtime::Runtime::new().unwrap().block_on(place());
    let files = tempfile::tempdir().unwrap();
    assert_eq!(host(&dir, &["init"], &[&sample("people.pg")]).0, Some(0));
    let file = write_file(&files, "a.ndjson", &person("A", 1));
    assert_eq!(host(&dir, &["load"], &[&file]).0, Some(0));
    assert_eq!(listed_branches(&dir), ["main"]);
    let main_head = host_json_lines(&dir, &["branch"], &["list"]).remove(0);
    assert_eq!(main_head["seq"], 1, "list shows each branch's head: {main_head}");

    // create (from main by default): printed, then listed.
    let created = host_json_lines(&dir, &["branch"], &["create", "side"]);
    assert_eq!(created.len(), 1);
    assert_eq!((created[0]["branch"].as_str(), created[0]["kind"].as_str()), (Some("side"), Some("fork")));
    assert_eq!(created[0]["parent_id"], main_head["id"]);
    assert_eq!(listed_branches(&dir), ["main", "side"]);
    let from_side = host_json_lines(&dir, &["branch"], &["create", "deeper", "--from", "side"]);
    assert_eq!(from_side[0]["parent"], serde_json::json!({"branch": "side", "seq": created[0]["seq"]}));
    assert_eq!(listed_branches(&dir), ["deeper", "main", "side"]);

    // Refusals: exit 2, nothing printed, nothing changed.
    let refused = |rest: &[&str], code: &str| {
        let (exit, stdout, stderr) = host(&dir, &["branch"], rest);
        assert_eq!((exit, stdout.as_str()), (Some(2), ""), "{rest:?}: {stderr}");
        assert!(stderr.contains(code), "{rest:?}: expected {code}: {stderr}");
        stderr
    };
    refused(&["create", "side"], "branch_exists");
    refused(&["create", "main", "--from", "side"], "branch_exists");
    refused(&["create", "other", "--from", "missing"], "branch_not_found");
    refused(&["create", "../escape"], "invalid_branch_name");
    let main_refusal = refused(&["delete", "main"], "main_branch_protected");
    assert!(main_refusal.contains("\"main\" cannot be deleted"), "{main_refusal}");
    refused(&["delete", "missing"], "branch_not_found");
    assert_eq!(listed_branches(&dir), ["deeper", "main", "side"]);

    // delete: gone from the list and from reads; other branches keep their data.
    let tombstone = host_json_lines(&dir, &["branch"], &["delete", "side"]);
    assert_eq!((tombstone[0]["branch"].as_str(), tombstone[0]["kind"].as_str()), (Some("side"), Some("delete")));
    assert_eq!(listed_branches(&dir), ["deeper", "main"]);
    assert_eq!(host(&dir, &["log"], &["--branch", "side"]).0, Some(2));
    refused(&["delete", "side"], "branch_not_found");
    let (code, exported, stderr) = host(&dir, &["export"], &["--branch", "deeper"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(exported.contains("\"id\":\"A\""), "a branch forked from a deleted one still reads: {exported}");

    // A deleted name can be created again; its chain continues.
    let again = host_json_lines(&dir, &["branch"], &["create", "side"]);
    assert!(again[0]["seq"].as_u64() > tombstone[0]["seq"].as_u64(), "{again:?} after {tombstone:?}");
    assert_eq!(listed_branches(&dir), ["deeper", "main", "side"]);
}

/// `recover` finishes a load a crash interrupted: a load process is stopped
/// dead (a failpoint panics: no cleanup runs, the lease and the recovery
/// record stay) and `recover` rolls it back or forward; the data is then
/// exactly the old or the new state and the graph takes loads again.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_rolls_back_or_forward_a_crashed_load() {
    // `recover` waits out the crashed writer's lease, then reports what it
    // did (it does not let opening the graph recover first and hide that).
    let crashed_lease_ms = if on_s3() { 12_000 } else { 1_500 };
    let cases = [
        // Some tables committed, the commit not published: undone.
        ("after-table-commit", "rolled_back", false),
        // Every table committed, the commit not published: published.
        ("after-sync", "rolled_forward", true),
    ];
    for (point, outcome, new_state) in cases {
        let dir = place().await;
        let graph = init(&dir).await;
        load(&graph, "main", Mode::Merge, &format!("{}{}{}", person("A", 1), person("B", 2), knows("k1", "A", "B"))).await.unwrap();
        drop(graph);
        let old = export(&reopen(&dir).await, "main", None).await;
        let files = tempfile::tempdir().unwrap();
        // Three tables, so a crash after the first table commit leaves the others uncommitted.
        let batch = format!("{}{}{}{}", person("A", 50), person("N", 1), "{\"type\":\"Company\",\"data\":{\"name\":\"Acme\"}}\n", knows("k2", "N", "A"));
        let file = write_file(&files, "crash.ndjson", &batch);

        let crash = format!("{point}=panic");
        let lease = crashed_lease_ms.to_string();
        let (code, _, stderr) =
            host_with_env(&dir, &["load"], &["--lease-ttl-ms", &lease, &file], &[("FAILPOINTS", crash.as_str())]);
        assert_eq!(code, Some(101), "{point}: the load must have crashed (a panic): {stderr}");
        assert_eq!(recovery_records(&dir.root()).await, 1, "{point}: the crash left a recovery record");

        let started = Instant::now();
        let (code, stdout, stderr) = host(&dir, &["recover"], &[]);
        assert_eq!(code, Some(0), "{point}: {stderr}");
        let reported: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{point}: {e}: {stdout}"));
        let expected = serde_json::json!({"outcome": outcome, "branch": "main", "seq": 2});
        assert_eq!(reported, expected, "{point} ({} ms after the crash): {stderr}", started.elapsed().as_millis());
        assert_eq!(recovery_records(&dir.root()).await, 0, "{point}: recover removes the record");

        let survivor = reopen(&dir).await;
        let state = export(&survivor, "main", None).await;
        if new_state {
            assert!(state.contains("\"id\":\"N\"") && state.contains("\"k2\"") && state.contains("Acme"), "{point}: {state}");
            assert!(state.contains("\"age\":50"), "{point}: A's update landed too: {state}");
        } else {
            assert_eq!(state, old, "{point}: expected the old state");
        }
        assert_heads_published(&survivor).await;
        let log = host_json_lines(&dir, &["log"], &[]);
        // A rolled-back load's sequence number is taken by a rollback marker.
        let kind = if new_state { "load" } else { "rollback" };
        assert_eq!((log[0]["seq"].as_u64(), log[0]["kind"].as_str()), (Some(2), Some(kind)), "{point}: {log:?}");
        drop(survivor);

        // A second `recover` has nothing to do; the graph takes the load again.
        let (code, stdout, stderr) = host(&dir, &["recover"], &[]);
        assert!(code == Some(0) && stdout.trim() == r#"{"outcome":"nothing"}"#, "{point}: {stdout} {stderr}");
        let (code, _, stderr) = host(&dir, &["load"], &[&file]);
        assert_eq!(code, Some(0), "{point}: {stderr}");
        let graph = reopen(&dir).await;
        let rows = counts(&graph, "main").await;
        assert_eq!((rows["Person"], rows["Company"], rows["Knows"]), (3, 1, 2), "{point}");
        assert_heads_published(&graph).await;
    }
}

/// The error contract (SPEC §4.7) from the CLI: a load that fails after its
/// recovery record exits 2 with `recovery_required` (never a claimed
/// rollback), and the graph holds nothing of it; a load whose record cannot
/// be deleted after the publish still succeeds.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_loads_keep_the_recovery_contract() {
    let dir = place().await;
    let graph = init(&dir).await;
    load(&graph, "main", Mode::Merge, &person("A", 1)).await.unwrap();
    drop(graph);
    let files = tempfile::tempdir().unwrap();
    let file = write_file(&files, "b.ndjson", &format!("{}{}", person("B", 2), knows("k1", "A", "B")));

    let (code, _, stderr) = host_with_env(&dir, &["load"], &[&file], &[("FAILPOINTS", "table-commit-error=return")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error [recovery_required]") && stderr.contains("nothing is claimed"), "{stderr}");
    assert!(!stderr.contains("rolled back"), "{stderr}");
    let graph = reopen(&dir).await;
    assert_eq!(counts(&graph, "main").await["Person"], 1, "nothing of the failed load");
    assert_eq!(recovery_records(graph.root()).await, 0, "the CLI finished it while it held the lease");
    drop(graph);

    let (code, _, stderr) = host_with_env(&dir, &["load"], &[&file], &[("FAILPOINTS", "record-delete-error=return")]);
    assert_eq!(code, Some(0), "housekeeping never fails a committed load: {stderr}");
    assert!(stderr.contains("could not delete recovery record"), "the failure is logged: {stderr}");
    let graph = reopen(&dir).await;
    assert_eq!(counts(&graph, "main").await["Person"], 2);
    assert_eq!(recovery_records(graph.root()).await, 0, "opening the graph recognised the load as published");
    let kinds: Vec<_> = graph.log("main").await.unwrap().iter().map(|c| c.kind).collect();
    assert_eq!(kinds.len(), 4, "init, A, the rollback marker, B: {kinds:?}");
}

/// Only commands that validate compile the validator artifact; the first
/// one fills the module cache and later processes use it.
#[test]
fn only_commands_that_validate_compile_the_validator() {
    let dir = tokio::runtime::Runtime::new().unwrap().block_on(place());
    let cache = tempfile::tempdir().unwrap();
    let modules = cache.path().join("modules");
    let env = [("OMNIGRAPH_MODULE_CACHE", modules.to_str().unwrap())];
    let compiled = || std::fs::read_dir(&modules).map_or(0, |d| d.count());
    let (code, _, stderr) = host_with_env(&dir, &["init"], &[&sample("people.pg")], &env);
    assert_eq!(code, Some(0), "{stderr}");
    for (words, rest) in [(&["log"][..], &[][..]), (&["branch"], &["list"]), (&["export"], &[])] {
        let (code, _, stderr) = host_with_env(&dir, words, rest, &env);
        assert_eq!(code, Some(0), "{words:?}: {stderr}");
        assert_eq!(compiled(), 0, "{words:?} compiled the validator");
    }
    for _ in 0..2 {
        let out = Command::new(BIN)
            .args(["validate", "--schema", &sample("people.pg"), &sample("people.ndjson")])
            .env("OMNIGRAPH_MODULE_CACHE", &modules)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(compiled(), 1, "one compiled module, kept");
    }
}
