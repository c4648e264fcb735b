//! `omnigraph-host validate`: a file judged offline by the validator
//! artifact in wasmtime, printed as `file:line: code: message` lines or as
//! the report's JSON.

use std::path::{Path, PathBuf};

use omnigraph_host::validator::ValidateOutcome;
use omnigraph_validate_wasm::{Limits, Options};

use super::common::{Failure, ModeArg, operational, read, read_limits, validator};

#[derive(clap::Args)]
pub(crate) struct ValidateArgs {
    #[arg(long)]
    schema: PathBuf,
    file: PathBuf,
    #[arg(long, value_enum, default_value = "merge")]
    mode: ModeArg,
    /// Print the report as JSON (SPEC §3) instead of lines.
    #[arg(long)]
    json: bool,
    /// Batch bounds as JSON (a host's `/rules` `bounds`), to judge as that host does.
    #[arg(long)]
    limits: Option<PathBuf>,
    /// Legacy identity (SPEC §2.3), as a graph created with `init --legacy-identity`.
    #[arg(long)]
    legacy_identity: bool,
}

pub(crate) async fn run(ValidateArgs { schema, file, mode, json, limits, legacy_identity }: ValidateArgs) -> Result<(), Failure> {
    let source = String::from_utf8(read(&schema)?).map_err(|_| operational("the schema is not UTF-8"))?;
    let batch = read(&file)?;
    let limits = match &limits {
        Some(path) => read_limits(path)?,
        None => Limits::default(),
    };
    let options = Options { mode: mode.into(), limits, legacy_identity, ..Options::default() };
    let options = serde_json::to_vec(&options).expect("options");
    match validator()?.validate(&source, &options, &batch).map_err(operational)? {
        ValidateOutcome::Report(report) => print_report(&file, &report, json),
        ValidateOutcome::SchemaError(e) => Err(operational(format!("{}: {e}", schema.display()))),
        ValidateOutcome::OptionsError(e) => Err(operational(e)),
    }
}

/// What `validate` prints of a report. Read without a DOM, and without its
/// `external_refs`, which serde skips unread: a batch of edges whose nodes
/// are stored lists two per line (20 MB of report for a 15 MB file).
#[derive(serde::Deserialize)]
struct ReportSummary {
    ok: bool,
    stats: RecordCount,
    errors: Vec<ReportError>,
    errors_truncated: bool,
    error_count: u64,
}

#[derive(serde::Deserialize)]
struct RecordCount {
    records: u64,
}

#[derive(serde::Deserialize)]
struct ReportError {
    line: u64,
    code: String,
    message: String,
}

/// Prints a report as `file:line: code: message` lines (or JSON); exit 1 if refused.
fn print_report(file: &Path, report_json: &str, json: bool) -> Result<(), Failure> {
    let report: ReportSummary = serde_json::from_str(report_json).map_err(operational)?;
    if json {
        println!("{report_json}");
    } else {
        for e in &report.errors {
            println!("{}:{}: {}: {}", file.display(), e.line, e.code, e.message);
        }
        if report.ok {
            println!("{}: valid ({} records)", file.display(), report.stats.records);
        } else {
            let truncated = if report.errors_truncated { ", list truncated" } else { "" };
            println!("{}: invalid ({} errors{truncated})", file.display(), report.error_count);
        }
    }
    if report.ok { Ok(()) } else { Err(Failure::Invalid(String::new())) }
}
