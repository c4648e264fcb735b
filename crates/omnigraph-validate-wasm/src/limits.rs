//! Every bound of the rule book, in one place, each with the error it raises.
//!
//! The batch bounds are defaults of [`Limits`]; a host may configure them and
//! they travel with the validator's options, so every runtime applies the same
//! numbers. The fixed bounds below are not configurable: they protect the
//! validator itself.
//!
//! Bounds before work: the batch size is checked before parsing; depth and
//! structural-token counts are checked while scanning, so no line costs more
//! than a scan before it is refused.

use serde::{Deserialize, Serialize};

const MIB: u64 = 1024 * 1024;

/// Default bound on a whole batch (the HTTP body of a load). Error: `batch_bytes_limit`.
pub const DEFAULT_MAX_BATCH_BYTES: u64 = 32 * MIB;
/// Default bound on one line; the body limit. Error: `line_too_long`.
pub const DEFAULT_MAX_LINE_BYTES: u64 = DEFAULT_MAX_BATCH_BYTES;
/// Default bound on structural tokens (`{ } [ ] , :`) per record. Error: `json_too_complex`.
pub const DEFAULT_MAX_JSON_STRUCTURE: u64 = 131_072;
/// Default bound on nesting depth; the record object itself is depth 1. Error: `json_too_complex`.
pub const DEFAULT_MAX_JSON_DEPTH: u32 = 64;
/// Default bound on rows per table in `merge`/`append` (after folding). Error: `table_rows_limit`.
pub const DEFAULT_MAX_TABLE_ROWS: u64 = 8_192;
/// Default bound on the Arrow bytes of one table. Error: `table_bytes_limit`.
pub const DEFAULT_MAX_TABLE_BYTES: u64 = 32 * MIB;
/// Default bound on the Arrow bytes summed over all tables. Error: `table_bytes_limit`.
pub const DEFAULT_MAX_TOTAL_ARROW_BYTES: u64 = 32 * MIB;
/// Default bound on the keyed parse estimate of a `merge`/`append` batch
/// (see [`Limits::max_keyed_parse_bytes`]). Error: `batch_bytes_limit`
/// (resource `keyed_parse_bytes`).
pub const DEFAULT_MAX_KEYED_PARSE_BYTES: u64 = 32 * MIB;
/// What the keyed parse estimate charges each row for its entry in a keyed
/// map, on top of its Arrow bytes and its identity.
pub const KEYED_ENTRY_OVERHEAD_BYTES: u64 = 24;
/// Default bound on the ids an `overwrite` removes (see
/// [`Limits::max_removed_id_bytes`]). Enforced by the host: `removed_ids_limit`.
pub const DEFAULT_MAX_REMOVED_ID_BYTES: u64 = 32 * MIB;
/// What the removed-ids bound charges each removed id on top of its UTF-8 length.
pub const REMOVED_ID_OVERHEAD_BYTES: u64 = 24;
/// Default number of errors a report lists; the total is always counted.
pub const DEFAULT_MAX_ERRORS: u32 = 1_000;

/// Largest error cap an option may ask for (keeps reports bounded in memory).
pub const MAX_ERRORS_CEILING: u32 = 100_000;
/// Characters of user data one message may echo (longer values are cut with `…`).
pub const MAX_ECHO_CHARS: usize = 120;
/// `Vector(n)` accepts 1 ≤ n ≤ this. Error: schema error.
pub const MAX_VECTOR_DIMENSION: u32 = 65_536;
/// Bound on a schema's source text. Error: schema error.
pub const MAX_SCHEMA_BYTES: usize = 1024 * 1024;
/// Bound on list brackets nested in one property type (`[[…]]`; only one
/// level is a valid type, deeper ones get their own error below this bound).
/// Error: schema error.
pub const MAX_TYPE_NESTING: usize = 8;
/// Bound on the compiled size of one `@check` regex. Error: schema error.
pub const MAX_REGEX_COMPILED_BYTES: usize = 1024 * 1024;
/// Dates and date-times are accepted from year 0000 to 9999 (after conversion to UTC),
/// the years RFC 3339 can write. Errors: `invalid_date`, `invalid_datetime`.
pub const MIN_YEAR: i64 = 0;
pub const MAX_YEAR: i64 = 9999;

/// The configurable batch bounds (SPEC §5). Part of the validator's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub max_batch_bytes: u64,
    pub max_line_bytes: u64,
    pub max_json_structure: u64,
    pub max_json_depth: u32,
    pub max_table_rows: u64,
    pub max_table_bytes: u64,
    pub max_total_arrow_bytes: u64,
    /// The keyed parse estimate (SPEC §5): what a host holds to apply a
    /// `merge` or `append` batch keyed by id. Each row that survives
    /// folding, in every touched table, is charged its Arrow bytes (what
    /// `table_bytes_limit` counts), plus the UTF-8 length of its identity
    /// (the given id; for keyed nodes the canonical key; nothing when the
    /// host generates the id), plus [`KEYED_ENTRY_OVERHEAD_BYTES`] for its
    /// map entry. Over the bound: one `batch_bytes_limit` error with
    /// resource `keyed_parse_bytes`, at the row (in line order) where the
    /// running total crosses it. Not checked in `overwrite`, which replaces
    /// tables without matching ids.
    pub max_keyed_parse_bytes: u64,
    /// The ids an `overwrite` removes from stored tables, each charged its
    /// UTF-8 length plus [`REMOVED_ID_OVERHEAD_BYTES`] (SPEC §5). The
    /// validator never checks it (it needs the stored ids): the host does,
    /// and refuses with `removed_ids_limit`. It lives here so the one bounds
    /// object a host reports in `/rules` and passes in the options carries it.
    pub max_removed_id_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_json_structure: DEFAULT_MAX_JSON_STRUCTURE,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_table_rows: DEFAULT_MAX_TABLE_ROWS,
            max_table_bytes: DEFAULT_MAX_TABLE_BYTES,
            max_total_arrow_bytes: DEFAULT_MAX_TOTAL_ARROW_BYTES,
            max_keyed_parse_bytes: DEFAULT_MAX_KEYED_PARSE_BYTES,
            max_removed_id_bytes: DEFAULT_MAX_REMOVED_ID_BYTES,
        }
    }
}
