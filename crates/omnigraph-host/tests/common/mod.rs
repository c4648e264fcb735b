//! Shared helpers of the engine tests: real Lance datasets in temp dirs and
//! the real validator artifact in wasmtime.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use omnigraph_host::manifest::table_path;
use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphRoot, LoadRequest, Receipt, tables};
use omnigraph_validate_wasm::Mode;

/// The sample schema (people, companies, knows, works-at).
pub const SCHEMA: &str = include_str!("../../../../samples/people.pg");

pub fn validator() -> Arc<Validator> {
    static VALIDATOR: OnceLock<Arc<Validator>> = OnceLock::new();
    VALIDATOR.get_or_init(|| Arc::new(Validator::new(RunnerConfig::default()).expect("validator"))).clone()
}

/// A writer with a short lease, so tests of crashed writers wait little.
pub fn config() -> EngineConfig {
    EngineConfig { lease_ttl: Duration::from_millis(1500), lease_wait: Duration::from_secs(20), ..EngineConfig::default() }
}

pub fn root(dir: &Path) -> GraphRoot {
    GraphRoot::create(dir.to_str().unwrap(), Default::default()).unwrap()
}

pub async fn init(dir: &Path) -> Graph {
    Graph::init(root(dir), SCHEMA, validator(), config()).await.expect("init")
}

pub async fn reopen(dir: &Path) -> Graph {
    Graph::open(root(dir), validator(), config()).await.expect("open")
}

pub fn request(branch: &str, mode: Mode, batch: &str) -> LoadRequest {
    LoadRequest { branch: branch.into(), from: None, mode, strict: true, actor: "tester".into(), batch: Arc::new(batch.as_bytes().to_vec()), batch_key: None }
}

pub async fn load(graph: &Graph, branch: &str, mode: Mode, batch: &str) -> Result<Receipt, EngineError> {
    graph.load(request(branch, mode, batch)).await
}

pub fn person(name: &str, age: u32) -> String {
    format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\",\"age\":{age}}}}}\n")
}

pub fn knows(id: &str, from: &str, to: &str) -> String {
    format!("{{\"edge\":\"Knows\",\"id\":\"{id}\",\"from\":\"{from}\",\"to\":\"{to}\"}}\n")
}

/// Every record of a branch (or commit), lines sorted: a canonical state.
pub async fn export(graph: &Graph, branch: &str, at: Option<u64>) -> String {
    let mut text = String::new();
    graph
        .export(branch, at, |chunk| {
            text.push_str(&chunk);
            std::future::ready(Ok(()))
        })
        .await
        .expect("export");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    lines.join("\n")
}

pub async fn counts(graph: &Graph, branch: &str) -> BTreeMap<String, u64> {
    graph.row_counts(branch, None).await.expect("row counts")
}

/// SPEC §4.2: no table's Lance head silently holds unpublished rows. For
/// every branch, each table it owns is at its published version (or at a
/// restore of it).
pub async fn assert_heads_published(graph: &Graph) {
    for head in graph.branches().await.expect("branches") {
        let own = head.lance_branch.clone();
        for def in &graph.schema().types {
            let pin = &head.tables[&def.name];
            if pin.lance_branch != own {
                continue;
            }
            let path = table_path(def.kind, &def.name);
            let latest = tables::latest_on(graph.root(), &path, own.as_deref()).await.unwrap().expect("lance branch");
            let pinned = tables::open_pinned(graph.root(), &path, pin).await.unwrap();
            let same = latest.version().version == pin.version
                || latest.count_rows(None).await.unwrap() == pinned.count_rows(None).await.unwrap()
                    && matches!(
                        latest.read_transaction().await.unwrap().map(|t| t.operation),
                        Some(lance::dataset::transaction::Operation::Restore { version }) if version == pin.version
                    );
            assert!(same, "{}: table {} head {} is above its published version {}", head.branch, def.name, latest.version().version, pin.version);
        }
    }
}

/// Batch `n`: 40 new people, edges among them, and an update of "Shared".
pub fn numbered_batch(n: usize) -> String {
    let mut text = format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"Shared\",\"age\":{}}}}}\n", n % 150);
    for i in 0..40 {
        text.push_str(&person(&format!("p{n}-{i}"), i));
        if i > 0 {
            text.push_str(&knows(&format!("k{n}-{i}"), &format!("p{n}-{i}"), &format!("p{n}-{}", i - 1)));
        }
    }
    text
}

/// Per batch number, how many of its people the graph holds; ids must be unique.
pub async fn people_per_batch(graph: &omnigraph_host::Graph) -> BTreeMap<usize, usize> {
    let state = export(graph, "main", None).await;
    let mut ids = BTreeSet::new();
    let mut per = BTreeMap::new();
    for line in state.lines() {
        let key = line.split("\"data\"").next().unwrap().to_owned();
        assert!(ids.insert(key.clone()), "duplicate record {key}");
        if let Some(rest) = line.strip_prefix("{\"type\":\"Person\",\"id\":\"p") {
            let n: usize = rest.split('-').next().unwrap().parse().unwrap();
            *per.entry(n).or_default() += 1;
        }
    }
    per
}


/// A real server on 127.0.0.1 (random port); dropping `stop` shuts it down.
pub struct Server {
    pub url: String,
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// A server over a root holding graph `g` (and `empty`, never loaded).
pub async fn start(auth: omnigraph_host::auth::Auth, tweak: impl FnOnce(&mut omnigraph_host::http::ServerConfig)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    for id in ["g", "empty"] {
        omnigraph_host::Graph::init(root(&dir.path().join(id)), SCHEMA, validator(), config()).await.unwrap();
    }
    let mut server_config = omnigraph_host::http::ServerConfig::new(dir.path().to_str().unwrap().to_owned(), auth);
    server_config.engine = config();
    tweak(&mut server_config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = omnigraph_host::http::AppState::new(server_config, validator());
    tokio::spawn(omnigraph_host::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Server { url: format!("http://{addr}"), addr, dir, stop: Some(stop) }
}

