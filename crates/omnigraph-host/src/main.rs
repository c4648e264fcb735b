//! `omnigraph-host`: the commit host's command line (SPEC §7).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use omnigraph_host::auth::Auth;
use omnigraph_host::http::{AppState, ServerConfig};
use omnigraph_host::split::{Checkpoint, split_batches};
use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphRoot, LoadRequest, StorageOptions};
use omnigraph_validate_wasm::{Limits, Mode, Options};

/// The demo graph `serve --demo` creates on first run.
const DEMO_SCHEMA: &str = include_str!("../../../samples/people.pg");
const DEMO_BATCH: &str = include_str!("../../../samples/people.ndjson");

#[derive(Parser)]
#[command(name = "omnigraph-host", version, about = "OmniGraph ingest: validate and commit graph batches into Lance")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct RootArgs {
    /// The graph root: a local directory or s3://bucket/prefix.
    #[arg(long)]
    root: String,
    #[command(flatten)]
    s3: S3Args,
    /// Write lease duration in milliseconds (a crashed writer blocks others this long).
    #[arg(long, env = "OMNIGRAPH_LEASE_TTL_MS")]
    lease_ttl_ms: Option<u64>,
}

/// Options of `s3://` roots; credentials come from `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY` (docs/storage.md).
#[derive(clap::Args, Clone, Default)]
struct S3Args {
    /// S3 endpoint (S3-compatible servers), e.g. http://127.0.0.1:9000.
    #[arg(long, env = "OMNIGRAPH_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    #[arg(long, env = "OMNIGRAPH_S3_REGION")]
    s3_region: Option<String>,
    /// Allow plain-HTTP S3 endpoints.
    #[arg(long, env = "OMNIGRAPH_S3_ALLOW_HTTP")]
    s3_allow_http: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Merge,
    Append,
    Overwrite,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Merge => Mode::Merge,
            ModeArg::Append => Mode::Append,
            ModeArg::Overwrite => Mode::Overwrite,
        }
    }
}

