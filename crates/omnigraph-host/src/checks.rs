//! The stateful checks (SPEC §4.5): what the validator cannot know without
//! stored data, run against the tables pinned by the branch head. Every
//! lookup is bounded by the batch, except that an `overwrite` streams the ids
//! of the tables it replaces (keeping only the removed ones, under the
//! removed-id allowance of SPEC §5). Lookups of stored `_id`s (append's,
//! merge counts, external references, an overwrite's kept ids) find rows as
//! merges do, through the key runs (`tables::stored_ids`); those of
//! `@unique`, `@card` and stranded edges are still Lance scans with an `IN`
//! list (`tables::lookup`), which cost what the pages the values fall in
//! cost. A table with no fragment is never scanned. Every conflict
//! a batch row causes names that row's line; `@unique` tuples are compared
//! as Arrow scalars. `ExternalRefs`: the report's `external_refs` read once
//! (other members skipped), type names as type indices, ids in one buffer
//! (no allocation per ref).
//!
//! One file of about 650 lines of code: every check reads the same
//! `Snapshot` and writes the same `Conflict`, and `run` orders them (SPEC
//! §4.5 lists them all); a file per check would repeat that frame.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use arrow_array::RecordBatch;
use lance::Dataset;
use lance::dataset::ProjectionRequest;
use lance::deps::datafusion::scalar::ScalarValue;
use omnigraph_validate_wasm::{DST_COLUMN, ID_COLUMN, Mode, SRC_COLUMN, Schema, TableKind, TypeDef, UniqueMember, echo};
use serde::Deserialize;

use crate::error::{Conflict, EngineError};
use omnigraph_validate_wasm::limits::REMOVED_ID_OVERHEAD_BYTES;
use crate::manifest::{TableCounts, TablePin, table_path};
use crate::storage::GraphRoot;
use crate::keys::{HashedIds, KeyRuns};
use crate::tables;

/// The edge endpoints the validator could not resolve inside the batch
/// (the report's `external_refs`, SPEC §3), read from the report's JSON
/// once and without an allocation per reference: type names become the
/// schema's type indices, ids are kept one after another in one buffer.
/// A batch of edges whose nodes are stored (every edge pass of a split
/// load) lists two per line.
#[derive(Debug, Default)]
pub struct ExternalRefs {
    refs: Vec<ExternalRef>,
    ids: String,
}

/// One external reference; its id is `ExternalRefs::ids[id]`.
#[derive(Debug)]
struct ExternalRef {
    edge: usize,
    end: End,
    node_type: usize,
    id: std::ops::Range<usize>,
    line: u64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum End {
    From,
    To,
}

impl End {
    fn as_str(self) -> &'static str {
        match self {
            End::From => "from",
            End::To => "to",
        }
    }
}

/// A reference as the report writes it; its strings borrow the report's
/// text unless they hold an escape.
#[derive(Deserialize)]
struct WrittenRef<'a> {
    #[serde(borrow)]
    edge: Cow<'a, str>,
    end: End,
    #[serde(rename = "type", borrow)]
    node_type: Cow<'a, str>,
    #[serde(borrow)]
    id: Cow<'a, str>,
    line: u64,
}

impl ExternalRefs {
    /// Reads the `external_refs` of a report the validator wrote for
    /// `schema`, skipping every other member unread. A report that is not
    /// JSON, or names a type `schema` lacks, is an error.
    pub fn from_report(report_json: &str, schema: &Schema) -> Result<ExternalRefs, serde_json::Error> {
        let mut reader = serde_json::Deserializer::from_str(report_json);
        let refs = serde::de::DeserializeSeed::deserialize(ReportSeed(schema), &mut reader)?;
        reader.end()?;
        Ok(refs)
    }

    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    fn id(&self, r: &ExternalRef) -> &str {
        &self.ids[r.id.clone()]
    }

    fn push(&mut self, schema: &Schema, written: WrittenRef<'_>) -> Result<(), String> {
        let type_of = |name: &str, kind: TableKind| {
            schema
                .type_index(name)
                .filter(|&t| schema.types[t].kind == kind)
                .ok_or_else(|| format!("external_refs names {name}, not a {} type of the schema", kind.word()))
        };
        let (edge, node_type) = (type_of(&written.edge, TableKind::Edge)?, type_of(&written.node_type, TableKind::Node)?);
        let start = self.ids.len();
        self.ids.push_str(&written.id);
        self.refs.push(ExternalRef { edge, end: written.end, node_type, id: start..self.ids.len(), line: written.line });
        Ok(())
    }
}

