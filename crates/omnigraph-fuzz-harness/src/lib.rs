//! The bodies of the fuzz targets in `fuzz/` and the invariants they check.
//!
//! `cargo fuzz` needs nightly; the stable test suite runs every kept input
//! (`fuzz/regressions/<target>/`) and every seed through these same
//! functions, so a fixed crash stays fixed without a nightly toolchain.
//!
//! Input formats are plain bytes, so seeds come straight from the
//! conformance corpus (`tests/vectors/`, see [`seeds`]):
//! * `schema`: the `.pg` source.
//! * `strict` / `compat`: `<vector name>\n<batch>`; the batch is validated
//!   against that vector's schema (an unknown name picks [`DEFAULT_VECTOR`]).
//! * `prepare`: `<flags byte><schema>\0<batch>`, see [`Flags`].
//! * `differential`: the same as `prepare`, read as strict lines whatever
//!   the flags say: the fast acceptor against the explainer, line by line
//!   (`omnigraph_validate_wasm::differential`).
//!
//! [`validations`] decodes a batch target's input (also for the host's
//! wasmtime replay, `crates/omnigraph-host/tests/parity.rs`). [`repo_root`]
//! finds the repository from the `CARGO_MANIFEST_DIR` cargo sets when it runs
//! a test, never the one compiled in (`tests/paths.rs` fails on that): the
//! shared target dir reuses builds made in other checkouts.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use omnigraph_validate_wasm::{
    Limits, Mode, Options, Report, Schema, Scratch, differential, prepare, prepare_reference, prepare_rows,
    tables_from_rows, validate,
};

/// The fuzz targets, by name (`fuzz/fuzz_targets/<name>.rs`).
pub const TARGETS: [&str; 5] = ["schema", "strict", "compat", "prepare", "differential"];

/// The schema the envelope targets use when the input names no vector:
/// every value type, so most mutations reach a value decoder.
pub const DEFAULT_VECTOR: &str = "all_types_ok__ok";

/// Runs one input through a target by name; panics on a broken invariant.
pub fn run(target: &str, data: &[u8]) {
    if target == "schema" {
        return schema(data);
    }
    for v in validations(target, data) {
        match target {
            "differential" => {
                differential(&v.schema, &v.options, v.batch);
            }
            _ => check_batch(&v.schema, &v.options, v.batch),
        }
    }
}

/// The schema compiler: never panics; refusals carry positioned messages;
/// a compiled schema has a stable canonical form, and its compiled form
/// (what the host passes every batch) reads back to the same schema.
pub fn schema(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else { return };
    match Schema::compile(source) {
        Ok(schema) => {
            let again = Schema::compile(source).expect("compiling is deterministic");
            assert_eq!(schema.canonical_json(), again.canonical_json(), "canonical JSON is deterministic");
            assert_eq!(schema.hash(), again.hash());
            reads_back(&schema);
        }
        Err(errors) => {
            assert!(!errors.errors.is_empty(), "a refused schema names at least one error");
            for e in &errors.errors {
                assert!(e.line >= 1 && e.column >= 1, "schema error positions are 1-based: {e:?}");
                assert!(!e.message.is_empty());
            }
        }
    }
}

/// `schema`'s compiled form reads back to the same rules, lookups, catalog
/// and form.
fn reads_back(schema: &Schema) {
    let form = schema.compiled_form();
    let back = Schema::from_compiled(&form).expect("a compiled form reads back");
    assert_eq!(format!("{:?}", back.types), format!("{:?}", schema.types), "the same types and rules");
    for (i, t) in schema.types.iter().enumerate() {
        assert_eq!(back.type_index(&t.name), Some(i), "type {}", t.name);
        for (j, p) in t.props.iter().enumerate() {
            assert_eq!(back.types[i].prop(&p.name), Some(j), "property {}.{}", t.name, p.name);
        }
    }
    assert_eq!(back.compiled_form(), form, "a read-back schema writes the same form");
    assert_eq!((back.canonical_json(), back.hash()), (schema.canonical_json(), schema.hash()));
    assert_eq!(back.catalog(), schema.catalog(), "the catalog decoded when asked for");
}

/// One validation a fuzz input asks for: a schema (its `.pg` source and
/// its compiled form), options and a batch.
pub struct Validation<'a> {
    pub source: &'a str,
    pub schema: Cow<'a, Schema>,
    pub options: Options,
    pub batch: &'a [u8],
}

