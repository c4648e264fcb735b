//! The server's state: its configuration, the graphs it opened (each once,
//! in a cell of its own), the writes running detached, the per-actor
//! admission of loads and the in-flight body budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use tokio::sync::Semaphore;

use crate::auth::{Actor, Auth};
use crate::error::EngineError;
use crate::graph::{EngineConfig, Graph};
use crate::limits::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_INFLIGHT_BYTES, DEFAULT_MAX_LOADS_PER_ACTOR,
};
use crate::manifest::check_branch_name;
use crate::metrics::Metrics;
use crate::storage::{GraphRoot, StorageOptions};
use crate::validator::Validator;

use super::error::*;

/// How the server runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// A local directory or `s3://bucket/prefix`; each graph is `<root>/<id>`.
    pub root: String,
    pub storage: StorageOptions,
    pub auth: Auth,
    pub engine: EngineConfig,
    /// Loads one actor may have in flight; more are answered 429.
    pub max_loads_per_actor: usize,
    /// Body bytes held at once over all requests; more are answered 503.
    pub max_inflight_bytes: u64,
    /// Deadline for reading one request body; slower bodies get 408.
    pub body_read_timeout: Duration,
    /// Deadline for a request's head; slower connections are closed.
    pub header_read_timeout: Duration,
    /// How often background maintenance looks for graphs loads changed
    /// (`None`: no background maintenance; run `omnigraph-host optimize`).
    pub maintenance_interval: Option<Duration>,
    /// Wraps every object store of every graph (`GraphRoot::with_store_wrapper`):
    /// metering, or a failing store in tests.
    pub store_wrapper: Option<Arc<dyn lance::io::WrappingObjectStore>>,
}

impl ServerConfig {
    pub fn new(root: String, auth: Auth) -> ServerConfig {
        ServerConfig {
            root,
            storage: StorageOptions::new(),
            auth,
            engine: EngineConfig::default(),
            max_loads_per_actor: DEFAULT_MAX_LOADS_PER_ACTOR,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            maintenance_interval: Some(crate::limits::MAINTENANCE_INTERVAL),
            store_wrapper: None,
        }
    }
}

pub struct AppState {
    pub(super) config: ServerConfig,
    pub(super) validator: Arc<Validator>,
    /// Each graph opened once and kept. The map's lock is held only to find
    /// or add a graph's cell, never across opening it (with its recovery):
    /// one graph's slow open blocks no other graph.
    pub(super) graphs: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Arc<Graph>>>>>,
    /// Writes running on tasks of their own (`run_detached`): shutdown waits
    /// for them too, since a write whose client went away has no connection
    /// left to wait on.
    pub(super) detached: tokio::sync::watch::Sender<usize>,
    pub(super) in_flight: Mutex<HashMap<String, usize>>,
    /// One permit per body byte held (`max_inflight_bytes`).
    pub(super) body_budget: Arc<Semaphore>,
    pub metrics: Metrics,
}

impl AppState {
    pub fn new(config: ServerConfig, validator: Arc<Validator>) -> Arc<AppState> {
        let body_budget = Arc::new(Semaphore::new(config.max_inflight_bytes.min(Semaphore::MAX_PERMITS as u64) as usize));
        Arc::new(AppState {
            config,
            validator,
            graphs: Mutex::new(HashMap::new()),
            detached: tokio::sync::watch::Sender::new(0),
            in_flight: Mutex::new(HashMap::new()),
            body_budget,
            metrics: Metrics::default(),
        })
    }

    pub(super) fn authenticate(&self, headers: &HeaderMap) -> Result<Actor, ApiError> {
        Ok(self.config.auth.authenticate(headers.get(header::AUTHORIZATION).map(HeaderValue::as_bytes))?)
    }

    /// The graph `id`, opened once and kept. Requests for a graph being
    /// opened wait for that open; requests for other graphs do not.
    pub(super) async fn graph(&self, id: &str) -> Result<Arc<Graph>, ApiError> {
        let not_found = || ApiError::new(StatusCode::NOT_FOUND, "graph_not_found", format!("no graph {id:?}"));
        check_branch_name(id).map_err(|_| not_found())?;
        let cell = self.graphs.lock().expect("graphs lock").entry(id.to_owned()).or_default().clone();
        let opened = cell
            .get_or_try_init(|| async {
                let root = self.wrapped(GraphRoot::new(&self.graph_location(id), self.config.storage.clone())?);
                Graph::open(root, self.validator.clone(), self.config.engine.clone()).await.map(Arc::new)
            })
            .await;
        match opened {
            Ok(graph) => Ok(graph.clone()),
            Err(e) => {
                // No entry stays for an id that did not open (a missing
                // graph's name must not grow the map).
                let mut graphs = self.graphs.lock().expect("graphs lock");
                if graphs.get(id).is_some_and(|c| Arc::ptr_eq(c, &cell) && !c.initialized()) {
                    graphs.remove(id);
                }
                Err(match e {
                    EngineError::NoGraph(_) => not_found(),
                    e => e.into(),
                })
            }
        }
    }

    /// The graph `id` as requests get it (a stream consumer inside the server).
    pub async fn open_graph(&self, id: &str) -> Result<Arc<Graph>, String> {
        self.graph(id).await.map_err(|e| format!("{} ({}): {}", e.code, e.status, e.message))
    }

    pub(super) fn graph_location(&self, id: &str) -> String {
        format!("{}/{id}", self.config.root.trim_end_matches('/'))
    }

    /// `root` behind the configured store wrapper, if any.
    pub(super) fn wrapped(&self, root: GraphRoot) -> GraphRoot {
        match &self.config.store_wrapper {
            Some(wrapper) => root.with_store_wrapper(wrapper.clone()),
            None => root,
        }
    }

    /// The graphs opened so far.
    pub(super) fn open_graphs(&self) -> Vec<(String, Arc<Graph>)> {
        let graphs = self.graphs.lock().expect("graphs lock");
        graphs.iter().filter_map(|(id, cell)| cell.get().map(|g| (id.clone(), g.clone()))).collect()
    }

    /// Refuses a store that would make the lease and commit slots
    /// last-writer-wins (`GraphRoot::prove_conditional_create`). `serve`
    /// calls it before it binds its listener (so no request waits on it in
    /// the accept backlog).
    pub async fn check_store(&self) -> Result<(), EngineError> {
        self.wrapped(GraphRoot::create(&self.config.root, self.config.storage.clone())?).prove_conditional_create().await
    }

    /// Counts a load against its actor's admission; the guard releases it.
    pub(super) fn admit(self: &Arc<Self>, actor: &str) -> Result<Admission, ApiError> {
        let mut in_flight = self.in_flight.lock().expect("admission lock");
        let n = in_flight.entry(actor.to_owned()).or_default();
        if *n >= self.config.max_loads_per_actor {
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_loads",
                format!("actor {actor:?} already has {n} loads in flight (limit {})", self.config.max_loads_per_actor),
            );
            e.retry_after = true;
            return Err(e);
        }
        *n += 1;
        Ok(Admission { state: self.clone(), actor: actor.to_owned() })
    }
}

pub(super) struct Admission {
    pub(super) state: Arc<AppState>,
    pub(super) actor: String,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(n) = self.state.in_flight.lock().expect("admission lock").get_mut(&self.actor) {
            *n -= 1;
        }
    }
}
