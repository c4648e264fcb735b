//! Loads killed with SIGKILL at random instants: every load is all or
//! nothing afterwards. Run with `--features failpoints`: the child processes
//! widen their commit window with injected delays so kills land inside it,
//! and every fourth run is killed at a known point inside it (its recovery
//! record written, its tables not yet committed), so the runs are sure to
//! have killed loads mid-commit.
#![cfg(feature = "failpoints")]

mod common;

use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");

fn load_command(place: &Place, file: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    // Widen the commit protocol's window (the binary is built with the
    // `failpoints` feature for tests), so random kills land inside it.
    cmd.env("FAILPOINTS", "after-record=sleep(100);after-table-commit=sleep(100);after-sync=sleep(50)");
    cmd.arg("load").args(place.cli_args()).args(["--lease-ttl-ms", &lease_ttl_ms().to_string(), file.to_str().unwrap()]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    place.apply_env(&mut cmd);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_killed_at_random_instants_leave_all_or_nothing() {
    let dir = place().await;
    let graph = init(&dir).await;
    drop(graph);
    let files = tempfile::tempdir().unwrap();
    let random = RandomState::new();

    // How long a process takes to reach the commit (start-up, validation,
    // lease: a load into a missing branch stops there) and to finish a load:
    // the kills are spread over the commit between the two.
    let first = files.path().join("0.ndjson");
    std::fs::write(&first, numbered_batch(0)).unwrap();
    let started = Instant::now();
    let out = load_command(&dir, &first).args(["--branch", "missing"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let ready = started.elapsed().as_millis() as u64;
    let started = Instant::now();
    let out = load_command(&dir, &first).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done = started.elapsed().as_millis() as u64;
    let (from, span) = (ready * 9 / 10, (done + done / 10).saturating_sub(ready * 9 / 10).max(1));
    eprintln!("start-up to the lease: {ready} ms; whole load: {done} ms; kills at {from}..{} ms", from + span);

    // Every fourth is held inside the commit: 5 of 20, or 2 of 8 on S3.
    let runs = fault_runs(20, 8);
    let (mut landed, mut recovered, mut placed) = (0, 0, 0);
    for n in 1..=runs {
        let file = files.path().join(format!("{n}.ndjson"));
        std::fs::write(&file, numbered_batch(n)).unwrap();
        let mut command = load_command(&dir, &file);
        let at_record = n % 4 == 0;
        if at_record {
            // Held after its recovery record until killed.
            command.env("FAILPOINTS", "after-record=sleep(60000)");
        }
        let mut child = command.spawn().unwrap();
        if at_record {
            let root = dir.root();
            let deadline = Instant::now() + Duration::from_secs(60);
            while recovery_records(&root).await == 0 {
                assert!(Instant::now() < deadline, "run {n}: the load never wrote its recovery record");
                assert!(child.try_wait().unwrap().is_none(), "run {n}: the load ended before its recovery record");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            placed += 1;
        } else {
            let delay = from + random.hash_one(n) % span;
            std::thread::sleep(Duration::from_millis(delay));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let survivor = reopen(&dir).await;
        recovered += (recovery_records(survivor.root()).await > 0) as usize;
        survivor.recover_with_wait(Duration::from_secs(10)).await.unwrap();
        assert_heads_published(&survivor).await;
        let per = people_per_batch(&survivor).await;
        for (batch, people) in &per {
            assert_eq!(*people, 40, "batch {batch} is partly visible after the kill in run {n}: {per:?}");
        }
        let edges = counts(&survivor, "main").await["Knows"];
        assert_eq!(edges as usize, 39 * per.len(), "edges all-or-nothing too (run {n})");
        landed += per.contains_key(&n) as usize;
    }
    eprintln!("{landed} of {runs} killed loads had committed; {recovered} kills left a recovery record ({placed} of them placed there)");
    assert!(recovered >= placed && placed == runs / 4, "kills inside the commit: {recovered}, placed {placed}");
    // The graph still takes loads.
    let last = files.path().join("last.ndjson");
    std::fs::write(&last, numbered_batch(99)).unwrap();
    let out = load_command(&dir, &last).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

