//! The host's Prometheus metrics (`GET /metrics`, text format 0.0.4):
//! counters and latency histograms.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (bound, n) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if s <= *bound {
                *n += 1;
            }
        }
        self.count += 1;
        self.sum += s;
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram").unwrap();
        for (bound, n) in BUCKETS.iter().zip(self.counts) {
            writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}").unwrap();
        }
        writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}", self.count, self.sum, self.count)
            .unwrap();
    }
}

#[derive(Default)]
struct State {
    loads: BTreeMap<&'static str, u64>,
    rows: BTreeMap<String, u64>,
    bytes: u64,
    requests: u64,
    maintenance_steps: u64,
    /// Records stream consumers handled, by stream and outcome.
    consumed: BTreeMap<(String, &'static str), u64>,
    /// Stream consumers' broken NATS connections, by stream.
    nats_disconnects: BTreeMap<String, u64>,
    validation: Histogram,
    checks: Histogram,
    commit: Histogram,
}

/// Counters and histograms shared by every request.
#[derive(Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    pub fn request(&self) {
        self.state.lock().expect("metrics lock").requests += 1;
    }

    /// A finished load: its outcome code (`committed`, `invalid`, …) and bytes.
    pub fn load(&self, outcome: &'static str, bytes: u64) {
        let mut s = self.state.lock().expect("metrics lock");
        *s.loads.entry(outcome).or_default() += 1;
        s.bytes += bytes;
    }

    /// A published maintenance step (a `maintain` commit).
    pub fn maintenance_step(&self) {
        self.state.lock().expect("metrics lock").maintenance_steps += 1;
    }

    /// Records a stream consumer (`serve --consume`) handled:
    /// `committed`, or `dead_lettered`.
    pub fn consumed(&self, stream: &str, outcome: &'static str, records: u64) {
        *self.state.lock().expect("metrics lock").consumed.entry((stream.to_owned(), outcome)).or_default() += records;
    }

    /// A stream consumer's NATS connection broke (it reconnects with backoff).
    pub fn nats_disconnect(&self, stream: &str) {
        *self.state.lock().expect("metrics lock").nats_disconnects.entry(stream.to_owned()).or_default() += 1;
    }

    pub fn rows(&self, table: &str, rows: u64) {
        *self.state.lock().expect("metrics lock").rows.entry(table.to_owned()).or_default() += rows;
    }

    pub fn timings(&self, validate: Duration, checks: Duration, commit: Duration) {
        let mut s = self.state.lock().expect("metrics lock");
        s.validation.observe(validate);
        s.checks.observe(checks);
        s.commit.observe(commit);
    }

    pub fn render(&self) -> String {
        let s = self.state.lock().expect("metrics lock");
        let mut out = String::new();
        out.push_str("# HELP omnigraph_http_requests_total HTTP requests received.\n# TYPE omnigraph_http_requests_total counter\n");
        writeln!(out, "omnigraph_http_requests_total {}", s.requests).unwrap();
        out.push_str("# HELP omnigraph_loads_total Loads by outcome.\n# TYPE omnigraph_loads_total counter\n");
        for (outcome, n) in &s.loads {
            writeln!(out, "omnigraph_loads_total{{outcome=\"{outcome}\"}} {n}").unwrap();
        }
        out.push_str("# HELP omnigraph_rows_total Rows committed by table.\n# TYPE omnigraph_rows_total counter\n");
        for (table, n) in &s.rows {
            writeln!(out, "omnigraph_rows_total{{table=\"{table}\"}} {n}").unwrap();
        }
        out.push_str("# HELP omnigraph_load_bytes_total Bytes of load bodies read.\n# TYPE omnigraph_load_bytes_total counter\n");
        writeln!(out, "omnigraph_load_bytes_total {}", s.bytes).unwrap();
        out.push_str("# HELP omnigraph_maintenance_steps_total Maintenance steps published (maintain commits).\n# TYPE omnigraph_maintenance_steps_total counter\n");
        writeln!(out, "omnigraph_maintenance_steps_total {}", s.maintenance_steps).unwrap();
        out.push_str("# HELP omnigraph_consumed_records_total Records stream consumers committed or dead-lettered.\n# TYPE omnigraph_consumed_records_total counter\n");
        for ((stream, outcome), n) in &s.consumed {
            writeln!(out, "omnigraph_consumed_records_total{{stream=\"{stream}\",outcome=\"{outcome}\"}} {n}").unwrap();
        }
        out.push_str("# HELP omnigraph_nats_disconnects_total Stream consumers' NATS connections that broke.\n# TYPE omnigraph_nats_disconnects_total counter\n");
        for (stream, n) in &s.nats_disconnects {
            writeln!(out, "omnigraph_nats_disconnects_total{{stream=\"{stream}\"}} {n}").unwrap();
        }
        s.validation.write(&mut out, "omnigraph_validation_seconds", "Validation time per load (wasm).");
        s.checks.write(&mut out, "omnigraph_checks_seconds", "Stateful check time per load.");
        s.commit.write(&mut out, "omnigraph_commit_seconds", "Stage, commit and publish time per load.");
        out
    }
}