/// The report object: only `external_refs` is read.
struct ReportSeed<'s>(&'s Schema);

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ReportMember {
    ExternalRefs,
    #[serde(other)]
    Other,
}

impl<'de> serde::de::DeserializeSeed<'de> for ReportSeed<'_> {
    type Value = ExternalRefs;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<ExternalRefs, D::Error> {
        reader.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ReportSeed<'_> {
    type Value = ExternalRefs;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a validation report")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut members: M) -> Result<ExternalRefs, M::Error> {
        let mut refs = None;
        while let Some(member) = members.next_key()? {
            match member {
                ReportMember::ExternalRefs if refs.is_none() => refs = Some(members.next_value_seed(RefsSeed(self.0))?),
                ReportMember::ExternalRefs => return Err(serde::de::Error::duplicate_field("external_refs")),
                ReportMember::Other => {
                    members.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        refs.ok_or_else(|| serde::de::Error::missing_field("external_refs"))
    }
}

/// The `external_refs` array, each reference added as it is read.
struct RefsSeed<'s>(&'s Schema);

impl<'de> serde::de::DeserializeSeed<'de> for RefsSeed<'_> {
    type Value = ExternalRefs;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<ExternalRefs, D::Error> {
        reader.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RefsSeed<'_> {
    type Value = ExternalRefs;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the report's external references")
    }

    fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<ExternalRefs, S::Error> {
        let mut refs = ExternalRefs::default();
        while let Some(written) = seq.next_element::<WrittenRef<'de>>()? {
            refs.push(self.0, written).map_err(serde::de::Error::custom)?;
        }
        Ok(refs)
    }
}

/// One touched table of a validated batch: its rows as Arrow (ids not yet
/// generated) and the batch line of each row.
pub struct BatchTable {
    pub t: usize,
    pub rows: RecordBatch,
    pub lines: Vec<u64>,
}

impl BatchTable {
    /// The batch line of each given id (the surviving row of a folded id).
    fn lines_by_id(&self) -> HashMap<&str, u64> {
        let ids = column(&self.rows, ID_COLUMN);
        (0..self.rows.num_rows()).filter_map(|row| tables::string_at(ids, row).map(|id| (id, self.lines[row]))).collect()
    }
}

/// The removed-id allowance of one load (SPEC §5): every id an overwrite
/// removes is charged its UTF-8 length plus [`REMOVED_ID_OVERHEAD_BYTES`];
/// past `limit` the ids are only counted, no longer kept, and the load is
/// refused (`removed_ids_limit`, 413), so memory stays bounded.
pub struct RemovedIdAllowance {
    limit: u64,
    charged: u64,
}

impl RemovedIdAllowance {
    pub fn new(limit: u64) -> Self {
        RemovedIdAllowance { limit, charged: 0 }
    }

    /// Charges one removed id; whether it still fits.
    fn charge(&mut self, id: &str) -> bool {
        self.charged += id.len() as u64 + REMOVED_ID_OVERHEAD_BYTES;
        self.charged <= self.limit
    }

    /// The refusal once the allowance is exceeded.
    pub fn check(&self) -> Result<(), EngineError> {
        if self.charged > self.limit {
            return Err(EngineError::BoundExceeded {
                code: "removed_ids_limit",
                resource: "removed_ids".into(),
                limit: self.limit,
                actual: self.charged,
            });
        }
        Ok(())
    }
}

/// What replaces a table's ids in an overwrite: a batch's, or another table's
/// (the work branch of a multi-batch overwrite, probed by its `_id` index).
pub enum Replacement<'a> {
    Batch(&'a HashSet<&'a str>),
    Table(&'a Dataset),
}

/// An overwrite's effect on one stored table.
pub struct Removal {
    /// Stored ids the replacement keeps (their rows are updated).
    pub kept: u64,
    /// Stored ids it removes.
    pub removed: u64,
    /// The removed ids, if asked for and within the allowance.
    pub gone: Vec<String>,
}