#[derive(Subcommand)]
enum BranchCommand {
    List,
    Create {
        name: String,
        #[arg(long, default_value = "main")]
        from: String,
    },
    Delete {
        name: String,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Create a graph from a .pg schema.
    Init {
        #[command(flatten)]
        root: RootArgs,
        schema: PathBuf,
    },
    /// Serve every graph under --root over HTTP (SPEC §6).
    Serve {
        #[command(flatten)]
        root: RootArgs,
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// Token config (TOML, SHA-256 digests of bearer tokens).
        #[arg(long, conflicts_with = "open")]
        auth: Option<PathBuf>,
        /// No authentication: every caller may do everything (local development).
        #[arg(long)]
        open: bool,
        /// Create the demo graph `demo` (the shipped sample) if it is missing.
        #[arg(long)]
        demo: bool,
        /// Loads one actor may have in flight (more get 429).
        #[arg(long, default_value_t = omnigraph_host::limits::DEFAULT_MAX_LOADS_PER_ACTOR)]
        max_loads_per_actor: usize,
        /// Body bound of one load in bytes (SPEC §5).
        #[arg(long)]
        max_batch_bytes: Option<u64>,
        /// Body bytes held at once over all requests (more get 503 server_busy).
        #[arg(long, default_value_t = omnigraph_host::limits::DEFAULT_MAX_INFLIGHT_BYTES)]
        max_inflight_bytes: u64,
        /// Seconds a request body may take to arrive (slower bodies get 408).
        #[arg(long, default_value_t = omnigraph_host::limits::DEFAULT_BODY_READ_TIMEOUT.as_secs())]
        body_read_timeout_secs: u64,
        /// Seconds a request's head may take to arrive (slower connections are closed).
        #[arg(long, default_value_t = omnigraph_host::limits::DEFAULT_HEADER_READ_TIMEOUT.as_secs())]
        header_read_timeout_secs: u64,
    },
    /// Validate a file offline with the validator artifact in wasmtime.
    Validate {
        #[arg(long)]
        schema: PathBuf,
        file: PathBuf,
        #[arg(long, value_enum, default_value = "merge")]
        mode: ModeArg,
        /// Print the report as JSON (SPEC §3) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Load an NDJSON file: split at line boundaries into bounded batches,
    /// one graph commit each, into a local root or through a server.
    Load {
        /// Local graph root (or use --server).
        #[arg(long, required_unless_present = "server", conflicts_with = "server")]
        root: Option<String>,
        /// A host's base URL, e.g. http://127.0.0.1:8080.
        #[arg(long, requires = "graph")]
        server: Option<String>,
        /// The graph id on the server.
        #[arg(long)]
        graph: Option<String>,
        #[arg(long, env = "OMNIGRAPH_TOKEN", hide_env_values = true)]
        token: Option<String>,
        file: PathBuf,
        #[arg(long, default_value = "main")]
        branch: String,
        /// Fork the branch from this one if it does not exist.
        #[arg(long)]
        from: Option<String>,
        #[arg(long, value_enum, default_value = "merge")]
        mode: ModeArg,
        #[arg(long, default_value = "cli")]
        actor: String,
        /// Continue after the last committed batch of an interrupted run.
        #[arg(long)]
        resume: bool,
        /// Lines per batch (at most the rows-per-table bound).
        #[arg(long, default_value_t = omnigraph_validate_wasm::limits::DEFAULT_MAX_TABLE_ROWS as usize)]
        batch_lines: usize,
        /// Bytes per batch (at most the body bound).
        #[arg(long, default_value_t = omnigraph_validate_wasm::limits::DEFAULT_MAX_BATCH_BYTES)]
        batch_bytes: u64,
        #[arg(long, env = "OMNIGRAPH_LEASE_TTL_MS")]
        lease_ttl_ms: Option<u64>,
        #[command(flatten)]
        s3: S3Args,
    },
    /// Print every record of a branch (or of commit --at) as NDJSON.
    Export {
        #[command(flatten)]
        root: RootArgs,
        #[arg(long, default_value = "main")]
        branch: String,
        #[arg(long)]
        at: Option<u64>,
    },
    /// Print a branch's commits, newest first, as JSON lines.
    Log {
        #[command(flatten)]
        root: RootArgs,
        #[arg(long, default_value = "main")]
        branch: String,
    },
    Branch {
        #[command(flatten)]
        root: RootArgs,
        #[command(subcommand)]
        command: BranchCommand,
    },
    /// Finish or undo a load interrupted by a crash.
    Recover {
        #[command(flatten)]
        root: RootArgs,
    },
}

/// Why the command failed: 1 for a refused batch, 2 for everything else.
enum Failure {
    Invalid(String),
    Operational(String),
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Failure {
        let mut text = format!("error [{}]: {e}", e.code());
        match &e {
            EngineError::Invalid { report_json } => text.push_str(&format!("\n{report_json}")),
            EngineError::Rejected { report_json, conflicts } => {
                text.push_str(&format!("\n{report_json}\n{}", serde_json::to_string(conflicts).expect("serializes")))
            }
            _ => {}
        }
        if matches!(e, EngineError::Invalid { .. } | EngineError::Rejected { .. }) {
            Failure::Invalid(text)
        } else {
            Failure::Operational(text)
        }
    }
}

fn operational(e: impl std::fmt::Display) -> Failure {
    Failure::Operational(format!("error: {e}"))
}

fn storage_options(s3: &S3Args) -> StorageOptions {
    let mut options = StorageOptions::new();
    if let Some(e) = &s3.s3_endpoint {
        options.insert("aws_endpoint".into(), e.clone());
    }
    if let Some(r) = &s3.s3_region {
        options.insert("aws_region".into(), r.clone());
    }
    if s3.s3_allow_http {
        options.insert("aws_allow_http".into(), "true".into());
    }
    for (key, env) in [("aws_access_key_id", "AWS_ACCESS_KEY_ID"), ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY")] {
        if let Ok(v) = std::env::var(env) {
            options.insert(key.into(), v);
        }
    }
    options
}

fn engine_config(lease_ttl_ms: Option<u64>) -> EngineConfig {
    let mut config = EngineConfig::default();
    if let Some(ms) = lease_ttl_ms {
        config.lease_ttl = Duration::from_millis(ms);
    }
    config
}

impl RootArgs {
    fn open_root(&self) -> Result<GraphRoot, EngineError> {
        GraphRoot::new(&self.root, storage_options(&self.s3))
    }

    /// The root for a new graph (a local directory is created).
    fn create_root(&self) -> Result<GraphRoot, EngineError> {
        GraphRoot::create(&self.root, storage_options(&self.s3))
    }

    async fn open(&self) -> Result<Graph, EngineError> {
        Graph::open(self.open_root()?, validator()?, engine_config(self.lease_ttl_ms)).await
    }
}

fn validator() -> Result<Arc<Validator>, EngineError> {
    Ok(Arc::new(Validator::new(RunnerConfig::default())?))
}

fn print_json(value: &impl serde::Serialize) {
    println!("{}", serde_json::to_string(value).expect("serializes"));
}

fn read(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| operational(format!("{}: {e}", path.display())))
}

/// Resolves on SIGINT or SIGTERM. The signals are blocked in every thread
/// (see `main`) and taken by one waiting thread, so no handler runs async-unsafe code.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let set = termination_signals();
        let mut signal = 0;
        // SAFETY: `set` is an initialised signal set; `signal` is a valid out pointer.
        unsafe { libc::sigwait(&set, &mut signal) };
        eprintln!("shutting down: finishing in-flight requests");
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}

