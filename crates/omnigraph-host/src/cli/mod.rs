//! The command line (SPEC §7): one file per command, what they share in
//! `common.rs`, and `run`, which hands a parsed command to its file.

pub(crate) mod branch;
mod common;
pub(crate) mod consume;
pub(crate) mod export;
pub(crate) mod init;
pub(crate) mod load;
pub(crate) mod log;
pub(crate) mod optimize;
pub(crate) mod publish;
pub(crate) mod recover;
pub(crate) mod serve;
mod target;
pub(crate) mod validate;

use clap::{Parser, Subcommand};

pub(crate) use common::Failure;

#[derive(Parser)]
#[command(name = "omnigraph-host", version, about = "OmniGraph ingest: validate and commit graph batches into Lance")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Create a graph from a .pg schema.
    Init(init::InitArgs),
    /// Serve every graph under --root over HTTP (SPEC §6).
    Serve(serve::ServeArgs),
    /// Validate a file offline with the validator artifact in wasmtime.
    Validate(validate::ValidateArgs),
    /// Load an NDJSON file: split at line boundaries into bounded batches,
    /// one graph commit each, into a local root or through a server.
    Load(load::LoadArgs),
    /// Commit a NATS JetStream stream into a graph, exactly once: bounded
    /// batches, one commit each; refused records to a dead-letter stream.
    Consume(consume::ConsumeArgs),
    /// Publish an NDJSON file into a NATS JetStream stream, N records per message.
    Publish(publish::PublishArgs),
    /// Print every record of a branch (or of commit --at) as NDJSON.
    Export(export::ExportArgs),
    /// Print a branch's commits, newest first, as JSON lines.
    Log(log::LogArgs),
    Branch(branch::BranchArgs),
    /// Finish or undo a load interrupted by a crash.
    Recover(recover::RecoverArgs),
    /// Maintain a graph until nothing needs work: create the indexes the
    /// checks and `@index` ask for, fold new rows into them, compact small
    /// fragments; one `maintain` commit per step (a server does this itself).
    Optimize(optimize::OptimizeArgs),
}

/// Runs a parsed command.
pub(crate) async fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Init(args) => init::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Validate(args) => validate::run(args).await,
        Command::Load(args) => load::run(args).await,
        Command::Consume(args) => consume::run(args).await,
        Command::Publish(args) => publish::run(args).await,
        Command::Export(args) => export::run(args).await,
        Command::Log(args) => log::run(args).await,
        Command::Branch(args) => branch::run(args).await,
        Command::Recover(args) => recover::run(args).await,
        Command::Optimize(args) => optimize::run(args).await,
    }
}
