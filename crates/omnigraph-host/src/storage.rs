//! Where a graph lives (`GraphRoot`): a local directory or an S3-compatible
//! prefix, with one Lance `Session` for all its tables (warm index caches),
//! and the small JSON objects of the graph manifest (commits, lease,
//! recovery record) written with `object_store` (put-if-absent and the
//! rest). Also the proof that the store refuses a second conditional create.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::io::{ObjectStoreParams, ObjectStoreRegistry, StorageOptionsAccessor, WrappingObjectStore};
use lance::Dataset;
use lance::session::Session;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::EngineError;
use crate::limits::{INDEX_CACHE_BYTES, METADATA_CACHE_BYTES};

/// Where [`GraphRoot::prove_conditional_create`] puts its probe objects.
const CONDITIONAL_PROBE_DIR: &str = "_probe";

/// A graph root: where its tables and manifest objects are.
#[derive(Clone)]
pub struct GraphRoot {
    /// The root as Lance sees it: an absolute directory or `s3://bucket/prefix`.
    uri: String,
    /// Set for local roots: durability is then the host's job (Lance never fsyncs).
    local_dir: Option<PathBuf>,
    /// Lance/object_store options (`aws_endpoint`, `aws_region`, …).
    options: HashMap<String, String>,
    store: Arc<dyn ObjectStore>,
    /// One Lance session (index, metadata and file caches) for every table
    /// this root opens: a load then reads warm indexes.
    session: Arc<Session>,
    /// Wraps every object store of the root, the manifest's and Lance's
    /// (e.g. to meter requests: tests/requests.rs).
    wrapper: Option<Arc<dyn WrappingObjectStore>>,
}

impl std::fmt::Debug for GraphRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Options hold credentials: never print them.
        f.debug_struct("GraphRoot").field("uri", &self.uri).finish_non_exhaustive()
    }
}

/// Storage options for S3-compatible roots, in Lance's key names
/// (`aws_endpoint`, `aws_region`, `aws_access_key_id`,
/// `aws_secret_access_key`, `aws_allow_http`).
pub type StorageOptions = HashMap<String, String>;

/// A Lance session with explicit cache bounds: Lance's defaults (6 GiB of
/// index cache, 1 GiB of metadata per session) would let a server's memory
/// grow with its tables.
fn bounded_session() -> Arc<Session> {
    Arc::new(Session::new(INDEX_CACHE_BYTES, METADATA_CACHE_BYTES, Arc::new(ObjectStoreRegistry::default())))
}

impl GraphRoot {
    /// A root for a new graph: like [`GraphRoot::new`], creating a missing
    /// local directory first.
    pub fn create(location: &str, options: StorageOptions) -> Result<GraphRoot, EngineError> {
        if !location.contains("://") {
            std::fs::create_dir_all(location).map_err(|e| EngineError::Storage(format!("{location}: {e}")))?;
        }
        GraphRoot::new(location, options)
    }

