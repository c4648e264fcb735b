//! The batch: framing (SPEC §2.1, §2.6) of strict lines or a compat stream;
//! each accepted row goes to the batch checks (`checks`, SPEC §2.5). See lib.rs.
//!
//! Over 600 lines only with its unit tests (the framing code is about 550).

use bumpalo::Bump;
use memchr::memchr;

use crate::checks::{Accepted, Recycled, Settled};
use crate::fast::{self, LineAt};
use crate::json::{Cursor, JsonError};
use crate::limits::Limits;
use crate::options::Options;
use crate::record::{Keep, Parsed, RecordCtx, Rows, parse_record};
use crate::value::Val;
use crate::report::{
    ErrorCode, ErrorSink, LimitDetail, Position, Report, Rules, Stats, TableStat,
};
use crate::schema::Schema;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The validator's result before serialization: the report and, per table
/// (indexed like `Schema::types`), the rows that survive folding, in line order.
pub struct Outcome<'a> {
    pub report: Report,
    pub tables: Vec<Rows<'a>>,
    /// What the next batch may work in: the checks' maps and unused chunks
    /// of rows (`tables`' chunks join them once the rows are done).
    pub recycled: Recycled<'a>,
}

struct Counts {
    lines: u64,
    records: u64,
    blank_lines: u64,
}

/// Validates `bytes`, the rows keeping `keep` of their values.
/// `texts` keeps the rows' strings that are not the batch's own bytes; the
/// checks work in `recycled` (what a past batch left, or nothing).
///
/// Validation (`Keep::Nothing`) runs first without keeping rows
/// (`Keep::Count`): a batch in which no check names a row (no duplicate
/// id, no `@unique` clash, no `@card` excess, no bound exceeded; a merge
/// may fold) is done in that pass, which does not write them. Any other batch is run again by
/// a pass that keeps rows, which alone writes its report. Both passes run
/// the same code, so a report does not depend on which one wrote it.
pub fn run<'a>(
    schema: &Schema,
    options: &Options,
    bytes: &'a [u8],
    keep: Keep,
    texts: &'a Bump,
    recycled: Recycled<'a>,
) -> Outcome<'a> {
    let input = Input { schema, options, bytes, texts };
    let recycled = match keep {
        Keep::Nothing => match pass(&input, Keep::Count, recycled) {
            Ok(outcome) => return outcome,
            Err(recycled) => recycled,
        },
        _ => recycled,
    };
    pass(&input, keep, recycled).ok().expect("a pass that keeps rows never gives up")
}

/// What every pass over a batch reads.
struct Input<'s, 'a> {
    schema: &'s Schema,
    options: &'s Options,
    bytes: &'a [u8],
    texts: &'a Bump,
}

/// One pass over the batch: its outcome, or, when it keeps no rows and a
/// check had to name one, what it worked in, for a pass that keeps them.
fn pass<'a>(input: &Input<'_, 'a>, keep: Keep, recycled: Recycled<'a>) -> Result<Outcome<'a>, Recycled<'a>> {
    let Input { schema, options, bytes, texts } = *input;
    let mut sink = ErrorSink::new(options.max_errors as usize);
    let mut accepted = Accepted::new(schema, options.mode, keep, texts, recycled);
    let limits = &options.limits;
    let counts = if bytes.len() as u64 > limits.max_batch_bytes {
        sink.push_limit(
            Position { line: 0, offset: 0, column: 0 },
            ErrorCode::BatchBytesLimit,
            LimitDetail { resource: "batch_bytes".into(), limit: limits.max_batch_bytes, actual: bytes.len() as u64 },
            format!(
                "the batch is {} bytes; the limit is {}: split it into smaller batches",
                bytes.len(),
                limits.max_batch_bytes
            ),
        );
        Counts { lines: 0, records: 0, blank_lines: 0 }
    } else if options.strict {
        strict_lines(schema, options, bytes, &mut sink, &mut accepted)
    } else {
        compat_stream(schema, options, bytes, &mut sink, &mut accepted)
    };
    let Settled { tables, folded, external_refs, recycled } = accepted.finish(options, &mut sink)?;

    let stats = Stats {
        lines: counts.lines,
        records: counts.records,
        blank_lines: counts.blank_lines,
        bytes: bytes.len() as u64,
        folded,
        tables: schema
            .types
            .iter()
            .zip(&tables)
            .filter(|(_, rows)| !rows.is_empty())
            .map(|(t, rows)| TableStat { kind: t.kind, name: t.name.clone(), rows: rows.len() as u64 })
            .collect(),
    };
    let ok = sink.is_empty();
    let (errors, errors_truncated, error_count) = sink.finish();
    let report = Report {
        ok,
        rules: Rules {
            validator: crate::VALIDATOR_VERSION,
            schema_hash: schema.hash().to_owned(),
            mode: options.mode,
            strict: options.strict,
            legacy_identity: options.legacy_identity,
        },
        stats,
        errors,
        errors_truncated,
        error_count,
        external_refs,
    };
    Ok(Outcome { report, tables, recycled })
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r'))
}

