//! Where `omnigraph-host load` sends its batches: a graph opened in this
//! process, or a host's HTTP API (`--server`), behind one interface that
//! says whether a refused batch may be split, or may have been written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use omnigraph_host::error::{SIZE_BOUND_CODES, report_bound};
use omnigraph_host::split::WorkBranch;
use omnigraph_host::{EngineError, Graph, LoadRequest, OverwritePublish};
use omnigraph_validate_wasm::Limits;

use super::common::{Failure, RootArgs, S3Args, operational, validator};

pub(crate) fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder().build().expect("HTTP client")
}

/// Where the commands that load (`load`, `consume`) send their batches.
#[derive(clap::Args)]
pub(crate) struct TargetArgs {
    /// Local graph root (or use --server).
    #[arg(long, required_unless_present = "server", conflicts_with = "server")]
    root: Option<String>,
    /// A host's base URL, e.g. http://127.0.0.1:8080.
    #[arg(long, requires = "graph")]
    server: Option<String>,
    /// The graph id on the server.
    #[arg(long)]
    graph: Option<String>,
    #[arg(long, env = "OMNIGRAPH_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[arg(long, env = "OMNIGRAPH_LEASE_TTL_MS")]
    lease_ttl_ms: Option<u64>,
    /// Batch bounds as JSON (local roots; a server's come from its /rules).
    #[arg(long, env = "OMNIGRAPH_LIMITS", conflicts_with = "server")]
    limits: Option<PathBuf>,
    /// Rows the graph's key runs may hold (local roots; as `serve --key-run-rows`).
    #[arg(long, env = "OMNIGRAPH_KEY_RUN_ROWS", conflicts_with = "server")]
    key_run_rows: Option<u64>,
    #[command(flatten)]
    s3: S3Args,
}

impl TargetArgs {
    pub(crate) async fn open(self) -> Result<Target, Failure> {
        let TargetArgs { root, server, graph, token, lease_ttl_ms, limits, key_run_rows, s3 } = self;
        Ok(match (root, server) {
            (Some(root), _) => {
                let root = RootArgs { root, s3, lease_ttl_ms, lease_wait_ms: None, limits, key_run_rows };
                let validator = validator()?;
                // The first load would load it; an error shows there.
                tokio::task::spawn_blocking({
                    let validator = validator.clone();
                    move || validator.ready()
                });
                // Not recovered on open: the first load's lease runs
                // recovery before it writes (and answers a batch that
                // recovery rolled forward with that commit), and its
                // commit settles each table it writes. A separate lease
                // taken and given back at open cost every run its own
                // round of lease writes.
                Target::Local(std::sync::Arc::new(root.open_unrecovered_with(validator).await?))
            }
            (None, Some(url)) => Target::Server {
                client: reqwest_client(),
                url: url.trim_end_matches('/').to_owned(),
                graph: graph.expect("clap requires --graph"),
                token,
            },
            (None, None) => unreachable!("clap requires --root or --server"),
        })
    }
}

/// The batch lines a refusal names (a report's errors, the stateful
/// checks' conflicts; local or from a server's body), each with the
/// entries that name it.
pub(crate) fn refused_lines(details: &serde_json::Value) -> BTreeMap<u64, Vec<serde_json::Value>> {
    let mut lines: BTreeMap<u64, Vec<serde_json::Value>> = BTreeMap::new();
    // Locally the report or `{"conflicts"}`; a server's error body has them under `details`.
    for list in [&details["errors"], &details["conflicts"], &details["details"]["report"]["errors"], &details["details"]["conflicts"]] {
        for item in list.as_array().into_iter().flatten() {
            if let Some(line) = item["line"].as_u64() {
                lines.entry(line).or_default().push(item.clone());
            }
        }
    }
    lines
}

pub(crate) enum Target {
    Local(std::sync::Arc<Graph>),
    Server { client: reqwest::Client, url: String, graph: String, token: Option<String> },
}

/// Why a batch was not committed, or may not have been.
pub(crate) struct BatchRefused {
    /// A bound of SPEC §5 that a smaller batch may fit (split and retry).
    pub(crate) splittable: bool,
    /// The report or the error body, as JSON, when there is one.
    pub(crate) details: Option<serde_json::Value>,
    /// The batch may have been committed all the same: recovery decides
    /// (`recovery_required`), or the answer was lost (the connection broke
    /// after the request was sent, a 5xx that is no refusal). `--resume`
    /// then finds it in the branch's log by its batch key.
    pub(crate) maybe_written: bool,
    /// The error's code (`target_moved`, `graph_busy`, …), empty when there is none.
    pub(crate) code: String,
    /// A server's `Retry-After` (429, 503): when to try again.
    pub(crate) retry_after: Option<std::time::Duration>,
    pub(crate) failure: Failure,
}