    /// Opens a root given as a local path or an `s3://bucket/prefix` URI. A
    /// local directory that does not exist holds no graph (`NoGraph`).
    pub fn new(location: &str, options: StorageOptions) -> Result<GraphRoot, EngineError> {
        if let Some(rest) = location.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let prefix = prefix.trim_end_matches('/');
            if bucket.is_empty() {
                return Err(EngineError::InvalidRoot(format!("{location}: no bucket")));
            }
            let mut builder = AmazonS3Builder::new().with_bucket_name(bucket);
            for (key, value) in &options {
                let key: AmazonS3ConfigKey =
                    key.parse().map_err(|_| EngineError::InvalidRoot(format!("unknown storage option {key}")))?;
                builder = builder.with_config(key, value);
            }
            let s3: Arc<dyn ObjectStore> = Arc::new(builder.build()?);
            let store: Arc<dyn ObjectStore> =
                if prefix.is_empty() { s3 } else { Arc::new(PrefixStore::new(s3, prefix)) };
            let uri = if prefix.is_empty() { format!("s3://{bucket}") } else { format!("s3://{bucket}/{prefix}") };
            return Ok(GraphRoot { uri, local_dir: None, options, store, session: bounded_session(), wrapper: None });
        }
        if location.contains("://") {
            return Err(EngineError::InvalidRoot(format!("{location}: only local paths and s3:// are supported")));
        }
        let dir = std::fs::canonicalize(location).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => EngineError::NoGraph(location.to_owned()),
            _ => EngineError::Storage(format!("{location}: {e}")),
        })?;
        let store = LocalFileSystem::new_with_prefix(&dir)?.with_fsync(true);
        Ok(GraphRoot {
            uri: dir.display().to_string(),
            local_dir: Some(dir),
            options,
            store: Arc::new(store),
            session: bounded_session(),
            wrapper: None,
        })
    }

    /// The same root with every object store wrapped by `wrapper`: the
    /// manifest's, and each one Lance opens for its tables.
    pub fn with_store_wrapper(mut self, wrapper: Arc<dyn WrappingObjectStore>) -> GraphRoot {
        self.store = wrapper.wrap("graph", self.store.clone());
        self.wrapper = Some(wrapper);
        // A fresh session: its registry must not hand out stores opened unwrapped.
        self.session = bounded_session();
        self
    }

    /// The same root whose manifest objects are written without fsync (a
    /// graph configured not durable: tests and benchmarks). Object stores are
    /// unaffected.
    pub fn without_fsync(mut self) -> GraphRoot {
        if let Some(dir) = &self.local_dir {
            let store: Arc<dyn ObjectStore> = Arc::new(
                LocalFileSystem::new_with_prefix(dir).expect("the directory was opened before"),
            );
            self.store = match &self.wrapper {
                Some(wrapper) => wrapper.wrap("graph", store),
                None => store,
            };
        }
        self
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub fn local_dir(&self) -> Option<&std::path::Path> {
        self.local_dir.as_deref()
    }

    /// The URI of a table's Lance dataset, e.g. `<root>/nodes/Person.lance`.
    pub fn table_uri(&self, relative: &str) -> String {
        format!("{}/{relative}", self.uri)
    }

    pub fn write_params(&self, mode: WriteMode) -> WriteParams {
        WriteParams {
            mode,
            store_params: Some(self.store_params()),
            session: Some(self.session.clone()),
            // Never Lance's age-based cleanup: it is blind to the versions
            // graph commits pin (graph/cleanup.rs removes versions).
            auto_cleanup: None,
            ..Default::default()
        }
    }

    pub fn store_params(&self) -> ObjectStoreParams {
        ObjectStoreParams {
            storage_options_accessor: Some(Arc::new(StorageOptionsAccessor::with_static_options(self.options.clone()))),
            object_store_wrapper: self.wrapper.clone(),
            ..Default::default()
        }
    }

    /// Opens a table's latest version on Lance's main branch.
    pub async fn open_table(&self, relative: &str) -> Result<Dataset, EngineError> {
        Ok(self.table_builder(relative).load().await?)
    }

    /// Opens a table at `version` of a Lance branch (`None` = main) in one
    /// manifest read.
    pub async fn open_table_at(&self, relative: &str, lance_branch: Option<&str>, version: u64) -> Result<Dataset, EngineError> {
        let builder = self.table_builder(relative);
        let builder = match lance_branch {
            Some(branch) => builder.with_branch(branch, Some(version)),
            None => builder.with_version(version),
        };
        Ok(builder.load().await?)
    }

    fn table_builder(&self, relative: &str) -> DatasetBuilder {
        DatasetBuilder::from_uri(self.table_uri(relative))
            .with_store_params(self.store_params())
            .with_session(self.session.clone())
    }

    /// Writes an object only if it does not exist (the graph's compare-and-swap).
    /// Returns `false` when it already existed.
    pub async fn put_if_absent(&self, path: &str, bytes: Vec<u8>) -> Result<bool, EngineError> {
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(&ObjectPath::from(path), PutPayload::from(bytes), options).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Proves that the store refuses a second conditional create of one
    /// object: the lease and every commit slot are such creates, and a store
    /// that ignores the condition (some S3-compatible servers do) would make
    /// them last-writer-wins (`UnsafeStore`). Three requests on a probe
    /// object of its own, removed after.
    pub async fn prove_conditional_create(&self) -> Result<(), EngineError> {
        let probe = format!("{CONDITIONAL_PROBE_DIR}/{}", ulid::Ulid::new());
        let first = self.put_if_absent(&probe, b"first".to_vec()).await?;
        let second = self.put_if_absent(&probe, b"second".to_vec()).await?;
        self.delete(&probe).await?;
        if first && !second {
            Ok(())
        } else {
            Err(EngineError::UnsafeStore(self.uri.clone()))
        }
    }

    pub async fn put_json_if_absent<T: Serialize>(&self, path: &str, value: &T) -> Result<bool, EngineError> {
        self.put_if_absent(path, serde_json::to_vec_pretty(value).expect("manifest objects serialize")).await
    }

    /// Writes (or replaces) an object: only for objects one lease holder owns.
    pub async fn put(&self, path: &str, bytes: Vec<u8>) -> Result<(), EngineError> {
        self.store.put(&ObjectPath::from(path), PutPayload::from(bytes)).await?;
        Ok(())
    }

    pub async fn get(&self, path: &str) -> Result<Option<Vec<u8>>, EngineError> {
        match self.store.get(&ObjectPath::from(path)).await {
            Ok(found) => Ok(Some(found.bytes().await?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, EngineError> {
        match self.get(path).await? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| EngineError::Corrupt(format!("{path}: {e}"))),
            None => Ok(None),
        }
    }

    pub async fn exists(&self, path: &str) -> Result<bool, EngineError> {
        match self.store.head(&ObjectPath::from(path)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn delete(&self, path: &str) -> Result<(), EngineError> {
        match self.store.delete(&ObjectPath::from(path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Names of the objects directly under `prefix` (not recursive).
    pub async fn list_names(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        let listed = self.store.list_with_delimiter(Some(&ObjectPath::from(prefix))).await?;
        Ok(listed.objects.into_iter().filter_map(|o| o.location.filename().map(str::to_owned)).collect())
    }

    /// Names of the "directories" directly under `prefix`.
    pub async fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        let listed = self.store.list_with_delimiter(Some(&ObjectPath::from(prefix))).await?;
        Ok(listed.common_prefixes.into_iter().filter_map(|p| p.filename().map(str::to_owned)).collect())
    }
}