fn report_json_error(sink: &mut ErrorSink, cx_at: impl Fn(usize) -> Position, line: u64, e: JsonError, limits: &Limits) {
    match e {
        JsonError::Syntax { pos, message } => {
            sink.push(cx_at(pos), ErrorCode::JsonSyntax, "", || format!("line {line}: invalid JSON: {message}"))
        }
        JsonError::Eof { pos } => sink.push(cx_at(pos), ErrorCode::JsonSyntax, "", || {
            format!("line {line}: invalid JSON: the input ends inside a value")
        }),
        JsonError::LoneSurrogate { pos } => sink.push(cx_at(pos), ErrorCode::LoneSurrogate, "", || {
            format!("line {line}: a \\u escape encodes half of a surrogate pair; strings must be valid Unicode")
        }),
        JsonError::TooComplex { pos, message } => {
            let (resource, limit) = if message.contains("nesting") {
                ("json_depth", limits.max_json_depth as u64)
            } else {
                ("json_structure", limits.max_json_structure)
            };
            sink.push_limit(
                cx_at(pos),
                ErrorCode::JsonTooComplex,
                LimitDetail { resource: resource.into(), limit, actual: limit + 1 },
                format!("line {line}: the record is too complex: {message}"),
            )
        }
    }
}

/// String- and bracket-aware scan state, to find where a record spread over
/// several lines ends.
#[derive(Default)]
struct Nesting {
    depth: u64,
    in_string: bool,
    escaped: bool,
}

impl Nesting {
    fn feed(&mut self, bytes: &[u8]) {
        for &c in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == b'"' {
                    self.in_string = false;
                }
            } else {
                match c {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                    _ => {}
                }
            }
        }
    }

    fn closed(&self) -> bool {
        self.depth == 0 && !self.in_string
    }
}

/// About how many bytes of a strict batch one call of [`Strict::window`]
/// reads (it finishes the line it is in).
const WINDOW_BYTES: usize = 64 * 1024;

/// A strict batch being read: what every window reads, and what one window
/// leaves to the next.
struct Strict<'s, 'a> {
    schema: &'s Schema,
    options: &'s Options,
    bytes: &'a [u8],
    plan: fast::Plan,
    counts: Counts,
    values: Vec<Val<'a>>,
    pos: usize,
}

fn strict_lines<'a>(
    schema: &Schema,
    options: &Options,
    bytes: &'a [u8],
    sink: &mut ErrorSink,
    accepted: &mut Accepted<'_, 'a>,
) -> Counts {
    let counts = Counts { lines: 0, records: 0, blank_lines: 0 };
    let plan = fast::Plan::new(schema);
    let mut strict = Strict { schema, options, bytes, plan, counts, values: Vec::new(), pos: 0 };
    // A pass that gave up reads no further (it is run again).
    while strict.pos < bytes.len() && !accepted.gave_up() {
        strict.window(sink, accepted);
    }
    strict.counts
}

