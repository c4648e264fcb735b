//! `omnigraph-host branch list|create|delete`.

use clap::Subcommand;

use super::common::{Failure, RootArgs, print_json};

#[derive(clap::Args)]
pub(crate) struct BranchArgs {
    #[command(flatten)]
    root: RootArgs,
    #[command(subcommand)]
    command: BranchCommand,
}

pub(crate) async fn run(BranchArgs { root, command }: BranchArgs) -> Result<(), Failure> {
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
    Ok(())
}

#[derive(Subcommand)]
pub(crate) enum BranchCommand {
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
