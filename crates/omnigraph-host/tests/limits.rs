//! The runner's bounds: deadline, memory cap, input size; a trap leaves the
//! next batch a clean instance. Every pooling slot is usable at once, calls
//! beyond the slots wait for one, and wasm memory stays within
//! `WASM_MEMORY_PER_BATCH_BYTE` × batch + base.

use std::time::Duration;

use omnigraph_host::validator::{
    PrepareResult, RunnerConfig, ValidateOutcome, Validator, ValidatorError, WASM_MEMORY_BASE, WASM_MEMORY_PER_BATCH_BYTE,
};

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
    // The instance is handed the batch and the schema's compiled form.
    let form = omnigraph_validate_wasm::Schema::compile(SCHEMA).unwrap().compiled_form();
    assert_eq!(err, ValidatorError::InputTooLarge { bytes: (5 << 20) + form.len() as u64, limit: 8 << 20 });
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

#[test]
fn every_instance_slot_can_run_at_once() {
    // One slot is one validation (each takes a linear memory and a GC heap).
    let single = Validator::new(RunnerConfig { max_instances: 1, ..RunnerConfig::default() }).unwrap();
    assert_small_batch_still_works(&single);
    // As many overlapping calls as slots: none is refused as busy.
    let v = Validator::new(RunnerConfig { max_instances: 4, ..RunnerConfig::default() }).unwrap();
    validate_at_once(&v, 4);
}

#[test]
fn calls_beyond_the_slots_wait_for_one_instead_of_being_refused() {
    // Four times as many overlapping calls as slots: each waits for a slot
    // (as loads on a busy host do) and every one is validated.
    let v = Validator::new(RunnerConfig { max_instances: 2, ..RunnerConfig::default() }).unwrap();
    validate_at_once(&v, 8);
}

/// `calls` threads validate a 100,000-row batch, started together; each
/// must get its report.
fn validate_at_once(v: &Validator, calls: usize) {
    let rows = batch(100_000);
    let barrier = std::sync::Barrier::new(calls);
    std::thread::scope(|s| {
        for _ in 0..calls {
            s.spawn(|| {
                barrier.wait();
                match v.validate(SCHEMA, LIFTED, &rows) {
                    Ok(ValidateOutcome::Report(r)) => assert!(r.starts_with("{\"ok\":true")),
                    other => panic!("{other:?}"),
                }
            });
        }
    });
}

/// Batches of about `bytes` of one shape each, for the memory bound: what
/// dominates the validator's working memory differs per shape.
fn shaped_batches(bytes: usize) -> Vec<(&'static str, Vec<u8>)> {
    let fill = |line: &dyn Fn(usize) -> String| {
        let mut out = String::with_capacity(bytes + 4096);
        let mut i = 0;
        while out.len() < bytes {
            out.push_str(&line(i));
            i += 1;
        }
        out.into_bytes()
    };
    let tags: Vec<String> = (0..40).map(|k| format!("\"t{k}\"")).collect();
    vec![
        ("small rows", fill(&|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"p{i}\",\"age\":{}}}}}\n", i % 100))),
        ("big strings", fill(&|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"b{i}\",\"bio\":\"{}\"}}}}\n", "x".repeat(100_000)))),
        ("blobs", fill(&|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"c{i}\",\"pic\":\"base64:{}\"}}}}\n", "QUFB".repeat(25_000)))),
        ("vectors and lists", fill(&|i| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"v{i}\",\"emb\":[1.5,2.5,3.5,4.5,5.5,6.5,7.5,8.5],\"tags\":[{}]}}}}\n", tags.join(",")))),
        ("external references", fill(&|i| format!("{{\"edge\":\"Knows\",\"id\":\"k{i}\",\"from\":\"x{i}\",\"to\":\"x{}\"}}\n", i + 1))),
        ("every line an error", fill(&|_| format!("{{\"type\":\"Persn\",\"data\":{{\"nme\":\"{}\"}}}}\n", "y".repeat(200)))),
    ]
}

#[test]
fn wasm_memory_stays_within_its_documented_multiple_of_the_batch() {
    const SHAPED: &str = "node Person { name: String @key  age: I32?  bio: String?  pic: Blob?  emb: Vector(8)?  tags: [String]? }\n\
                          edge Knows: Person -> Person";
    // Every bound lifted but the memory cap, and every error listed.
    const OPTIONS: &[u8] = br#"{"max_errors":100000,"limits":{"max_table_rows":100000000}}"#;
    let bytes = 4 << 20;
    let cap = WASM_MEMORY_PER_BATCH_BYTE * bytes as u64 + WASM_MEMORY_BASE;
    let within = Validator::new(RunnerConfig { memory_limit: cap, max_instances: 1, ..RunnerConfig::default() }).unwrap();
    let tight = Validator::new(RunnerConfig { memory_limit: 3 * bytes as u64, max_instances: 1, ..RunnerConfig::default() }).unwrap();
    let mut over_tight = 0;
    for (shape, batch) in shaped_batches(bytes) {
        match within.prepare(SHAPED, OPTIONS, &batch) {
            Ok(PrepareResult::Accepted { .. } | PrepareResult::Rejected { .. }) => {}
            other => panic!("{shape}: {} bytes did not validate within {cap} bytes of memory: {other:?}", batch.len()),
        }
        over_tight += matches!(tight.prepare(SHAPED, OPTIONS, &batch), Err(ValidatorError::MemoryLimit { .. })) as usize;
    }
    assert!(over_tight >= 4, "the cap is enforced: most shapes need more than 3x ({over_tight} failed)");
    // The default runner fits the default batch bound of its worst shape.
    let default_bound = omnigraph_validate_wasm::limits::DEFAULT_MAX_BATCH_BYTES;
    assert!(RunnerConfig::default().memory_limit >= WASM_MEMORY_PER_BATCH_BYTE * default_bound + WASM_MEMORY_BASE);
}
