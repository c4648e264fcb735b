//! Object-store requests per load (SPEC §4.7): every request of a graph root,
//! the manifest's and Lance's, goes through a counting wrapper
//! (`GraphRoot::with_store_wrapper`). Finding a head and opening tables must
//! not list history, a load's requests must not grow with the number of
//! commits, and a writer that keeps loading makes at most 4 graph-level
//! requests (lease, head, recovery record, publish) per load.

mod common;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::*;
use futures::stream::BoxStream;
use futures::StreamExt;
use lance::io::WrappingObjectStore;
use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};
use omnigraph_host::Graph;
use omnigraph_validate_wasm::Mode;

/// Every request, as `(operation, path)`; a listing is `list` when its
/// reader took more than the newest entry (`list-newest`: one page on S3,
/// where names sort newest first, however long the history).
#[derive(Debug, Default)]
struct Requests(Mutex<Vec<(&'static str, String, Arc<AtomicUsize>)>>);

impl Requests {
    fn note(&self, op: &'static str, path: &str) -> Arc<AtomicUsize> {
        let taken = Arc::new(AtomicUsize::new(0));
        self.0.lock().unwrap().push((op, path.to_owned(), taken.clone()));
        taken
    }
    fn take(&self) -> Vec<(&'static str, String)> {
        let seen = std::mem::take(&mut *self.0.lock().unwrap());
        seen.into_iter()
            .map(|(op, path, taken)| (if op == "list" && taken.load(Ordering::Acquire) <= 1 { "list-newest" } else { op }, path))
            .collect()
    }
}

/// A listing stream that counts the entries its reader takes.
fn counted(stream: BoxStream<'static, object_store::Result<ObjectMeta>>, taken: Arc<AtomicUsize>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
    stream
        .map(move |entry| {
            taken.fetch_add(1, Ordering::AcqRel);
            entry
        })
        .boxed()
}

#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ObjectStore>,
    requests: Arc<Requests>,
}

impl fmt::Display for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> object_store::Result<PutResult> {
        self.requests.note("put", location.as_ref());
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.requests.note("put", location.as_ref());
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.requests.note(if options.head { "head" } else { "get" }, location.as_ref());
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(&self, locations: BoxStream<'static, object_store::Result<Path>>) -> BoxStream<'static, object_store::Result<Path>> {
        let requests = self.requests.clone();
        self.inner.delete_stream(
            locations
                .map(move |p| {
                    if let Ok(path) = &p {
                        requests.note("delete", path.as_ref());
                    }
                    p
                })
                .boxed(),
        )
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let taken = self.requests.note("list", prefix.map_or("", |p| p.as_ref()));
        counted(self.inner.list(prefix), taken)
    }
    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let taken = self.requests.note("list", prefix.map_or("", |p| p.as_ref()));
        counted(self.inner.list_with_offset(prefix, offset), taken)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let taken = self.requests.note("list", prefix.map_or("", |p| p.as_ref()));
        let listed = self.inner.list_with_delimiter(prefix).await?;
        taken.store(listed.objects.len() + listed.common_prefixes.len(), Ordering::Release);
        Ok(listed)
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.requests.note("copy", to.as_ref());
        self.inner.copy_opts(from, to, options).await
    }
}

/// Lance's paged listings (S3: one page of a listing, e.g. only the newest
/// manifest name), counted one request per page.
struct CountingPages {
    inner: Arc<dyn PaginatedListStore>,
    requests: Arc<Requests>,
}

#[async_trait]
impl PaginatedListStore for CountingPages {
    async fn list_paginated(&self, prefix: Option<&str>, opts: PaginatedListOptions) -> object_store::Result<PaginatedListResult> {
        let taken = self.requests.note("list", prefix.unwrap_or(""));
        let page = self.inner.list_paginated(prefix, opts).await?;
        taken.store(page.result.objects.len() + page.result.common_prefixes.len(), Ordering::Release);
        Ok(page)
    }
}

#[derive(Debug)]
struct Meter(Arc<Requests>);

impl WrappingObjectStore for Meter {
    fn wrap(&self, _prefix: &str, original: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(Counting { inner: original, requests: self.0.clone() })
    }
    // Observes, so it keeps Lance's paged listings as they are.
    fn wrap_paginated(&self, _prefix: &str, original: Arc<dyn PaginatedListStore>) -> Option<Arc<dyn PaginatedListStore>> {
        Some(Arc::new(CountingPages { inner: original, requests: self.0.clone() }))
    }
}

async fn metered(place: &Place) -> (Graph, Arc<Requests>) {
    let requests = Arc::new(Requests::default());
    let root = place.root().with_store_wrapper(Arc::new(Meter(requests.clone())));
    (Graph::init(root, SCHEMA, validator(), config()).await.unwrap(), requests)
}

/// A listing of history: commits of a branch, table versions or transactions.
fn lists_history((op, path): &(&'static str, String)) -> bool {
    *op == "list" && (path.contains("_graph/branches/") || path.contains("_versions") || path.contains("_transactions"))
}

/// The requests of the cheapest of `tries` single loads (a load that
/// compacts a table is not the steady state this measures).
async fn cheapest_load(graph: &Graph, requests: &Requests, first: usize, tries: usize) -> Vec<(&'static str, String)> {
    let mut best: Option<Vec<_>> = None;
    for n in first..first + tries {
        requests.take();
        load(graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
        let seen = requests.take();
        if best.as_ref().is_none_or(|b| seen.len() < b.len()) {
            best = Some(seen);
        }
    }
    best.unwrap()
}

fn summary(requests: &[(&'static str, String)]) -> String {
    let graph = requests.iter().filter(|(_, p)| p.starts_with("_graph/") || p.contains("/_graph/")).count();
    format!("{} requests ({graph} graph-level)", requests.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loads_requests_do_not_grow_with_history_and_never_list_it() {
    let place = place().await;
    let (graph, requests) = metered(&place).await;
    // Past the first lease generations (releasing one also drops the
    // generation before last: a constant two deletes from then on).
    for n in 1..4 {
        load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap();
    }
    let young = cheapest_load(&graph, &requests, 4, 3).await;
    for n in 7..207 {
        load(&graph, "main", Mode::Merge, &person(&format!("q{n}"), 1)).await.unwrap();
    }
    let old = cheapest_load(&graph, &requests, 300, 3).await;
    eprintln!("a load after 7 commits: {}; after 207 commits: {}", summary(&young), summary(&old));
    for (when, seen) in [("young", &young), ("old", &old)] {
        let listed: Vec<_> = seen.iter().filter(|r| lists_history(r)).collect();
        assert!(listed.is_empty(), "{when}: a load listed history: {listed:?}");
    }
    // Data files, deletion files and index pages follow the table's
    // fragments (bounded by compaction), not its history: compare the rest.
    let metadata = |seen: &[(&'static str, String)]| {
        seen.iter().filter(|(_, p)| !["/data/", "/_deletions/", "/_indices/"].iter().any(|d| p.contains(d))).count()
    };
    assert!(metadata(&old) <= metadata(&young), "requests grew with history: {young:?}\nthen {old:?}");

    // Head resolution alone (a reader: dry run) reads the head hint and probes once.
    requests.take();
    let head = graph.head("main").await.unwrap().unwrap();
    let seen = requests.take();
    assert_eq!(head.seq, 209);
    assert_eq!(seen.iter().map(|(op, _)| *op).collect::<Vec<_>>(), ["get", "get"], "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_keeps_loading_makes_at_most_4_graph_level_requests_per_load() {
    let place = place().await;
    let (graph, requests) = metered(&place).await;
    let graph = Arc::new(graph);
    load(&graph, "main", Mode::Merge, &numbered_batch(0)).await.unwrap();
    requests.take();
    let loads = 24;
    let tasks: Vec<_> = (1..=loads)
        .map(|n| {
            let graph = graph.clone();
            tokio::spawn(async move { load(&graph, "main", Mode::Merge, &numbered_batch(n)).await.unwrap() })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let seen = requests.take();
    let graph_level: Vec<_> = seen.iter().filter(|(_, p)| p.contains("_graph/")).collect();
    let per_load = graph_level.len() as f64 / loads as f64;
    eprintln!("{loads} back-to-back loads: {} per load, {per_load:.2} graph-level per load", seen.len() / loads);
    assert!(per_load <= 4.0, "{per_load:.2} graph-level requests per load: {graph_level:?}");
    assert_eq!(people_per_batch(&graph).await.len(), loads + 1);
}
