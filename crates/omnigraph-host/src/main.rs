//! `omnigraph-host`: the commit host's command line (SPEC §7): `init`,
//! `serve`, `validate`, `load` (split files, progress, `--resume`,
//! `--server`), `export`, `log`, `branch`, `recover`, `optimize`.

// `run` awaits every command's future; their nested async state machines
// outgrow the default query depth when compiled as a test.
#![recursion_limit = "256"]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use omnigraph_host::auth::Auth;
use omnigraph_host::http::{AppState, ServerConfig};
use omnigraph_host::split::{Batch, Checkpoint, Pass, Position, Splitter, WorkBranch, file_sha256, types_named};
use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};
use omnigraph_host::error::{SIZE_BOUND_CODES, report_bound};
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphRoot, GraphSettings, LoadRequest, OverwritePublish, StorageOptions};
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
    /// How long a write waits for another host's lease, in milliseconds,
    /// before it answers 503 (`graph_busy`, or `recovery_in_progress`).
    #[arg(long, env = "OMNIGRAPH_LEASE_WAIT_MS")]
    lease_wait_ms: Option<u64>,
    /// Batch bounds (SPEC §5) as JSON, e.g. {"max_table_rows": 4096}; the
    /// rest keep their defaults. Loads are validated with them and `/rules`
    /// reports them.
    #[arg(long, env = "OMNIGRAPH_LIMITS")]
    limits: Option<PathBuf>,
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
        /// Legacy identity (SPEC §2.3): a node record's `data.id` is its
        /// identity when it has no top-level `id`. Fixed for the graph's life.
        #[arg(long)]
        legacy_identity: bool,
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
        /// How often background maintenance looks for graphs that loads
        /// changed, in milliseconds; 0 turns it off (then run `optimize`).
        #[arg(long, default_value_t = omnigraph_host::limits::MAINTENANCE_INTERVAL.as_millis() as u64)]
        maintenance_interval_ms: u64,
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
        /// Batch bounds as JSON (a host's `/rules` `bounds`), to judge as that host does.
        #[arg(long)]
        limits: Option<PathBuf>,
        /// Legacy identity (SPEC §2.3), as a graph created with `init --legacy-identity`.
        #[arg(long)]
        legacy_identity: bool,
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
        /// Records of any one type per batch (default and most: the graph's
        /// rows-per-table bound).
        #[arg(long, alias = "batch-lines")]
        batch_rows: Option<usize>,
        /// Bytes per batch (default and most: the graph's body bound).
        #[arg(long)]
        batch_bytes: Option<u64>,
        #[arg(long, env = "OMNIGRAPH_LEASE_TTL_MS")]
        lease_ttl_ms: Option<u64>,
        /// Batch bounds as JSON (local roots; a server's come from its /rules).
        #[arg(long, env = "OMNIGRAPH_LIMITS", conflicts_with = "server")]
        limits: Option<PathBuf>,
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
    /// Maintain a graph until nothing needs work: create the indexes the
    /// checks and `@index` ask for, fold new rows into them, compact small
    /// fragments; one `maintain` commit per step (a server does this itself).
    Optimize {
        #[command(flatten)]
        root: RootArgs,
        /// Stop after this many steps.
        #[arg(long, default_value_t = 1_000)]
        max_steps: usize,
        /// Then remove table versions no commit of a live branch pins that
        /// are older than this many seconds (pinned versions always stay).
        #[arg(long, default_value_t = omnigraph_host::limits::VERSION_RETENTION.as_secs())]
        retention_secs: u64,
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

impl RootArgs {
    fn engine_config(&self) -> Result<EngineConfig, Failure> {
        let mut config = EngineConfig::default();
        if let Some(ms) = self.lease_ttl_ms {
            config.lease_ttl = Duration::from_millis(ms);
        }
        if let Some(ms) = self.lease_wait_ms {
            config.lease_wait = Duration::from_millis(ms);
        }
        if let Some(path) = &self.limits {
            config.limits = read_limits(path)?;
        }
        Ok(config)
    }
}

/// Bounds from a JSON file (any subset of `Limits`; the rest default), checked.
fn read_limits(path: &Path) -> Result<Limits, Failure> {
    let invalid = |e: &dyn std::fmt::Display| operational(format!("{}: {e}", path.display()));
    let limits: Limits = serde_json::from_slice(&read(path)?).map_err(|e| invalid(&e))?;
    Ok(Options { limits, ..Options::default() }.checked().map_err(|e| invalid(&e))?.limits)
}

impl RootArgs {
    fn open_root(&self) -> Result<GraphRoot, EngineError> {
        GraphRoot::new(&self.root, storage_options(&self.s3))
    }

    /// The root for a new graph (a local directory is created).
    fn create_root(&self) -> Result<GraphRoot, EngineError> {
        GraphRoot::create(&self.root, storage_options(&self.s3))
    }

    async fn open(&self) -> Result<Graph, Failure> {
        Ok(Graph::open(self.open_root()?, validator()?, self.engine_config()?).await?)
    }

    /// The graph without a recovery pass at open (`Graph::open_unrecovered`).
    async fn open_unrecovered(&self) -> Result<Graph, Failure> {
        self.open_unrecovered_with(validator()?).await
    }

    async fn open_unrecovered_with(&self, validator: Arc<Validator>) -> Result<Graph, Failure> {
        Ok(Graph::open_unrecovered(self.open_root()?, validator, self.engine_config()?).await?)
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
        Command::Init { root, schema, legacy_identity } => {
            let source = String::from_utf8(read(&schema)?).map_err(|_| operational("the schema is not UTF-8"))?;
            let settings = GraphSettings { legacy_identity };
            let graph = Graph::init_with(root.create_root()?, &source, settings, validator()?, root.engine_config()?).await?;
            eprintln!("created graph at {} (schema {})", graph.root().uri(), graph.schema().hash());
        }
        Command::Serve {
            root,
            listen,
            auth,
            open,
            demo,
            max_loads_per_actor,
            max_batch_bytes,
            max_inflight_bytes,
            body_read_timeout_secs,
            header_read_timeout_secs,
            maintenance_interval_ms,
        } => {
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
            // Compiled (or loaded from the module cache) before the first request.
            validator.ready().map_err(EngineError::from)?;
            if demo {
                ensure_demo(&root, validator.clone()).await?;
            }
            let mut config = ServerConfig::new(root.root.clone(), auth);
            config.storage = storage_options(&root.s3);
            config.engine = root.engine_config()?;
            config.max_loads_per_actor = max_loads_per_actor;
            config.max_inflight_bytes = max_inflight_bytes;
            config.body_read_timeout = Duration::from_secs(body_read_timeout_secs);
            config.maintenance_interval = (maintenance_interval_ms > 0).then(|| Duration::from_millis(maintenance_interval_ms));
            config.header_read_timeout = Duration::from_secs(header_read_timeout_secs);
            if let Some(bytes) = max_batch_bytes {
                config.engine.limits.max_batch_bytes = bytes;
            }
            let state = AppState::new(config, validator);
            state.check_store().await?;
            let listener = tokio::net::TcpListener::bind(&listen).await.map_err(|e| operational(format!("{listen}: {e}")))?;
            eprintln!("serving graphs under {} on http://{}", root.root, listener.local_addr().map_err(operational)?);
            omnigraph_host::http::serve(listener, state, shutdown_signal()).await.map_err(operational)?;
        }
        Command::Validate { schema, file, mode, json, limits, legacy_identity } => {
            let source = String::from_utf8(read(&schema)?).map_err(|_| operational("the schema is not UTF-8"))?;
            let batch = read(&file)?;
            let limits = match &limits {
                Some(path) => read_limits(path)?,
                None => Limits::default(),
            };
            let options = Options { mode: mode.into(), limits, legacy_identity, ..Options::default() };
            let options = serde_json::to_vec(&options).expect("options");
            match validator()?.validate(&source, &options, &batch).map_err(operational)? {
                ValidateOutcome::Report(report) => return print_report(&file, &report, json),
                ValidateOutcome::SchemaError(e) => return Err(operational(format!("{}: {e}", schema.display()))),
                ValidateOutcome::OptionsError(e) => return Err(operational(e)),
            }
        }
        Command::Load { root, server, graph, token, file, branch, from, mode, actor, resume, batch_rows, batch_bytes, lease_ttl_ms, limits, s3 } => {
            // Hashed (for the checkpoint) while the graph opens and the
            // validator's module loads: each costs a process a few
            // milliseconds that need not add up.
            let file_sha256 = tokio::task::spawn_blocking({
                let file = file.clone();
                move || file_sha256(&file)
            });
            let target = match (&root, &server) {
                (Some(root), _) => {
                    let root = RootArgs { root: root.clone(), s3, lease_ttl_ms, lease_wait_ms: None, limits };
                    let validator = validator()?;
                    // The first load would load it; an error shows there.
                    tokio::task::spawn_blocking({
                        let validator = validator.clone();
                        move || validator.ready()
                    });
                    // Not recovered on open: the first load's lease runs
                    // recovery before it writes (and answers a batch that
                    // recovery rolled forward with that commit), and its
                    // commit settles each table it writes. A separate lease
                    // taken and given back at open cost every run its own
                    // round of lease writes.
                    Target::Local(Box::new(root.open_unrecovered_with(validator).await?))
                }
                (None, Some(url)) => Target::Server {
                    client: reqwest_client(),
                    url: url.trim_end_matches('/').to_owned(),
                    graph: graph.clone().expect("clap requires --graph"),
                    token,
                },
                (None, None) => unreachable!("clap requires --root or --server"),
            };
            let bounds = target.limits().await?;
            let job = LoadJob {
                file: &file,
                branch: &branch,
                from,
                mode: mode.into(),
                actor: &actor,
                resume,
                batch_rows: batch_rows.map_or(bounds.max_table_rows, |rows| rows as u64).clamp(1, bounds.max_table_rows.max(1)) as usize,
                batch_bytes: batch_bytes.unwrap_or(bounds.max_batch_bytes).clamp(1, bounds.max_batch_bytes) as usize,
            };
            let file_sha256 = file_sha256.await.map_err(operational)?.map_err(operational)?;
            load_file(&target, job, file_sha256).await?;
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
            // Not `open`: it would recover first, and this command reports what recovery did.
            let graph = root.open_unrecovered().await?;
            print_json(&graph.recover_with_wait(EngineConfig::default().lease_wait).await?);
        }
        Command::Optimize { root, max_steps, retention_secs } => {
            let graph = root.open().await?;
            for commit in graph.optimize(max_steps).await? {
                print_json(&commit);
            }
            print_json(&serde_json::json!({"cleaned": graph.cleanup_versions(Duration::from_secs(retention_secs)).await?}));
        }
    }
    Ok(())
}

/// What `validate` prints of a report. Read without a DOM, and without its
/// `external_refs`, which serde skips unread: a batch of edges whose nodes
/// are stored lists two per line (20 MB of report for a 15 MB file).
#[derive(serde::Deserialize)]
struct ReportSummary {
    ok: bool,
    stats: RecordCount,
    errors: Vec<ReportError>,
    errors_truncated: bool,
    error_count: u64,
}

#[derive(serde::Deserialize)]
struct RecordCount {
    records: u64,
}

#[derive(serde::Deserialize)]
struct ReportError {
    line: u64,
    code: String,
    message: String,
}

/// Prints a report as `file:line: code: message` lines (or JSON); exit 1 if refused.
fn print_report(file: &Path, report_json: &str, json: bool) -> Result<(), Failure> {
    let report: ReportSummary = serde_json::from_str(report_json).map_err(operational)?;
    if json {
        println!("{report_json}");
    } else {
        for e in &report.errors {
            println!("{}:{}: {}: {}", file.display(), e.line, e.code, e.message);
        }
        if report.ok {
            println!("{}: valid ({} records)", file.display(), report.stats.records);
        } else {
            let truncated = if report.errors_truncated { ", list truncated" } else { "" };
            println!("{}: invalid ({} errors{truncated})", file.display(), report.error_count);
        }
    }
    if report.ok { Ok(()) } else { Err(Failure::Invalid(String::new())) }
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder().build().expect("HTTP client")
}

enum Target {
    Local(Box<Graph>),
    Server { client: reqwest::Client, url: String, graph: String, token: Option<String> },
}

/// Why a batch was not committed, or may not have been.
struct BatchRefused {
    /// A bound of SPEC §5 that a smaller batch may fit (split and retry).
    splittable: bool,
    /// The report or the error body, as JSON, when there is one.
    details: Option<serde_json::Value>,
    /// The batch may have been committed all the same: recovery decides
    /// (`recovery_required`), or the answer was lost (the connection broke
    /// after the request was sent, a 5xx that is no refusal). `--resume`
    /// then finds it in the branch's log by its batch key.
    maybe_written: bool,
    failure: Failure,
}

impl BatchRefused {
    /// The failure to report; when the batch may have been committed, it
    /// says so and how to finish (the progress bar's message is not shown
    /// when standard error is no terminal).
    fn reported(self, what: &str) -> Failure {
        match self.failure {
            Failure::Invalid(text) | Failure::Operational(text) if self.maybe_written => {
                Failure::Operational(format!("{text}\n{what} may have been committed (the answer was lost, or recovery decides); nothing after it was sent. Run again with --resume: it finds it by its batch key in the branch's log and finishes exactly once"))
            }
            failure => failure,
        }
    }
}

impl From<Failure> for BatchRefused {
    fn from(failure: Failure) -> Self {
        BatchRefused { splittable: false, details: None, maybe_written: false, failure }
    }
}

/// The server's answers that refuse a request before anything is written
/// (503 and 5xx otherwise leave it open whether a write happened).
const REFUSED_UNWRITTEN: [&str; 5] = ["graph_busy", "server_busy", "recovery_in_progress", "validator_error", "caller_gone"];

impl Target {
    fn call(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let Target::Server { client, url, graph, token } = self else { unreachable!("a server target") };
        let call = client.request(method, format!("{url}/graphs/{graph}{path}"));
        match token {
            Some(token) => call.bearer_auth(token),
            None => call,
        }
    }

    /// Sends a request to the server; a non-2xx answer is an error with its body.
    async fn send(call: reqwest::RequestBuilder) -> Result<serde_json::Value, BatchRefused> {
        // A request that may have reached the server whose answer is lost.
        let lost = |e: reqwest::Error| BatchRefused { maybe_written: !e.is_connect(), ..BatchRefused::from(operational(e)) };
        let response = call.send().await.map_err(lost)?;
        let status = response.status();
        let body = response.text().await.map_err(lost)?;
        if status.is_success() {
            return Ok(serde_json::from_str(&body).unwrap_or(serde_json::Value::Null));
        }
        let details: Option<serde_json::Value> = serde_json::from_str(&body).ok();
        let code = details.as_ref().and_then(|d| d["code"].as_str()).unwrap_or_default().to_owned();
        let text = format!("error: HTTP {status}\n{body}");
        let failure = match status.as_u16() {
            409 | 413 | 422 => Failure::Invalid(text),
            _ => Failure::Operational(text),
        };
        let maybe_written = code == "recovery_required" || (status.is_server_error() && !REFUSED_UNWRITTEN.contains(&code.as_str()));
        Err(BatchRefused { splittable: status == 413 && SIZE_BOUND_CODES.contains(&code.as_str()), details, maybe_written, failure })
    }

    /// The bounds the graph validates with (the server's `/rules`).
    async fn limits(&self) -> Result<Limits, Failure> {
        match self {
            Target::Local(graph) => Ok(*graph.limits()),
            Target::Server { .. } => {
                let rules = Target::send(self.call(reqwest::Method::GET, "/rules")).await.map_err(|r| r.failure)?;
                serde_json::from_value(rules["bounds"].clone()).map_err(operational)
            }
        }
    }

    /// Commits one batch; `batch_key` makes a retried batch recognisable.
    async fn load(&self, request: LoadRequest) -> Result<(), BatchRefused> {
        match self {
            Target::Local(graph) => match graph.load(request).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    let (splittable, details) = match &e {
                        EngineError::Invalid { report_json } => {
                            let report: serde_json::Value = serde_json::from_str(report_json).unwrap_or_default();
                            (report_bound(report_json).is_some(), Some(report))
                        }
                        EngineError::Rejected { conflicts, .. } => {
                            (false, Some(serde_json::json!({ "conflicts": conflicts })))
                        }
                        _ => (false, None),
                    };
                    Err(BatchRefused { splittable, details, maybe_written: e.maybe_committed(), failure: e.into() })
                }
            },
            Target::Server { .. } => {
                let mut query = vec![("branch", request.branch.clone()), ("mode", request.mode.as_str().to_owned())];
                if let Some(from) = &request.from {
                    query.push(("from", from.clone()));
                }
                if let Some(key) = &request.batch_key {
                    query.push(("batch_key", key.clone()));
                }
                let call = self
                    .call(reqwest::Method::POST, "/load/ndjson")
                    .query(&query)
                    .header("content-type", "application/x-ndjson")
                    .body(request.batch.as_ref().clone());
                Target::send(call).await.map(drop)
            }
        }
    }

    /// Forks `name` from `from` with the tables of `clear` empty; the base's seq.
    async fn fork(&self, name: &str, from: &str, clear: &[String]) -> Result<u64, Failure> {
        match self {
            Target::Local(graph) => {
                let commit = graph.create_work_branch(name, from, clear, "cli").await?;
                Ok(commit.parent.map_or(0, |p| p.seq))
            }
            Target::Server { .. } => {
                let body = serde_json::json!({"name": name, "from": from, "clear": clear});
                let created = Target::send(self.call(reqwest::Method::POST, "/branches").json(&body)).await.map_err(|r| r.failure)?;
                created["base"]["seq"].as_u64().ok_or_else(|| operational("the server did not name the fork's base"))
            }
        }
    }

    /// Publishes a multi-batch overwrite's work branch onto `branch`.
    async fn publish(&self, branch: &str, work: &WorkBranch, key: String, actor: &str) -> Result<(), BatchRefused> {
        match self {
            Target::Local(graph) => {
                let publish = OverwritePublish {
                    branch: branch.to_owned(),
                    work: work.branch.clone(),
                    base_seq: work.base_seq,
                    types: work.types.clone(),
                    actor: actor.to_owned(),
                    batch_key: Some(key),
                };
                graph.publish_overwrite(publish).await.map(drop).map_err(|e| BatchRefused {
                    maybe_written: e.maybe_committed(),
                    ..BatchRefused::from(Failure::from(e))
                })
            }
            Target::Server { .. } => {
                let body = serde_json::json!({
                    "branch": branch, "from": work.branch, "base_seq": work.base_seq, "types": work.types, "batch_key": key,
                });
                Target::send(self.call(reqwest::Method::POST, "/overwrite").json(&body)).await.map(drop)
            }
        }
    }

    /// After a split run of `commits` loads on a local root, once: the
    /// maintenance a server would have done in the background meanwhile
    /// (bounded steps, each its own `maintain` commit, at most a few per
    /// batch the run committed), so the next load's checks use indexes and
    /// few fragments. Never between a run's batches: a file's commits come
    /// one after another. A one-batch file adds what one load adds, and is
    /// left, like any load, to a server or `optimize`. A server target
    /// maintains itself.
    async fn maintain_after(&self, commits: u64) {
        let Target::Local(graph) = self else { return };
        let steps = omnigraph_host::limits::MAINTENANCE_STEPS_PER_BATCH.saturating_mul(commits as usize);
        for _ in 0..steps {
            match graph.maintain_step().await {
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => {
                    eprintln!("maintenance skipped ({e}); `omnigraph-host optimize` catches up");
                    return;
                }
            }
        }
    }

    /// The batch keys already committed on `branch` (none if it does not exist).
    async fn committed_keys(&self, branch: &str) -> Result<Vec<String>, Failure> {
        let commits: Vec<serde_json::Value> = match self {
            Target::Local(graph) => match graph.log(branch).await {
                Ok(log) => log.iter().map(|c| serde_json::to_value(c).expect("serializes")).collect(),
                Err(EngineError::BranchNotFound(_)) => Vec::new(),
                Err(e) => return Err(e.into()),
            },
            Target::Server { .. } => {
                let call = self.call(reqwest::Method::GET, "/commits").query(&[("branch", branch)]);
                match Target::send(call).await {
                    Ok(body) => body["commits"].as_array().cloned().unwrap_or_default(),
                    Err(BatchRefused { details: Some(d), .. }) if d["code"] == "branch_not_found" => Vec::new(),
                    Err(refused) => return Err(refused.failure),
                }
            }
        };
        Ok(commits.iter().filter_map(|c| c["batch_key"].as_str().map(str::to_owned)).collect())
    }
}

