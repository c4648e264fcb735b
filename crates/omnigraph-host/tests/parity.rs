//! Parity in wasmtime: the host's runner gives every corpus report byte for
//! byte, runs the recorded artifact (its SHA-256, its import list), `prepare`
//! matches the native Arrow, and fuzzing's inputs (the seeds,
//! `fuzz/regressions/`, a local corpus named by `OMNIGRAPH_FUZZ_CORPUS`) get
//! the native report and `prepare` in wasmtime.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use omnigraph_host::validator::{ARTIFACT, PrepareResult, RunnerConfig, ValidateOutcome, Validator};
use arrow_ipc::reader::StreamReader;
use omnigraph_fuzz_harness::{Validation, input_files, regressions_dir, repo_root, seeds, validations};
use omnigraph_validate_wasm::{Options, PreparedBatch, PreparedTable, Schema, prepare, validate};

/// Compiled once per test binary: Cranelift compilation is the slow part.
static VALIDATOR: LazyLock<Validator> = LazyLock::new(|| Validator::new(RunnerConfig::default()).expect("validator"));

fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        fs::read_dir(repo_root().join("tests/vectors")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

#[test]
fn runner_uses_the_recorded_artifact() {
    let recorded = fs::read_to_string(repo_root().join("web/pkg/validate_bg.wasm.sha256")).unwrap();
    assert_eq!(VALIDATOR.artifact_sha256(), recorded.trim());
    assert_eq!(VALIDATOR.abi_version().unwrap(), omnigraph_validate_wasm::abi::ABI_VERSION);
}

#[test]
fn module_imports_only_the_known_glue() {
    let expected: serde_json::Value =
        serde_json::from_slice(&fs::read(repo_root().join("tests/wasm-imports.json")).unwrap()).unwrap();
    let engine = wasmtime::Engine::default();
    let module = wasmtime::Module::new(&engine, ARTIFACT).unwrap();
    let actual: Vec<serde_json::Value> = module
        .imports()
        .map(|i| {
            let kind = match i.ty() {
                wasmtime::ExternType::Func(_) => "function",
                wasmtime::ExternType::Table(_) => "table",
                wasmtime::ExternType::Memory(_) => "memory",
                wasmtime::ExternType::Global(_) => "global",
                wasmtime::ExternType::Tag(_) => "tag",
            };
            serde_json::json!({"module": i.module(), "name": i.name(), "kind": kind})
        })
        .collect();
    assert_eq!(serde_json::Value::Array(actual), expected);
}

#[test]
fn every_corpus_report_is_byte_identical_in_wasmtime() {
    let mut mismatches = Vec::new();
    for dir in cases() {
        let schema = String::from_utf8(read(&dir, "schema.pg")).unwrap();
        let expected = String::from_utf8(read(&dir, "report.json")).unwrap();
        match VALIDATOR.validate(&schema, &read(&dir, "options.json"), &read(&dir, "input.ndjson")).unwrap() {
            ValidateOutcome::Report(report) if format!("{report}\n") == expected => {}
            other => mismatches.push(format!("wasmtime: {}\n  expected {expected}  actual   {other:?}", dir.display())),
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

fn read_ipc(table: PreparedTable) -> PreparedBatch {
    let mut reader = StreamReader::try_new(std::io::Cursor::new(table.ipc), None).unwrap();
    let batch = reader.next().expect("one batch per table").unwrap();
    assert_eq!(batch.num_rows() as u64, table.rows);
    PreparedBatch { kind: table.kind, name: table.name, lines: table.lines, batch }
}

#[test]
fn prepare_in_wasmtime_equals_native_prepare() {
    let mut checked = 0;
    for dir in cases().into_iter().filter(|d| d.to_string_lossy().ends_with("__ok")) {
        let source = String::from_utf8(read(&dir, "schema.pg")).unwrap();
        let options_json = read(&dir, "options.json");
        let input = read(&dir, "input.ndjson");
        let schema = Schema::compile(&source).unwrap();
        let options = Options::from_json(&options_json).unwrap();
        let native = prepare(&schema, &options, &input).unwrap();
        let wasm = VALIDATOR.prepare(&source, &options_json, &input).unwrap();
        // The native tables' IPC bytes, read back, are the batches the host gets.
        let report_json = native.report.to_json();
        let tables = native.into_tables().into_iter().map(read_ipc).collect();
        let expected = PrepareResult::Accepted { report_json, tables };
        assert_eq!(wasm, expected, "{}", dir.display());
        checked += 1;
    }
    assert!(checked > 50);
    let rejected = VALIDATOR.prepare("node P { a: String }", b"", b"{}\n").unwrap();
    assert!(matches!(rejected, PrepareResult::Rejected { report_json } if report_json.contains("envelope_kind")));
}

/// What the artifact in wasmtime must answer for `v`: the native report
/// (`og_validate`), and the native `prepare`'s tables or refusal
/// (`og_prepare`). Native, every strict line the acceptor takes is checked
/// against the explainer (the fuzz targets); here, the artifact's whole
/// answer against native's, so a difference of wasm's code generation
/// (32-bit `usize`, float conversion, Cranelift) would show.
fn wasm_disagrees(v: &Validation<'_>) -> Option<String> {
    let options_json = serde_json::to_vec(&v.options).unwrap();
    assert_eq!(Options::from_json(&options_json).unwrap(), v.options, "options cross as JSON unchanged");
    let native_report = validate(&v.schema, &v.options, v.batch).to_json();
    let report = VALIDATOR.validate(v.source, &options_json, v.batch).unwrap();
    if report != ValidateOutcome::Report(native_report.clone()) {
        return Some(format!("og_validate: {report:?}\n  native {native_report}"));
    }
    let expected = match prepare(&v.schema, &v.options, v.batch) {
        Ok(native) => PrepareResult::Accepted {
            report_json: native.report.to_json(),
            tables: native.into_tables().into_iter().map(read_ipc).collect(),
        },
        Err(refused) => PrepareResult::Rejected { report_json: refused.to_json() },
    };
    let prepared = VALIDATOR.prepare_compiled(v.source, &v.schema, &options_json, v.batch).unwrap();
    (prepared != expected).then(|| format!("og_prepare: {prepared:?}\n  native {expected:?}"))
}

/// The inputs of a fuzz target replayed here: its seeds and kept inputs
/// (`fuzz/regressions/<target>/`) always, and a whole local corpus
/// (`$OMNIGRAPH_FUZZ_CORPUS/<target>/`, e.g. `fuzz/corpus`, which git does
/// not keep) when that variable names one.
fn fuzz_inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut inputs = seeds(target);
    let mut dirs = vec![regressions_dir().join(target)];
    if let Some(corpus) = std::env::var_os("OMNIGRAPH_FUZZ_CORPUS") {
        dirs.push(repo_root().join(corpus).join(target));
    }
    for dir in dirs {
        inputs.extend(input_files(&dir).into_iter().map(|f| (f.display().to_string(), fs::read(&f).unwrap())));
    }
    inputs
}

#[test]
fn fuzz_inputs_get_the_native_answers_in_wasmtime() {
    let mut mismatches = Vec::new();
    for target in ["strict", "compat", "prepare", "differential"] {
        let (mut inputs, mut runs) = (0, 0);
        for (name, data) in fuzz_inputs(target) {
            inputs += 1;
            for v in validations(target, &data) {
                runs += 1;
                if let Some(why) = wasm_disagrees(&v) {
                    mismatches.push(format!("{target} {name} ({:?} mode): {why}", v.options.mode));
                }
            }
        }
        eprintln!("{target}: {inputs} inputs, {runs} validations replayed in wasmtime");
        assert!(runs > 20, "{target}: too few inputs replayed ({runs}): are fuzz/regressions and the corpus there?");
    }
    let shown: Vec<String> = mismatches.iter().take(5).cloned().collect();
    assert!(mismatches.is_empty(), "{} disagreements, the first:\n{}", mismatches.len(), shown.join("\n"));
}

#[test]
fn schema_and_options_errors_are_typed() {
    assert!(matches!(
        VALIDATOR.validate("node P { a: Strin }", b"", b"").unwrap(),
        ValidateOutcome::SchemaError(e) if e.contains("\"column\":13")
    ));
    assert!(matches!(
        VALIDATOR.validate("node P { a: String }", b"{\"max_errors\":0}", b"").unwrap(),
        ValidateOutcome::OptionsError(_)
    ));
}

/// A wasm feature's name and what turns it off.
type Toggle = (&'static str, fn(&mut wasmtime::Config));

/// The WebAssembly proposals the artifact cannot compile without, as
/// `tests/wasm-features.json` lists them (the README's browser table and
/// the page's refusal are derived from that list): a build that starts
/// using another one (SIMD, say) fails here until both are updated.
#[test]
fn the_artifact_needs_exactly_the_listed_wasm_features() {
    let listed: serde_json::Value =
        serde_json::from_slice(&fs::read(repo_root().join("tests/wasm-features.json")).unwrap()).unwrap();
    let toggles: [Toggle; 11] = [
        ("bulk-memory", |c| {
            c.wasm_bulk_memory(false);
        }),
        ("reference-types", |c| {
            c.wasm_reference_types(false).wasm_function_references(false).wasm_gc(false);
        }),
        ("multi-value", |c| {
            c.wasm_multi_value(false);
        }),
        ("simd", |c| {
            c.wasm_simd(false).wasm_relaxed_simd(false);
        }),
        ("relaxed-simd", |c| {
            c.wasm_relaxed_simd(false);
        }),
        ("tail-call", |c| {
            c.wasm_tail_call(false);
        }),
        ("extended-const", |c| {
            c.wasm_extended_const(false);
        }),
        ("multi-memory", |c| {
            c.wasm_multi_memory(false);
        }),
        ("exceptions", |c| {
            c.wasm_exceptions(false);
        }),
        ("function-references", |c| {
            c.wasm_function_references(false).wasm_gc(false);
        }),
        ("gc", |c| {
            c.wasm_gc(false);
        }),
    ];
    let mut needed = Vec::new();
    for (name, disable) in toggles {
        let mut config = wasmtime::Config::new();
        disable(&mut config);
        let engine = wasmtime::Engine::new(&config).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        if wasmtime::Module::new(&engine, ARTIFACT).is_err() {
            needed.push(serde_json::Value::from(name));
        }
    }
    assert_eq!(serde_json::Value::Array(needed), listed["required"], "the proposals the artifact uses");
}

/// The artifact's string scan runs on wasm `simd128` lanes, which no native
/// test executes: every byte value at every position of the first 40 bytes
/// of a string (two 16-byte vectors, then the word and byte loops), alone
/// and as a 2-byte UTF-8 character, gets the native report (the native
/// lanes are held to a byte loop by `json`'s unit tests), in strict and
/// compat mode.
#[test]
fn every_byte_at_every_string_position_gets_the_native_report() {
    const SCHEMA: &str = "node P { s: String }";
    let mut batch = Vec::new();
    for at in 0..40 {
        let mut odd_bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        odd_bytes.push("é".into());
        for odd in odd_bytes {
            let mut s = vec![b'a'; 40];
            s.splice(at..at + 1, odd);
            batch.extend_from_slice(b"{\"type\":\"P\",\"data\":{\"s\":\"");
            batch.extend_from_slice(&s);
            batch.extend_from_slice(b"\"}}\n");
        }
    }
    let schema = Schema::compile(SCHEMA).unwrap();
    for strict in [true, false] {
        let options = Options { strict, max_errors: omnigraph_validate_wasm::limits::MAX_ERRORS_CEILING, ..Options::default() };
        let native = validate(&schema, &options, &batch).to_json();
        assert!(native.contains("\"code\""), "the batch has errors to report");
        let wasm = VALIDATOR.validate(SCHEMA, &serde_json::to_vec(&options).unwrap(), &batch).unwrap();
        assert_eq!(wasm, ValidateOutcome::Report(native), "strict: {strict}");
    }
}