fn termination_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

async fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Init { root, schema } => {
            let source = String::from_utf8(read(&schema)?).map_err(|_| operational("the schema is not UTF-8"))?;
            let graph = Graph::init(root.create_root()?, &source, validator()?, engine_config(root.lease_ttl_ms)).await?;
            eprintln!("created graph at {} (schema {})", graph.root().uri(), graph.schema().hash());
        }
        Command::Serve { root, listen, auth, open, demo, max_loads_per_actor, max_batch_bytes, max_inflight_bytes, body_read_timeout_secs, header_read_timeout_secs } => {
            let auth = match (auth, open) {
                (Some(path), _) => {
                    Auth::from_toml(&String::from_utf8_lossy(&read(&path)?)).map_err(Failure::Operational)?
                }
                (None, true) => {
                    eprintln!("WARNING: --open: no authentication, every caller may read and change every graph");
                    Auth::Open
                }
                (None, false) => return Err(operational("give --auth FILE (bearer tokens) or --open (local development)")),
            };
            let validator = validator()?;
            if demo {
                ensure_demo(&root, validator.clone()).await?;
            }
            let mut config = ServerConfig::new(root.root.clone(), auth);
            config.storage = storage_options(&root.s3);
            config.engine = engine_config(root.lease_ttl_ms);
            config.max_loads_per_actor = max_loads_per_actor;
            config.max_inflight_bytes = max_inflight_bytes;
            config.body_read_timeout = Duration::from_secs(body_read_timeout_secs);
            config.header_read_timeout = Duration::from_secs(header_read_timeout_secs);
            if let Some(bytes) = max_batch_bytes {
                config.limits.max_batch_bytes = bytes;
            }
            let listener = tokio::net::TcpListener::bind(&listen).await.map_err(|e| operational(format!("{listen}: {e}")))?;
            eprintln!("serving graphs under {} on http://{}", root.root, listener.local_addr().map_err(operational)?);
            let state = AppState::new(config, validator);
            omnigraph_host::http::serve(listener, state, shutdown_signal()).await.map_err(operational)?;
        }
        Command::Validate { schema, file, mode, json } => {
            let source = String::from_utf8(read(&schema)?).map_err(|_| operational("the schema is not UTF-8"))?;
            let batch = read(&file)?;
            let options = serde_json::to_vec(&Options { mode: mode.into(), ..Options::default() }).expect("options");
            match validator()?.validate(&source, &options, &batch).map_err(operational)? {
                ValidateOutcome::Report(report) => return print_report(&file, &report, json),
                ValidateOutcome::SchemaError(e) => return Err(operational(format!("{}: {e}", schema.display()))),
                ValidateOutcome::OptionsError(e) => return Err(operational(e)),
            }
        }
        Command::Load { root, server, graph, token, file, branch, from, mode, actor, resume, batch_lines, batch_bytes, lease_ttl_ms, s3 } => {
            let data = read(&file)?;
            let limits = Limits::default();
            let batch_lines = batch_lines.clamp(1, limits.max_table_rows as usize);
            let batch_bytes = batch_bytes.clamp(1, limits.max_batch_bytes);
            let target = match (&root, &server) {
                (Some(root), _) => {
                    let root = RootArgs { root: root.clone(), s3, lease_ttl_ms };
                    Target::Local(root.open().await?)
                }
                (None, Some(url)) => Target::Server {
                    client: reqwest_client(),
                    url: url.trim_end_matches('/').to_owned(),
                    graph: graph.clone().expect("clap requires --graph"),
                    token,
                },
                (None, None) => unreachable!("clap requires --root or --server"),
            };
            load_file(&target, &file, &data, &branch, from, mode.into(), &actor, resume, batch_lines, batch_bytes).await?;
        }
        Command::Export { root, branch, at } => {
            let graph = root.open().await?;
            let mut out = std::io::stdout().lock();
            let mut reader_gone = false;
            let exported = graph
                .export(&branch, at, |chunk| {
                    let written = out.write_all(chunk.as_bytes());
                    reader_gone = matches!(&written, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe);
                    std::future::ready(written.map_err(|e| EngineError::Storage(format!("stdout: {e}"))))
                })
                .await;
            // `export | head` closing the pipe early is how a reader says "enough".
            if !reader_gone {
                exported?;
            }
        }
        Command::Log { root, branch } => {
            for commit in root.open().await?.log(&branch).await? {
                print_json(&commit);
            }
        }
        Command::Branch { root, command } => {
            let graph = root.open().await?;
            match command {
                BranchCommand::List => {
                    for head in graph.branches().await? {
                        print_json(&head);
                    }
                }
                BranchCommand::Create { name, from } => print_json(&graph.create_branch(&name, &from, "cli").await?),
                BranchCommand::Delete { name } => print_json(&graph.delete_branch(&name, "cli").await?),
            }
        }
        Command::Recover { root } => {
            let graph = root.open().await?;
            let outcome = graph.recover_with_wait(EngineConfig::default().lease_wait).await?;
            eprintln!("recovery: {outcome:?}");
        }
    }
    Ok(())
}

