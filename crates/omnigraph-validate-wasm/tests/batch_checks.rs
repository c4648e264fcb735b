//! The batch checks (SPEC §2.5) over batches of up to 1,000 records, in
//! every mode, against a model that applies the rules record by record:
//! duplicate ids (refused, or folded in merge mode), then `@unique`, `@card`
//! and endpoints over the rows that survive. The validator checks rows in
//! groups of 32 (ids, tuples and sources inserted a group at a time), so
//! duplicates, clashes, `@card` sources and endpoints here fall inside one
//! group, across groups and in the last partial one.

use std::collections::{HashMap, HashSet};

use omnigraph_validate_wasm::{Mode, Options, Report, Schema, Scratch, validate};

const SCHEMA: &str = "node Person { name: String @key  email: String? @unique }
edge Knows: Person -> Person @card(0..3)";

/// One record of the generated batch.
enum Record {
    Person {
        name: String,
        email: Option<String>,
    },
    Knows {
        id: String,
        from: String,
        to: String,
    },
}

fn batch(records: usize) -> Vec<Record> {
    (0..records)
        .map(|k| {
            if k % 3 == 2 {
                let j = k / 3;
                // Most endpoints are people of the batch; some are not.
                let to = if j % 17 == 5 {
                    format!("q{j}")
                } else {
                    format!("p{}", j % 13)
                };
                Record::Knows {
                    id: format!("k{}", j % 130),
                    from: format!("p{}", j % 11),
                    to,
                }
            } else {
                let i = k - k / 3;
                // Duplicates far apart (150 and 97 rows), and near ones,
                // in the same group of rows.
                let email_of = if i % 8 == 3 { i - 1 } else { i };
                let email = (i % 5 != 0).then(|| format!("e{}", email_of * 7 % 97));
                let name_of = if i % 10 == 9 { i - 2 } else { i };
                Record::Person {
                    name: format!("p{}", name_of % 150),
                    email,
                }
            }
        })
        .collect()
}

fn ndjson(records: &[Record]) -> Vec<u8> {
    let mut out = String::new();
    for record in records {
        match record {
            Record::Person {
                name,
                email: Some(email),
            } => {
                out += &format!(
                    "{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\",\"email\":\"{email}\"}}}}\n"
                )
            }
            Record::Person { name, email: None } => {
                out += &format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\"}}}}\n")
            }
            Record::Knows { id, from, to } => {
                out += &format!(
                    "{{\"edge\":\"Knows\",\"id\":\"{id}\",\"from\":\"{from}\",\"to\":\"{to}\"}}\n"
                )
            }
        }
    }
    out.into_bytes()
}

/// What the rules give: errors as (line, code), rows per table, the folded
/// count and the endpoints left to the host as (line, end, id).
struct Expected {
    errors: Vec<(u64, &'static str)>,
    rows: [u64; 2],
    folded: u64,
    external: Vec<(u64, &'static str, String)>,
}

fn model(records: &[Record], mode: Mode) -> Expected {
    let line = |k: usize| k as u64 + 1;
    let id = |r: &Record| match r {
        Record::Person { name, .. } => (0, name.clone()),
        Record::Knows { id, .. } => (1, id.clone()),
    };
    let mut errors = Vec::new();
    // Which records survive: the last of an id in merge mode, else the first
    // (a later one is refused).
    let mut survives = vec![false; records.len()];
    let mut holder: HashMap<(usize, String), usize> = HashMap::new();
    let mut folded = 0;
    for (k, record) in records.iter().enumerate() {
        match holder.get(&id(record)).copied() {
            None => {
                holder.insert(id(record), k);
                survives[k] = true;
            }
            Some(earlier) if mode == Mode::Merge => {
                survives[earlier] = false;
                survives[k] = true;
                holder.insert(id(record), k);
                folded += 1;
            }
            Some(_) => errors.push((line(k), "duplicate_id")),
        }
    }
    let people: HashSet<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::Person { name, .. } => Some(name.as_str()),
            Record::Knows { .. } => None,
        })
        .collect();
    let (mut emails, mut sources) = (HashSet::new(), HashMap::new());
    let (mut rows, mut external) = ([0; 2], Vec::new());
    for (k, record) in records.iter().enumerate().filter(|&(k, _)| survives[k]) {
        match record {
            Record::Person { email, .. } => {
                rows[0] += 1;
                if let Some(email) = email
                    && !emails.insert(email.as_str())
                {
                    errors.push((line(k), "unique_violation"));
                }
            }
            Record::Knows { from, to, .. } => {
                rows[1] += 1;
                let n = sources.entry(from.as_str()).or_insert(0);
                *n += 1;
                if *n == 4 {
                    errors.push((line(k), "card_violation"));
                }
                for (end, id) in [("from", from), ("to", to)] {
                    if people.contains(id.as_str()) {
                        continue;
                    }
                    if mode == Mode::Overwrite {
                        errors.push((line(k), "dangling_endpoint"));
                    } else {
                        external.push((line(k), end, id.clone()));
                    }
                }
            }
        }
    }
    errors.sort();
    Expected {
        errors,
        rows,
        folded,
        external,
    }
}