/// What `load` was asked to do.
struct LoadJob<'a> {
    file: &'a Path,
    branch: &'a str,
    from: Option<String>,
    mode: Mode,
    actor: &'a str,
    resume: bool,
    batch_rows: usize,
    batch_bytes: usize,
}

/// Tells which file lines a refused batch's report lines are (reports
/// count lines within the batch).
fn print_file_lines(batch: &Batch, details: Option<&serde_json::Value>) {
    let Some(details) = details else { return };
    let mut lines = std::collections::BTreeSet::new();
    for list in [&details["errors"], &details["report"]["errors"], &details["conflicts"], &details["details"]["conflicts"]] {
        for item in list.as_array().into_iter().flatten() {
            lines.extend(item["line"].as_u64());
        }
    }
    for line in lines.into_iter().take(100) {
        if let Some(file_line) = batch.file_line(line) {
            eprintln!("  batch line {line} is line {file_line} of the file");
        }
    }
}

/// Streams the file into batches and commits them in order (nodes before
/// edges once the file is split), with a progress bar and a checkpoint file
/// for `--resume`. An overwrite of several batches goes through a work
/// branch published in one commit (`Graph::publish_overwrite`). `digest`
/// is the file's SHA-256, which ties a checkpoint to the file.
async fn load_file(target: &Target, job: LoadJob<'_>, digest: String) -> Result<(), Failure> {
    let checkpoint_path = Checkpoint::path_for(job.file);
    let mut checkpoint = match (job.resume, Checkpoint::read(&checkpoint_path).map_err(operational)?) {
        (true, Some(previous)) if previous.file_sha256 != digest => {
            return Err(operational("--resume: the file changed since the interrupted run"));
        }
        // A resumed run splits with the interrupted run's bounds.
        (true, Some(previous)) => previous,
        (true, None) => return Err(operational(format!("--resume: no checkpoint at {}", checkpoint_path.display()))),
        (false, _) => Checkpoint::new(digest, job.batch_rows, job.batch_bytes),
    };
    let mut splitter = Splitter::open(job.file, checkpoint.batch_rows, checkpoint.batch_bytes).map_err(operational)?;
    let len = splitter.len();
    // A batch may have committed after the last checkpoint write: the
    // graph's log knows (each commit carries its batch key).
    if let Some(work) = &checkpoint.overwrite {
        if target.committed_keys(job.branch).await?.contains(&checkpoint.publish_key()) {
            eprintln!("the overwrite was already published");
            return Checkpoint::remove(&checkpoint_path).map_err(operational);
        }
        let keys = target.committed_keys(&work.branch).await?;
        checkpoint.catch_up(&keys, len);
    } else {
        checkpoint.catch_up(&target.committed_keys(job.branch).await?, len);
    }
    let bar = indicatif::ProgressBar::new(len.max(1));
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {msg}").expect("progress template"));
    let mut commits = 0u64;

    if checkpoint.next.pass == Pass::All {
        let whole = if checkpoint.next.offset == 0 { splitter.whole_file().map_err(operational)? } else { None };
        match whole {
            None if checkpoint.next.offset >= len && len > 0 => {}
            None if len == 0 => {}
            None => checkpoint.next = Position { pass: Pass::Nodes, offset: 0 },
            Some(batch) => {
                // The run id and batch key are on disk before anything is
                // sent: whatever happens to the answer, --resume can tell.
                checkpoint.write(&checkpoint_path).map_err(operational)?;
                let request = batch_request(&job, job.branch, job.mode, job.from.clone(), &batch, &checkpoint.run);
                match target.load(request).await {
                    Ok(()) => {
                        checkpoint.next.offset = len;
                        commits += 1;
                    }
                    Err(refused) if refused.splittable => {
                        eprintln!("the file is over a bound as one batch; splitting it");
                        checkpoint.next = Position { pass: Pass::Nodes, offset: 0 };
                        checkpoint.write(&checkpoint_path).map_err(operational)?;
                    }
                    Err(refused) if refused.maybe_written => {
                        bar.abandon_with_message("stopped: the file may have been committed; run again with --resume");
                        return Err(refused.reported("the file (one batch)"));
                    }
                    Err(refused) => {
                        print_file_lines(&batch, refused.details.as_ref());
                        Checkpoint::remove(&checkpoint_path).map_err(operational)?;
                        bar.abandon_with_message("stopped: nothing of the file was written");
                        return Err(refused.failure);
                    }
                }
            }
        }
    }

    if checkpoint.next.pass != Pass::All {
        if job.mode == Mode::Overwrite && checkpoint.overwrite.is_none() {
            let types = types_named(job.file, checkpoint.batch_bytes).map_err(operational)?;
            let work_name = checkpoint.work_branch_name();
            let base_seq = match target.fork(&work_name, job.branch, &types).await {
                Err(Failure::Operational(text) | Failure::Invalid(text)) if text.contains("branch_not_found") && job.from.is_some() => {
                    target.fork(job.branch, job.from.as_deref().expect("checked"), &[]).await?;
                    target.fork(&work_name, job.branch, &types).await?
                }
                other => other?,
            };
            checkpoint.overwrite = Some(WorkBranch { branch: work_name, base_seq, types });
            checkpoint.write(&checkpoint_path).map_err(operational)?;
        }
        let (branch, mode, from) = match &checkpoint.overwrite {
            Some(work) => (work.branch.clone(), Mode::Append, None),
            None => (job.branch.to_owned(), job.mode, job.from.clone()),
        };
        splitter.seek(checkpoint.next).map_err(operational)?;
        // As for a whole file: the run id is on disk before a batch is sent.
        checkpoint.write(&checkpoint_path).map_err(operational)?;
        let mut smaller: Vec<Batch> = Vec::new();
        loop {
            let batch = match smaller.pop() {
                Some(batch) => batch,
                None => match splitter.next_batch().map_err(operational)? {
                    Some(batch) => batch,
                    None => break,
                },
            };
            let request = batch_request(&job, &branch, mode, from.clone(), &batch, &checkpoint.run);
            match target.load(request).await {
                Ok(()) => {
                    checkpoint.next = Position { pass: batch.pass, offset: batch.end };
                    checkpoint.write(&checkpoint_path).map_err(operational)?;
                    commits += 1;
                    let done = if batch.pass == Pass::Edges { len / 2 + batch.end / 2 } else { batch.end / 2 };
                    bar.set_position(done);
                    bar.set_message(format!("{commits} commits ({})", if batch.pass == Pass::Edges { "edges" } else { "nodes" }));
                }
                Err(refused) if refused.splittable && batch.lines.len() > 1 => {
                    let (first, second) = batch.halves().expect("two lines or more");
                    smaller.push(second);
                    smaller.push(first);
                }
                Err(refused) if refused.maybe_written => {
                    let what = format!(
                        "the batch of file lines {}..={}",
                        batch.lines.first().map_or(0, |l| l.0),
                        batch.lines.last().map_or(0, |l| l.0)
                    );
                    bar.abandon_with_message(format!("stopped: {what} may have been committed; run again with --resume"));
                    return Err(refused.reported(&what));
                }
                Err(refused) => {
                    print_file_lines(&batch, refused.details.as_ref());
                    let target_note = if checkpoint.overwrite.is_some() { ", and the target is unchanged" } else { "" };
                    bar.abandon_with_message(format!(
                        "stopped at file lines {}..={} (nothing of this batch was written{target_note}); fix it and run again with --resume",
                        batch.lines.first().map_or(0, |l| l.0),
                        batch.lines.last().map_or(0, |l| l.0)
                    ));
                    return Err(refused.failure);
                }
            }
        }
        if let Some(work) = &checkpoint.overwrite {
            if let Err(refused) = target.publish(job.branch, work, checkpoint.publish_key(), job.actor).await {
                bar.abandon_with_message(if refused.maybe_written {
                    "the overwrite may have been published; run again with --resume"
                } else {
                    "the overwrite was not published: the target is unchanged"
                });
                return Err(refused.reported("the overwrite's publish"));
            }
            commits += 1;
        }
    }
    bar.set_position(len.max(1));
    bar.finish_with_message(format!("{commits} commits"));
    Checkpoint::remove(&checkpoint_path).map_err(operational)?;
    if checkpoint.next.pass != Pass::All {
        target.maintain_after(commits).await;
    }
    Ok(())
}

