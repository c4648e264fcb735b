//! Every input kept in `fuzz/regressions/<target>/` (crashes fixed since,
//! and a minimized sample of each target's interesting inputs) and every
//! corpus seed passes its target's invariants; a target without kept inputs
//! fails.

use std::collections::BTreeMap;
use std::path::PathBuf;

use omnigraph_fuzz_harness::{TARGETS, corpus_cases, input_files, regressions_dir, run, seeds};

/// The kept inputs of each target, sorted by path: `<target>/<file>`.
fn kept_inputs() -> BTreeMap<&'static str, Vec<PathBuf>> {
    let root = regressions_dir();
    for entry in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(TARGETS.contains(&name.as_str()), "{}: not a fuzz target (one of {TARGETS:?})", path.display());
        }
    }
    TARGETS
        .into_iter()
        .map(|target| {
            let files = input_files(&root.join(target));
            for path in &files {
                assert!(path.is_file(), "{}: kept inputs are files", path.display());
            }
            (target, files)
        })
        .collect()
}

#[test]
fn kept_fuzz_inputs_pass_their_targets() {
    let mut ran = BTreeMap::new();
    for (target, files) in kept_inputs() {
        assert!(!files.is_empty(), "fuzz/regressions/{target}/ holds no inputs: the target's regressions would silently run nothing");
        for path in &files {
            let data = std::fs::read(path).unwrap();
            eprintln!("{target}: {}", path.display());
            run(target, &data);
        }
        ran.insert(target, files.len());
    }
    let total: usize = ran.values().sum();
    eprintln!("replayed {total} kept fuzz inputs: {ran:?}");
}

/// An envelope input that names a corpus case must name one that exists:
/// otherwise the target silently falls back to the default schema (a
/// renamed vector would quietly weaken the input). Names without `__` are
/// deliberate fallbacks.
#[test]
fn kept_envelope_inputs_name_existing_corpus_schemas() {
    let cases: Vec<String> = corpus_cases().into_iter().map(|c| c.name).collect();
    let inputs = kept_inputs();
    for target in ["strict", "compat"] {
        for path in &inputs[target] {
            let data = std::fs::read(path).unwrap();
            let Some(end) = data.iter().position(|&b| b == b'\n') else { continue };
            let name = String::from_utf8_lossy(&data[..end]);
            if name.contains("__") {
                assert!(cases.iter().any(|c| *c == name), "{}: names corpus case {name}, which does not exist", path.display());
            }
        }
    }
}

#[test]
fn corpus_seeds_pass_every_target() {
    for target in TARGETS {
        let seeds = seeds(target);
        assert!(seeds.len() > 100, "{target}: only {} seeds", seeds.len());
        for (name, data) in seeds {
            eprintln!("{target}: {name}");
            run(target, &data);
        }
    }
}

#[test]
fn the_envelope_targets_pick_the_named_schema() {
    // A batch valid only for its own vector's schema is refused under the default one.
    let case = "basic_nodes_and_edge__ok";
    let input = std::fs::read(omnigraph_fuzz_harness::vectors_dir().join(case).join("input.ndjson")).unwrap();
    let schema = std::fs::read_to_string(omnigraph_fuzz_harness::vectors_dir().join(case).join("schema.pg")).unwrap();
    let schema = omnigraph_validate_wasm::Schema::compile(&schema).unwrap();
    assert!(omnigraph_validate_wasm::validate(&schema, &Default::default(), &input).ok);
    let default = omnigraph_fuzz_harness::vectors_dir().join(omnigraph_fuzz_harness::DEFAULT_VECTOR).join("schema.pg");
    let default = omnigraph_validate_wasm::Schema::compile(&std::fs::read_to_string(default).unwrap()).unwrap();
    assert!(!omnigraph_validate_wasm::validate(&default, &Default::default(), &input).ok);
}