impl<'a> Strict<'_, 'a> {
    /// The lines of one window of a strict batch, a call each so that V8
    /// (which optimises a wasm function only for its later calls) would not
    /// run a whole batch's loop in baseline code. Measured in Chromium, it
    /// does not change the first call (`fast::accept` tiers up on its own):
    /// docs/lab/2026-12-02-earlier-four-runtime-runs.md, "Where Chromium's first call goes".
    #[inline(never)]
    fn window(&mut self, sink: &mut ErrorSink, accepted: &mut Accepted<'_, 'a>) {
        let Strict { schema, options, bytes, plan, counts, values, pos } = self;
        let (schema, options, bytes) = (*schema, *options, *bytes);
        let limits = &options.limits;
        let mut pos = *pos;
        let window_end = pos.saturating_add(WINDOW_BYTES);
        let keep_values = accepted.keeps_values();
        while pos < bytes.len() && pos < window_end {
            // The acceptor frames the lines it takes; every other line is framed
            // and explained below, as if the acceptor had not looked at it.
            let at_line = LineAt { line: counts.lines + 1, offset: pos as u64 };
            if let Some(taken) = fast::accept(plan, schema, limits, &bytes[pos..], at_line, keep_values, values) {
                let content = &bytes[pos..pos + taken.line_end];
                let content_len = content.len() - usize::from(content.last() == Some(&b'\r'));
                if content_len as u64 <= limits.max_line_bytes {
                    counts.lines += 1;
                    counts.records += 1;
                    pos = (pos + taken.line_end + 1).min(bytes.len());
                    accepted.push(taken.table, taken.row, values, sink);
                    continue;
                }
            }
            let (end, next) = match memchr(b'\n', &bytes[pos..]) {
                Some(i) => (pos + i, pos + i + 1),
                None => (bytes.len(), bytes.len()),
            };
            counts.lines += 1;
            let line = counts.lines;
            let mut content = &bytes[pos..end];
            if content.last() == Some(&b'\r') {
                content = &content[..content.len() - 1];
            }
            let line_start = pos;
            let at = move |column: usize| Position { line, offset: line_start as u64, column: column as u64 };
            pos = next;
            if line == 1 && content.starts_with(BOM) {
                counts.records += 1;
                sink.push(at(0), ErrorCode::ByteOrderMark, "", || {
                    "line 1: the batch starts with a UTF-8 byte order mark; remove it (strict batches are plain UTF-8)".into()
                });
                continue;
            }
            if content.len() as u64 > limits.max_line_bytes {
                counts.records += 1;
                sink.push_limit(
                    at(0),
                    ErrorCode::LineTooLong,
                    LimitDetail { resource: "line_bytes".into(), limit: limits.max_line_bytes, actual: content.len() as u64 },
                    format!("line {line}: the line is {} bytes; the limit is {}", content.len(), limits.max_line_bytes),
                );
                continue;
            }
            if is_blank(content) {
                counts.blank_lines += 1;
                continue;
            }
            counts.records += 1;
            let text = match std::str::from_utf8(content) {
                Ok(text) => text,
                Err(e) => {
                    sink.push(at(e.valid_up_to()), ErrorCode::InvalidUtf8, "", || {
                        format!("line {line}: invalid UTF-8 at byte {} of the line", e.valid_up_to())
                    });
                    continue;
                }
            };
            let at_line = LineAt { line, offset: line_start as u64 };
            match explain_line(schema, options, text, at_line, sink, values) {
                (Ok(row), trailing) => {
                    if let Some(second) = trailing {
                        sink.push(at(second), ErrorCode::TrailingContent, "", || {
                            format!(
                                "line {line}: more content after the record at byte {second}; strict batches hold one JSON record per line"
                            )
                        });
                    } else if let Some((t, row)) = row {
                        accepted.push(t, row, values, sink);
                    }
                }
                (Err(JsonError::Eof { .. }), _) => {
                    // Find where the record would end if it continues on later lines.
                    let mut nesting = Nesting::default();
                    nesting.feed(content);
                    let mut scan = pos;
                    let mut last_line = line;
                    let mut closed_at = None;
                    while scan < bytes.len() && closed_at.is_none() {
                        let stop = memchr(b'\n', &bytes[scan..]).map_or(bytes.len(), |i| scan + i + 1);
                        nesting.feed(&bytes[scan..stop]);
                        last_line += 1;
                        scan = stop;
                        if nesting.closed() {
                            closed_at = Some((last_line, scan));
                        }
                    }
                    match closed_at {
                        Some((end_line, resume)) => {
                            sink.push(at(0), ErrorCode::MultilineRecord, "", || {
                                format!(
                                    "line {line}: the record continues to line {end_line}; strict batches need one record per line (write each record on a single line)"
                                )
                            });
                            counts.lines = end_line;
                            pos = resume;
                        }
                        None => sink.push(at(text.len()), ErrorCode::MultilineRecord, "", || {
                            format!("line {line}: the record is not complete at the end of the line; strict batches need one whole record per line")
                        }),
                    }
                }
                (Err(e), _) => report_json_error(sink, at, line, e, limits),
            }
        }
        self.pos = pos;
    }
}

