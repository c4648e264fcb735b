//! Finding branch heads and publishing commits: the head hint (`HEAD.json`)
//! plus a probe (O(1) requests whatever the history), the tenure's known
//! heads, and the put-if-absent of a commit's sequence number, the
//! visibility point.

use super::*;

impl Graph {

    /// The newest commit object of a branch, a deletion included, in O(1)
    /// requests whatever the history: the head hint, then a probe of the next
    /// sequence numbers (commits published after the hint was last written).
    /// A branch without a hint (its writer stopped before writing the first
    /// one) is listed once.
    pub(super) async fn latest_commit(&self, branch: &str) -> Result<Option<Commit>, EngineError> {
        let mut head = match self.root.get_json::<Commit>(&head_hint_path(branch)).await? {
            Some(hint) => hint,
            None => {
                let names = self.root.list_names(&format!("{BRANCHES_DIR}/{branch}")).await?;
                match names.iter().filter_map(|n| seq_from_commit_name(n)).max() {
                    Some(seq) => self.commit_at(branch, seq).await?,
                    None => return Ok(None),
                }
            }
        };
        while let Some(next) = self.root.get_json::<Commit>(&commit_path(branch, head.seq + 1)).await? {
            head = next;
        }
        Ok(Some(head))
    }

    /// Publishes a commit: the put-if-absent of its sequence number is the
    /// visibility point (`false`: the slot is taken). Then the branch's head
    /// hint; failing to write it only costs readers a probe.
    pub(super) async fn publish_commit(&self, commit: &Commit) -> Result<bool, EngineError> {
        if !self.root.put_json_if_absent(&commit_path(&commit.branch, commit.seq), commit).await? {
            return Ok(false);
        }
        self.heads.lock().expect("heads lock").insert(commit.branch.clone(), commit.clone());
        if commit.kind == CommitKind::Load {
            self.maintenance_due.store(true, Ordering::Release);
        }
        let hint = serde_json::to_vec_pretty(commit).expect("commits serialize");
        if let Err(e) = self.root.put(&head_hint_path(&commit.branch), hint).await {
            eprintln!("could not update the head hint of branch {} ({e}); readers probe past it", commit.branch);
        }
        Ok(true)
    }

    /// A branch's head commit, or `None` if the branch does not exist.
    pub async fn head(&self, branch: &str) -> Result<Option<Commit>, EngineError> {
        check_branch_name(branch)?;
        Ok(self.latest_commit(branch).await?.filter(|c| c.kind != CommitKind::Delete))
    }

    /// A branch's head for a writer holding the lease: from the tenure's
    /// cache when known (no request), else read once and remembered.
    pub(super) async fn head_leased(&self, branch: &str) -> Result<Option<Commit>, EngineError> {
        let known = self.heads.lock().expect("heads lock").get(branch).cloned();
        let latest = match known {
            Some(commit) => Some(commit),
            None => {
                check_branch_name(branch)?;
                let latest = self.latest_commit(branch).await?;
                if let Some(commit) = &latest {
                    self.heads.lock().expect("heads lock").insert(branch.to_owned(), commit.clone());
                }
                latest
            }
        };
        Ok(latest.filter(|c| c.kind != CommitKind::Delete))
    }

    pub(super) async fn head_or_404(&self, branch: &str) -> Result<Commit, EngineError> {
        self.head(branch).await?.ok_or_else(|| EngineError::BranchNotFound(branch.to_owned()))
    }

    /// Commit `seq` of a branch (time travel).
    pub async fn commit_at(&self, branch: &str, seq: u64) -> Result<Commit, EngineError> {
        check_branch_name(branch)?;
        self.root
            .get_json::<Commit>(&commit_path(branch, seq))
            .await?
            .ok_or_else(|| EngineError::CommitNotFound(format!("{branch}@{seq}")))
    }

    /// A branch's commits, newest first, back to where it was forked.
    pub async fn log(&self, branch: &str) -> Result<Vec<Commit>, EngineError> {
        self.log_matching(branch, usize::MAX, |_| true).await
    }

