//! Creating and deleting branches.

use super::*;

impl Graph {

    /// Creates `name` from `from`'s head: a commit pointing at the base's
    /// table versions (no data copied).
    pub async fn create_branch(&self, name: &str, from: &str, actor: &str) -> Result<Commit, EngineError> {
        self.fork(name, from, &[], actor).await
    }

    /// Deletes a branch: a tombstone commit ends its chain. Its Lance
    /// branches stay (older commits and branches forked from it still read
    /// them); `main` cannot be deleted.
    pub async fn delete_branch(&self, name: &str, actor: &str) -> Result<Commit, EngineError> {
        check_branch_name(name)?;
        if name == MAIN_BRANCH {
            return Err(EngineError::MainBranchProtected);
        }
        self.with_lease(self.config.lease_wait, |_, _| async {
            let head = self.head_or_404(name).await?;
            let tombstone = self.next_commit(name, &head, CommitKind::Delete, actor, None, None).await?;
            if !self.publish_commit(&tombstone).await? {
                return Err(EngineError::CommitConflict { attempts: 1 });
            }
            Ok(tombstone)
        })
        .await
    }
}
