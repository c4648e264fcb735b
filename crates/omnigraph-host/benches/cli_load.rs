//! `omnigraph-host load` of a user's file, whole processes, against the
//! engine's own `Graph::load` of the same batches inside one process (the
//! floor a CLI can reach), alternated round by round, into fresh graphs of
//! `samples/people.pg`:
//! * a file of 25,600 records (8,192 `Person`, 1,024 `Company`, 8,192
//!   `Knows`, 8,192 `WorksAt`, 2.8 MB): every table within the rows bound,
//!   so one batch and one commit;
//! * a file of 204,800 records (8× the people and edges): split into the
//!   fewest batches the bounds allow, against the sum of those batches
//!   loaded by the engine one after another, followed by the maintenance
//!   the CLI runs after a split run (the same bounded steps,
//!   `MAINTENANCE_STEPS_PER_BATCH` per batch, in the same process); the
//!   ratio against the batches alone is printed too.
//!
//! The CLI's time is the whole process: start-up, the module cache read,
//! hashing and splitting the file, the loads, and the maintenance it runs
//! after its last commit.
//!
//! cargo bench --profile dev -p omnigraph-host --bench cli_load
//! (`CLI_LOAD_ROUNDS`, default 5)

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_count, median, ms, ratio, runtime_and_validator, target};
use omnigraph_fuzz_harness::samples_dir;
use omnigraph_host::limits::MAINTENANCE_STEPS_PER_BATCH;
use omnigraph_host::manifest::CommitKind;
use omnigraph_host::split::Splitter;
use omnigraph_host::validator::Validator;
use omnigraph_host::{EngineConfig, Graph, GraphRoot, LoadRequest};
use omnigraph_validate_wasm::Mode;
use omnigraph_validate_wasm::limits::{DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_TABLE_ROWS};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_omnigraph-host");
const PEOPLE: usize = 8_192;
const COMPANIES: usize = 1_024;
/// The multi-batch file is this many times the one-batch file.
const SCALE: usize = 8;

/// `people` people with an email, a birthday and tags; `people / 8`
/// companies; each person knows the next one and works at one company.
/// Tables one after another, as `export` writes them.
fn people_file(people: usize) -> Vec<u8> {
    let companies = people / (PEOPLE / COMPANIES);
    let mut out = String::new();
    for i in 0..people {
        out.push_str(&format!(
            "{{\"type\":\"Person\",\"data\":{{\"name\":\"person-{i:07}\",\"age\":{},\"email\":\"person-{i}@example.com\",\"born\":\"19{:02}-0{}-1{}\",\"tags\":[\"t{}\"]}}}}\n",
            i % 90,
            i % 100,
            1 + i % 9,
            i % 10,
            i % 13
        ));
    }
    for c in 0..companies {
        out.push_str(&format!("{{\"type\":\"Company\",\"data\":{{\"name\":\"company-{c:05}\",\"size\":\"small\"}}}}\n"));
    }
    for i in 0..people {
        out.push_str(&format!(
            "{{\"edge\":\"Knows\",\"from\":\"person-{i:07}\",\"to\":\"person-{:07}\",\"data\":{{\"since\":\"2020-01-0{}\"}}}}\n",
            (i + 1) % people,
            1 + i % 9
        ));
    }
    for i in 0..people {
        out.push_str(&format!(
            "{{\"edge\":\"WorksAt\",\"from\":\"person-{i:07}\",\"to\":\"company-{:05}\"}}\n",
            i % companies
        ));
    }
    out.into_bytes()
}

fn records(file: &Path) -> usize {
    std::fs::read(file).unwrap().iter().filter(|&&b| b == b'\n').count()
}

/// One CLI process; its wall time.
fn cli(args: &[&str], cache: &Path) -> Duration {
    let start = Instant::now();
    let out = Command::new(BIN).args(args).env("OMNIGRAPH_MODULE_CACHE", cache).output().unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    took
}

/// The CLI loading `file` into a fresh graph at `root`: wall time, and the
/// graph's `load` and `maintain` commits after it.
fn cli_load(file: &Path, root: &Path, cache: &Path, runtime: &tokio::runtime::Runtime, validator: &Arc<Validator>) -> (Duration, usize, usize) {
    let schema = samples_dir().join("people.pg");
    let root_arg = root.to_str().unwrap();
    cli(&["init", "--root", root_arg, schema.to_str().unwrap()], cache);
    let took = cli(&["load", "--root", root_arg, file.to_str().unwrap()], cache);
    let log = runtime.block_on(async {
        let graph = Graph::open(GraphRoot::new(root_arg, Default::default()).unwrap(), validator.clone(), EngineConfig::default()).await.unwrap();
        graph.log("main").await.unwrap()
    });
    let count = |kind: CommitKind| log.iter().filter(|c| c.kind == kind).count();
    (took, count(CommitKind::Load), count(CommitKind::Maintain))
}

/// The engine loading `batches` one after another into a fresh graph at
/// `root`, in this process: each load's time, and the time of the
/// maintenance the CLI runs after a split run (none after one batch).
fn engine_load(batches: &[Arc<Vec<u8>>], root: &Path, runtime: &tokio::runtime::Runtime, validator: &Arc<Validator>) -> (Vec<Duration>, Duration) {
    let schema = std::fs::read_to_string(samples_dir().join("people.pg")).unwrap();
    runtime.block_on(async {
        let root = GraphRoot::create(root.to_str().unwrap(), Default::default()).unwrap();
        let graph = Graph::init(root, &schema, validator.clone(), EngineConfig::default()).await.unwrap();
        let mut took = Vec::new();
        for (n, batch) in batches.iter().enumerate() {
            let request = LoadRequest {
                branch: "main".into(),
                from: None,
                mode: Mode::Merge,
                strict: true,
                actor: "bench".into(),
                batch: batch.clone(),
                batch_key: Some(format!("bench:{n}")),
                unchanged_since: None,
            };
            let start = Instant::now();
            graph.load(request).await.unwrap();
            took.push(start.elapsed());
        }
        let start = Instant::now();
        if batches.len() > 1 {
            for _ in 0..MAINTENANCE_STEPS_PER_BATCH * batches.len() {
                if graph.maintain_step().await.unwrap().is_none() {
                    break;
                }
            }
        }
        (took, start.elapsed())
    })
}