/// The explainer on one strict line (its errors go to `sink`): the record
/// and, when more than whitespace follows it, where that starts.
fn explain_line<'a>(
    schema: &Schema,
    options: &Options,
    text: &'a str,
    at: LineAt,
    sink: &mut ErrorSink,
    values: &mut Vec<Val<'a>>,
) -> (Parsed<'a>, Option<usize>) {
    let limits = &options.limits;
    let mut cur = Cursor::new(text, limits.max_json_depth, limits.max_json_structure);
    let mut cx = RecordCtx {
        schema,
        compat: false,
        legacy_identity: options.legacy_identity,
        sink,
        line: at.line,
        offset: at.offset,
        line_start: 0,
    };
    let record = parse_record(&mut cur, &mut cx, values);
    cur.skip_ws();
    let trailing = (record.is_ok() && !cur.at_end()).then_some(cur.pos);
    (record, trailing)
}

/// Line numbers for positions in a compat batch, advanced monotonically.
struct LineIndex<'b> {
    bytes: &'b [u8],
    pos: usize,
    line: u64,
    line_start: usize,
}

impl LineIndex<'_> {
    fn advance(&mut self, to: usize) -> (u64, usize) {
        while let Some(i) = memchr(b'\n', &self.bytes[self.pos..to]) {
            self.line += 1;
            self.pos += i + 1;
            self.line_start = self.pos;
        }
        self.pos = to;
        (self.line, self.line_start)
    }
}

fn compat_stream<'a>(
    schema: &Schema,
    options: &Options,
    bytes: &'a [u8],
    sink: &mut ErrorSink,
    accepted: &mut Accepted<'_, 'a>,
) -> Counts {
    let limits = &options.limits;
    let mut counts = Counts { lines: 0, records: 0, blank_lines: 0 };
    for line in bytes.split(|&b| b == b'\n') {
        counts.lines += 1;
        if is_blank(line) {
            counts.blank_lines += 1;
        }
    }
    if bytes.last() == Some(&b'\n') || bytes.is_empty() {
        counts.lines -= 1;
        counts.blank_lines -= 1;
    }
    // Invalid UTF-8 cannot be framed: validate the prefix before it.
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let bad = e.valid_up_to();
            let line_start = bytes[..bad].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let line = 1 + bytes[..bad].iter().filter(|&&b| b == b'\n').count() as u64;
            sink.push(
                Position { line, offset: line_start as u64, column: (bad - line_start) as u64 },
                ErrorCode::InvalidUtf8,
                "",
                || format!("line {line}: invalid UTF-8; nothing from this line on was read"),
            );
            std::str::from_utf8(&bytes[..line_start]).expect("valid prefix")
        }
    };
    let mut cur = Cursor::new(text, limits.max_json_depth, limits.max_json_structure);
    cur.reject_duplicates = false;
    // Compat is lenient about a leading byte order mark.
    if text.starts_with('\u{FEFF}') {
        cur.pos = '\u{FEFF}'.len_utf8();
    }
    let mut lines = LineIndex { bytes, pos: 0, line: 1, line_start: 0 };
    let mut values = Vec::new();
    // A pass that gave up reads no further (it is run again).
    while !accepted.gave_up() {
        cur.skip_ws();
        if cur.at_end() {
            break;
        }
        cur.reset_bounds();
        let start = cur.pos;
        let (line, line_start) = lines.advance(start);
        counts.records += 1;
        let mut cx = RecordCtx {
            schema,
            compat: true,
            legacy_identity: options.legacy_identity,
            sink,
            line,
            offset: line_start as u64,
            line_start,
        };
        match parse_record(&mut cur, &mut cx, &mut values) {
            Ok(Some((t, row))) => accepted.push(t, row, &mut values, sink),
            Ok(None) => {}
            Err(e) => {
                let failed_at = match &e {
                    JsonError::Syntax { pos, .. }
                    | JsonError::Eof { pos }
                    | JsonError::TooComplex { pos, .. }
                    | JsonError::LoneSurrogate { pos } => *pos,
                };
                let at = |pos: usize| Position { line, offset: line_start as u64, column: (pos - line_start) as u64 };
                report_json_error(sink, at, line, e, limits);
                // Resume at the next line after the failure.
                cur.pos = memchr(b'\n', &bytes[failed_at.min(text.len())..text.len()])
                    .map_or(text.len(), |i| failed_at + i + 1);
            }
        }
    }
    counts
}