impl BatchRefused {
    /// The failure to report; when the batch may have been committed, it
    /// says so and how to finish (the progress bar's message is not shown
    /// when standard error is no terminal).
    pub(crate) fn reported(self, what: &str) -> Failure {
        match self.failure {
            Failure::Invalid(text) | Failure::Operational(text) if self.maybe_written => {
                Failure::Operational(format!("{text}\n{what} may have been committed (the answer was lost, or recovery decides); nothing after it was sent. Run again with --resume: it finds it by its batch key in the branch's log and finishes exactly once"))
            }
            failure => failure,
        }
    }
}

impl From<Failure> for BatchRefused {
    fn from(failure: Failure) -> Self {
        BatchRefused { splittable: false, details: None, maybe_written: false, code: String::new(), retry_after: None, failure }
    }
}

/// The server's answers that refuse a request before anything is written
/// (503 and 5xx otherwise leave it open whether a write happened).
const REFUSED_UNWRITTEN: [&str; 5] = ["graph_busy", "server_busy", "recovery_in_progress", "validator_error", "caller_gone"];

impl Target {
    fn call(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let Target::Server { client, url, graph, token } = self else { unreachable!("a server target") };
        let call = client.request(method, format!("{url}/graphs/{graph}{path}"));
        match token {
            Some(token) => call.bearer_auth(token),
            None => call,
        }
    }

    /// Sends a request to the server; a non-2xx answer is an error with its body.
    async fn send(call: reqwest::RequestBuilder) -> Result<serde_json::Value, BatchRefused> {
        // A request that may have reached the server whose answer is lost.
        let lost = |e: reqwest::Error| BatchRefused { maybe_written: !e.is_connect(), ..BatchRefused::from(operational(e)) };
        let response = call.send().await.map_err(lost)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        let body = response.text().await.map_err(lost)?;
        if status.is_success() {
            return Ok(serde_json::from_str(&body).unwrap_or(serde_json::Value::Null));
        }
        let details: Option<serde_json::Value> = serde_json::from_str(&body).ok();
        let code = details.as_ref().and_then(|d| d["code"].as_str()).unwrap_or_default().to_owned();
        let text = format!("error: HTTP {status}\n{body}");
        let failure = match status.as_u16() {
            409 | 413 | 422 => Failure::Invalid(text),
            _ => Failure::Operational(text),
        };
        let maybe_written = code == "recovery_required" || (status.is_server_error() && !REFUSED_UNWRITTEN.contains(&code.as_str()));
        Err(BatchRefused { splittable: status == 413 && SIZE_BOUND_CODES.contains(&code.as_str()), details, maybe_written, code, retry_after, failure })
    }

    /// The bounds the graph validates with (the server's `/rules`).
    pub(crate) async fn limits(&self) -> Result<Limits, Failure> {
        match self {
            Target::Local(graph) => Ok(*graph.limits()),
            Target::Server { .. } => {
                let rules = Target::send(self.call(reqwest::Method::GET, "/rules")).await.map_err(|r| r.failure)?;
                serde_json::from_value(rules["bounds"].clone()).map_err(operational)
            }
        }
    }