    /// The newest `limit` commits of a branch that `keep` accepts, newest
    /// first. The walk stops at the `limit`th: it reads the commits down to
    /// it, not the branch's whole history.
    pub async fn log_matching(&self, branch: &str, limit: usize, mut keep: impl FnMut(&Commit) -> bool) -> Result<Vec<Commit>, EngineError> {
        let mut out = Vec::new();
        let head = self.head_or_404(branch).await?;
        if limit == 0 {
            return Ok(out);
        }
        self.walk_back(head, |commit| {
            if keep(commit) {
                out.push(commit.clone());
            }
            out.len() < limit
        })
        .await?;
        Ok(out)
    }

    /// Visits `from` and its ancestors on its branch, newest first, while
    /// `visit` answers true (a fork's walk ends at its fork commit).
    pub(super) async fn walk_back(&self, from: Commit, mut visit: impl FnMut(&Commit) -> bool) -> Result<(), EngineError> {
        let mut commit = from;
        while visit(&commit) {
            match &commit.parent {
                Some(p) if p.branch == commit.branch => commit = self.commit_at(&commit.branch, p.seq).await?,
                _ => break,
            }
        }
        Ok(())
    }

    /// The newest commit at or below `head` that changed rows, walking back
    /// no further than sequence number `floor`: maintenance moves no row,
    /// and a rollback marker holds its parent's tables (a publish that
    /// recovery rolled back must not make its retry `target_moved`).
    pub(super) async fn last_change_since(&self, head: &Commit, floor: u64) -> Result<Commit, EngineError> {
        let mut commit = head.clone();
        while matches!(commit.kind, CommitKind::Maintain | CommitKind::Rollback) && commit.seq > floor {
            match &commit.parent {
                Some(parent) if parent.branch == commit.branch => commit = self.commit_at(&commit.branch, parent.seq).await?,
                _ => break,
            }
        }
        Ok(commit)
    }

    /// Every existing branch with its head.
    pub async fn branches(&self) -> Result<Vec<Commit>, EngineError> {
        let mut out = Vec::new();
        for name in self.root.list_dirs(BRANCHES_DIR).await? {
            if check_branch_name(&name).is_ok()
                && let Some(head) = self.head(&name).await?
            {
                out.push(head);
            }
        }
        Ok(out)
    }

    pub(super) async fn resolve(&self, branch: &str, at: Option<u64>) -> Result<Commit, EngineError> {
        match at {
            Some(seq) => self.commit_at(branch, seq).await,
            None => self.head_or_404(branch).await,
        }
    }

    /// The next commit object of `branch` on top of `parent`: its sequence
    /// number continues the branch's chain (after a deletion too).
    pub(super) async fn next_commit(
        &self,
        branch: &str,
        parent: &Commit,
        kind: CommitKind,
        actor: &str,
        batch_id: Option<String>,
        mode: Option<Mode>,
    ) -> Result<Commit, EngineError> {
        // On its own branch the parent is the head; a fork continues after
        // whatever the name last held (a deletion).
        let (seq, lance_branch) = if parent.branch == branch {
            (parent.seq + 1, parent.lance_branch.clone())
        } else {
            let seq = self.latest_commit(branch).await?.map_or(0, |c| c.seq + 1);
            (seq, Some(format!("{branch}-{seq}")))
        };
        Ok(Commit {
            id: ulid::Ulid::new().to_string(),
            branch: branch.to_owned(),
            seq,
            kind,
            parent: Some(CommitRef { branch: parent.branch.clone(), seq: parent.seq }),
            parent_id: Some(parent.id.clone()),
            actor: actor.to_owned(),
            time: now_rfc3339(),
            batch_id,
            batch_key: None,
            mode: mode.map(|m| m.as_str().to_owned()),
            maintenance: None,
            lance_branch,
            tables: parent.tables.clone(),
            counts: BTreeMap::new(),
        })
    }
}