/// Checks the fast acceptor against the explainer on every line of `batch`
/// read as strict lines: each line the acceptor takes (given the batch from
/// that line on, as `strict_lines` gives it), validating (values measured,
/// and left in the buffer for the next line) or keeping values (whole
/// values: taken from the buffer, as the reference `prepare` takes them, or
/// left in it, as `prepare`'s columns copy them, so the next line's blobs,
/// vectors and lists refill their buffers), must end where the line ends and
/// be UTF-8, and the explainer must accept it alone, with the same table and
/// the same row, and, keeping values, the same values. Returns how many
/// lines the acceptor took and how many lines there were. Panics on a
/// disagreement (tests, fuzz targets).
pub fn differential(schema: &Schema, options: &Options, batch: &[u8]) -> (u64, u64) {
    let plan = fast::Plan::new(schema);
    let limits = &options.limits;
    let (mut accepted, mut lines) = (0, 0);
    // One buffer per mode for every line, as in `strict_lines`: validating,
    // and keeping values that are left, a line starts from what the line
    // before left in it; keeping values that are taken, from an empty buffer.
    let (mut whole_taken, mut whole_left, mut measured) = (Vec::new(), Vec::new(), Vec::new());
    let mut start = 0;
    for (n, raw) in batch.split(|&b| b == b'\n').enumerate() {
        lines += 1;
        let rest = &batch[start..];
        start += raw.len() + 1;
        let content = raw.strip_suffix(b"\r").unwrap_or(raw);
        let at = LineAt { line: n as u64 + 1, offset: 0 };
        let modes = [(true, true, &mut whole_taken), (true, false, &mut whole_left), (false, false, &mut measured)];
        for (keep_values, take_values, values) in modes {
            let Some(taken) = fast::accept(&plan, schema, limits, rest, at, keep_values, values) else { continue };
            assert_eq!(taken.line_end, raw.len(), "the fast acceptor ends line {} elsewhere: {raw:?}", n + 1);
            let Ok(text) = std::str::from_utf8(content) else {
                panic!("the fast acceptor took line {} that is not UTF-8: {raw:?}", n + 1)
            };
            let fast_row = (taken.table, taken.row);
            accepted += u64::from(take_values);
            let mut sink = ErrorSink::new(16);
            let mut slow_values = Vec::new();
            let (slow, trailing) = explain_line(schema, options, text, at, &mut sink, &mut slow_values);
            match slow {
                // Debug tells -0.0 from 0.0, which `==` does not.
                // Validating, the acceptor only measures blobs, vectors and
                // lists: the row (their Arrow bytes included) must agree.
                Ok(Some(slow_row)) if trailing.is_none() && sink.is_empty() => assert_eq!(
                    format!("{slow_row:?} {:?}", keep_values.then_some(&slow_values)),
                    format!("{fast_row:?} {:?}", keep_values.then_some(&*values)),
                    "the fast acceptor's row differs from the explainer's on {text:?}"
                ),
                other => panic!(
                    "the fast acceptor accepted {text:?}, the explainer gives {other:?} (trailing at {trailing:?}, errors: {})",
                    sink.total()
                ),
            }
            if take_values {
                values.clear();
            }
        }
    }
    (accepted, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = "node P { name: String @key  email: String? @unique }\nedge K: P -> P @card(0..1)";

    fn options(json: &str) -> Options {
        Options::from_json(json.as_bytes()).expect("options")
    }

    /// Whether the pass that keeps no rows finishes `batch` itself, and
    /// that `run` gives the report of a pass that keeps rows either way.
    fn first_pass_finishes(options: &Options, batch: &str) -> bool {
        let schema = Schema::compile(SCHEMA).expect("schema");
        let texts = Bump::new();
        let input = Input { schema: &schema, options, bytes: batch.as_bytes(), texts: &texts };
        let kept = pass(&input, Keep::Nothing, Recycled::default()).ok().expect("a pass that keeps rows never gives up");
        assert_eq!(run(&schema, options, batch.as_bytes(), Keep::Nothing, &texts, Recycled::default()).report, kept.report);
        let first = pass(&input, Keep::Count, Recycled::default());
        first.map(|outcome| assert_eq!(outcome.report, kept.report, "{batch}")).is_ok()
    }

    #[test]
    fn the_first_pass_hands_on_exactly_the_batches_whose_checks_name_a_row() {
        let (a, b) = (r#"{"type":"P","data":{"name":"a","email":"e"}}"#, r#"{"type":"P","data":{"name":"b"}}"#);
        let b_same_email = r#"{"type":"P","data":{"name":"b","email":"e"}}"#;
        let (ab, ax, bx) = (r#"{"edge":"K","from":"a","to":"b"}"#, r#"{"edge":"K","from":"a","to":"x"}"#, r#"{"edge":"K","from":"b","to":"x"}"#);
        let merge = options(r#"{"mode":"merge"}"#);
        let append = options(r#"{"mode":"append"}"#);
        let overwrite = options(r#"{"mode":"overwrite"}"#);
        let one_row = options(r#"{"mode":"merge","limits":{"max_table_rows":1}}"#);
        let few_bytes = options(r#"{"mode":"merge","limits":{"max_table_bytes":8}}"#);
        let lines = |records: &[&str]| records.iter().map(|r| format!("{r}\n")).collect::<String>();
        // Finished: valid, with an external ref, or with errors of records alone.
        assert!(first_pass_finishes(&merge, &lines(&[a, b, ab, bx])));
        assert!(first_pass_finishes(&merge, &lines(&[ax, "{}"])));
        // Finished past a fold: a row folded away holds its @unique tuple
        // against no later row, in its group of rows or in a later one, and
        // its @card source is not counted when it dies in its group.
        let a_no_email = r#"{"type":"P","data":{"name":"a"}}"#;
        // 40 records made from a template of their number (more than a group of rows).
        let forty = |record: fn(usize) -> String| (0..40).map(record).collect::<Vec<String>>();
        fn borrowed(records: &[String]) -> Vec<&str> {
            records.iter().map(String::as_str).collect()
        }
        let (fillers, edges) = (
            forty(|n| format!(r#"{{"type":"P","data":{{"name":"f{n}"}}}}"#)),
            forty(|n| format!(r#"{{"edge":"K","id":"k{n}","from":"f{n}","to":"a"}}"#)),
        );
        let (fillers, edges) = (borrowed(&fillers), borrowed(&edges));
        let after = |head: &[&str], tail: &[&str]| lines(&[head, &fillers, tail].concat());
        assert!(first_pass_finishes(&merge, &lines(&[a, a])));
        assert!(first_pass_finishes(&merge, &lines(&[a, b_same_email, b])));
        assert!(first_pass_finishes(&merge, &lines(&[a, b, a_no_email, b_same_email])));
        assert!(first_pass_finishes(&merge, &after(&[a], &[a_no_email, b_same_email])));
        let k = r#"{"edge":"K","id":"k","from":"a","to":"b"}"#;
        assert!(first_pass_finishes(&merge, &lines(&[a, b, k, k])));
        // Handed on: a duplicate id, a @unique clash (between rows that
        // survive, or with a row folded away only in a later group), a
        // @card excess (also one counted with an edge folded away only in
        // a later group), a bound exceeded, a dangling endpoint.
        assert!(!first_pass_finishes(&merge, &after(&[&[a, b, k][..], &edges].concat(), &[k])));
        assert!(!first_pass_finishes(&append, &lines(&[a, a])));
        assert!(!first_pass_finishes(&merge, &lines(&[a, a, b_same_email])));
        assert!(!first_pass_finishes(&merge, &lines(&[a, b_same_email, a])));
        assert!(!first_pass_finishes(&merge, &after(&[a, b_same_email], &[a_no_email])));
        assert!(!first_pass_finishes(&merge, &lines(&[a, b_same_email])));
        assert!(!first_pass_finishes(&merge, &lines(&[a, b, ab, ax])));
        assert!(!first_pass_finishes(&one_row, &lines(&[a, b])));
        assert!(!first_pass_finishes(&few_bytes, &lines(&[a])));
        assert!(!first_pass_finishes(&overwrite, &lines(&[a, ax])));
    }
}
