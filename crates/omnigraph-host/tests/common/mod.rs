//! Shared helpers of the engine tests: real Lance datasets in temp dirs (or,
//! with `OMNIGRAPH_TEST_STORE=s3`, under fresh prefixes of a real local
//! S3-compatible server at `OMNIGRAPH_TEST_S3_ENDPOINT`, checked to refuse a
//! second conditional create before any test relies on it, see [`place`])
//! and the real validator artifact in wasmtime.
#![allow(dead_code)] // each test binary uses a different subset

pub mod faulty_store;
pub mod host_process;
pub mod nats_server;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use omnigraph_host::manifest::table_path;
use omnigraph_host::validator::{RunnerConfig, Validator};
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphRoot, LoadRequest, Receipt, StorageOptions, tables};
use omnigraph_validate_wasm::Mode;

/// A file of `samples/`, found from where the test runs (see
/// [`omnigraph_fuzz_harness::repo_root`]).
pub fn sample(name: &str) -> String {
    omnigraph_fuzz_harness::samples_dir().join(name).to_str().expect("a UTF-8 path").to_owned()
}

/// The sample schema (people, companies, knows, works-at).
pub const SCHEMA: &str = include_str!("../../../../samples/people.pg");

pub fn validator() -> Arc<Validator> {
    static VALIDATOR: OnceLock<Arc<Validator>> = OnceLock::new();
    VALIDATOR.get_or_init(|| Arc::new(Validator::new(RunnerConfig::default()).expect("validator"))).clone()
}

/// A writer with a short lease, so tests of crashed writers wait little.
pub fn config() -> EngineConfig {
    EngineConfig { lease_ttl: Duration::from_millis(lease_ttl_ms()), lease_wait: Duration::from_secs(20), ..EngineConfig::default() }
}

/// The tests' lease: short, so a crashed writer is taken over quickly, but
/// longer than a load: on moto (one Python process serving every request) a
/// load on a busy machine takes seconds.
pub fn lease_ttl_ms() -> u64 {
    if on_s3() { 6_000 } else { 1_500 }
}

/// Where a test's graphs live: a temp dir, or a fresh prefix of the
/// S3-compatible server at `OMNIGRAPH_TEST_S3_ENDPOINT` when
/// `OMNIGRAPH_TEST_STORE=s3` (scripts/test.sh starts moto and runs the
/// engine, crash, process and HTTP suites both ways).
pub struct Place {
    pub uri: String,
    pub options: StorageOptions,
    /// Keeps a local place's directory alive.
    _dir: Option<Arc<tempfile::TempDir>>,
}

/// The bucket every S3 test place is a prefix of.
pub const TEST_BUCKET: &str = "omnigraph-test";

pub fn on_s3() -> bool {
    match std::env::var("OMNIGRAPH_TEST_STORE").as_deref() {
        Ok("s3") => true,
        Ok("local") | Err(_) => false,
        Ok(other) => panic!("OMNIGRAPH_TEST_STORE={other}: use local or s3"),
    }
}

/// Whether a randomized test runs its trimmed count: on S3, where each
/// store call is an HTTP exchange with moto, unless `OMNIGRAPH_TEST_FULL=1`
/// (`scripts/test-full.sh`), so that a fresh machine's test run stays short.
fn trimmed() -> bool {
    on_s3() && !std::env::var("OMNIGRAPH_TEST_FULL").is_ok_and(|v| v == "1")
}

/// The seeds a seeded property test runs: every one, or only the first when
/// trimmed (a seed of the cleanup property took ~90 s on S3).
pub fn property_seeds(seeds: &[u64]) -> &[u64] {
    if trimmed() { &seeds[..1] } else { seeds }
}

/// How many runs a randomized fault test makes: `full`, or `trimmed` when
/// trimmed (20 kills on S3 took 122 s of a fresh machine's test run).
pub fn fault_runs(full: usize, trimmed_runs: usize) -> usize {
    if trimmed() { trimmed_runs } else { full }
}

