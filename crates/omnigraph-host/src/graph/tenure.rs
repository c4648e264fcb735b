//! The lease a process holds while it writes: taken (after recovering what
//! older generations left), renewed while a write runs, kept for a write
//! already waiting, given up otherwise.

use super::*;

/// The lease a process keeps across back-to-back loads.
pub(super) struct Tenure {
    lease: HeldLease,
    /// Writes done under it: bounded by `MAX_TENURE_WRITES`, so a busy host
    /// gives other hosts a turn.
    writes: u32,
}

impl Graph {
    /// Runs `work` holding this process's writer lock and the graph's lease
    /// (waiting at most `wait` for it), after finishing any interrupted load;
    /// `work` learns what that recovery did. The lease is renewed while
    /// `work` runs, and kept for the next writer of this process when one is
    /// already waiting (back-to-back loads pay for the lease once); it is
    /// released when none waits, after `MAX_TENURE_WRITES` writes, or after
    /// a failure that needs recovery.
    pub(super) async fn with_lease<'s, T, F, Fut>(&'s self, wait: Duration, work: F) -> Result<T, EngineError>
    where
        F: FnOnce(HeldLease, Recovered) -> Fut,
        Fut: std::future::Future<Output = Result<T, EngineError>> + 's,
    {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut held = self.writer.lock().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        let kept = match held.take() {
            Some(tenure) if tenure.lease.valid_for(self.publish_margin()) => Some(tenure),
            Some(tenure) => {
                self.give_up(&tenure.lease, true).await;
                None
            }
            None => None,
        };
        let (mut tenure, recovered) = match kept {
            Some(tenure) => (tenure, Recovered::Nothing),
            None => {
                let lease = match lease::acquire(&self.root, &self.config.owner, self.config.lease_ttl, wait).await {
                    Err(EngineError::LeaseBusy { owner, generation }) => {
                        return Err(if self.unfinished_before(generation).await? {
                            EngineError::RecoveryInProgress
                        } else {
                            EngineError::LeaseBusy { owner, generation }
                        });
                    }
                    other => other?,
                };
                // Heads known before this lease (from an earlier tenure, or
                // published outside one, like `init`'s) may be stale now.
                self.heads.lock().expect("heads lock").clear();
                match self.recover_leased(lease.generation).await {
                    Ok(recovered) => (Tenure { lease, writes: 0 }, recovered),
                    Err(e) => {
                        self.give_up(&lease, false).await;
                        return Err(e);
                    }
                }
            }
        };
        tenure.writes += 1;
        // On its own task, so a load busy on its thread cannot starve it; and
        // stopped however the work ends, a panic included (a lease renewed
        // by an orphaned task would never expire).
        let renewer = AbortOnDrop(tokio::spawn(keep_renewed(
            self.root.clone(),
            tenure.lease.clone(),
            self.config.owner.clone(),
            self.config.lease_ttl,
        )));
        let result = work(tenure.lease.clone(), recovered).await;
        drop(renewer);
        let needs_recovery = matches!(result, Err(EngineError::RecoveryRequired { .. }));
        // A load that stopped after its record was written is finished now,
        // while this writer likely still holds the lease (else by the next
        // writer); its answer stays `recovery_required` either way.
        if needs_recovery
            && tenure.lease.valid_for(self.publish_margin())
            && let Err(e) = self.recover_leased(tenure.lease.generation).await
        {
            eprintln!("recovery after a failed load did not finish ({e}); the next writer finishes it");
        }
        let keep = !needs_recovery
            && self.waiting.load(Ordering::Acquire) > 0
            && tenure.writes < MAX_TENURE_WRITES
            && tenure.lease.valid_for(self.publish_margin());
        if keep {
            *held = Some(tenure);
        } else {
            self.give_up(&tenure.lease, !needs_recovery).await;
        }
        result
    }

    /// Releases a lease and forgets what was known under it; `finished`:
    /// the tenure's recovery record (if any) belongs to a published load and
    /// is deleted. Housekeeping only: a failure is logged, never the load's
    /// error (a record left behind is recognised by the next recovery; a
    /// lease not released expires).
    pub(super) async fn give_up(&self, lease: &HeldLease, finished: bool) {
        self.heads.lock().expect("heads lock").clear();
        if self.record_written.swap(false, Ordering::AcqRel) && finished {
            let path = recovery_path(lease.generation);
            if let Err(e) = self.delete_own_record(&path).await {
                eprintln!("could not delete recovery record {path} ({e}); the next recovery removes it");
            }
            fail_point!("after-record-delete");
        }
        if let Err(e) = lease::release(&self.root, lease).await {
            eprintln!("could not release lease generation {} ({e}); it expires on its own", lease.generation);
        }
    }

    pub(super) async fn delete_own_record(&self, path: &str) -> Result<(), EngineError> {
        fail_point!("record-delete-error", |_| Err(EngineError::Storage("injected failure deleting the recovery record".into())));
        self.root.delete(path).await
    }

    /// Whether a recovery record older than lease `generation` is left: its
    /// holder is finishing (or will finish) an interrupted load.
    pub(super) async fn unfinished_before(&self, generation: u64) -> Result<bool, EngineError> {
        let names = self.root.list_names(RECOVERY_DIR).await?;
        Ok(names.iter().filter_map(|n| generation_from_lease_name(n)).any(|g| g < generation))
    }

    /// Lease time a writer must have left to commit a table or publish.
    pub(super) fn publish_margin(&self) -> Duration {
        LEASE_PUBLISH_MARGIN.min(self.config.lease_ttl / 4)
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews `lease` whenever half of it is left, until aborted (when the work
/// it protects ends). Stops, quietly, once it cannot: the fences keep a
/// writer that lost its lease harmless.
async fn keep_renewed(root: GraphRoot, lease: HeldLease, owner: String, ttl: Duration) {
    let half = ttl.as_millis() as u64 / 2;
    loop {
        let due = lease.expires_at_ms().saturating_sub(half);
        tokio::time::sleep(Duration::from_millis(due.saturating_sub(now_ms()))).await;
        if !matches!(lease::renew(&root, &lease, &owner, ttl).await, Ok(true)) {
            return;
        }
    }
}
