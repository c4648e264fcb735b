//! `omnigraph-host init`: creates a graph from a `.pg` schema.

use std::path::PathBuf;

use omnigraph_host::{Graph, GraphSettings};

use super::common::{Failure, RootArgs, operational, read, validator};

#[derive(clap::Args)]
pub(crate) struct InitArgs {
    #[command(flatten)]
    root: RootArgs,
    schema: PathBuf,
    /// Legacy identity (SPEC §2.3): a node record's `data.id` is its
    /// identity when it has no top-level `id`. Fixed for the graph's life.
    #[arg(long)]
    legacy_identity: bool,
}

pub(crate) async fn run(InitArgs { root, schema, legacy_identity }: InitArgs) -> Result<(), Failure> {
    let source = String::from_utf8(read(&schema)?).map_err(|_| operational("the schema is not UTF-8"))?;
    let settings = GraphSettings { legacy_identity };
    let graph = Graph::init_with(root.create_root()?, &source, settings, validator()?, root.engine_config()?).await?;
    eprintln!("created graph at {} (schema {})", graph.root().uri(), graph.schema().hash());
    Ok(())
}