/// Prints a report as `file:line: code: message` lines (or JSON); exit 1 if refused.
fn print_report(file: &Path, report_json: &str, json: bool) -> Result<(), Failure> {
    let report: serde_json::Value = serde_json::from_str(report_json).map_err(operational)?;
    let ok = report["ok"].as_bool() == Some(true);
    if json {
        println!("{report_json}");
    } else {
        for e in report["errors"].as_array().into_iter().flatten() {
            println!("{}:{}: {}: {}", file.display(), e["line"], e["code"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or(""));
        }
        let errors = report["error_count"].as_u64().unwrap_or(0);
        let records = report["stats"]["records"].as_u64().unwrap_or(0);
        if ok {
            println!("{}: valid ({records} records)", file.display());
        } else {
            println!("{}: invalid ({errors} errors{})", file.display(), if report["errors_truncated"] == true { ", list truncated" } else { "" });
        }
    }
    if ok { Ok(()) } else { Err(Failure::Invalid(String::new())) }
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder().build().expect("HTTP client")
}

enum Target {
    Local(Graph),
    Server { client: reqwest::Client, url: String, graph: String, token: Option<String> },
}

impl Target {
    /// Commits one batch; `batch_key` makes a retried batch recognisable.
    async fn load(&self, request: LoadRequest) -> Result<(), Failure> {
        match self {
            Target::Local(graph) => graph.load(request).await.map(drop).map_err(Failure::from),
            Target::Server { client, url, graph, token } => {
                let mut query = vec![("branch", request.branch.clone()), ("mode", request.mode.as_str().to_owned())];
                if let Some(from) = &request.from {
                    query.push(("from", from.clone()));
                }
                if let Some(key) = &request.batch_key {
                    query.push(("batch_key", key.clone()));
                }
                let mut call = client
                    .post(format!("{url}/graphs/{graph}/load/ndjson"))
                    .query(&query)
                    .header("content-type", "application/x-ndjson")
                    .body(request.batch.as_ref().clone());
                if let Some(token) = token {
                    call = call.bearer_auth(token);
                }
                let response = call.send().await.map_err(operational)?;
                let status = response.status();
                let body = response.text().await.map_err(operational)?;
                match status.as_u16() {
                    200 => Ok(()),
                    409 | 413 | 422 => Err(Failure::Invalid(format!("error: HTTP {status}\n{body}"))),
                    _ => Err(Failure::Operational(format!("error: HTTP {status}\n{body}"))),
                }
            }
        }
    }

    /// The batch keys already committed on `branch` by runs named `run`.
    async fn committed_keys(&self, branch: &str) -> Result<Vec<String>, Failure> {
        let commits: Vec<serde_json::Value> = match self {
            Target::Local(graph) => match graph.log(branch).await {
                Ok(log) => log.iter().map(|c| serde_json::to_value(c).expect("serializes")).collect(),
                Err(EngineError::BranchNotFound(_)) => Vec::new(),
                Err(e) => return Err(e.into()),
            },
            Target::Server { client, url, graph, token } => {
                let mut call = client.get(format!("{url}/graphs/{graph}/commits")).query(&[("branch", branch)]);
                if let Some(token) = token {
                    call = call.bearer_auth(token);
                }
                let response = call.send().await.map_err(operational)?;
                if response.status() == 404 {
                    Vec::new()
                } else {
                    let body: serde_json::Value = response.json().await.map_err(operational)?;
                    body["commits"].as_array().cloned().unwrap_or_default()
                }
            }
        };
        Ok(commits.iter().filter_map(|c| c["batch_key"].as_str().map(str::to_owned)).collect())
    }
}

/// Splits the file into batches and commits them in order, with a progress
/// bar and a checkpoint file for `--resume`.
#[allow(clippy::too_many_arguments)]
async fn load_file(
    target: &Target,
    file: &Path,
    data: &[u8],
    branch: &str,
    from: Option<String>,
    mode: Mode,
    actor: &str,
    resume: bool,
    batch_lines: usize,
    batch_bytes: u64,
) -> Result<(), Failure> {
    let digest = omnigraph_host::auth::sha256_hex(data);
    let checkpoint_path = Checkpoint::path_for(file);
    let mut checkpoint = match (resume, Checkpoint::read(&checkpoint_path).map_err(operational)?) {
        (true, Some(previous)) if previous.file_sha256 != digest => {
            return Err(operational("--resume: the file changed since the interrupted run"));
        }
        // A resumed run splits exactly as the interrupted one did, whatever
        // bounds it is given now: batch numbers must mean the same lines.
        (true, Some(previous)) => previous,
        (true, None) => return Err(operational(format!("--resume: no checkpoint at {}", checkpoint_path.display()))),
        (false, _) => Checkpoint::new(digest, batch_lines, batch_bytes as usize),
    };
    let batches = split_batches(data, checkpoint.batch_lines, checkpoint.batch_bytes).map_err(operational)?;
    // A batch may have committed after the last checkpoint write: the
    // graph's log knows (each commit carries its batch key).
    let committed = target.committed_keys(branch).await?;
    checkpoint.catch_up(&committed);
    let total_bytes = data.len() as u64;
    let bar = indicatif::ProgressBar::new(total_bytes);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {msg}").expect("progress template"),
    );
    let mut rows = 0u64;
    for (n, range) in batches.iter().enumerate() {
        if n < checkpoint.next_batch {
            bar.set_position(range.end as u64);
            continue;
        }
        let chunk = &data[range.clone()];
        let request = LoadRequest {
            branch: branch.to_owned(),
            from: from.clone(),
            mode,
            strict: true,
            actor: actor.to_owned(),
            batch: Arc::new(chunk.to_vec()),
            batch_key: Some(checkpoint.key(n)),
        };
        if let Err(failure) = target.load(request).await {
            bar.abandon_with_message(format!("stopped at batch {} of {} (nothing of it was written)", n + 1, batches.len()));
            return Err(failure);
        }
        rows += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        checkpoint.next_batch = n + 1;
        checkpoint.write(&checkpoint_path).map_err(operational)?;
        bar.set_position(range.end as u64);
        bar.set_message(format!("~{rows} lines, {} commits", n + 1));
    }
    bar.finish_with_message(format!("{} batches committed", batches.len()));
    Checkpoint::remove(&checkpoint_path).map_err(operational)?;
    Ok(())
}

