//! OmniGraph ingest's commit host. Its modules follow a load's path:
//! validate (the wasm artifact in wasmtime, [`validator`]) → stateful checks
//! ([`checks`]) → stage one Lance transaction per table ([`tables`]) →
//! commit, sync and publish one graph commit ([`graph`]). The data flow and
//! the invariants are in docs/ARCHITECTURE.md.

pub mod auth;
pub mod checks;
mod durability;
pub mod error;
mod export;
pub mod graph;
pub mod http;
pub mod keys;
mod lease;
pub mod limits;
pub mod manifest;
pub mod metrics;
pub mod nats;
pub mod split;
pub mod storage;
pub mod tables;
pub mod validator;

pub use error::{Conflict, EngineError};
pub use graph::{
    Cleaned, DryRun, EngineConfig, Graph, GraphSettings, LoadRequest, LoadTimings,
    OverwritePublish, Receipt, Recovered,
};
pub use storage::{GraphRoot, StorageOptions};
