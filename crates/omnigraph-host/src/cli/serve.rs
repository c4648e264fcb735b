//! `omnigraph-host serve`: every graph under `--root` over HTTP (SPEC §6),
//! with a graceful shutdown on SIGINT or SIGTERM, and the demo graph
//! `scripts/run.sh` serves (`--demo`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use omnigraph_host::auth::Auth;
use omnigraph_host::http::{AppState, ServerConfig};
use omnigraph_host::validator::Validator;
use omnigraph_host::{EngineError, Graph, LoadRequest};
use omnigraph_validate_wasm::Mode;

use super::common::{Failure, RootArgs, operational, read, storage_options, validator};
use super::consume::{StreamArgs, consume};
use super::target::Target;

/// The demo graph `serve --demo` creates on first run.
const DEMO_SCHEMA: &str = include_str!("../../../../samples/people.pg");
const DEMO_BATCH: &str = include_str!("../../../../samples/people.ndjson");

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
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
    /// Consume a NATS JetStream stream into a graph's main branch, as
    /// `consume` does with its defaults: GRAPH=STREAM (repeatable; the
    /// stream must exist). Counted in /metrics.
    #[arg(long = "consume", value_name = "GRAPH=STREAM")]
    consume: Vec<String>,
    /// The NATS server of --consume, host:port.
    #[arg(long, env = "OMNIGRAPH_NATS", default_value = "127.0.0.1:4222")]
    nats: String,
}

pub(crate) async fn run(ServeArgs { root, listen, auth, open, demo, max_loads_per_actor, max_batch_bytes, max_inflight_bytes, body_read_timeout_secs, header_read_timeout_secs, maintenance_interval_ms, consume, nats }: ServeArgs) -> Result<(), Failure> {
    let consumers: Vec<(String, String)> = consume
        .iter()
        .map(|spec| spec.split_once('=').map(|(g, s)| (g.to_owned(), s.to_owned())))
        .collect::<Option<_>>()
        .ok_or_else(|| operational("--consume takes GRAPH=STREAM"))?;
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
    for (graph, stream) in consumers {
        tokio::spawn(consume_in_server(state.clone(), graph, StreamArgs::defaults(&nats, &stream)));
    }
    eprintln!("serving graphs under {} on http://{}", root.root, listener.local_addr().map_err(operational)?);
    omnigraph_host::http::serve(listener, state, shutdown_signal()).await.map_err(operational)?;
    Ok(())
}

/// A `--consume` inside the server: its graph as requests get it, the
/// consumer for as long as the server runs (its errors logged, then it
/// starts again after a pause).
async fn consume_in_server(state: Arc<AppState>, graph: String, stream: StreamArgs) {
    loop {
        let outcome = match state.open_graph(&graph).await {
            Ok(opened) => consume(Target::Local(opened), stream.clone(), None, Some(state.clone())).await.err(),
            Err(e) => Some(operational(e)),
        };
        if let Some(Failure::Invalid(text) | Failure::Operational(text)) = outcome {
            eprintln!("consume {graph}: {text}; starting again in 5 s");
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
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
        unchanged_since: None,
    };
    graph.load(request).await?;
    eprintln!("created the demo graph at {}", graph.root().uri());
    Ok(())
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

pub(crate) fn termination_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}
