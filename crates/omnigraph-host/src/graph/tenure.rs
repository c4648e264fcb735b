//! The lease a process holds while it writes: taken (after recovering what
//! older generations left), renewed while a write runs (on its own task; a
//! failed renewal is retried with backoff while the lease outlives the
//! wait), kept for a write already waiting, given up otherwise (its record
//! deleted). The wait for the writer lock is a guard (`InLine`) that a
//! caller who went away leaves (`CallerGone`); a write future dropped
//! holding the lease releases it on a task of its own (`Unreleased`).

use super::*;

/// Resolves when the caller of a write no longer wants it (its client went
/// away). Honoured only while the write waits its turn, before anything
/// is written; once the lease is had the write runs to its end.
pub type CallerGone<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// A caller that never goes away.
pub fn never_gone() -> CallerGone<'static> {
    Box::pin(std::future::pending())
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
        self.with_lease_while_wanted(wait, never_gone(), work).await
    }

    /// [`Graph::with_lease`] for a caller that may go away while the write
    /// waits for the writer lock or another host's lease (`CallerGone`,
    /// nothing written). If this future is dropped once the lease is held,
    /// the lease is released on a task of its own (a record left behind is
    /// finished by the next writer's recovery), not kept until it expires.
    pub(super) async fn with_lease_while_wanted<'s, T, F, Fut>(
        &'s self,
        wait: Duration,
        mut gone: CallerGone<'_>,
        work: F,
    ) -> Result<T, EngineError>
    where
        F: FnOnce(HeldLease, Recovered) -> Fut,
        Fut: std::future::Future<Output = Result<T, EngineError>> + 's,
    {
        let mut held = {
            // A waiter keeps the tenure's lease from being given up; the
            // guard takes it out of line however the wait ends.
            let _in_line = InLine::join(&self.waiting);
            tokio::select! {
                biased;
                held = self.writer.lock() => held,
                () = &mut gone => return Err(EngineError::CallerGone),
            }
        };
        let kept = match held.take() {
            Some(tenure) if tenure.lease.valid_for(self.publish_margin()) => Some(tenure),
            Some(tenure) => {
                self.give_up(&tenure.lease, true).await;
                None
            }
            None => None,
        };
        let mut unreleased;
        let (mut tenure, recovered) = match kept {
            Some(tenure) => {
                unreleased = Unreleased::arm(self, &tenure.lease);
                (tenure, Recovered::Nothing)
            }
            None => {
                let lease = match lease::acquire(&self.root, &self.config.owner, self.config.lease_ttl, wait, &mut gone).await {
                    Err(EngineError::LeaseBusy { owner, generation }) => {
                        return Err(if self.unfinished_before(generation).await? {
                            EngineError::RecoveryInProgress
                        } else {
                            EngineError::LeaseBusy { owner, generation }
                        });
                    }
                    other => other?,
                };
                unreleased = Unreleased::arm(self, &lease);
                // Heads known before this lease (from an earlier tenure, or
                // published outside one, like `init`'s) may be stale now.
                self.heads.lock().expect("heads lock").clear();
                match self.recover_leased(lease.generation).await {
                    Ok(recovered) => (Tenure { lease, writes: 0 }, recovered),
                    Err(e) => {
                        self.give_up(&lease, false).await;
                        unreleased.disarm();
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
        unreleased.disarm();
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

/// A place in line for the writer lock, counted in `Graph::waiting` until
/// dropped (the lock had, or the wait given up or cut short).
struct InLine<'a>(&'a AtomicUsize);

impl<'a> InLine<'a> {
    fn join(waiting: &'a AtomicUsize) -> InLine<'a> {
        waiting.fetch_add(1, Ordering::AcqRel);
        InLine(waiting)
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A held lease that a write dropped mid-way (its future cut at an await)
/// would otherwise keep until it expires: dropped armed, it forgets the
/// tenure's heads and releases the lease on a task of its own. A recovery
/// record of the cut load stays for the next writer's recovery, which runs
/// before that writer's first load.
struct Unreleased<'a> {
    graph: &'a Graph,
    lease: Option<HeldLease>,
}

impl<'a> Unreleased<'a> {
    fn arm(graph: &'a Graph, lease: &HeldLease) -> Unreleased<'a> {
        Unreleased { graph, lease: Some(lease.clone()) }
    }

    /// The lease was kept or given up in order.
    fn disarm(&mut self) {
        self.lease = None;
    }
}

impl Drop for Unreleased<'_> {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else { return };
        self.graph.heads.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
        self.graph.record_written.store(false, Ordering::Release);
        // Without a runtime (it is shutting down) the lease expires on its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let root = self.graph.root.clone();
            runtime.spawn(async move {
                if let Err(e) = lease::release(&root, &lease).await {
                    eprintln!("could not release lease generation {} of a write cut short ({e}); it expires on its own", lease.generation);
                }
            });
        }
    }
}

/// Renews `lease` whenever half of it is left, until aborted (when the work
/// it protects ends). A renewal that fails is tried again, backing off,
/// while the lease outlives the wait (one failed store call must not cost a
/// long write its lease); it stops, quietly, once the lease was taken over
/// or ran out: the fences keep a writer that lost its lease harmless.
async fn keep_renewed(root: GraphRoot, lease: HeldLease, owner: String, ttl: Duration) {
    let half = ttl.as_millis() as u64 / 2;
    loop {
        let due = lease.expires_at_ms().saturating_sub(half);
        tokio::time::sleep(Duration::from_millis(due.saturating_sub(now_ms()))).await;
        let mut backoff = RENEW_BACKOFF_FIRST;
        loop {
            match lease::renew(&root, &lease, &owner, ttl).await {
                Ok(true) => break,
                Ok(false) => return,
                Err(e) => {
                    if !lease.valid_for(backoff) {
                        eprintln!("lease generation {} could not be renewed before it ran out ({e})", lease.generation);
                        return;
                    }
                    eprintln!("renewing lease generation {} failed ({e}); trying again in {backoff:?}", lease.generation);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RENEW_BACKOFF_MAX);
                }
            }
        }
    }
}