/// A fresh, empty place for graphs.
pub async fn place() -> Place {
    if !on_s3() {
        let dir = tempfile::tempdir().unwrap();
        return Place { uri: dir.path().to_str().unwrap().to_owned(), options: StorageOptions::new(), _dir: Some(Arc::new(dir)) };
    }
    let endpoint = std::env::var("OMNIGRAPH_TEST_S3_ENDPOINT")
        .expect("OMNIGRAPH_TEST_STORE=s3 needs OMNIGRAPH_TEST_S3_ENDPOINT (scripts/test.sh starts moto)");
    let options: StorageOptions = [
        ("aws_endpoint", endpoint.as_str()),
        ("aws_allow_http", "true"),
        ("aws_region", "us-east-1"),
        ("aws_access_key_id", "testing"),
        ("aws_secret_access_key", "testing"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    s3_bucket_with_conditional_puts(&endpoint, &options).await;
    Place { uri: format!("s3://{TEST_BUCKET}/{}", ulid::Ulid::new().to_string().to_lowercase()), options, _dir: None }
}

/// Creates the test bucket (idempotent) and checks, once per process, that
/// the server refuses a second conditional create: the graph-commit fence
/// and Lance's own commits rely on `If-None-Match: *`.
async fn s3_bucket_with_conditional_puts(endpoint: &str, options: &StorageOptions) {
    static CHECKED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CHECKED
        .get_or_init(|| async {
            let response = reqwest::Client::new().put(format!("{endpoint}/{TEST_BUCKET}")).send().await.expect("S3 server reachable");
            assert!(response.status().is_success() || response.status() == 409, "create bucket: {}", response.status());
            let probe = GraphRoot::new(&format!("s3://{TEST_BUCKET}/probe-{}", ulid::Ulid::new()), options.clone()).unwrap();
            probe.put_if_absent("fence.json", b"1".to_vec()).await.expect("first conditional create");
            let second = probe.put_if_absent("fence.json", b"2".to_vec()).await;
            assert!(
                matches!(second, Ok(false)),
                "the S3 server accepted a second conditional create ({second:?}): it does not honour If-None-Match: *"
            );
        })
        .await;
}

impl Place {
    pub fn root(&self) -> GraphRoot {
        GraphRoot::create(&self.uri, self.options.clone()).unwrap()
    }

    /// A place inside this one (a server's graph `<root>/<name>`).
    pub fn child(&self, name: &str) -> Place {
        Place { uri: format!("{}/{name}", self.uri), options: self.options.clone(), _dir: self._dir.clone() }
    }

    /// The CLI's options for this place: `--root` and, on S3, the S3 flags
    /// (credentials go in the environment, see [`Place::apply_env`]).
    pub fn cli_args(&self) -> Vec<String> {
        let mut args = vec!["--root".to_owned(), self.uri.clone()];
        if let Some(endpoint) = self.options.get("aws_endpoint") {
            args.extend(["--s3-endpoint".into(), endpoint.clone(), "--s3-region".into(), self.options["aws_region"].clone(), "--s3-allow-http".into()]);
        }
        args
    }

    pub fn apply_env(&self, cmd: &mut std::process::Command) {
        for (key, env) in [("aws_access_key_id", "AWS_ACCESS_KEY_ID"), ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY")] {
            if let Some(v) = self.options.get(key) {
                cmd.env(env, v);
            }
        }
    }
}

pub fn root(place: &Place) -> GraphRoot {
    place.root()
}

pub async fn init(place: &Place) -> Graph {
    Graph::init(root(place), SCHEMA, validator(), config()).await.expect("init")
}

pub async fn reopen(place: &Place) -> Graph {
    Graph::open(root(place), validator(), config()).await.expect("open")
}

pub fn request(branch: &str, mode: Mode, batch: &str) -> LoadRequest {
    LoadRequest { branch: branch.into(), from: None, mode, strict: true, actor: "tester".into(), batch: Arc::new(batch.as_bytes().to_vec()), batch_key: None, unchanged_since: None }
}

/// A load into `branch` that forks it from `from` if it does not exist.
pub fn fork_request(branch: &str, from: &str, mode: Mode, batch: &str) -> LoadRequest {
    LoadRequest { from: Some(from.into()), ..request(branch, mode, batch) }
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
/// How many recovery records (one per lease generation) are left.
pub async fn recovery_records(root: &GraphRoot) -> usize {
    root.list_names("_graph/recovery").await.unwrap().len()
}

pub async fn assert_heads_published(graph: &Graph) {
    for head in graph.branches().await.expect("branches") {
        for def in &graph.schema().types {
            let pin = &head.tables[&def.name];
            if !pin.owned_by(head.lance_branch.as_deref()) {
                continue;
            }
            let path = table_path(def.kind, &def.name);
            let latest = tables::latest_on(graph.root(), &path, pin.lance_branch.as_deref()).await.unwrap().expect("lance branch");
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
    people_per_batch_at(graph, "main", None).await
}

/// [`people_per_batch`] of a branch, at its head or at commit `at`.
pub async fn people_per_batch_at(graph: &omnigraph_host::Graph, branch: &str, at: Option<u64>) -> BTreeMap<usize, usize> {
    let state = export(graph, branch, at).await;
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
    /// The server's root; graph `g` is `place.child("g")`.
    pub place: Place,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The serving task; it ends once in-flight work has finished.
    pub served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// Shuts the server down and waits until it has stopped.
    pub async fn shut_down(&mut self) {
        let _ = self.stop.take().expect("running").send(());
        self.served.take().expect("running").await.unwrap().unwrap();
    }
}

/// A server over a root holding graph `g` (and `empty`, never loaded).
pub async fn start(auth: omnigraph_host::auth::Auth, tweak: impl FnOnce(&mut omnigraph_host::http::ServerConfig)) -> Server {
    let place = place().await;
    for id in ["g", "empty"] {
        init(&place.child(id)).await;
    }
    start_at(place, auth, tweak).await
}

/// A server over the graphs under `place`.
pub async fn start_at(
    place: Place,
    auth: omnigraph_host::auth::Auth,
    tweak: impl FnOnce(&mut omnigraph_host::http::ServerConfig),
) -> Server {
    let mut server_config = omnigraph_host::http::ServerConfig::new(place.uri.clone(), auth);
    server_config.storage = place.options.clone();
    server_config.engine = config();
    // Commit sequences stay exact; tests of maintenance turn it on.
    server_config.maintenance_interval = None;
    tweak(&mut server_config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let state = omnigraph_host::http::AppState::new(server_config, validator());
    let served = tokio::spawn(omnigraph_host::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Server { url: format!("http://{addr}"), addr, place, stop: Some(stop), served: Some(served) }
}


/// Writes `chunks` on a fresh connection to `addr`, `pause` apart (stopping
/// when the server stops reading), then reads the start of the answer
/// (empty if the server closed without one). Blocking: call it from
/// `spawn_blocking`.
pub fn raw_exchange(addr: std::net::SocketAddr, chunks: Vec<Vec<u8>>, pause: Duration) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        if stream.write_all(chunk).is_err() {
            break;
        }
    }
    let mut answer = vec![0u8; 4096];
    let n = stream.read(&mut answer).unwrap_or(0);
    String::from_utf8_lossy(&answer[..n]).into_owned()
}
