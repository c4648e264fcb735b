//! The report (SPEC §3): stable error codes, diagnostics, and the bounded,
//! deterministically ordered error list. More in lib.rs.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use serde::Serialize;

use crate::json::scan_plain;
use crate::limits::MAX_ECHO_CHARS;
use crate::options::Mode;

/// Stable error codes. `docs/errors.md` documents each one with an example.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    AmbiguousId,
    BatchBytesLimit,
    ByteOrderMark,
    CardViolation,
    CheckViolation,
    DanglingEndpoint,
    DuplicateId,
    DuplicateMember,
    EnvelopeKind,
    ExternalBlobNotAllowed,
    InvalidBase64,
    InvalidDate,
    InvalidDatetime,
    InvalidUtf8,
    JsonSyntax,
    JsonTooComplex,
    LineTooLong,
    LoneSurrogate,
    MissingField,
    MultilineRecord,
    NoncanonicalId,
    NotAnObject,
    NotInEnum,
    NullNotAllowed,
    OutOfRange,
    RangeViolation,
    ReservedField,
    TableBytesLimit,
    TableRowsLimit,
    TrailingContent,
    TypeMismatch,
    UniqueViolation,
    UnknownField,
    UnknownProperty,
    UnknownType,
    VectorDimension,
    WrongJsonType,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 37] = [
        ErrorCode::AmbiguousId,
        ErrorCode::BatchBytesLimit,
        ErrorCode::ByteOrderMark,
        ErrorCode::CardViolation,
        ErrorCode::CheckViolation,
        ErrorCode::DanglingEndpoint,
        ErrorCode::DuplicateId,
        ErrorCode::DuplicateMember,
        ErrorCode::EnvelopeKind,
        ErrorCode::ExternalBlobNotAllowed,
        ErrorCode::InvalidBase64,
        ErrorCode::InvalidDate,
        ErrorCode::InvalidDatetime,
        ErrorCode::InvalidUtf8,
        ErrorCode::JsonSyntax,
        ErrorCode::JsonTooComplex,
        ErrorCode::LineTooLong,
        ErrorCode::LoneSurrogate,
        ErrorCode::MissingField,
        ErrorCode::MultilineRecord,
        ErrorCode::NoncanonicalId,
        ErrorCode::NotAnObject,
        ErrorCode::NotInEnum,
        ErrorCode::NullNotAllowed,
        ErrorCode::OutOfRange,
        ErrorCode::RangeViolation,
        ErrorCode::ReservedField,
        ErrorCode::TableBytesLimit,
        ErrorCode::TableRowsLimit,
        ErrorCode::TrailingContent,
        ErrorCode::TypeMismatch,
        ErrorCode::UniqueViolation,
        ErrorCode::UnknownField,
        ErrorCode::UnknownProperty,
        ErrorCode::UnknownType,
        ErrorCode::VectorDimension,
        ErrorCode::WrongJsonType,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::AmbiguousId => "ambiguous_id",
            ErrorCode::BatchBytesLimit => "batch_bytes_limit",
            ErrorCode::ByteOrderMark => "byte_order_mark",
            ErrorCode::CardViolation => "card_violation",
            ErrorCode::CheckViolation => "check_violation",
            ErrorCode::DanglingEndpoint => "dangling_endpoint",
            ErrorCode::DuplicateId => "duplicate_id",
            ErrorCode::DuplicateMember => "duplicate_member",
            ErrorCode::EnvelopeKind => "envelope_kind",
            ErrorCode::ExternalBlobNotAllowed => "external_blob_not_allowed",
            ErrorCode::InvalidBase64 => "invalid_base64",
            ErrorCode::InvalidDate => "invalid_date",
            ErrorCode::InvalidDatetime => "invalid_datetime",
            ErrorCode::InvalidUtf8 => "invalid_utf8",
            ErrorCode::JsonSyntax => "json_syntax",
            ErrorCode::JsonTooComplex => "json_too_complex",
            ErrorCode::LineTooLong => "line_too_long",
            ErrorCode::LoneSurrogate => "lone_surrogate",
            ErrorCode::MissingField => "missing_field",
            ErrorCode::MultilineRecord => "multiline_record",
            ErrorCode::NoncanonicalId => "noncanonical_id",
            ErrorCode::NotAnObject => "not_an_object",
            ErrorCode::NotInEnum => "not_in_enum",
            ErrorCode::NullNotAllowed => "null_not_allowed",
            ErrorCode::OutOfRange => "out_of_range",
            ErrorCode::RangeViolation => "range_violation",
            ErrorCode::ReservedField => "reserved_field",
            ErrorCode::TableBytesLimit => "table_bytes_limit",
            ErrorCode::TableRowsLimit => "table_rows_limit",
            ErrorCode::TrailingContent => "trailing_content",
            ErrorCode::TypeMismatch => "type_mismatch",
            ErrorCode::UniqueViolation => "unique_violation",
            ErrorCode::UnknownField => "unknown_field",
            ErrorCode::UnknownProperty => "unknown_property",
            ErrorCode::UnknownType => "unknown_type",
            ErrorCode::VectorDimension => "vector_dimension",
            ErrorCode::WrongJsonType => "wrong_json_type",
        }
    }

    /// True for the codes that mean "a bound of SPEC §5 was exceeded" (HTTP 413).
    pub fn is_bound(self) -> bool {
        matches!(
            self,
            ErrorCode::BatchBytesLimit
                | ErrorCode::LineTooLong
                | ErrorCode::JsonTooComplex
                | ErrorCode::TableRowsLimit
                | ErrorCode::TableBytesLimit
        )
    }
}