/// The load request of one batch of a file.
fn batch_request(job: &LoadJob<'_>, branch: &str, mode: Mode, from: Option<String>, batch: &Batch, run: &str) -> LoadRequest {
    LoadRequest {
        branch: branch.to_owned(),
        from,
        mode,
        strict: true,
        actor: job.actor.to_owned(),
        batch: batch.bytes.clone(),
        batch_key: Some(batch.key(run)),
    }
}

async fn ensure_demo(root: &RootArgs, validator: Arc<Validator>) -> Result<(), Failure> {
    let demo = RootArgs { root: format!("{}/demo", root.root.trim_end_matches('/')), ..root.clone() };
    let graph = match Graph::init(demo.create_root()?, DEMO_SCHEMA, validator, demo.engine_config()?).await {
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
    // Before any thread exists: few arenas, so freed batch buffers are reused
    // instead of piling up per thread, a fixed mmap threshold, so a batch's
    // large buffers are returned when freed (memory stays one batch, not the
    // file), and a trim threshold that keeps the heap's top between batches.
    // SAFETY: mallopt only sets allocator parameters; no allocation is in flight on another thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, omnigraph_host::limits::MALLOC_ARENAS);
        libc::mallopt(libc::M_MMAP_THRESHOLD, omnigraph_host::limits::MALLOC_MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, omnigraph_host::limits::MALLOC_TRIM_THRESHOLD);
    }
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
