//! The `omnigraph-host` binary: offline validation, and a multi-batch load
//! killed mid-way and resumed (nothing lost, nothing repeated).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");
const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples");

#[test]
fn validate_prints_file_lines_and_codes_and_exits_by_verdict() {
    let run = |file: &str, json: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["validate", "--schema", &format!("{SAMPLES}/people.pg"), &format!("{SAMPLES}/{file}")]);
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
    let load = |resume: bool, batch_lines: &str| {
        let mut cmd = Command::new(BIN);
        cmd.arg("load").args(dir.cli_args()).args(["--batch-lines", batch_lines, file.to_str().unwrap()])
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
    loop {
        let progress: Option<serde_json::Value> =
            std::fs::read(&checkpoint).ok().and_then(|b| serde_json::from_slice(&b).ok());
        if progress.is_some_and(|p| p["next_batch"].as_u64().unwrap() >= 3) {
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
    assert_eq!(log.len(), batches + 1, "one commit per batch, plus init");
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
                .args(["load", "--server", &url, "--graph", "g", "--token", &token, "--batch-lines", "50"])
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
    assert_eq!(log.len(), 4, "three batches, three commits");
    assert!(log.iter().take(3).all(|c| c.actor == "cli" && c.batch_key.is_some()));
    assert_eq!(counts(&graph, "main").await["Knows"], 30);
}
