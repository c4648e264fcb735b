//! Concurrent writers: two processes and several tasks loading into one
//! branch at once (the lease and the graph-commit compare-and-swap serialize
//! them), and racing appends of one id.

mod common;

use std::process::{Command, Stdio};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_and_many_tasks_load_one_branch_at_once() {
    let dir = place().await;
    let graph = std::sync::Arc::new(init(&dir).await);
    let files = tempfile::tempdir().unwrap();

    // Two processes, three batches each, plus four in-process tasks.
    let mut children = Vec::new();
    for process in 0..2 {
        let mut script = String::new();
        for k in 0..3 {
            let n = 10 + process * 3 + k;
            let file = files.path().join(format!("{n}.ndjson"));
            std::fs::write(&file, numbered_batch(n)).unwrap();
            script.push_str(&format!(
                "{BIN} load {} --lease-ttl-ms 20000 {} >/dev/null || exit 1\n",
                dir.cli_args().join(" "),
                file.display()
            ));
        }
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &script]).stderr(Stdio::piped());
        dir.apply_env(&mut cmd);
        children.push(cmd.spawn().unwrap());
    }
    let mut tasks = Vec::new();
    for n in 0..4 {
        let graph = graph.clone();
        tasks.push(tokio::spawn(async move { load(&graph, "main", omnigraph_validate_wasm::Mode::Merge, &numbered_batch(n)).await }));
    }
    for task in tasks {
        task.await.unwrap().expect("in-process load");
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let per = people_per_batch(&graph).await;
    assert_eq!(per.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 10, 11, 12, 13, 14, 15]);
    assert!(per.values().all(|&n| n == 40), "{per:?}");
    assert_eq!(graph.log("main").await.unwrap().len(), 11, "one commit per load, plus init");
    assert_heads_published(&graph).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_appends_of_one_id_commit_once() {
    let dir = place().await;
    let first = std::sync::Arc::new(init(&dir).await);
    let second = std::sync::Arc::new(reopen(&dir).await);
    let mut tasks = Vec::new();
    for (n, graph) in [first.clone(), second.clone(), first.clone(), second.clone()].into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            load(&graph, "main", omnigraph_validate_wasm::Mode::Append, &person("Same", n as u32)).await
        }));
    }
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => won += 1,
            Err(omnigraph_host::EngineError::Rejected { conflicts, .. }) => assert_eq!(conflicts[0].code, "key_conflict"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(counts(&first, "main").await["Person"], 1);
}
