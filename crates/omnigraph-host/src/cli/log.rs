//! `omnigraph-host log`: a branch's commits, newest first, as JSON lines.

use super::common::{Failure, RootArgs, print_json};

#[derive(clap::Args)]
pub(crate) struct LogArgs {
    #[command(flatten)]
    root: RootArgs,
    #[arg(long, default_value = "main")]
    branch: String,
}

pub(crate) async fn run(LogArgs { root, branch }: LogArgs) -> Result<(), Failure> {
    for commit in root.open().await?.log(&branch).await? {
        print_json(&commit);
    }
    Ok(())
}
