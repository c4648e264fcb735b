//! `omnigraph-host optimize`: maintenance steps until nothing needs work,
//! then the cleanup of unpinned table versions.

use std::time::Duration;

use super::common::{Failure, RootArgs, print_json};

#[derive(clap::Args)]
pub(crate) struct OptimizeArgs {
    #[command(flatten)]
    root: RootArgs,
    /// Stop after this many steps.
    #[arg(long, default_value_t = 1_000)]
    max_steps: usize,
    /// Then remove table versions no commit of a live branch pins that
    /// are older than this many seconds (pinned versions always stay).
    #[arg(long, default_value_t = omnigraph_host::limits::VERSION_RETENTION.as_secs())]
    retention_secs: u64,
}

pub(crate) async fn run(OptimizeArgs { root, max_steps, retention_secs }: OptimizeArgs) -> Result<(), Failure> {
    let graph = root.open().await?;
    for commit in graph.optimize(max_steps).await? {
        print_json(&commit);
    }
    print_json(&serde_json::json!({"cleaned": graph.cleanup_versions(Duration::from_secs(retention_secs)).await?}));
    Ok(())
}
