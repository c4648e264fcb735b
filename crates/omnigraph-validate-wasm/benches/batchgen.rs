//! The benchmark batch: deterministic NDJSON for `tests/bench/schema.pg`,
//! mixing node and edge types and every property type. Shared by the
//! criterion bench and the `gen-bench-batch` example (other runtimes'
//! benchmarks read the file it writes).

/// A small deterministic generator (no randomness in the core, and the
/// same batch on every machine).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Generates about `target_bytes` of valid NDJSON: per 100 people, 10
/// companies, 200 Knows and 100 WorksAt edges, all endpoints in the batch.
pub fn generate(target_bytes: usize) -> Vec<u8> {
    let mut out = String::with_capacity(target_bytes + 4096);
    let mut rng = Lcg(42);
    let mut block = 0u64;
    while out.len() < target_bytes {
        let first = block * 100;
        for c in 0..10 {
            let id = block * 10 + c;
            out.push_str(&format!(
                "{{\"type\":\"Company\",\"data\":{{\"name\":\"company-{id}\",\"founded\":\"19{:02}-0{}-1{}\",\"employees\":{}}}}}\n",
                rng.below(100),
                1 + rng.below(9),
                rng.below(10),
                rng.below(100_000)
            ));
        }
        for p in first..first + 100 {
            let avatar: String = (0..4).map(|_| BASE64[rng.below(64) as usize] as char).collect();
            let embedding: Vec<String> = (0..8).map(|_| format!("{:.4}", rng.below(20_000) as f64 / 10_000.0 - 1.0)).collect();
            out.push_str(&format!(
                concat!(
                    "{{\"type\":\"Person\",\"data\":{{\"name\":\"person-{}\",\"active\":{},\"age\":{},\"visits\":{},",
                    "\"score\":{},\"big\":{},\"ratio\":{},\"weight\":{},\"born\":\"{}-{:02}-{:02}\",",
                    "\"seen\":\"2026-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z\",\"avatar\":\"base64:{}\",",
                    "\"embedding\":[{}],\"tags\":[\"t{}\",\"t{}\"],\"lucky\":[{},{}],\"tier\":\"{}\",",
                    "\"email\":\"person-{}@example.com\"}}}}\n"
                ),
                p,
                rng.below(2) == 0,
                rng.below(100),
                rng.below(1 << 40),
                rng.below(1 << 31),
                rng.next() << 20,
                rng.below(1000) as f64 / 8.0,
                rng.below(1_000_000) as f64 / 1000.0,
                1950 + rng.below(60),
                1 + rng.below(12),
                1 + rng.below(28),
                1 + rng.below(12),
                1 + rng.below(28),
                rng.below(24),
                rng.below(60),
                rng.below(60),
                rng.below(1_000_000),
                avatar,
                embedding.join(","),
                rng.below(50),
                rng.below(50),
                rng.below(1000),
                rng.below(1000),
                ["free", "pro", "enterprise"][rng.below(3) as usize],
                p
            ));
        }
        for k in 0..200 {
            let from = first + k % 100;
            let to = first + rng.below(100);
            out.push_str(&format!(
                "{{\"edge\":\"Knows\",\"id\":\"k-{block}-{k}\",\"from\":\"person-{from}\",\"to\":\"person-{to}\",\"data\":{{\"since\":\"20{:02}-01-01\",\"strength\":{}}}}}\n",
                rng.below(26),
                rng.below(100) as f64 / 100.0
            ));
        }
        for w in 0..100 {
            let company = block * 10 + rng.below(10);
            out.push_str(&format!(
                "{{\"edge\":\"WorksAt\",\"from\":\"person-{}\",\"to\":\"company-{company}\",\"data\":{{\"role\":\"{}\",\"start\":\"2020-01-01T00:00:00+02:00\"}}}}\n",
                first + w,
                ["eng", "ops", "sales"][rng.below(3) as usize]
            ));
        }
        block += 1;
    }
    out.into_bytes()
}

/// Options for the benchmark batch: the default bounds would (rightly)
/// refuse a 32 MiB batch's row counts, so the bench lifts them.
pub const BENCH_OPTIONS: &str = r#"{"mode":"merge","limits":{"max_batch_bytes":1073741824,"max_line_bytes":1073741824,"max_table_rows":100000000,"max_table_bytes":1073741824,"max_total_arrow_bytes":1073741824}}"#;

/// The lines of `batch` that `keep` selects, each with its line end.
pub fn lines_where(batch: &[u8], keep: impl Fn(&[u8]) -> bool) -> String {
    let kept: Vec<&[u8]> = batch.split(|&c| c == b'\n').filter(|l| !l.is_empty() && keep(l)).collect();
    String::from_utf8(kept.join(&b"\n"[..])).expect("the batch is UTF-8") + "\n"
}

/// Whether a generated line is an edge: the worst case "a batch of only
/// edges" is the batch's edges alone (their nodes are then outside it, as
/// in every edge pass of a split load).
pub fn is_edge(line: &[u8]) -> bool {
    line.starts_with(b"{\"edge\"")
}