/// The validations an input of a batch target (`strict`, `compat`,
/// `prepare`, `differential`) runs; none when its schema does not compile.
/// * `strict` / `compat`: the batch against a corpus schema chosen by the
///   input's first line, in `merge` and in `overwrite` mode;
/// * `prepare`: a fuzzed schema, options and batch;
/// * `differential`: the same, read as strict lines whatever the flags say.
pub fn validations<'a>(target: &str, data: &'a [u8]) -> Vec<Validation<'a>> {
    match target {
        "strict" | "compat" => {
            let (name, batch) = match data.iter().position(|&b| b == b'\n') {
                Some(i) => (&data[..i], &data[i + 1..]),
                None => (&data[..0], data),
            };
            let schemas = corpus_schemas();
            let (source, schema) = std::str::from_utf8(name)
                .ok()
                .and_then(|n| schemas.get(n))
                .unwrap_or_else(|| &schemas[DEFAULT_VECTOR]);
            let strict = target == "strict";
            [Mode::Merge, Mode::Overwrite]
                .into_iter()
                .map(|mode| Validation {
                    source,
                    schema: Cow::Borrowed(schema),
                    options: Options { mode, strict, ..Options::default() },
                    batch,
                })
                .collect()
        }
        "prepare" | "differential" => {
            let Some((&flags, rest)) = data.split_first() else { return Vec::new() };
            let Some(split) = rest.iter().position(|&b| b == 0) else { return Vec::new() };
            let Ok(source) = std::str::from_utf8(&rest[..split]) else { return Vec::new() };
            let Ok(schema) = Schema::compile(source) else { return Vec::new() };
            let mut options = Flags(flags).options();
            options.strict |= target == "differential";
            vec![Validation { source, schema: Cow::Owned(schema), options, batch: &rest[split + 1..] }]
        }
        other => panic!("{other} is not a batch target"),
    }
}

/// The `prepare` target's flags byte: bits 0–1 the mode (3 = merge with
/// legacy identity, SPEC §2.3), bit 2
/// the compat parser, bit 3 tight limits (so inputs of a few hundred bytes
/// reach every bound), bits 4–7 the error cap (0 = the default).
#[derive(Debug, Clone, Copy)]
pub struct Flags(pub u8);

impl Flags {
    pub fn options(self) -> Options {
        let (mode, legacy_identity) = match self.0 & 3 {
            0 => (Mode::Merge, false),
            1 => (Mode::Append, false),
            2 => (Mode::Overwrite, false),
            _ => (Mode::Merge, true),
        };
        let limits = if self.0 & 8 != 0 { TIGHT_LIMITS } else { Limits::default() };
        let max_errors = match self.0 >> 4 {
            0 => Options::default().max_errors,
            cap => u32::from(cap),
        };
        Options { mode, strict: self.0 & 4 == 0, max_errors, limits, legacy_identity }
            .checked()
            .expect("fuzz options are in range")
    }

    /// The flags byte for a corpus case's options, when it has one.
    pub fn for_options(options: &Options) -> Option<Flags> {
        let mode = match (options.mode, options.legacy_identity) {
            (Mode::Merge, false) => 0,
            (Mode::Append, false) => 1,
            (Mode::Overwrite, false) => 2,
            (Mode::Merge, true) => 3,
            _ => return None,
        };
        let errors = if options.max_errors == Options::default().max_errors { 0 } else { options.max_errors.min(16) as u8 };
        let flags = Flags(mode | if options.strict { 0 } else { 4 } | (errors & 15) << 4);
        (flags.options() == *options).then_some(flags)
    }
}

const TIGHT_LIMITS: Limits = Limits {
    max_batch_bytes: 4096,
    max_line_bytes: 512,
    max_json_structure: 64,
    max_json_depth: 4,
    max_table_rows: 4,
    max_table_bytes: 2048,
    max_total_arrow_bytes: 4096,
    max_keyed_parse_bytes: 4096,
    max_removed_id_bytes: 4096,
};

