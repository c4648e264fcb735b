//! Reading a branch at its head or at a commit: row counts and export.

use super::*;

impl Graph {
    /// Rows per table at a branch's head (or commit `at`).
    pub async fn row_counts(&self, branch: &str, at: Option<u64>) -> Result<BTreeMap<String, u64>, EngineError> {
        let commit = self.resolve(branch, at).await?;
        let mut out = BTreeMap::new();
        for def in &self.schema.types {
            let ds = tables::open_pinned(&self.root, &table_path(def.kind, &def.name), &commit.tables[&def.name]).await?;
            out.insert(def.name.clone(), ds.count_rows(None).await? as u64);
        }
        Ok(out)
    }

    /// Streams every record of a branch head (or commit `at`) as strict
    /// NDJSON, nodes first, to `sink`, one chunk per Lance batch (awaited:
    /// a slow consumer slows the scan instead of buffering it).
    pub async fn export<F, Fut>(&self, branch: &str, at: Option<u64>, mut sink: F) -> Result<Commit, EngineError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<(), EngineError>>,
    {
        let commit = self.resolve(branch, at).await?;
        for def in &self.schema.types {
            let ds = tables::open_pinned(&self.root, &table_path(def.kind, &def.name), &commit.tables[&def.name]).await?;
            let mut scan = ds.scan();
            scan.blob_handling(BlobHandling::AllBinary);
            let mut stream = scan.try_into_stream().await?;
            while let Some(batch) = stream.try_next().await? {
                let mut chunk = String::new();
                write_records(&mut chunk, def, &batch);
                if !chunk.is_empty() {
                    sink(chunk).await?;
                }
            }
        }
        Ok(commit)
    }
}
