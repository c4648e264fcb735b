//! An object store that fails chosen requests, or ignores the condition of
//! conditional creates, wrapped around a graph root's real store
//! (`GraphRoot::with_store_wrapper`, `ServerConfig::store_wrapper`): the
//! tests of "any store call can fail once" and of a store that must be
//! refused.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use lance::io::WrappingObjectStore;
use object_store::list::PaginatedListStore;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};

/// What the wrapped stores get wrong; shared by every store one wrapper wraps.
#[derive(Debug, Default)]
pub struct Faults {
    /// Puts to a path containing the string fail, this many more times.
    failing_puts: Mutex<Option<(String, usize)>>,
    /// Puts failed so far.
    pub failed_puts: AtomicUsize,
    /// Conditional creates overwrite like plain puts (a store that ignores
    /// `If-None-Match: *`).
    pub ignore_create_condition: AtomicBool,
}

impl Faults {
    /// The next `times` puts to a path containing `path_part` fail.
    pub fn fail_puts(&self, path_part: &str, times: usize) {
        *self.failing_puts.lock().unwrap() = Some((path_part.to_owned(), times));
    }

    fn put_fails(&self, location: &Path) -> bool {
        let mut failing = self.failing_puts.lock().unwrap();
        match failing.as_mut() {
            Some((part, left)) if *left > 0 && location.as_ref().contains(part.as_str()) => {
                *left -= 1;
                self.failed_puts.fetch_add(1, Ordering::AcqRel);
                true
            }
            _ => false,
        }
    }
}

/// Wraps each store of a root in a [`FaultyStore`] sharing `Faults`.
#[derive(Debug, Clone)]
pub struct Faulty(pub Arc<Faults>);

impl WrappingObjectStore for Faulty {
    fn wrap(&self, _prefix: &str, original: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(FaultyStore { inner: original, faults: self.0.clone() })
    }
    // Lance's paged listings stay as they are.
    fn wrap_paginated(&self, _prefix: &str, original: Arc<dyn PaginatedListStore>) -> Option<Arc<dyn PaginatedListStore>> {
        Some(original)
    }
}

#[derive(Debug)]
struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<Faults>,
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, mut opts: PutOptions) -> object_store::Result<PutResult> {
        if self.faults.put_fails(location) {
            return Err(object_store::Error::Generic { store: "faulty", source: format!("injected failure of a put to {location}").into() });
        }
        if self.faults.ignore_create_condition.load(Ordering::Acquire) && opts.mode == PutMode::Create {
            opts.mode = PutMode::Overwrite;
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(&self, locations: BoxStream<'static, object_store::Result<Path>>) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