    /// Commits one batch; `batch_key` makes a retried batch recognisable.
    pub(crate) async fn load(&self, request: LoadRequest) -> Result<(), BatchRefused> {
        match self {
            Target::Local(graph) => match graph.load(request).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    let (splittable, details) = match &e {
                        EngineError::Invalid { report_json } => {
                            let report: serde_json::Value = serde_json::from_str(report_json).unwrap_or_default();
                            (report_bound(report_json).is_some(), Some(report))
                        }
                        EngineError::Rejected { conflicts, .. } => {
                            (false, Some(serde_json::json!({ "conflicts": conflicts })))
                        }
                        _ => (false, None),
                    };
                    Err(BatchRefused { splittable, details, maybe_written: e.maybe_committed(), code: e.code().to_owned(), retry_after: None, failure: e.into() })
                }
            },
            Target::Server { .. } => {
                let mut query = vec![("branch", request.branch.clone()), ("mode", request.mode.as_str().to_owned())];
                if let Some(from) = &request.from {
                    query.push(("from", from.clone()));
                }
                if let Some(key) = &request.batch_key {
                    query.push(("batch_key", key.clone()));
                }
                if let Some(since) = request.unchanged_since {
                    query.push(("unchanged_since", since.to_string()));
                }
                let call = self
                    .call(reqwest::Method::POST, "/load/ndjson")
                    .query(&query)
                    .header("content-type", "application/x-ndjson")
                    .body(request.batch.as_ref().clone());
                Target::send(call).await.map(drop)
            }
        }
    }

    /// Forks `name` from `from` with the tables of `clear` empty; the base's seq.
    pub(crate) async fn fork(&self, name: &str, from: &str, clear: &[String]) -> Result<u64, Failure> {
        match self {
            Target::Local(graph) => {
                let commit = graph.create_work_branch(name, from, clear, "cli").await?;
                Ok(commit.parent.map_or(0, |p| p.seq))
            }
            Target::Server { .. } => {
                let body = serde_json::json!({"name": name, "from": from, "clear": clear});
                let created = Target::send(self.call(reqwest::Method::POST, "/branches").json(&body)).await.map_err(|r| r.failure)?;
                created["base"]["seq"].as_u64().ok_or_else(|| operational("the server did not name the fork's base"))
            }
        }
    }

    /// Publishes a multi-batch overwrite's work branch onto `branch`.
    pub(crate) async fn publish(&self, branch: &str, work: &WorkBranch, key: String, actor: &str) -> Result<(), BatchRefused> {
        match self {
            Target::Local(graph) => {
                let publish = OverwritePublish {
                    branch: branch.to_owned(),
                    work: work.branch.clone(),
                    base_seq: work.base_seq,
                    types: work.types.clone(),
                    actor: actor.to_owned(),
                    batch_key: Some(key),
                };
                graph.publish_overwrite(publish).await.map(drop).map_err(|e| BatchRefused {
                    maybe_written: e.maybe_committed(),
                    ..BatchRefused::from(Failure::from(e))
                })
            }
            Target::Server { .. } => {
                let body = serde_json::json!({
                    "branch": branch, "from": work.branch, "base_seq": work.base_seq, "types": work.types, "batch_key": key,
                });
                Target::send(self.call(reqwest::Method::POST, "/overwrite").json(&body)).await.map(drop)
            }
        }
    }

    /// After a split run of `commits` loads on a local root, once: the
    /// maintenance a server would have done in the background meanwhile
    /// (bounded steps, each its own `maintain` commit, at most a few per
    /// batch the run committed), so the next load's checks use indexes and
    /// few fragments. Never between a run's batches: a file's commits come
    /// one after another. A one-batch file adds what one load adds, and is
    /// left, like any load, to a server or `optimize`. A server target
    /// maintains itself.
    pub(crate) async fn maintain_after(&self, commits: u64) {
        let Target::Local(graph) = self else { return };
        let steps = omnigraph_host::limits::MAINTENANCE_STEPS_PER_BATCH.saturating_mul(commits as usize);
        for _ in 0..steps {
            match graph.maintain_step().await {
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => {
                    eprintln!("maintenance skipped ({e}); `omnigraph-host optimize` catches up");
                    return;
                }
            }
        }
    }

    /// The sequence number of `branch`'s head, and the batch key of its
    /// newest commit whose key starts with `prefix`, read from that head or
    /// after it (never older: the load is based on the head).
    pub(crate) async fn head_then_keyed(&self, branch: &str, prefix: &str) -> Result<(u64, Option<String>), Failure> {
        match self {
            Target::Local(graph) => {
                // One walk: it starts at the head, so the key is the newest at or below it.
                let mut head = None;
                let keyed = graph
                    .log_matching(branch, 1, |c| {
                        head.get_or_insert(c.seq);
                        c.batch_key.as_deref().is_some_and(|k| k.starts_with(prefix))
                    })
                    .await?;
                Ok((head.unwrap_or(0), keyed.first().and_then(|c| c.batch_key.clone())))
            }
            Target::Server { .. } => {
                let newest = |query: Vec<(&str, &str)>| {
                    let call = self.call(reqwest::Method::GET, "/commits").query(&query);
                    async move {
                        let body = Target::send(call).await.map_err(|r| r.failure)?;
                        Ok::<_, Failure>(body["commits"].as_array().and_then(|c| c.first()).cloned())
                    }
                };
                let head = newest(vec![("branch", branch), ("limit", "1")]).await?;
                let keyed = newest(vec![("branch", branch), ("limit", "1"), ("batch_key_prefix", prefix)]).await?;
                let seq = head.and_then(|c| c["seq"].as_u64()).ok_or_else(|| operational("the server named no head commit"))?;
                Ok((seq, keyed.and_then(|c| c["batch_key"].as_str().map(str::to_owned))))
            }
        }
    }

    /// The batch keys already committed on `branch` (none if it does not exist).
    pub(crate) async fn committed_keys(&self, branch: &str) -> Result<Vec<String>, Failure> {
        let commits: Vec<serde_json::Value> = match self {
            Target::Local(graph) => match graph.log(branch).await {
                Ok(log) => log.iter().map(|c| serde_json::to_value(c).expect("serializes")).collect(),
                Err(EngineError::BranchNotFound(_)) => Vec::new(),
                Err(e) => return Err(e.into()),
            },
            Target::Server { .. } => {
                let call = self.call(reqwest::Method::GET, "/commits").query(&[("branch", branch)]);
                match Target::send(call).await {
                    Ok(body) => body["commits"].as_array().cloned().unwrap_or_default(),
                    Err(BatchRefused { details: Some(d), .. }) if d["code"] == "branch_not_found" => Vec::new(),
                    Err(refused) => return Err(refused.failure),
                }
            }
        };
        Ok(commits.iter().filter_map(|c| c["batch_key"].as_str().map(str::to_owned)).collect())
    }
}