fn options(mode: Mode) -> Options {
    Options {
        mode,
        max_errors: 100_000,
        ..Options::default()
    }
}

/// Asserts that `report` is what the model gives for `records` in `mode`.
fn assert_model(report: &Report, records: &[Record], mode: Mode) {
    let expected = model(records, mode);
    let what = format!("{} records, {mode:?}", records.len());
    let mut errors: Vec<(u64, &str)> = report
        .errors
        .iter()
        .map(|e| (e.line, e.code.as_str()))
        .collect();
    errors.sort();
    assert_eq!(errors, expected.errors, "{what}");
    assert_eq!(report.error_count, expected.errors.len() as u64, "{what}");
    assert_eq!(report.stats.folded, expected.folded, "{what}");
    let rows: Vec<u64> = report.stats.tables.iter().map(|t| t.rows).collect();
    assert_eq!(rows, expected.rows, "{what}");
    let external: Vec<(u64, &str, String)> = report
        .external_refs
        .iter()
        .map(|r| {
            (
                r.line,
                if r.end == omnigraph_validate_wasm::End::From {
                    "from"
                } else {
                    "to"
                },
                r.id.clone(),
            )
        })
        .collect();
    assert_eq!(external, expected.external, "{what}");
}

#[test]
fn batch_checks_over_many_groups_give_the_record_by_record_answer() {
    let schema = Schema::compile(SCHEMA).unwrap();
    for records in [10, 31, 32, 33, 97, 1000] {
        let records = batch(records);
        let input = ndjson(&records);
        for mode in [Mode::Merge, Mode::Append, Mode::Overwrite] {
            let report = validate(&schema, &options(mode), &input);
            assert_model(&report, &records, mode);
        }
    }
    // The model is not vacuous: the largest batch has every kind of finding.
    let records = batch(1000);
    let (append, merge) = (model(&records, Mode::Append), model(&records, Mode::Merge));
    for code in ["duplicate_id", "unique_violation", "card_violation"] {
        assert!(
            append.errors.iter().any(|e| e.1 == code),
            "{code} in append mode"
        );
    }
    assert!(merge.folded > 0 && !merge.external.is_empty());
    assert!(
        model(&records, Mode::Overwrite)
            .errors
            .iter()
            .any(|e| e.1 == "dangling_endpoint")
    );
}

/// One scratch through batches large and small, in every mode: each batch
/// gets the record-by-record answer, whatever the maps held before.
#[test]
fn a_scratch_kept_between_batches_gives_each_its_own_answer() {
    let schema = Schema::compile(SCHEMA).unwrap();
    let mut scratch = Scratch::default();
    for records in [1000, 10, 1000, 1000, 33, 31, 97, 10, 10] {
        let records = batch(records);
        let input = ndjson(&records);
        for mode in [Mode::Append, Mode::Merge, Mode::Overwrite] {
            let report = scratch.validate(&schema, &options(mode), &input);
            assert_model(&report, &records, mode);
        }
    }
}
