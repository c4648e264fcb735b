//! Parity in wasmtime: the host's runner gives every corpus report byte for
//! byte, runs the recorded artifact, and `prepare` matches the native Arrow.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use omnigraph_host::validator::{ARTIFACT, PrepareResult, RunnerConfig, ValidateOutcome, Validator};
use arrow_ipc::reader::StreamReader;
use omnigraph_validate_wasm::{Options, PreparedBatch, PreparedTable, Schema, prepare};

/// Compiled once per test binary: Cranelift compilation is the slow part.
static VALIDATOR: LazyLock<Validator> = LazyLock::new(|| Validator::new(RunnerConfig::default()).expect("validator"));

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        fs::read_dir(root().join("tests/vectors")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

#[test]
fn runner_uses_the_recorded_artifact() {
    let recorded = fs::read_to_string(root().join("web/pkg/validate_bg.wasm.sha256")).unwrap();
    assert_eq!(VALIDATOR.artifact_sha256(), recorded.trim());
    assert_eq!(VALIDATOR.abi_version().unwrap(), omnigraph_validate_wasm::abi::ABI_VERSION);
}

#[test]
fn module_imports_only_the_known_glue() {
    let expected: serde_json::Value =
        serde_json::from_slice(&fs::read(root().join("tests/wasm-imports.json")).unwrap()).unwrap();
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
        let tables = native.tables.into_iter().map(read_ipc).collect();
        let expected = PrepareResult::Accepted { report_json: native.report.to_json(), tables };
        assert_eq!(wasm, expected, "{}", dir.display());
        checked += 1;
    }
    assert!(checked > 50);
    let rejected = VALIDATOR.prepare("node P { a: String }", b"", b"{}\n").unwrap();
    assert!(matches!(rejected, PrepareResult::Rejected { report_json } if report_json.contains("envelope_kind")));
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

/// The WebAssembly proposals the artifact cannot compile without, as
/// `tests/wasm-features.json` lists them (the README's browser table and
/// the page's refusal are derived from that list): a build that starts
/// using another one (SIMD, say) fails here until both are updated.
#[test]
fn the_artifact_needs_exactly_the_listed_wasm_features() {
    let listed: serde_json::Value =
        serde_json::from_slice(&fs::read(root().join("tests/wasm-features.json")).unwrap()).unwrap();
    let toggles: [(&str, fn(&mut wasmtime::Config)); 11] = [
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
