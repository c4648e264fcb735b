//! The compiled-module cache: the artifact is compiled only when something
//! validates, at most once per cache directory and engine setting; a
//! damaged entry is compiled again and replaced, never trusted.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use std::time::{Duration, SystemTime};

use omnigraph_host::limits::MODULE_CACHE_RETENTION;
use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator};

const SCHEMA: &str = "node P { name: String @key  n: I64? }";
/// One valid record and one whose `n` is not an integer.
const BATCH: &[u8] = b"{\"type\":\"P\",\"data\":{\"name\":\"a\",\"n\":1}}\n{\"type\":\"P\",\"data\":{\"name\":\"b\",\"n\":\"two\"}}\n";

fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = read.map(|e| e.unwrap().path()).collect();
    out.sort();
    out
}

fn report(v: &Validator) -> String {
    match v.validate(SCHEMA, b"", BATCH).unwrap() {
        ValidateOutcome::Report(r) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_module_is_compiled_on_first_use_once_and_recompiled_when_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("modules");
    let config = RunnerConfig::default();

    let idle = Validator::with_module_cache(config, Some(cache.clone())).unwrap();
    assert!(!idle.artifact_sha256().is_empty());
    assert!(entries(&cache).is_empty(), "nothing validated, nothing compiled");
    drop(idle);

    let first = Validator::with_module_cache(config, Some(cache.clone())).unwrap();
    let expected = report(&first);
    assert!(expected.starts_with("{\"ok\":false") && expected.contains("\"line\":2"), "line 2 is reported: {expected}");
    let [entry] = entries(&cache).try_into().expect("one cache entry");
    let name = entry.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with(first.artifact_sha256()) && name.ends_with(".cwasm"), "{name}");
    let inode = std::fs::metadata(&entry).unwrap().ino();

    // A second process's validator maps the entry instead of compiling.
    let second = Validator::with_module_cache(config, Some(cache.clone())).unwrap();
    assert_eq!(report(&second), expected);
    assert_eq!(std::fs::metadata(&entry).unwrap().ino(), inode, "the entry was used, not rewritten");

    // Another memory cap compiles to the same code: wasmtime's
    // compatibility hash says so, and the entry is shared.
    let other = RunnerConfig { memory_limit: 256 << 20, ..config };
    assert_eq!(report(&Validator::with_module_cache(other, Some(cache.clone())).unwrap()), expected);
    assert_eq!(std::fs::metadata(&entry).unwrap().ino(), inode);

    // A damaged entry is not used: compiled again, and replaced.
    std::fs::write(&entry, b"not a compiled module").unwrap();
    let third = Validator::with_module_cache(config, Some(cache.clone())).unwrap();
    assert_eq!(report(&third), expected);
    assert!(std::fs::read(&entry).unwrap().len() > 1024, "the entry was rewritten");
    assert_eq!(entries(&cache), vec![entry], "no staging file is left behind");
}

#[test]
fn a_cache_that_cannot_be_written_costs_only_the_compile() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the cache directory should be: nothing can be stored.
    let blocked = dir.path().join("modules");
    std::fs::write(&blocked, b"").unwrap();
    let v = Validator::with_module_cache(RunnerConfig::default(), Some(blocked.join("inner"))).unwrap();
    assert!(report(&v).starts_with("{\"ok\":false"));
    let uncached = Validator::with_module_cache(RunnerConfig::default(), None).unwrap();
    assert_eq!(report(&uncached), report(&v));
}

fn set_age(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn age(path: &Path) -> Duration {
    SystemTime::now().duration_since(std::fs::metadata(path).unwrap().modified().unwrap()).unwrap_or_default()
}

/// Entries nobody used for MODULE_CACHE_RETENTION (other artifacts', other
/// wasmtimes', a killed writer's staging file) go when a new entry is
/// stored; an entry in use is marked used and stays.
#[test]
fn unused_entries_are_pruned_and_used_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("modules");
    let config = RunnerConfig::default();
    std::fs::create_dir_all(&cache).unwrap();
    let stale = cache.join("0000-1111.cwasm");
    let staged = cache.join(".staged-1-0");
    let recent = cache.join("2222-3333.cwasm");
    let unrelated = cache.join("notes.txt");
    for path in [&stale, &staged, &recent, &unrelated] {
        std::fs::write(path, b"x").unwrap();
        set_age(path, MODULE_CACHE_RETENTION + Duration::from_secs(3600));
    }
    set_age(&recent, MODULE_CACHE_RETENTION - Duration::from_secs(3600));

    let v = Validator::with_module_cache(config, Some(cache.clone())).unwrap();
    report(&v);
    let entry = cache.join(entries(&cache).into_iter().find(|p| p.to_string_lossy().contains(v.artifact_sha256())).unwrap());
    assert_eq!(entries(&cache), {
        let mut kept = vec![entry.clone(), recent.clone(), unrelated.clone()];
        kept.sort();
        kept
    });

    // An old entry that a process uses is marked used.
    set_age(&entry, MODULE_CACHE_RETENTION + Duration::from_secs(3600));
    report(&Validator::with_module_cache(config, Some(cache.clone())).unwrap());
    assert!(age(&entry) < Duration::from_secs(600), "the entry's use was recorded");
}
