//! `omnigraph-host`: the commit host's command line (SPEC §7).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphRoot, LoadRequest, StorageOptions};
use omnigraph_validate_wasm::Mode;

#[derive(Parser)]
#[command(name = "omnigraph-host", version, about = "OmniGraph ingest: validate and commit graph batches into Lance")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct RootArgs {
    /// The graph root: a local directory or s3://bucket/prefix.
    #[arg(long)]
    root: String,
    /// S3 endpoint (S3-compatible servers), e.g. http://127.0.0.1:9000.
    #[arg(long, env = "OMNIGRAPH_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    #[arg(long, env = "OMNIGRAPH_S3_REGION")]
    s3_region: Option<String>,
    /// Allow plain-HTTP S3 endpoints.
    #[arg(long)]
    s3_allow_http: bool,
    /// Write lease duration in milliseconds (a crashed writer blocks others this long).
    #[arg(long, env = "OMNIGRAPH_LEASE_TTL_MS")]
    lease_ttl_ms: Option<u64>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Merge,
    Append,
    Overwrite,
}

#[derive(Subcommand)]
enum BranchCommand {
    List,
    Create { name: String, #[arg(long, default_value = "main")] from: String },
    Delete { name: String },
}

#[derive(Subcommand)]
enum Command {
    /// Create a graph from a .pg schema.
    Init {
        #[command(flatten)]
        root: RootArgs,
        schema: PathBuf,
    },
    /// Load one NDJSON batch as one graph commit.
    Load {
        #[command(flatten)]
        root: RootArgs,
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

impl RootArgs {
    fn open_root(&self) -> Result<GraphRoot, EngineError> {
        let mut options = StorageOptions::new();
        if let Some(e) = &self.s3_endpoint {
            options.insert("aws_endpoint".into(), e.clone());
        }
        if let Some(r) = &self.s3_region {
            options.insert("aws_region".into(), r.clone());
        }
        if self.s3_allow_http {
            options.insert("aws_allow_http".into(), "true".into());
        }
        for (key, env) in [("aws_access_key_id", "AWS_ACCESS_KEY_ID"), ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY")] {
            if let Ok(v) = std::env::var(env) {
                options.insert(key.into(), v);
            }
        }
        GraphRoot::new(&self.root, options)
    }

    fn config(&self) -> EngineConfig {
        let mut config = EngineConfig::default();
        if let Some(ms) = self.lease_ttl_ms {
            config.lease_ttl = Duration::from_millis(ms);
        }
        config
    }

    async fn open(&self) -> Result<Graph, EngineError> {
        Graph::open(self.open_root()?, validator()?, self.config()).await
    }
}

fn validator() -> Result<Arc<Validator>, EngineError> {
    Ok(Arc::new(Validator::new(RunnerConfig::default())?))
}

fn print_json(value: &impl serde::Serialize) {
    println!("{}", serde_json::to_string(value).expect("serializes"));
}

async fn run(command: Command) -> Result<(), EngineError> {
    match command {
        Command::Init { root, schema } => {
            let source = std::fs::read_to_string(&schema).map_err(|e| EngineError::Storage(format!("{}: {e}", schema.display())))?;
            let graph = Graph::init(root.open_root()?, &source, validator()?, root.config()).await?;
            eprintln!("created graph at {} (schema {})", graph.root().uri(), graph.schema().hash());
        }
        Command::Load { root, file, branch, from, mode, actor } => {
            let batch = std::fs::read(&file).map_err(|e| EngineError::Storage(format!("{}: {e}", file.display())))?;
            let mode = match mode {
                ModeArg::Merge => Mode::Merge,
                ModeArg::Append => Mode::Append,
                ModeArg::Overwrite => Mode::Overwrite,
            };
            let graph = root.open().await?;
            let receipt = graph.load(LoadRequest { branch, from, mode, actor, batch: Arc::new(batch) }).await?;
            print_json(&receipt);
        }
        Command::Export { root, branch, at } => {
            let graph = root.open().await?;
            let mut out = std::io::stdout().lock();
            graph
                .export(&branch, at, |chunk| out.write_all(chunk.as_bytes()).map_err(|e| EngineError::Storage(e.to_string())))
                .await?;
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
            let graph = Graph::open(root.open_root()?, validator()?, root.config()).await?;
            let outcome = graph.recover_with_wait(root.config().lease_wait).await?;
            eprintln!("recovery: {outcome:?}");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Test builds read crash/delay injections from FAILPOINTS (tests/processes.rs).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            if let EngineError::Invalid { report_json } | EngineError::Rejected { report_json, .. } = &e {
                eprintln!("{report_json}");
            }
            if let EngineError::Rejected { conflicts, .. } = &e {
                eprintln!("{}", serde_json::to_string(conflicts).expect("serializes"));
            }
            // 1: the batch is invalid; 2: anything operational.
            ExitCode::from(if matches!(e, EngineError::Invalid { .. } | EngineError::Rejected { .. }) { 1 } else { 2 })
        }
    }
}