async fn ensure_demo(root: &RootArgs, validator: Arc<Validator>) -> Result<(), Failure> {
    let demo = RootArgs { root: format!("{}/demo", root.root.trim_end_matches('/')), ..root.clone() };
    let graph = match Graph::init(demo.create_root()?, DEMO_SCHEMA, validator, engine_config(demo.lease_ttl_ms)).await {
        Ok(g) => g,
        Err(EngineError::GraphExists(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let request = LoadRequest {
        branch: "main".into(),
        from: None,
        mode: Mode::Merge,
        strict: true,
        actor: "demo".into(),
        batch: Arc::new(DEMO_BATCH.as_bytes().to_vec()),
        batch_key: None,
    };
    graph.load(request).await?;
    eprintln!("created the demo graph at {}", graph.root().uri());
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Test builds read crash/delay injections from FAILPOINTS (tests/kill.rs).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    if matches!(cli.command, Command::Serve { .. }) {
        // Before any thread starts, so every thread inherits the mask and
        // SIGINT/SIGTERM reach only the waiting thread (graceful shutdown).
        let set = termination_signals();
        // SAFETY: a valid set; no old mask is requested.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(text)) => {
            if !text.is_empty() {
                eprintln!("{text}");
            }
            ExitCode::from(1)
        }
        Err(Failure::Operational(text)) => {
            eprintln!("{text}");
            ExitCode::from(2)
        }
    }
}
