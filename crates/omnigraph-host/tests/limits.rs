//! The runner's bounds: deadline, memory cap, input size; a trap leaves the
//! next batch a clean instance.

use std::time::Duration;

use omnigraph_host::validator::{RunnerConfig, ValidateOutcome, Validator, ValidatorError};

const SCHEMA: &str = "node P { name: String @key  n: I64? }";

fn batch(rows: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..rows {
        out.extend_from_slice(format!("{{\"type\":\"P\",\"data\":{{\"name\":\"p{i:08}\",\"n\":{i}}}}}\n").as_bytes());
    }
    out
}

const LIFTED: &[u8] = br#"{"limits":{"max_table_rows":100000000}}"#;

fn assert_small_batch_still_works(v: &Validator) {
    match v.validate(SCHEMA, b"", &batch(3)).unwrap() {
        ValidateOutcome::Report(r) => assert!(r.starts_with("{\"ok\":true")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_call_past_its_deadline_is_interrupted() {
    let v = Validator::new(RunnerConfig { deadline: Duration::from_millis(1), ..RunnerConfig::default() }).unwrap();
    let err = v.validate(SCHEMA, LIFTED, &batch(400_000)).unwrap_err();
    assert!(matches!(err, ValidatorError::Timeout { .. }), "{err:?}");
}

#[test]
fn running_out_of_memory_is_a_typed_error_and_the_next_batch_is_fine() {
    let v = Validator::new(RunnerConfig { memory_limit: 24 << 20, ..RunnerConfig::default() }).unwrap();
    let big = batch(200_000); // ~9 MB: fits the precheck, not the working memory
    assert!(big.len() * 2 < 24 << 20);
    let err = v.validate(SCHEMA, LIFTED, &big).unwrap_err();
    assert!(matches!(err, ValidatorError::MemoryLimit { .. }), "{err:?}");
    assert_small_batch_still_works(&v);
}

#[test]
fn input_beyond_the_cap_is_refused_before_running() {
    let v = Validator::new(RunnerConfig { memory_limit: 8 << 20, ..RunnerConfig::default() }).unwrap();
    let err = v.validate(SCHEMA, b"", &vec![b' '; 5 << 20]).unwrap_err();
    assert_eq!(err, ValidatorError::InputTooLarge { bytes: (5 << 20) + SCHEMA.len() as u64, limit: 8 << 20 });
    assert_small_batch_still_works(&v);
}

#[test]
fn concurrent_batches_share_one_compiled_module() {
    let v = Validator::new(RunnerConfig::default()).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    assert_small_batch_still_works(&v);
                }
            });
        }
    });
}
