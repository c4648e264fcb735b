//! Tests and benchmarks find the repository's files from where they run.
//!
//! `env!` of `CARGO_MANIFEST_DIR` compiles in the checkout that built the
//! binary, and the target dir is shared between checkouts (ours and CI's
//! clean clones, `.ci/run`): cargo keeps a build made in another
//! checkout whenever this one's sources are older than it, and the tests then
//! read that checkout's files (seen: the parity replay reading
//! `/check/work/main/tests/vectors`, gone). Only [`repo_root`]'s fallback,
//! for binaries cargo does not start, may use the compiled-in path.

use std::path::{Path, PathBuf};

use omnigraph_fuzz_harness::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() && path.file_name().is_some_and(|name| name != "target") {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_test_compiles_in_the_checkout_it_was_built_in() {
    let root = repo_root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("fuzz/fuzz_targets"), &mut files);
    assert!(files.len() > 20, "found only {} Rust files under {}", files.len(), root.display());
    // Spelled in two parts so that this file does not match itself.
    let compiled_in = ["env!(\"CARGO_", "MANIFEST_DIR\")"].concat();
    let fallback = root.join("crates/omnigraph-fuzz-harness/src/lib.rs");
    let offenders: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let allowed = usize::from(*file == fallback);
            let found = text.matches(&compiled_in).count();
            (found > allowed).then(|| format!("{}: {found}", file.display()))
        })
        .collect();
    assert!(offenders.is_empty(), "paths compiled in (use omnigraph_fuzz_harness::repo_root, or the CARGO_MANIFEST_DIR cargo sets when it runs a test): {offenders:?}");
}

#[test]
fn the_root_is_the_checkout_cargo_runs_the_test_in() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo runs the tests"));
    assert_eq!(repo_root().canonicalize().unwrap(), manifest_dir.join("../..").canonicalize().unwrap());
}
