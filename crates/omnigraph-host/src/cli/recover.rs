//! `omnigraph-host recover`: finishes or undoes a load a crash interrupted,
//! and prints what recovery did.

use omnigraph_host::EngineConfig;

use super::common::{Failure, RootArgs, print_json};

#[derive(clap::Args)]
pub(crate) struct RecoverArgs {
    #[command(flatten)]
    root: RootArgs,
}

pub(crate) async fn run(RecoverArgs { root }: RecoverArgs) -> Result<(), Failure> {
    // Not `open`: it would recover first, and this command reports what recovery did.
    let graph = root.open_unrecovered().await?;
    print_json(&graph.recover_with_wait(EngineConfig::default().lease_wait).await?);
    Ok(())
}