/// Streams the stored ids of `ds` and sorts them into kept and removed,
/// charging every removed id to `allowance`.
pub async fn removal(
    ds: &Dataset,
    by: &Replacement<'_>,
    keep_gone: bool,
    allowance: &mut RemovedIdAllowance,
    key_runs: &KeyRuns,
) -> Result<Removal, EngineError> {
    let mut scan = ds.scan();
    scan.project(&[ID_COLUMN])?;
    let mut stream = scan.try_into_stream().await?;
    let mut out = Removal { kept: 0, removed: 0, gone: Vec::new() };
    while let Some(batch) = futures::TryStreamExt::try_next(&mut stream).await? {
        // A batch's ids are at hand; another table's are looked up, one
        // indexed probe per scanned chunk.
        let found = match by {
            Replacement::Batch(_) => BTreeSet::new(),
            Replacement::Table(table) => {
                let ids: Vec<&str> = tables::strings(batch.column(0)).collect();
                tables::stored_ids(table, &ids, key_runs).await?
            }
        };
        for id in tables::strings(batch.column(0)) {
            let kept = match by {
                Replacement::Batch(ids) => ids.contains(id),
                Replacement::Table(_) => found.contains(id),
            };
            if kept {
                out.kept += 1;
                continue;
            }
            out.removed += 1;
            if allowance.charge(id) && keep_gone {
                out.gone.push(id.to_owned());
            }
        }
    }
    Ok(out)
}

/// The tables of one commit, opened on demand at their pinned versions.
pub struct Snapshot<'g> {
    root: &'g GraphRoot,
    schema: &'g Schema,
    pins: &'g BTreeMap<String, TablePin>,
    /// The engine's lookups of stored `_id`s (src/keys.rs).
    key_runs: &'g KeyRuns,
    open: HashMap<usize, Dataset>,
}

impl<'g> Snapshot<'g> {
    pub fn new(root: &'g GraphRoot, schema: &'g Schema, pins: &'g BTreeMap<String, TablePin>, key_runs: &'g KeyRuns) -> Self {
        Snapshot { root, schema, pins, key_runs, open: HashMap::new() }
    }

    pub async fn table(&mut self, t: usize) -> Result<&Dataset, EngineError> {
        if !self.open.contains_key(&t) {
            let def = &self.schema.types[t];
            let pin = self
                .pins
                .get(&def.name)
                .ok_or_else(|| EngineError::Corrupt(format!("the commit does not pin table {}", def.name)))?;
            let ds = tables::open_pinned(self.root, &table_path(def.kind, &def.name), pin).await?;
            self.open.insert(t, ds);
        }
        Ok(&self.open[&t])
    }
}

pub struct CheckOutcome {
    pub conflicts: Vec<Conflict>,
    pub counts: BTreeMap<String, TableCounts>,
}

/// Batch lines as a message names them: the first few, then how many more.
fn lines_text(lines: &[u64]) -> String {
    const SHOWN: usize = 5;
    let mut text = lines.iter().take(SHOWN).map(u64::to_string).collect::<Vec<_>>().join(", ");
    if lines.len() > SHOWN {
        text.push_str(&format!(" and {} more", lines.len() - SHOWN));
    }
    text
}

fn column<'b>(batch: &'b RecordBatch, name: &str) -> &'b arrow_array::ArrayRef {
    batch.column_by_name(name).expect("stored column")
}

fn ids(batch: &RecordBatch) -> Vec<&str> {
    tables::strings(column(batch, ID_COLUMN)).collect()
}

fn string_scalars<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<ScalarValue> {
    values.into_iter().map(ScalarValue::from).collect()
}

/// Which of `ids` the table holds (an indexed lookup on `_id`).
fn conflict(code: &'static str, def: &TypeDef, id: &str, line: Option<u64>, message: String) -> Conflict {
    Conflict { code, type_name: def.name.clone(), id: id.to_owned(), line, message }
}

