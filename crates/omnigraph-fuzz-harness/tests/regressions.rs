//! Every input a fuzzer ever kept (`fuzz/regressions/<target>/`, crashes
//! fixed since) and every corpus seed passes its target's invariants.

use std::path::Path;

use omnigraph_fuzz_harness::{TARGETS, run, seeds};

#[test]
fn kept_fuzz_inputs_pass_their_targets() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    let mut ran = 0;
    for target in TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(target)) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            eprintln!("{target}: {}", path.display());
            run(target, &data);
            ran += 1;
        }
    }
    eprintln!("{ran} kept inputs");
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
