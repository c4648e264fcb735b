//! Local-disk durability: Lance writes without fsync, so the host flushes
//! (syncfs) before it publishes a graph commit (SPEC §4.2).

use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::EngineError;

/// Flushes every dirty file and directory entry of the filesystem holding
/// `dir` (`syncfs(2)`): the new data, deletion, transaction and manifest
/// files of every table committed since, and the directories naming them.
pub fn sync_filesystem(dir: &Path) -> Result<(), EngineError> {
    let handle = std::fs::File::open(dir).map_err(|e| EngineError::Storage(format!("{}: {e}", dir.display())))?;
    // SAFETY: the descriptor is open for the duration of the call.
    if unsafe { libc::syncfs(handle.as_raw_fd()) } != 0 {
        return Err(EngineError::Storage(format!("syncfs {}: {}", dir.display(), std::io::Error::last_os_error())));
    }
    Ok(())
}