/// Runs every stateful check of a batch (`touched`: type index and rows,
/// ids not yet generated) and computes the per-table counts. A `merge` needs
/// no id lookup unless `count_merges` (a load takes its counts from the merge
/// itself; a dry run has none).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    snapshot: &mut Snapshot<'_>,
    mode: Mode,
    touched: &[BatchTable],
    refs: &ExternalRefs,
    count_merges: bool,
    removed_id_limit: u64,
) -> Result<CheckOutcome, EngineError> {
    let (schema, key_runs) = (snapshot.schema, snapshot.key_runs);
    let overwritten: HashSet<usize> =
        if mode == Mode::Overwrite { touched.iter().map(|table| table.t).collect() } else { HashSet::new() };
    let mut conflicts = Vec::new();
    let mut counts = BTreeMap::new();
    let mut removed: Vec<(usize, Vec<String>)> = Vec::new();
    let mut allowance = RemovedIdAllowance::new(removed_id_limit);

    for table in touched {
        let def = &schema.types[table.t];
        let batch = &table.rows;
        // Distinct: the validator folds or refuses a batch's duplicate ids.
        let batch_id_list = ids(batch);
        let batch_ids: HashSet<&str> = batch_id_list.iter().copied().collect();
        let rows = batch.num_rows() as u64;
        let ds = snapshot.table(table.t).await?;
        if mode == Mode::Overwrite {
            let keep_gone = def.kind == TableKind::Node;
            let r = removal(ds, &Replacement::Batch(&batch_ids), keep_gone, &mut allowance, key_runs).await?;
            counts.insert(def.name.clone(), TableCounts { inserted: rows - r.kept, updated: r.kept, removed: r.removed });
            if !r.gone.is_empty() {
                removed.push((table.t, r.gone));
            }
            continue;
        }
        if mode == Mode::Append || count_merges {
            let existing = tables::stored_ids(ds, &batch_id_list, key_runs).await?;
            if mode == Mode::Append {
                let lines = table.lines_by_id();
                for id in &existing {
                    let line = lines.get(id.as_str()).copied();
                    conflicts.push(conflict(
                        "key_conflict",
                        def,
                        id,
                        line,
                        format!(
                            "line {}: {} {} {} already exists (append never replaces a row)",
                            line.unwrap_or_default(),
                            def.kind.word(),
                            def.name,
                            echo(id)
                        ),
                    ));
                }
            }
            let updated = if mode == Mode::Merge { existing.len() as u64 } else { 0 };
            counts.insert(def.name.clone(), TableCounts { inserted: rows - existing.len() as u64, updated, removed: 0 });
        }
        let mut replaced = ReplacedRows { ids: &batch_id_list, rows: None };
        for unique in &def.uniques {
            check_unique(ds, def, unique, table, &batch_ids, &mut replaced, key_runs, &mut conflicts).await?;
        }
        if let Some(max) = def.card_max {
            check_card(ds, def, max, table, &batch_ids, &mut replaced, key_runs, &mut conflicts).await?;
        }
    }
    allowance.check()?;

    check_external_refs(snapshot, &overwritten, refs, &mut conflicts).await?;
    for (node_type, gone) in &removed {
        check_stranded_edges(snapshot, &overwritten, *node_type, gone, &mut conflicts).await?;
    }
    sort_conflicts(&mut conflicts);
    Ok(CheckOutcome { conflicts, counts })
}

/// Conflicts in a stable order: by line (batch rows first, in line order),
/// then code, type and id.
pub fn sort_conflicts(conflicts: &mut [Conflict]) {
    conflicts.sort_by(|a, b| {
        (a.line.is_none(), a.line, a.code, &a.type_name, &a.id).cmp(&(b.line.is_none(), b.line, b.code, &b.type_name, &b.id))
    });
}

/// The stored rows a batch replaces (its ids' live rows), looked up once
/// per table and only if a check's key runs answer: those rows do not
/// count against the batch's `@unique` and `@card`.
struct ReplacedRows<'b> {
    ids: &'b [&'b str],
    rows: Option<roaring::RoaringTreemap>,
}

impl ReplacedRows<'_> {
    async fn of(&mut self, ds: &Dataset, key_runs: &KeyRuns) -> Result<&roaring::RoaringTreemap, EngineError> {
        if self.rows.is_none() {
            self.rows = Some(tables::live_id_addresses(ds, self.ids, key_runs).await?);
        }
        Ok(self.rows.as_ref().expect("just looked up"))
    }
}

/// A row's tuple as Arrow scalars (batch and stored rows share the stored
/// schema, so equal values are equal scalars); `None` if a member is null
/// (a null member exempts the row, SPEC §1.4).
fn tuple(batch: &RecordBatch, columns: &[&str], row: usize) -> Result<Option<Vec<ScalarValue>>, EngineError> {
    let mut values = Vec::with_capacity(columns.len());
    for name in columns {
        let value = ScalarValue::try_from_array(column(batch, name), row).map_err(|e| EngineError::Storage(e.to_string()))?;
        if value.is_null() {
            return Ok(None);
        }
        values.push(value);
    }
    Ok(Some(values))
}