/// `{resource, limit, actual}` of a bound that was exceeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitDetail {
    pub resource: String,
    pub limit: u64,
    pub actual: u64,
}

/// One error of the report. `offset` is the byte offset of the start of the
/// line; `column` (the byte position inside the line) only orders errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub line: u64,
    pub offset: u64,
    #[serde(skip)]
    pub column: u64,
    pub code: ErrorCode,
    pub path: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitDetail>,
}

impl Diagnostic {
    fn sort_key(&self) -> (u64, u64, &'static str, &str, &str) {
        (self.line, self.column, self.code.as_str(), &self.path, &self.message)
    }
}

impl Ord for Diagnostic {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl PartialOrd for Diagnostic {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Where an error points: physical line, start of that line, position in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u64,
    pub offset: u64,
    pub column: u64,
}

/// Keeps the `cap` smallest errors in report order and counts all of them,
/// so memory stays bounded however bad a batch is.
#[derive(Debug)]
pub struct ErrorSink {
    cap: usize,
    kept: BinaryHeap<Diagnostic>,
    total: u64,
}

impl ErrorSink {
    pub fn new(cap: usize) -> Self {
        ErrorSink { cap: cap.max(1), kept: BinaryHeap::new(), total: 0 }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Records an error; `message` is only built if the error will be kept.
    pub fn push(&mut self, at: Position, code: ErrorCode, path: &str, message: impl FnOnce() -> String) {
        self.push_detail(at, code, path, message, None)
    }

    pub fn push_limit(&mut self, at: Position, code: ErrorCode, detail: LimitDetail, message: String) {
        self.push_detail(at, code, "", || message, Some(detail))
    }

    fn push_detail(
        &mut self,
        at: Position,
        code: ErrorCode,
        path: &str,
        message: impl FnOnce() -> String,
        limit: Option<LimitDetail>,
    ) {
        self.total += 1;
        if self.kept.len() >= self.cap {
            let worst = self.kept.peek().expect("cap >= 1");
            if (at.line, at.column, code.as_str()) > (worst.line, worst.column, worst.code.as_str()) {
                return;
            }
        }
        self.kept.push(Diagnostic {
            line: at.line,
            offset: at.offset,
            column: at.column,
            code,
            path: path.to_owned(),
            message: message(),
            limit,
        });
        if self.kept.len() > self.cap {
            self.kept.pop();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn finish(self) -> (Vec<Diagnostic>, bool, u64) {
        let list = self.kept.into_sorted_vec();
        let truncated = self.total > list.len() as u64;
        (list, truncated, self.total)
    }
}

/// The rule book's version; part of every report's `rules`.
pub const VALIDATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rules {
    pub validator: &'static str,
    pub schema_hash: String,
    pub mode: Mode,
    pub strict: bool,
    /// Present (and true) only in legacy identity mode, so every other
    /// report keeps its bytes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub legacy_identity: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableKind {
    Node,
    Edge,
}

impl TableKind {
    /// `node` or `edge`, as messages and the envelope say it.
    pub fn word(self) -> &'static str {
        match self {
            TableKind::Node => "node",
            TableKind::Edge => "edge",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableStat {
    pub kind: TableKind,
    pub name: String,
    pub rows: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub lines: u64,
    pub records: u64,
    pub blank_lines: u64,
    pub bytes: u64,
    pub folded: u64,
    pub tables: Vec<TableStat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    From,
    To,
}

/// An edge endpoint that is not in the batch; the host resolves it against
/// stored data. The type names are shared: a batch of edges whose nodes are
/// stored lists two per line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalRef {
    #[serde(serialize_with = "shared_str")]
    pub edge: Arc<str>,
    pub end: End,
    #[serde(rename = "type", serialize_with = "shared_str")]
    pub node_type: Arc<str>,
    pub id: String,
    pub line: u64,
}

/// A shared name as a JSON string. serde's own `Arc` support is a feature
/// that, unified across the workspace, would rebuild every dependency.
fn shared_str<S: serde::Serializer>(name: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(name)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub ok: bool,
    pub rules: Rules,
    pub stats: Stats,
    pub errors: Vec<Diagnostic>,
    pub errors_truncated: bool,
    pub error_count: u64,
    pub external_refs: Vec<ExternalRef>,
}

impl Report {
    /// The canonical serialization: compact JSON, fields in declaration
    /// order, integers only. Identical in every build of the validator, and
    /// to serde's serialization of the report: the head goes through serde,
    /// `external_refs` (the last field, and most of the report of a batch
    /// of edges whose nodes are stored) is written directly.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Head<'r> {
            ok: bool,
            rules: &'r Rules,
            stats: &'r Stats,
            errors: &'r [Diagnostic],
            errors_truncated: bool,
            error_count: u64,
        }
        let Report { ok, rules, stats, errors, errors_truncated, error_count, external_refs } = self;
        let head = Head { ok: *ok, rules, stats, errors, errors_truncated: *errors_truncated, error_count: *error_count };
        let mut out = serde_json::to_string(&head).expect("report serializes");
        out.pop(); // The head's closing brace: one more member follows.
        out.push_str(",\"external_refs\":");
        write_external_refs(&mut out, external_refs);
        out.push('}');
        out
    }

    /// The first bound error, if the batch was refused for a bound (HTTP 413).
    pub fn bound_error(&self) -> Option<&Diagnostic> {
        self.errors.iter().find(|d| d.code.is_bound())
    }
}

/// `refs` as serde_json writes them, without its per-member path (which
/// escapes every member name byte by byte): the member names are constant,
/// and a string is escaped by serde_json itself only when it needs it.
fn write_external_refs(out: &mut String, refs: &[ExternalRef]) {
    out.push('[');
    for (i, r) in refs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"edge\":");
        write_json_str(out, &r.edge);
        out.push_str(match r.end {
            End::From => ",\"end\":\"from\",\"type\":",
            End::To => ",\"end\":\"to\",\"type\":",
        });
        write_json_str(out, &r.node_type);
        out.push_str(",\"id\":");
        write_json_str(out, &r.id);
        out.push_str(",\"line\":");
        out.push_str(itoa::Buffer::new().format(r.line));
        out.push('}');
    }
    out.push(']');
}

/// `s` as a JSON string, exactly as serde_json writes it.
fn write_json_str(out: &mut String, s: &str) {
    // The bytes serde_json escapes are those a plain string stops at.
    if scan_plain(s.as_bytes(), 0) == s.len() {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).expect("strings serialize"));
    }
}