thread_local! {
    /// One scratch for every input a fuzzer runs: each validates in what
    /// the inputs before it (other schemas, other batches) left.
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// The invariants of one validation, in every runtime's terms:
/// * validation is deterministic and its report serializes, and a
///   [`Scratch`] kept from the inputs before changes no report or table;
/// * `prepare` gives the same report as `validate`, and output exactly
///   when the report is ok;
/// * the rows the wasm artifact would return (`prepare_rows`) decode to the
///   very Arrow tables native `prepare` gives, and those are the tables
///   arrow-rs's builders make from every row's values (`prepare_reference`);
/// * the report lists at most `max_errors` errors and counts them all;
/// * in strict batches, every line the fast acceptor takes, the explainer
///   accepts with the same row.
fn check_batch(schema: &Schema, options: &Options, batch: &[u8]) {
    if options.strict {
        differential(schema, options, batch);
    }
    let report = validate(schema, options, batch);
    let json = report.to_json();
    let again = SCRATCH.with_borrow_mut(|scratch| scratch.validate(schema, options, batch).to_json());
    assert_eq!(json, again, "validation is deterministic, in new memory or in what earlier inputs left");
    check_counts(&report, options);
    let prepared = prepare(schema, options, batch);
    assert!(SCRATCH.with_borrow_mut(|scratch| scratch.prepare(schema, options, batch) == prepared), "prepare in a kept scratch");
    match prepared {
        Ok(prepared) => {
            assert!(report.ok, "prepare accepted a batch validate refused");
            assert_eq!(prepared.report.to_json(), json);
            let (rows_report, rows) = prepare_rows(schema, options, batch).expect("prepare_rows agrees with prepare");
            assert_eq!(rows_report.to_json(), json);
            // Compared as IPC bytes: Arrow's equality skips what hides
            // under a null, the bytes a host receives do not.
            let native = prepared.into_tables();
            let tables = tables_from_rows(schema, &rows).expect("prepare_rows output decodes");
            assert_eq!(tables, native, "canonical rows decode to the native Arrow tables");
            let reference = prepare_reference(schema, options, batch).expect("prepare_reference agrees with prepare");
            assert_eq!(reference.report.to_json(), json);
            assert_eq!(native, reference.into_tables(), "the columns written as rows arrive are arrow-rs's");
            let total: u64 = native.iter().map(|t| t.rows).sum();
            assert!(total > 0 || batch.iter().all(u8::is_ascii_whitespace) || native.is_empty());
        }
        Err(refused) => {
            assert!(!report.ok, "prepare refused a batch validate accepted");
            assert_eq!(refused.to_json(), json);
            assert!(prepare_rows(schema, options, batch).is_err());
            assert!(prepare_reference(schema, options, batch).is_err());
        }
    }
}

fn check_counts(report: &Report, options: &Options) {
    assert!(report.errors.len() as u64 <= u64::from(options.max_errors), "report lists more than max_errors");
    assert!(report.errors.len() as u64 <= report.error_count, "listed errors are counted");
    assert_eq!(report.errors_truncated, report.error_count > report.errors.len() as u64);
    assert_eq!(report.ok, report.error_count == 0, "ok means no errors");
}

/// The repository's root, found when the process runs: the first folder
/// holding `tests/vectors` and `fuzz/regressions` above the
/// `CARGO_MANIFEST_DIR` that cargo sets for every test, bench and example it
/// starts, else above the path compiled in (`env!`), for the binaries cargo
/// does not start (cargo-fuzz's). A target dir shared between checkouts
/// (ours and CI's clean clones) keeps a build made in another checkout
/// whenever this one's sources are older than it, and that build's
/// compiled-in path names the other checkout (which may hold other files,
/// or be gone).
pub fn repo_root() -> PathBuf {
    let compiled_in = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let starts: Vec<PathBuf> = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).into_iter().chain([compiled_in]).collect();
    let is_root = |dir: &Path| dir.join("tests/vectors").is_dir() && dir.join("fuzz/regressions").is_dir();
    let root = starts.iter().find_map(|start| start.ancestors().find(|dir| is_root(dir)));
    root.unwrap_or_else(|| panic!("no repository root (tests/vectors, fuzz/regressions) above {starts:?}")).to_path_buf()
}

/// The kept inputs' folder: `fuzz/regressions/<target>/`.
pub fn regressions_dir() -> PathBuf {
    repo_root().join("fuzz/regressions")
}

/// The input files of a folder (a target's kept inputs or a corpus),
/// sorted by path.
pub fn input_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries.map(|e| e.expect("directory entry").path()).collect();
    files.sort();
    files
}

/// The sample graph's folder (`samples/`: the people schema and batches).
pub fn samples_dir() -> PathBuf {
    repo_root().join("samples")
}

/// The conformance corpus folder.
pub fn vectors_dir() -> PathBuf {
    repo_root().join("tests/vectors")
}

/// Every corpus case's schema that compiles (its source and compiled
/// form), by case name.
fn corpus_schemas() -> &'static BTreeMap<String, (String, Schema)> {
    static SCHEMAS: OnceLock<BTreeMap<String, (String, Schema)>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        corpus_cases()
            .into_iter()
            .filter_map(|case| {
                let schema = Schema::compile(&case.schema).ok()?;
                Some((case.name, (case.schema, schema)))
            })
            .collect()
    })
}

/// One case of the conformance corpus.
pub struct CorpusCase {
    pub name: String,
    pub schema: String,
    pub input: Vec<u8>,
    pub options: Option<Options>,
}

/// Reads the conformance corpus (sorted by name).
pub fn corpus_cases() -> Vec<CorpusCase> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("tests/vectors is readable")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.join("schema.pg").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| CorpusCase {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            schema: std::fs::read_to_string(dir.join("schema.pg")).expect("schema.pg"),
            input: std::fs::read(dir.join("input.ndjson")).unwrap_or_default(),
            options: std::fs::read(dir.join("options.json")).ok().and_then(|o| Options::from_json(&o).ok()),
        })
        .collect()
}

/// Seed inputs for a target, derived from the corpus: (name, bytes).
pub fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    corpus_cases()
        .into_iter()
        .filter_map(|case| {
            let bytes = match target {
                "schema" => case.schema.into_bytes(),
                "strict" | "compat" => [case.name.as_bytes(), b"\n", &case.input].concat(),
                "prepare" | "differential" => {
                    let flags = Flags::for_options(&case.options?)?;
                    [&[flags.0][..], case.schema.as_bytes(), b"\0", &case.input].concat()
                }
                other => panic!("unknown fuzz target {other}"),
            };
            Some((case.name, bytes))
        })
        .collect()
}
