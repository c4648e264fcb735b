//! What the commands share: a graph root and its S3 options, the load
//! mode, the way a command fails (exit 1 for a refused batch, 2 otherwise),
//! and small helpers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphRoot, StorageOptions};
use omnigraph_validate_wasm::{Limits, Mode, Options};

#[derive(clap::Args, Clone)]
pub(crate) struct RootArgs {
    /// The graph root: a local directory or s3://bucket/prefix.
    #[arg(long)]
    pub(crate) root: String,
    #[command(flatten)]
    pub(crate) s3: S3Args,
    /// Write lease duration in milliseconds (a crashed writer blocks others this long).
    #[arg(long, env = "OMNIGRAPH_LEASE_TTL_MS")]
    pub(crate) lease_ttl_ms: Option<u64>,
    /// How long a write waits for another host's lease, in milliseconds,
    /// before it answers 503 (`graph_busy`, or `recovery_in_progress`).
    #[arg(long, env = "OMNIGRAPH_LEASE_WAIT_MS")]
    pub(crate) lease_wait_ms: Option<u64>,
    /// Rows each graph's key runs (the in-memory lookups of stored rows)
    /// may hold in all, about 40 bytes each (default 8,388,608): every
    /// `_id`, every `@card` edge's source and every `@unique` tuple counts.
    #[arg(long, env = "OMNIGRAPH_KEY_RUN_ROWS")]
    pub(crate) key_run_rows: Option<u64>,
    /// Batch bounds (SPEC §5) as JSON, e.g. {"max_table_rows": 4096}; the
    /// rest keep their defaults. Loads are validated with them and `/rules`
    /// reports them.
    #[arg(long, env = "OMNIGRAPH_LIMITS")]
    pub(crate) limits: Option<PathBuf>,
}

/// Options of `s3://` roots; credentials come from `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY` (docs/storage.md).
#[derive(clap::Args, Clone, Default)]
pub(crate) struct S3Args {
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
pub(crate) enum ModeArg {
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

/// Why the command failed: 1 for a refused batch, 2 for everything else.
pub(crate) enum Failure {
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

pub(crate) fn operational(e: impl std::fmt::Display) -> Failure {
    Failure::Operational(format!("error: {e}"))
}

pub(crate) fn storage_options(s3: &S3Args) -> StorageOptions {
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
    pub(crate) fn engine_config(&self) -> Result<EngineConfig, Failure> {
        let mut config = EngineConfig::default();
        if let Some(ms) = self.lease_ttl_ms {
            config.lease_ttl = Duration::from_millis(ms);
        }
        if let Some(ms) = self.lease_wait_ms {
            config.lease_wait = Duration::from_millis(ms);
        }
        if let Some(rows) = self.key_run_rows {
            config.key_run_rows = rows;
        }
        if let Some(path) = &self.limits {
            config.limits = read_limits(path)?;
        }
        Ok(config)
    }

    pub(crate) fn open_root(&self) -> Result<GraphRoot, EngineError> {
        GraphRoot::new(&self.root, storage_options(&self.s3))
    }

    /// The root for a new graph (a local directory is created).
    pub(crate) fn create_root(&self) -> Result<GraphRoot, EngineError> {
        GraphRoot::create(&self.root, storage_options(&self.s3))
    }

    pub(crate) async fn open(&self) -> Result<Graph, Failure> {
        Ok(Graph::open(self.open_root()?, validator()?, self.engine_config()?).await?)
    }

    /// The graph without a recovery pass at open (`Graph::open_unrecovered`).
    pub(crate) async fn open_unrecovered(&self) -> Result<Graph, Failure> {
        self.open_unrecovered_with(validator()?).await
    }

    pub(crate) async fn open_unrecovered_with(&self, validator: Arc<Validator>) -> Result<Graph, Failure> {
        Ok(Graph::open_unrecovered(self.open_root()?, validator, self.engine_config()?).await?)
    }
}

/// Bounds from a JSON file (any subset of `Limits`; the rest default), checked.
pub(crate) fn read_limits(path: &Path) -> Result<Limits, Failure> {
    let invalid = |e: &dyn std::fmt::Display| operational(format!("{}: {e}", path.display()));
    let limits: Limits = serde_json::from_slice(&read(path)?).map_err(|e| invalid(&e))?;
    Ok(Options { limits, ..Options::default() }.checked().map_err(|e| invalid(&e))?.limits)
}

pub(crate) fn validator() -> Result<Arc<Validator>, EngineError> {
    Ok(Arc::new(Validator::new(RunnerConfig::default())?))
}

pub(crate) fn print_json(value: &impl serde::Serialize) {
    println!("{}", serde_json::to_string(value).expect("serializes"));
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| operational(format!("{}: {e}", path.display())))
}
