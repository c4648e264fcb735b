//! `omnigraph-host`: the commit host's command line (SPEC §7): `init`,
//! `serve`, `validate`, `load` (split files, progress, `--resume`,
//! `--server`), `consume` (a NATS JetStream stream), `export`, `log`,
//! `branch`, `recover`, `optimize`.
//! The commands are in `cli/`, one file each.

// `run` awaits every command's future; their nested async state machines
// outgrow the default query depth when compiled as a test.
#![recursion_limit = "256"]

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command, Failure};

fn main() -> ExitCode {
    // Before any thread exists: few arenas, so freed batch buffers are reused
    // instead of piling up per thread, a fixed mmap threshold, so a batch's
    // large buffers are returned when freed (memory stays one batch, not the
    // file), and a trim threshold that keeps the heap's top between batches.
    // SAFETY: mallopt only sets allocator parameters; no allocation is in flight on another thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, omnigraph_host::limits::MALLOC_ARENAS);
        libc::mallopt(libc::M_MMAP_THRESHOLD, omnigraph_host::limits::MALLOC_MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, omnigraph_host::limits::MALLOC_TRIM_THRESHOLD);
    }
    let cli = Cli::parse();
    // Test builds read crash/delay injections from FAILPOINTS (tests/kill.rs).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    if matches!(cli.command, Command::Serve(_)) {
        // Before any thread starts, so every thread inherits the mask and
        // SIGINT/SIGTERM reach only the waiting thread (graceful shutdown).
        let set = cli::serve::termination_signals();
        // SAFETY: a valid set; no old mask is requested.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(cli::run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(text)) => {
            if !text.is_empty() {
                eprintln!("{text}");
            }
            ExitCode::from(1)
        }
        Err(Failure::Operational(text)) => {
            eprintln!("{text}");
            ExitCode::from(2)
        }
    }
}
