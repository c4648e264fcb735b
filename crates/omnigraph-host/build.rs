//! Link options for the `omnigraph-host` binary only (libraries, tests and
//! dependencies are built as they were).
//!
//! The binary is position independent (ASLR, which a process serving HTTP
//! to untrusted clients keeps) and carries ~500,000 relative relocations
//! that the dynamic loader reads before `main` on every start. Packed
//! (DT_RELR, `-z pack-relative-relocs`), their table shrinks from 12.4 MB
//! to 124 KB, which the loader no longer reads from disk and cache at every
//! start (docs/lab/2026-12-07-cli-load.md). It needs GNU ld ≥ 2.38 to link
//! and glibc ≥ 2.36 to run, which the machines this project builds on have
//! (Debian 12); the binary runs where it is built.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.ends_with("-linux-gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
