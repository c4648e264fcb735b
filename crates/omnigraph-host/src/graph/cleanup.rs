//! Version cleanup (SPEC §4.7): Lance versions that no commit of any live
//! branch pins, and older than a retention, are removed, and so are whole
//! Lance branches no such commit pins; every commit of a live branch stays
//! readable (time travel). Exactly those versions are
//! named to Lance (`CleanupPolicy::versions`), so no age rule of Lance's own
//! can reach a pinned one; Lance keeps the files a retained version or a
//! child Lance branch still uses.
//!
//! `Graph::cleanup_versions` (`optimize`, and the server once per
//! `CLEANUP_INTERVAL`): collect every version any commit of a live branch
//! pins by walking each branch's log *before* taking the lease (commits
//! never change, and loads go on meanwhile); under the lease, walk only the
//! commits published since (each branch's walk stops at a commit already
//! read), then per (table, Lance branch) name to Lance exactly the versions
//! that are unpinned, not the newest and older than the retention. Lance
//! branches that no pin names (a deleted graph branch's, a finished work
//! branch's) and whose newest version is older than the retention are
//! deleted whole, child first (Lance refuses one another branch was created
//! from). Writes set `auto_cleanup: None`: Lance's age-based cleanup never
//! runs.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use fail::fail_point;

use lance::dataset::cleanup::CleanupPolicyBuilder;

use super::*;

/// What a cleanup removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cleaned {
    pub versions: u64,
    pub bytes: u64,
    /// Lance branches removed whole (bytes not counted: Lance does not say).
    pub lance_branches: u64,
}

/// Versions each table (on each Lance branch) has pinned by some commit.
type Pinned = BTreeMap<(String, Option<String>), BTreeSet<u64>>;

impl Graph {
    /// Removes every table version that no commit of a live branch pins and
    /// that is older than `retention` (never a table's newest version).
    /// Walks every live branch's commits, a maintenance job, never part of a
    /// load, and does it before taking the lease: commits never change, so
    /// under the lease only the commits published meanwhile are read, and a
    /// load waits for the version listing and Lance's cleanup only. A
    /// branch deleted during the walk keeps its pins until the next cleanup.
    pub async fn cleanup_versions(&self, retention: Duration) -> Result<Cleaned, EngineError> {
        let mut walked = HashSet::new();
        let mut pinned = Pinned::new();
        self.pin_new_commits(&mut walked, &mut pinned).await?;
        fail_point!("cleanup-history-read");
        self.with_lease(self.config.lease_wait, |_, _| async move {
            self.pin_new_commits(&mut walked, &mut pinned).await?;
            let cutoff_ms = now_ms().saturating_sub(retention.as_millis() as u64) as i64;
            let mut cleaned = Cleaned {
                lance_branches: self.remove_unpinned_lance_branches(&pinned, cutoff_ms).await?,
                ..Cleaned::default()
            };
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

    /// Removes each table's Lance branches that no live commit pins (a
    /// deleted graph branch's, a work branch's once its overwrite was
    /// published or abandoned) and whose newest version is older than
    /// `cutoff_ms`; how many. Under the lease, so no load is writing one.
    /// Lance refuses to remove a branch another one was created from, so
    /// each table's branches are gone over until none more can go: a chain
    /// goes child first, and a parent of a kept branch stays.
    async fn remove_unpinned_lance_branches(&self, pinned: &Pinned, cutoff_ms: i64) -> Result<u64, EngineError> {
        let mut removed = 0;
        for def in &self.schema.types {
            let mut ds = self.root.open_table(&table_path(def.kind, &def.name)).await?;
            loop {
                let mut progress = false;
                for name in ds.list_branches().await?.into_keys() {
                    if pinned.contains_key(&(def.name.clone(), Some(name.clone()))) {
                        continue;
                    }
                    let newest = ds.checkout_branch(&name).await?.version().timestamp.timestamp_millis();
                    if newest >= cutoff_ms {
                        continue;
                    }
                    match ds.delete_branch(&name).await {
                        Ok(()) => {
                            removed += 1;
                            progress = true;
                        }
                        // Another Lance branch was created from it: after that one, if ever.
                        Err(lance::Error::RefConflict { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                if !progress {
                    break;
                }
            }
        }
        Ok(removed)
    }

    /// Adds the pins of every live branch's commits not in `walked` (by id).
    /// A walk stops at a walked commit: its older commits on the branch were
    /// walked with it.
    async fn pin_new_commits(&self, walked: &mut HashSet<String>, pinned: &mut Pinned) -> Result<(), EngineError> {
        for head in self.branches().await? {
            self.walk_back(head, |commit| {
                if !walked.insert(commit.id.clone()) {
                    return false;
                }
                for (name, pin) in &commit.tables {
                    pinned.entry((name.clone(), pin.lance_branch.clone())).or_default().insert(pin.version);
                }
                true
            })
            .await?;
        }
        Ok(())
    }
}
