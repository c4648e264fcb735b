//! The conformance corpus (`tests/vectors/` at the workspace root): every
//! case's report must equal its `report.json` byte for byte.
//!
//! To accept new expectations deliberately: `BLESS=1 cargo test -p
//! omnigraph-validate-wasm --test vectors`; every change is printed as a diff.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use omnigraph_validate_wasm::limits::MAX_ECHO_CHARS;
use omnigraph_validate_wasm::{ErrorCode, Options, Schema, Scratch, prepare, validate};

/// The workspace root, from the directory cargo gives the running test (not
/// the one compiled in: a target dir shared between checkouts may keep a
/// build made in another checkout).
fn root() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo runs the tests")).join("../..")
}

fn corpus_dir() -> PathBuf {
    root().join("tests/vectors")
}

fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .expect("tests/vectors exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// A case's schema, options and input.
fn read_case(dir: &Path) -> (Schema, Options, Vec<u8>) {
    let source = fs::read_to_string(dir.join("schema.pg")).expect("schema.pg");
    let schema = Schema::compile(&source).unwrap_or_else(|e| panic!("{}: schema: {e}", dir.display()));
    let options = Options::from_json(&fs::read(dir.join("options.json")).expect("options.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    (schema, options, fs::read(dir.join("input.ndjson")).expect("input.ndjson"))
}

fn run_case(dir: &Path) -> String {
    let (schema, options, input) = read_case(dir);
    let report = validate(&schema, &options, &input);
    // The schema read back from its compiled form (what hosts keep between
    // batches) must give the very same report.
    let reread = Schema::from_compiled(&schema.compiled_form()).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    assert_eq!(validate(&reread, &options, &input).to_json(), report.to_json(), "{}: compiled form", dir.display());
    // prepare() must agree with validate() on the verdict and the report.
    match prepare(&schema, &options, &input) {
        Ok(prepared) => {
            assert!(report.ok, "{}: prepare accepted a rejected batch", dir.display());
            assert_eq!(prepared.report, report);
            let rows: u64 = prepared.tables.iter().map(|t| t.batch.num_rows() as u64).sum();
            let stat_rows: u64 = report.stats.tables.iter().map(|t| t.rows).sum();
            assert_eq!(rows, stat_rows, "{}", dir.display());
        }
        Err(rejected) => {
            assert!(!report.ok, "{}: prepare rejected an accepted batch", dir.display());
            assert_eq!(rejected, report);
        }
    }
    format!("{}\n", report.to_json())
}

fn pretty(json: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v) => serde_json::to_string_pretty(&v).expect("pretty"),
        Err(_) => json.to_owned(),
    }
}

fn expected_codes(dir: &Path) -> BTreeSet<String> {
    let name = dir.file_name().expect("name").to_string_lossy().into_owned();
    let (_, suffix) = name.rsplit_once("__").unwrap_or_else(|| panic!("case {name} lacks a __codes suffix"));
    if suffix == "ok" { BTreeSet::new() } else { suffix.split('+').map(str::to_owned).collect() }
}

#[test]
fn corpus_reports_match_byte_for_byte() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    let mut blessed = 0;
    for dir in cases() {
        let actual = run_case(&dir);
        let expected_path = dir.join("report.json");
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if actual == expected {
            continue;
        }
        let diff = similar::TextDiff::from_lines(&pretty(&expected), &pretty(&actual))
            .unified_diff()
            .header("expected report.json", "actual")
            .to_string();
        if bless {
            fs::write(&expected_path, &actual).expect("write report.json");
            println!("BLESSED {}\n{diff}", dir.display());
            blessed += 1;
        } else {
            failures.push(format!("{}\n{diff}", dir.display()));
        }
    }
    if bless {
        println!("{blessed} case(s) blessed");
    }
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
}

/// One scratch through the whole corpus, forwards then backwards (each
/// case's schema after another's, small batches after larger ones): every
/// case gets the report and the prepared tables it gets alone.
#[test]
fn one_scratch_through_the_corpus_gives_each_case_its_own_answer() {
    let mut scratch = Scratch::default();
    let dirs = cases();
    for dir in dirs.iter().chain(dirs.iter().rev()) {
        let (schema, options, input) = read_case(dir);
        let alone = validate(&schema, &options, &input);
        assert_eq!(scratch.validate(&schema, &options, &input).to_json(), alone.to_json(), "{}", dir.display());
        assert_eq!(scratch.prepare(&schema, &options, &input), prepare(&schema, &options, &input), "{}: prepare", dir.display());
    }
}

#[test]
fn corpus_reports_have_the_codes_their_names_promise() {
    let mut wrong = Vec::new();
    for dir in cases() {
        let report: serde_json::Value = serde_json::from_str(&run_case(&dir)).expect("json");
        let got: BTreeSet<String> = report["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| e["code"].as_str().expect("code").to_owned())
            .collect();
        let want = expected_codes(&dir);
        if got != want || report["ok"].as_bool() != Some(want.is_empty()) {
            wrong.push(format!("{}: want {want:?}, got {got:?} (ok = {})", dir.display(), report["ok"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// SPEC §3: a message echoes at most `MAX_ECHO_CHARS` characters of user
/// data. The corpus writes long user data (values, member and property
/// names, ids) as runs of one character, so no message may hold a longer run.
#[test]
fn corpus_messages_echo_at_most_the_echo_limit() {
    let mut long = Vec::new();
    for dir in cases() {
        let report: serde_json::Value = serde_json::from_str(&run_case(&dir)).expect("json");
        for e in report["errors"].as_array().expect("errors") {
            let message = e["message"].as_str().expect("message");
            let chars: Vec<char> = message.chars().collect();
            let longest = chars.chunk_by(|a, b| a == b).map(<[char]>::len).max().unwrap_or(0);
            if longest > MAX_ECHO_CHARS {
                long.push(format!("{}: {message}", dir.display()));
            }
        }
    }
    assert!(long.is_empty(), "messages echo more than {MAX_ECHO_CHARS} characters:\n{}", long.join("\n"));
}

#[test]
fn corpus_is_large_and_covers_every_documented_code() {
    let dirs = cases();
    assert!(dirs.len() >= 150, "only {} cases", dirs.len());
    let covered: BTreeSet<String> = dirs.iter().flat_map(|d| expected_codes(d)).collect();
    let docs = fs::read_to_string(root().join("docs/errors.md")).expect("docs/errors.md");
    let documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .map(|l| l.trim_end_matches('`').to_owned())
        .collect();
    let all: BTreeSet<String> = ErrorCode::ALL.iter().map(|c| c.as_str().to_owned()).collect();
    assert_eq!(documented, all, "docs/errors.md must document exactly the validator's codes");
    let missing: Vec<_> = all.difference(&covered).collect();
    assert!(missing.is_empty(), "codes no case triggers: {missing:?}");
}
