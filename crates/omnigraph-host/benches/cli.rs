//! The CLI as a user meets it: wall time of whole `omnigraph-host`
//! processes (start-up, work, exit). `validate` of a one-line file and
//! `log` / `branch list` of a graph with a few commits, each the median of
//! RUNS processes, with the compiled-module cache filled by one earlier
//! process (as after a first run on a machine); and `validate` with the
//! cache off, for the ratio the cache buys.
//!
//! cargo bench --profile dev -p omnigraph-host --bench cli

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::target;
use omnigraph_fuzz_harness::samples_dir;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");
const RUNS: usize = 15;
const UNCACHED_RUNS: usize = 3;
const LOADS: usize = 20;

/// Runs the binary once, checks it succeeded, returns its wall time.
fn run(bin: &Path, args: &[&str], cache: &str) -> Duration {
    let start = Instant::now();
    let out = Command::new(bin).args(args).env("OMNIGRAPH_MODULE_CACHE", cache).output().unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    took
}

fn median_ms(bin: &Path, args: &[&str], cache: &str, runs: usize) -> f64 {
    let mut times: Vec<Duration> = (0..runs).map(|_| run(bin, args, cache)).collect();
    times.sort();
    times[runs / 2].as_secs_f64() * 1e3
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    // A copy: the target dir's path is rewritten by whatever builds there
    // next (a `cargo test` from another checkout builds it at opt-level 0).
    let bin = dir.path().join("omnigraph-host");
    std::fs::copy(BIN, &bin).unwrap();
    let bin = bin.as_path();
    let cache = dir.path().join("modules");
    let cache = cache.to_str().unwrap();
    let root = dir.path().join("graph");
    let root = root.to_str().unwrap();
    let schema = samples_dir().join("people.pg").display().to_string();
    let one_line = dir.path().join("one.ndjson");
    let first = std::fs::read_to_string(samples_dir().join("people.ndjson")).unwrap().lines().next().unwrap().to_owned();
    std::fs::write(&one_line, format!("{first}\n")).unwrap();
    let one_line = one_line.to_str().unwrap();

    run(bin, &["init", "--root", root, &schema], cache);
    for n in 0..LOADS {
        let file = dir.path().join(format!("{n}.ndjson"));
        std::fs::write(&file, format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{n}\",\"age\":{n}}}}}\n")).unwrap();
        run(bin, &["load", "--root", root, file.to_str().unwrap()], cache);
    }
    assert!(Path::new(cache).read_dir().unwrap().count() == 1, "the loads filled the module cache");

    let validate = ["validate", "--schema", &schema, one_line];
    let cached = median_ms(bin, &validate, cache, RUNS);
    let uncached = median_ms(bin, &validate, "off", UNCACHED_RUNS);
    let log = median_ms(bin, &["log", "--root", root], cache, RUNS);
    let branches = median_ms(bin, &["branch", "--root", root, "list"], cache, RUNS);
    println!("validate, one line, module cache filled: {cached:.1} ms (median of {RUNS} processes)");
    println!("validate, one line, module cache off:    {uncached:.1} ms (median of {UNCACHED_RUNS}), {:.1}x", uncached / cached);
    println!("log ({} commits):                         {log:.1} ms", LOADS + 1);
    println!("branch list:                             {branches:.1} ms");
    println!("{}", target("cli_validate_one_line_ms", cached, 100.0));
    println!("{}", target("cli_log_ms", log, 50.0));
    println!("{}", target("cli_branch_list_ms", branches, 50.0));
}
