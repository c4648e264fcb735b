//! `omnigraph-host export`: every record of a branch, or of one of its
//! commits (`--at`), as NDJSON on standard output.

use std::io::Write;

use omnigraph_host::EngineError;

use super::common::{Failure, RootArgs};

#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    root: RootArgs,
    #[arg(long, default_value = "main")]
    branch: String,
    #[arg(long)]
    at: Option<u64>,
}

pub(crate) async fn run(ExportArgs { root, branch, at }: ExportArgs) -> Result<(), Failure> {
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
    Ok(())
}
