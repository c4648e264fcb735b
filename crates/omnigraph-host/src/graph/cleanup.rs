//! Version cleanup (SPEC §4.7): Lance versions that no commit of any live
//! branch pins, and older than a retention, are removed; every commit of a
//! live branch stays readable (time travel). Exactly those versions are
//! named to Lance (`CleanupPolicy::versions`), so no age rule of Lance's own
//! can reach a pinned one; Lance keeps the files a retained version or a
//! child Lance branch still uses.

use std::collections::{BTreeMap, BTreeSet};

use lance::dataset::cleanup::CleanupPolicyBuilder;

use super::*;

/// What a cleanup removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cleaned {
    pub versions: u64,
    pub bytes: u64,
}

impl Graph {
    /// Removes every table version that no commit of a live branch pins and
    /// that is older than `retention` (never a table's newest version). Runs
    /// under the lease. Walks every live branch's commits: a maintenance
    /// job, never part of a load. Versions only a deleted branch pinned stay
    /// (its Lance branches are left as they are).
    pub async fn cleanup_versions(&self, retention: Duration) -> Result<Cleaned, EngineError> {
        self.with_lease(self.config.lease_wait, |_, _| async move {
            let mut pinned: BTreeMap<(String, Option<String>), BTreeSet<u64>> = BTreeMap::new();
            for head in self.branches().await? {
                for commit in self.log(&head.branch).await? {
                    for (name, pin) in commit.tables {
                        pinned.entry((name, pin.lance_branch)).or_default().insert(pin.version);
                    }
                }
            }
            let cutoff_ms = now_ms().saturating_sub(retention.as_millis() as u64) as i64;
            let mut cleaned = Cleaned::default();
            for ((name, lance_branch), versions) in pinned {
                let path = self.recorded_table(&name)?;
                let Some(ds) = tables::latest_on(&self.root, &path, lance_branch.as_deref()).await? else { continue };
                let newest = ds.version().version;
                let doomed: Vec<u64> = ds
                    .versions()
                    .await?
                    .into_iter()
                    .filter(|v| v.version != newest && !versions.contains(&v.version) && v.timestamp.timestamp_millis() < cutoff_ms)
                    .map(|v| v.version)
                    .collect();
                if doomed.is_empty() {
                    continue;
                }
                let count = doomed.len() as u64;
                let policy = CleanupPolicyBuilder::default().versions(doomed).map_err(EngineError::from)?.build();
                let removed = ds.cleanup_with_policy(policy).await?;
                cleaned.versions += count;
                cleaned.bytes += removed.bytes_removed;
            }
            Ok(cleaned)
        })
        .await
    }
}