/// The batches the CLI cuts `file` into with the default bounds.
fn batches_of(file: &Path) -> Vec<Arc<Vec<u8>>> {
    let mut splitter = Splitter::open(file, DEFAULT_MAX_TABLE_ROWS as usize, DEFAULT_MAX_BATCH_BYTES as usize).unwrap();
    if let Some(whole) = splitter.whole_file().unwrap() {
        return vec![whole.bytes];
    }
    splitter.seek(omnigraph_host::split::Position { pass: omnigraph_host::split::Pass::Nodes, offset: 0 }).unwrap();
    std::iter::from_fn(|| splitter.next_batch().unwrap()).map(|b| b.bytes).collect()
}

struct Compared {
    cli: Vec<Duration>,
    /// Per round, the sum of the engine's loads.
    engine: Vec<Duration>,
    /// Per round, the sum of the engine's loads and its maintenance after them.
    engine_maintained: Vec<Duration>,
    /// Per batch, its median over the rounds: whether a batch's cost stays
    /// flat along a file with no maintenance between batches.
    engine_batches: Vec<Duration>,
    load_commits: usize,
    maintain_commits: usize,
}

/// `rounds` alternated rounds of the CLI and the engine loading `file`.
fn compare(file: &Path, rounds: usize, dir: &Path, cache: &Path, runtime: &tokio::runtime::Runtime, validator: &Arc<Validator>) -> Compared {
    let batches = batches_of(file);
    let mut compared = Compared { cli: Vec::new(), engine: Vec::new(), engine_maintained: Vec::new(), engine_batches: Vec::new(), load_commits: 0, maintain_commits: 0 };
    let mut per_batch = vec![Vec::new(); batches.len()];
    for round in 0..rounds {
        let root = dir.join(format!("cli-{round}"));
        let (took, loads, maintains) = cli_load(file, &root, cache, runtime, validator);
        assert_eq!(loads, batches.len(), "the CLI committed the batches the splitter cuts");
        compared.cli.push(took);
        (compared.load_commits, compared.maintain_commits) = (loads, maintains);
        let (loads, maintenance) = engine_load(&batches, &dir.join(format!("engine-{round}")), runtime, validator);
        let loads_took: Duration = loads.iter().sum();
        compared.engine.push(loads_took);
        compared.engine_maintained.push(loads_took + maintenance);
        for (times, took) in per_batch.iter_mut().zip(loads) {
            times.push(took);
        }
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(dir.join(format!("engine-{round}"))).unwrap();
    }
    compared.engine_batches = per_batch.iter().map(|times| median(times)).collect();
    compared
}

fn main() {
    let rounds = env_count("CLI_LOAD_ROUNDS", 5);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("modules");
    let (runtime, validator) = runtime_and_validator();
    let one = dir.path().join("one-batch.ndjson");
    std::fs::write(&one, people_file(PEOPLE)).unwrap();
    let many = dir.path().join("multi-batch.ndjson");
    std::fs::write(&many, people_file(PEOPLE * SCALE)).unwrap();
    // One earlier process fills the module cache, as after a first run.
    cli(&["validate", "--schema", samples_dir().join("people.pg").to_str().unwrap(), one.to_str().unwrap()], &cache);

    let whole = compare(&one, rounds, dir.path(), &cache, &runtime, &validator);
    let split = compare(&many, rounds.div_ceil(2), dir.path(), &cache, &runtime, &validator);
    let (whole_cli, whole_engine) = (median(&whole.cli), median(&whole.engine));
    let (split_cli, split_engine, split_maintained) = (median(&split.cli), median(&split.engine), median(&split.engine_maintained));
    println!(
        "one-batch file ({} records, {} bytes): CLI process {} ms, engine load {} ms (medians of {rounds}); {} load and {} maintain commits",
        records(&one),
        std::fs::metadata(&one).unwrap().len(),
        ms(whole_cli),
        ms(whole_engine),
        whole.load_commits,
        whole.maintain_commits
    );
    println!(
        "multi-batch file ({} records): CLI process {} ms, engine's {} batches {} ms, with the same maintenance after them {} ms (medians of {}); {} maintain commits; CLI vs the batches alone {:.2}",
        records(&many),
        ms(split_cli),
        split.load_commits,
        ms(split_engine),
        ms(split_maintained),
        rounds.div_ceil(2),
        split.maintain_commits,
        ratio(split_cli, split_engine)
    );
    let listed = |times: &[Duration]| times.iter().map(|t| ms(*t)).collect::<Vec<_>>().join(" ");
    println!("the engine's batches of the multi-batch file, in order (ms): {}", listed(&split.engine_batches));
    println!("{}", target("cli_whole_file_vs_engine_load", ratio(whole_cli, whole_engine), 1.2));
    println!("{}", target("cli_whole_file_commits", whole.load_commits as f64, 1.0));
    println!("{}", target("cli_multi_batch_file_vs_engine_batches", ratio(split_cli, split_maintained), 1.2));
}