/// `@unique` against committed rows of other ids (rows the batch replaces
/// do not count): the stored rows with the batch's tuples, found through
/// the tuple's key runs (only matches are read back), or, where a segment
/// has no run yet, through Lance's index on the first member.
#[allow(clippy::too_many_arguments)]
async fn check_unique(
    ds: &Dataset,
    def: &TypeDef,
    unique: &[UniqueMember],
    table: &BatchTable,
    batch_ids: &HashSet<&str>,
    replaced: &mut ReplacedRows<'_>,
    key_runs: &KeyRuns,
    conflicts: &mut Vec<Conflict>,
) -> Result<(), EngineError> {
    let batch = &table.rows;
    let columns: Vec<&str> = unique.iter().map(|m| tables::unique_member_column(def, *m)).collect();
    let ids = column(batch, ID_COLUMN);
    let mut wanted: HashMap<Vec<ScalarValue>, (Option<String>, u64)> = HashMap::new();
    let mut probe = Vec::new();
    for row in 0..batch.num_rows() {
        if let Some(key) = tuple(batch, &columns, row)? {
            probe.push(key[0].clone());
            wanted.insert(key, (tables::string_at(ids, row).map(str::to_owned), table.lines[row]));
        }
    }
    if probe.is_empty() {
        return Ok(());
    }
    let mut project = vec![ID_COLUMN];
    project.extend(columns.iter().copied().filter(|c| *c != ID_COLUMN));
    let key = tables::unique_key(def, unique);
    let keys = key.bytes(batch)?;
    let hashed = HashedIds::of_bytes((0..keys.len()).filter_map(|row| keys.get(row)));
    let found = match tables::live_rows_keyed(ds, &key, &hashed, key_runs).await? {
        Some(matches) => {
            let replaced = replaced.of(ds, key_runs).await?;
            let mut addresses: Vec<u64> = matches.into_iter().map(|(_, address)| address).filter(|a| !replaced.contains(*a)).collect();
            addresses.sort_unstable();
            addresses.dedup();
            if addresses.is_empty() {
                return Ok(());
            }
            vec![ds.take_rows(&addresses, ProjectionRequest::from_columns(project.iter().copied(), ds.schema())).await?]
        }
        None => tables::lookup(ds, columns[0], probe, &project).await?,
    };
    for found in found {
        let stored_ids = column(&found, ID_COLUMN);
        for row in 0..found.num_rows() {
            let stored_id = tables::string_at(stored_ids, row).unwrap_or_default();
            if batch_ids.contains(stored_id) {
                continue;
            }
            let Some(key) = tuple(&found, &columns, row)? else { continue };
            if let Some((batch_id, line)) = wanted.get(&key) {
                let shown = batch_id.clone().unwrap_or_else(|| "(new row)".into());
                conflicts.push(conflict(
                    "unique_violation",
                    def,
                    &shown,
                    Some(*line),
                    format!(
                        "line {line}: {} {} {}: @unique({}) value {} is already used by {}",
                        def.kind.word(),
                        def.name,
                        echo(&shown),
                        columns.join(", "),
                        echo(&key.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
                        echo(stored_id)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `@card` maximum over committed plus batch edges, per source the batch
/// touches: the stored edges of its sources counted in the `_src` key runs
/// (nothing read back), or, where a segment has no run yet, read through
/// Lance's `_src` index.
#[allow(clippy::too_many_arguments)]
async fn check_card(
    ds: &Dataset,
    def: &TypeDef,
    max: u64,
    table: &BatchTable,
    batch_ids: &HashSet<&str>,
    replaced: &mut ReplacedRows<'_>,
    key_runs: &KeyRuns,
    conflicts: &mut Vec<Conflict>,
) -> Result<(), EngineError> {
    let mut per_source: BTreeMap<&str, u64> = BTreeMap::new();
    let mut source_lines: HashMap<&str, Vec<u64>> = HashMap::new();
    for (src, line) in tables::strings(column(&table.rows, SRC_COLUMN)).zip(&table.lines) {
        *per_source.entry(src).or_default() += 1;
        source_lines.entry(src).or_default().push(*line);
    }
    let sources: Vec<&str> = per_source.keys().copied().collect();
    let hashed = HashedIds::of(&sources);
    match tables::live_rows_keyed(ds, &tables::card_key(), &hashed, key_runs).await? {
        Some(matches) => {
            let replaced = replaced.of(ds, key_runs).await?;
            for (k, address) in matches {
                let src = std::str::from_utf8(hashed.sorted[k].1).expect("a source is a string");
                if !replaced.contains(address)
                    && let Some(n) = per_source.get_mut(src)
                {
                    *n += 1;
                }
            }
        }
        None => {
            let probe = string_scalars(sources.iter().copied());
            for found in tables::lookup(ds, SRC_COLUMN, probe, &[ID_COLUMN, SRC_COLUMN]).await? {
                for (id, src) in tables::strings(found.column(0)).zip(tables::strings(found.column(1))) {
                    if !batch_ids.contains(id)
                        && let Some(n) = per_source.get_mut(src)
                    {
                        *n += 1;
                    }
                }
            }
        }
    }
    for (src, n) in per_source {
        if n > max {
            let lines = &source_lines[src];
            conflicts.push(conflict(
                "card_violation",
                def,
                src,
                lines.first().copied(),
                format!(
                    "line {}: edge {}: source {} would have {n} edges, at most {max} allowed (this batch's edges from it: lines {})",
                    lines[0],
                    def.name,
                    echo(src),
                    lines_text(lines)
                ),
            ));
        }
    }
    Ok(())
}

/// Every external reference must name a stored node of its type that this
/// load does not remove.
async fn check_external_refs(
    snapshot: &mut Snapshot<'_>,
    overwritten: &HashSet<usize>,
    refs: &ExternalRefs,
    conflicts: &mut Vec<Conflict>,
) -> Result<(), EngineError> {
    let schema = snapshot.schema;
    let mut by_type: BTreeMap<usize, Vec<&ExternalRef>> = BTreeMap::new();
    for r in &refs.refs {
        by_type.entry(r.node_type).or_default().push(r);
    }
    for (t, of_type) in by_type {
        let stored = if overwritten.contains(&t) {
            BTreeSet::new()
        } else {
            let wanted: BTreeSet<&str> = of_type.iter().map(|r| refs.id(r)).collect();
            let wanted: Vec<&str> = wanted.into_iter().collect();
            let key_runs = snapshot.key_runs;
            tables::stored_ids(snapshot.table(t).await?, &wanted, key_runs).await?
        };
        for r in of_type.into_iter().filter(|r| !stored.contains(refs.id(r))) {
            let (edge, id) = (&schema.types[r.edge].name, refs.id(r));
            let why = if overwritten.contains(&t) { "this overwrite replaces every" } else { "the graph has no" };
            conflicts.push(Conflict {
                code: "dangling_endpoint",
                type_name: edge.clone(),
                id: id.to_owned(),
                line: Some(r.line),
                message: format!(
                    "line {}: edge {edge} '{}' endpoint {}: {why} {} with that id",
                    r.line,
                    r.end.as_str(),
                    echo(id),
                    schema.types[t].name
                ),
            });
        }
    }
    Ok(())
}

/// An overwrite that removes nodes must not strand committed edges of types
/// the batch does not replace.
pub async fn check_stranded_edges(
    snapshot: &mut Snapshot<'_>,
    overwritten: &HashSet<usize>,
    node_type: usize,
    gone: &[String],
    conflicts: &mut Vec<Conflict>,
) -> Result<(), EngineError> {
    let schema = snapshot.schema;
    let node = &schema.types[node_type];
    for (e, def) in schema.types.iter().enumerate() {
        if def.kind != TableKind::Edge || overwritten.contains(&e) {
            continue;
        }
        for (end, column_name, points_here) in
            [("from", SRC_COLUMN, def.from == Some(node_type)), ("to", DST_COLUMN, def.to == Some(node_type))]
        {
            if !points_here {
                continue;
            }
            let ds = snapshot.table(e).await?;
            let found = tables::lookup(ds, column_name, string_scalars(gone.iter().map(String::as_str)), &[ID_COLUMN, column_name]).await?;
            for b in &found {
                for (id, node_id) in tables::strings(b.column(0)).zip(tables::strings(b.column(1))) {
                    conflicts.push(conflict(
                        "dangling_endpoint",
                        def,
                        id,
                        None,
                        format!(
                            "overwrite removes {} {}, but the stored edge {} {} still points to it ({end})",
                            node.name,
                            echo(node_id),
                            def.name,
                            echo(id)
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use omnigraph_validate_wasm::{Options, validate};

    const SCHEMA: &str = "node Person { name: String @key }\nnode Company { name: String @key }\n\
        edge WorksAt: Person -> Company\n";

    fn schema() -> Schema {
        Schema::compile(SCHEMA).unwrap()
    }

    /// The refs as (edge, end, node type, id, line), read back through the schema.
    fn read(refs: &ExternalRefs, schema: &Schema) -> Vec<(String, String, String, String, u64)> {
        let name = |t: usize| schema.types[t].name.clone();
        let of = |r: &ExternalRef| (name(r.edge), r.end.as_str().to_owned(), name(r.node_type), refs.id(r).to_owned(), r.line);
        refs.refs.iter().map(of).collect()
    }

    /// What serde_json reads from the same report's `external_refs`.
    fn written(report: &str) -> Vec<(String, String, String, String, u64)> {
        let report: serde_json::Value = serde_json::from_str(report).unwrap();
        let text = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap().to_owned();
        let refs = report["external_refs"].as_array().unwrap();
        refs.iter().map(|r| (text(r, "edge"), text(r, "end"), text(r, "type"), text(r, "id"), r["line"].as_u64().unwrap())).collect()
    }

    #[test]
    fn reads_the_refs_of_a_validators_report_ids_with_escapes_included() {
        let schema = schema();
        // Ids the report must escape (quote, backslash, control, non-ASCII
        // written as \u), beside plain ones; two refs per edge line.
        let ids = ["ada", "b\\\"q", "c\\\\d", "e\\u0001f", "\\u00e9l\\u00e8ne", "plain"];
        let batch: String = ids
            .iter()
            .enumerate()
            .map(|(i, id)| format!("{{\"edge\":\"WorksAt\",\"from\":\"{id}\",\"to\":\"co{i}\",\"data\":{{}}}}\n"))
            .collect();
        let report = validate(&schema, &Options::default(), batch.as_bytes()).to_json();
        assert!(report.contains("\"ok\":true"), "{report}");
        let refs = ExternalRefs::from_report(&report, &schema).unwrap();
        assert_eq!(refs.len(), 2 * ids.len());
        assert_eq!(read(&refs, &schema), written(&report));
        assert!(read(&refs, &schema).iter().any(|r| r.3 == "b\"q") && read(&refs, &schema).iter().any(|r| r.3 == "\u{e9}l\u{e8}ne"));
    }

    #[test]
    fn a_report_without_refs_reads_as_none() {
        let schema = schema();
        let report = validate(&schema, &Options::default(), b"{\"type\":\"Person\",\"data\":{\"name\":\"ada\"}}\n").to_json();
        assert!(ExternalRefs::from_report(&report, &schema).unwrap().is_empty());
    }

    #[test]
    fn a_report_the_schema_does_not_explain_is_refused() {
        let schema = schema();
        let report = |edge: &str, node: &str| {
            format!("{{\"ok\":true,\"external_refs\":[{{\"edge\":\"{edge}\",\"end\":\"from\",\"type\":\"{node}\",\"id\":\"a\",\"line\":1}}]}}")
        };
        assert!(ExternalRefs::from_report(&report("WorksAt", "Person"), &schema).is_ok());
        for (edge, node) in [("Knows", "Person"), ("WorksAt", "Nobody"), ("Person", "Person"), ("WorksAt", "WorksAt")] {
            let e = ExternalRefs::from_report(&report(edge, node), &schema).unwrap_err();
            assert!(e.to_string().contains("not a"), "{edge} {node}: {e}");
        }
        let bad_end = "{\"external_refs\":[{\"edge\":\"WorksAt\",\"end\":\"middle\",\"type\":\"Person\",\"id\":\"a\",\"line\":1}]}";
        for bad in ["{\"ok\":true}", "[]", "{\"external_refs\":[]} x", bad_end, "{\"external_refs\":[],\"external_refs\":[]}"] {
            assert!(ExternalRefs::from_report(bad, &schema).is_err(), "{bad}");
        }
    }
}