/// Quotes user data for a message: at most [`MAX_ECHO_CHARS`] characters,
/// control characters escaped, cut with `…` when longer.
pub fn echo(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(MAX_ECHO_CHARS * 2) + 2);
    out.push('\'');
    for (n, ch) in value.chars().enumerate() {
        if n == MAX_ECHO_CHARS {
            out.push('…');
            break;
        }
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(refs: Vec<ExternalRef>, errors: Vec<Diagnostic>) -> Report {
        Report {
            ok: errors.is_empty(),
            rules: Rules { validator: "v", schema_hash: "sha256:00".into(), mode: Mode::Merge, strict: true, legacy_identity: false },
            stats: Stats { lines: 3, records: 2, blank_lines: 1, bytes: 9, folded: 0, tables: Vec::new() },
            error_count: errors.len() as u64,
            errors,
            errors_truncated: false,
            external_refs: refs,
        }
    }

    proptest::proptest! {
        /// `to_json` writes exactly what serde writes for the whole report,
        /// for names and ids with quotes, backslashes, control characters,
        /// DEL and text beyond ASCII.
        #[test]
        fn to_json_is_serdes_serialization(
            refs in proptest::collection::vec(
                ("[a-zA-Z\"\\\\\u{0}-\u{1f}\u{7f}é€😀/ ]{0,6}", proptest::bool::ANY, "[a-z\"\\\\\u{0}-\u{1f}é]{0,4}", "\\PC{0,8}|[\u{0}-\u{1f}\"\\\\a]{0,8}", proptest::num::u64::ANY),
                0..5,
            ),
            with_error in proptest::bool::ANY,
        ) {
            let refs = refs
                .into_iter()
                .map(|(edge, from, node_type, id, line)| ExternalRef {
                    edge: Arc::from(edge.as_str()),
                    end: if from { End::From } else { End::To },
                    node_type: Arc::from(node_type.as_str()),
                    id,
                    line,
                })
                .collect();
            let errors = match with_error {
                true => vec![Diagnostic {
                    line: 1,
                    offset: 0,
                    column: 2,
                    code: ErrorCode::DanglingEndpoint,
                    path: "/to".into(),
                    message: "m\"\n".into(),
                    limit: None,
                }],
                false => Vec::new(),
            };
            let report = report(refs, errors);
            proptest::prop_assert_eq!(report.to_json(), serde_json::to_string(&report).unwrap());
        }
    }
}
