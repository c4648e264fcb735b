//! One writer per graph across processes and hosts: a lease taken by a
//! conditional create of the next lease generation. A generation is free
//! once released or expired; creating the next one is atomic on a local disk
//! and on S3-compatible stores, so exactly one contender wins. The holder
//! renews it by rewriting its own generation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::EngineError;
use crate::manifest::{LEASE_DIR, Lease, generation_from_lease_name, lease_path, lease_released_path};
use crate::storage::GraphRoot;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

const POLL: Duration = Duration::from_millis(25);

/// A held lease. Release it with [`release`]; a holder that dies simply
/// lets it expire. Clones share the expiry, which [`renew`] moves.
#[derive(Debug, Clone)]
pub struct HeldLease {
    pub generation: u64,
    expires_at_ms: Arc<AtomicU64>,
}

impl HeldLease {
    /// Whether at least `margin` of the lease is left, by this host's clock:
    /// used only to give up early (liveness), never for safety. The
    /// `lease-clock-trusted` failpoint plays a clock that is wrong.
    pub fn valid_for(&self, margin: Duration) -> bool {
        fail::fail_point!("lease-clock-trusted", |_| true);
        now_ms() + margin.as_millis() as u64 <= self.expires_at_ms()
    }

    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms.load(Ordering::Acquire)
    }
}

async fn latest_generation(root: &GraphRoot) -> Result<Option<u64>, EngineError> {
    Ok(root.list_names(LEASE_DIR).await?.iter().filter_map(|n| generation_from_lease_name(n)).max())
}

/// Takes the graph's write lease, waiting up to `wait` for another holder.
/// While it waits (never inside a request: a create cut short could land
/// later and hold the graph for a whole TTL), `gone` resolving gives up
/// with `CallerGone`.
pub async fn acquire(
    root: &GraphRoot,
    owner: &str,
    ttl: Duration,
    wait: Duration,
    gone: &mut (impl Future<Output = ()> + Unpin),
) -> Result<HeldLease, EngineError> {
    let give_up = now_ms() + wait.as_millis() as u64;
    loop {
        let latest = latest_generation(root).await?;
        let holder = match latest {
            None => None,
            Some(g) if root.exists(&lease_released_path(g)).await? => None,
            Some(g) => match root.get_json::<Lease>(&lease_path(g)).await? {
                Some(lease) if lease.expires_at_ms > now_ms() => Some((lease.owner, g)),
                // Expired: its holder died or stalled; recovery follows the takeover.
                _ => None,
            },
        };
        match holder {
            None => {
                let generation = latest.map_or(1, |g| g + 1);
                let lease = Lease { owner: owner.to_owned(), generation, expires_at_ms: now_ms() + ttl.as_millis() as u64 };
                if root.put_json_if_absent(&lease_path(generation), &lease).await? {
                    return Ok(HeldLease { generation, expires_at_ms: Arc::new(AtomicU64::new(lease.expires_at_ms)) });
                }
            }
            Some((owner, generation)) => {
                if now_ms() >= give_up {
                    return Err(EngineError::LeaseBusy { owner, generation });
                }
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    () = &mut *gone => return Err(EngineError::CallerGone),
                }
            }
        }
    }
}

/// Extends a held lease by `ttl` from now: its holder rewrites its own
/// generation's object. `false` when a newer generation exists (the lease
/// was taken over; renewing would be pointless). A renewal racing a
/// takeover is harmless: the newest generation rules, and every durable
/// effect of a load is fenced (docs/ARCHITECTURE.md).
pub async fn renew(root: &GraphRoot, lease: &HeldLease, owner: &str, ttl: Duration) -> Result<bool, EngineError> {
    if root.exists(&lease_path(lease.generation + 1)).await? {
        return Ok(false);
    }
    let expires_at_ms = now_ms() + ttl.as_millis() as u64;
    let renewed = Lease { owner: owner.to_owned(), generation: lease.generation, expires_at_ms };
    root.put(&lease_path(lease.generation), serde_json::to_vec_pretty(&renewed).expect("lease serializes")).await?;
    lease.expires_at_ms.store(expires_at_ms, Ordering::Release);
    Ok(true)
}

/// Releases a lease and drops generations older than the previous one.
pub async fn release(root: &GraphRoot, lease: &HeldLease) -> Result<(), EngineError> {
    root.put_if_absent(&lease_released_path(lease.generation), Vec::new()).await?;
    if let Some(old) = lease.generation.checked_sub(2).filter(|&g| g > 0) {
        root.delete(&lease_path(old)).await?;
        root.delete(&lease_released_path(old)).await?;
    }
    Ok(())
}
