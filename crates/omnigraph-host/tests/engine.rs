//! The commit engine against real Lance datasets in temp dirs: modes,
//! stateful checks, branches, time travel, export round trips.

mod common;

use common::*;
use omnigraph_host::{EngineError, LoadRequest};
use omnigraph_host::manifest::CommitKind;
use omnigraph_validate_wasm::Mode;

fn conflicts_of(result: Result<omnigraph_host::Receipt, EngineError>) -> Vec<(String, String, String)> {
    match result {
        Err(EngineError::Rejected { conflicts, .. }) => {
            conflicts.into_iter().map(|c| (c.code.to_owned(), c.type_name, c.id)).collect()
        }
        other => panic!("expected a stateful rejection, got {other:?}"),
    }
}

fn triple(code: &str, ty: &str, id: &str) -> (String, String, String) {
    (code.into(), ty.into(), id.into())
}

#[tokio::test]
async fn merge_inserts_then_replaces_whole_rows_with_counts() {
    let dir = place().await;
    let g = init(&dir).await;
    let first = format!(
        "{}{}{}",
        "{\"type\":\"Person\",\"data\":{\"name\":\"Ada\",\"age\":36,\"email\":\"ada@example.com\"}}\n",
        person("Bob", 40),
        knows("k1", "Ada", "Bob")
    );
    let r = load(&g, "main", Mode::Merge, &first).await.unwrap();
    let commit = r.commit.expect("a commit");
    assert_eq!((commit.seq, commit.kind, commit.actor.as_str()), (1, CommitKind::Load, "tester"));
    assert_eq!(commit.counts["Person"], omnigraph_host::manifest::TableCounts { inserted: 2, updated: 0, removed: 0 });
    assert_eq!(commit.counts["Knows"].inserted, 1);
    assert!(!commit.counts.contains_key("Company"), "untouched tables have no counts");

    // Merge replaces the whole row: Ada's email is gone, her age changed.
    let r = load(&g, "main", Mode::Merge, &format!("{}{}", person("Ada", 37), person("Cy", 5))).await.unwrap();
    let counts = &r.commit.unwrap().counts["Person"];
    assert_eq!((counts.inserted, counts.updated, counts.removed), (1, 1, 0));
    let state = export(&g, "main", None).await;
    assert!(state.contains("{\"type\":\"Person\",\"id\":\"Ada\",\"data\":{\"name\":\"Ada\",\"age\":37}}"), "{state}");
    assert_eq!(counts_of(&g).await, [("Knows", 1), ("Person", 3)]);
    assert_heads_published(&g).await;
}

/// Fragments of the graph's Person table at main's head: (physical rows,
/// rows deleted).
async fn person_fragments(g: &omnigraph_host::Graph) -> Vec<(usize, usize)> {
    let head = g.branches().await.unwrap().into_iter().find(|b| b.branch == "main").unwrap();
    let path = omnigraph_host::manifest::table_path(omnigraph_validate_wasm::TableKind::Node, "Person");
    let ds = omnigraph_host::tables::open_pinned(g.root(), &path, &head.tables["Person"]).await.unwrap();
    let mut out = Vec::new();
    for f in ds.get_fragments() {
        let deleted = f.get_deletion_vector().await.unwrap().map_or(0, |d| d.len());
        out.push((f.metadata().physical_rows.unwrap(), deleted));
    }
    out
}

/// A merge takes a deletion vector from memory only if this process wrote
/// the very deletion file the version names: after another host extended
/// it, the store's is read, and the rows that host replaced stay deleted.
#[tokio::test]
async fn a_merge_reads_the_deletions_another_host_wrote() {
    let dir = place().await;
    let (first, second) = (init(&dir).await, reopen(&dir).await);
    let names = ["Ada", "Bob", "Cy", "Di"];
    load(&first, "main", Mode::Merge, &names.iter().map(|n| person(n, 1)).collect::<String>()).await.unwrap();
    load(&first, "main", Mode::Merge, &person("Ada", 2)).await.unwrap();
    load(&second, "main", Mode::Merge, &person("Bob", 2)).await.unwrap();
    load(&first, "main", Mode::Merge, &person("Cy", 2)).await.unwrap();
    assert_eq!(person_fragments(&first).await[0], (4, 3), "one vector holds both hosts' deletions");
    let state = export(&first, "main", None).await;
    for name in names {
        let age = if name == "Di" { 1 } else { 2 };
        let row = format!("{{\"type\":\"Person\",\"id\":\"{name}\",\"data\":{{\"name\":\"{name}\",\"age\":{age}}}}}");
        assert_eq!(state.matches(&format!("\"id\":\"{name}\"")).count(), 1, "{state}");
        assert!(state.contains(&row), "{state}");
    }
}

#[tokio::test]
async fn a_merge_deletes_the_rows_it_replaces_and_drops_fragments_it_empties() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &format!("{}{}{}", person("Ada", 1), person("Bob", 2), person("Cy", 3))).await.unwrap();
    assert_eq!(person_fragments(&g).await, [(3, 0)]);
    // Two of the three replaced: their old rows are deleted in place.
    let r = load(&g, "main", Mode::Merge, &format!("{}{}{}", person("Ada", 10), person("Bob", 20), person("Di", 4))).await.unwrap();
    let person_counts = &r.commit.unwrap().counts["Person"];
    assert_eq!((person_counts.inserted, person_counts.updated), (1, 2));
    assert_eq!(person_fragments(&g).await, [(3, 2), (3, 0)]);
    // The last live row of the first fragment replaced: the fragment goes.
    load(&g, "main", Mode::Merge, &person("Cy", 30)).await.unwrap();
    assert_eq!(person_fragments(&g).await, [(3, 0), (1, 0)]);
    let state = export(&g, "main", None).await;
    for (name, age) in [("Ada", 10), ("Bob", 20), ("Cy", 30), ("Di", 4)] {
        assert!(state.contains(&format!("\"data\":{{\"name\":\"{name}\",\"age\":{age}}}")), "{name}: {state}");
    }
    assert_eq!(counts(&g, "main").await["Person"], 4);
    // The first commit still reads as it was.
    let first = export(&g, "main", Some(1)).await;
    assert!(first.contains("\"name\":\"Cy\",\"age\":3}"), "{first}");
    assert_heads_published(&g).await;
}

#[tokio::test]
async fn a_merge_finds_its_rows_when_the_index_covers_no_fragment_yet() {
    let dir = place().await;
    let g = init(&dir).await;
    // Maintenance indexes the empty tables: those indexes cover no fragment.
    g.optimize(usize::MAX).await.unwrap();
    load(&g, "main", Mode::Merge, &person("Ada", 1)).await.unwrap();
    let r = load(&g, "main", Mode::Merge, &person("Ada", 2)).await.unwrap();
    assert_eq!(r.commit.unwrap().counts["Person"].updated, 1);
    assert_eq!(counts(&g, "main").await["Person"], 1);
    // Once the index covers the first load's fragment, it finds Ada there.
    g.optimize(usize::MAX).await.unwrap();
    let r = load(&g, "main", Mode::Merge, &person("Ada", 3)).await.unwrap();
    assert_eq!(r.commit.unwrap().counts["Person"].updated, 1);
    assert_eq!(counts(&g, "main").await["Person"], 1);
    assert!(export(&g, "main", None).await.contains("\"age\":3"));
}

/// A merge whose rows are found by key runs (src/keys.rs) replaces each
/// stored row once: in the fragment a run answers for, and in one no run
/// covers yet (scanned).
#[tokio::test]
async fn merges_answered_by_key_runs_replace_each_stored_row_once() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &format!("{}{}", person("Ada", 1), person("Bob", 2))).await.unwrap();
    g.optimize(usize::MAX).await.unwrap();
    g.warm_key_runs().await.unwrap();
    assert_eq!(g.key_run_rows(), 2, "the indexed fragment's run");
    for age in [10, 11] {
        let r = load(&g, "main", Mode::Merge, &format!("{}{}", person("Ada", age), person(&format!("New{age}"), 1))).await.unwrap();
        let person_counts = &r.commit.unwrap().counts["Person"];
        assert_eq!((person_counts.inserted, person_counts.updated), (1, 1), "age {age}");
    }
    assert_eq!(counts(&g, "main").await["Person"], 4);
    let state = export(&g, "main", None).await;
    assert!(state.contains("\"name\":\"Ada\",\"age\":11}"), "{state}");
    assert_heads_published(&g).await;
}

/// An overwrite leaves its table with no index: the next loads find its
/// rows in the key runs of what it wrote (every key's: `_id`, and the
/// `@unique` email), not by reading the table, until maintenance indexes it.
#[tokio::test]
async fn an_overwrites_rows_are_found_through_the_runs_of_what_it_wrote() {
    let dir = place().await;
    let g = init(&dir).await;
    let with_email = |name: &str| format!("{{\"type\":\"Person\",\"data\":{{\"name\":\"{name}\",\"email\":\"{name}@x.org\"}}}}\n");
    let people: String = ["P1", "P2", "P3", "P4", "P5"].iter().map(|n| with_email(n)).collect();
    load(&g, "main", Mode::Overwrite, &people).await.unwrap();
    assert_eq!(g.key_run_rows(), 10, "five ids and five emails");
    let r = load(&g, "main", Mode::Merge, &format!("{}{}", with_email("P3"), with_email("P6"))).await.unwrap();
    let person_counts = &r.commit.unwrap().counts["Person"];
    assert_eq!((person_counts.inserted, person_counts.updated), (1, 1));
    let steals = "{\"type\":\"Person\",\"data\":{\"name\":\"P7\",\"email\":\"P2@x.org\"}}\n";
    assert_eq!(conflicts_of(load(&g, "main", Mode::Merge, steals).await), [triple("unique_violation", "Person", "P7")]);
}

/// `EngineConfig::key_run_rows` bounds a graph's key runs; what does not
/// fit is answered by reading fragments and by Lance's indexes, alike.
#[tokio::test]
async fn key_runs_stay_within_the_rows_configured() {
    let dir = place().await;
    let config = omnigraph_host::EngineConfig { key_run_rows: 3, ..config() };
    let g = omnigraph_host::Graph::init(dir.root(), SCHEMA, validator(), config).await.unwrap();
    let five: String = (1..=5).map(|i| person(&format!("P{i}"), i)).collect();
    load(&g, "main", Mode::Merge, &five).await.unwrap();
    g.optimize(usize::MAX).await.unwrap();
    g.warm_key_runs().await.unwrap();
    assert!(g.key_run_rows() <= 3, "{} rows", g.key_run_rows());
    let r = load(&g, "main", Mode::Merge, &format!("{}{}", person("P2", 9), person("P6", 1))).await.unwrap();
    let person_counts = &r.commit.unwrap().counts["Person"];
    assert_eq!((person_counts.inserted, person_counts.updated), (1, 1));
}

async fn counts_of(g: &omnigraph_host::Graph) -> Vec<(&'static str, u64)> {
    let c = counts(g, "main").await;
    ["Knows", "Person"].iter().map(|t| (*t, c[*t])).collect()
}

#[tokio::test]
async fn append_reports_every_conflicting_id_and_writes_nothing() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &format!("{}{}{}", person("A", 1), person("B", 2), person("C", 3))).await.unwrap();
    let before = export(&g, "main", None).await;
    let head = g.head("main").await.unwrap().unwrap();
    let result = load(&g, "main", Mode::Append, &format!("{}{}{}", person("A", 9), person("D", 4), person("C", 9))).await;
    assert_eq!(conflicts_of(result), [triple("key_conflict", "Person", "A"), triple("key_conflict", "Person", "C")]);
    assert_eq!(export(&g, "main", None).await, before);
    assert_eq!(g.head("main").await.unwrap().unwrap(), head, "no commit");
    // Without conflicts append inserts.
    let r = load(&g, "main", Mode::Append, &person("D", 4)).await.unwrap();
    assert_eq!(r.commit.unwrap().counts["Person"].inserted, 1);
    assert_heads_published(&g).await;
}

#[tokio::test]
async fn overwrite_replaces_named_types_only_and_refuses_stranding_edges() {
    let dir = place().await;
    let g = init(&dir).await;
    let company = "{\"type\":\"Company\",\"data\":{\"name\":\"Acme\"}}\n";
    load(&g, "main", Mode::Merge, &format!("{}{}{}{}", person("A", 1), person("B", 2), company, knows("k1", "A", "B")))
        .await
        .unwrap();
    // Removing B would strand k1.
    let result = load(&g, "main", Mode::Overwrite, &format!("{}{}", person("A", 1), person("Z", 3))).await;
    assert_eq!(conflicts_of(result), [triple("dangling_endpoint", "Knows", "k1")]);
    // Overwriting people and their edges together is fine; companies stay.
    let r = load(&g, "main", Mode::Overwrite, &format!("{}{}{}", person("A", 10), person("Z", 3), knows("k2", "A", "Z")))
        .await
        .unwrap();
    let c = r.commit.unwrap().counts;
    assert_eq!((c["Person"].inserted, c["Person"].updated, c["Person"].removed), (1, 1, 1));
    assert_eq!((c["Knows"].inserted, c["Knows"].removed), (1, 1));
    let state = export(&g, "main", None).await;
    assert!(state.contains("\"id\":\"Acme\""), "companies are untouched: {state}");
    assert!(!state.contains("\"id\":\"B\"") && !state.contains("\"k1\""), "{state}");
    assert_heads_published(&g).await;
}

#[tokio::test]
async fn external_references_unique_and_card_are_checked_against_the_graph() {
    let dir = place().await;
    let g = init(&dir).await;
    let ada = "{\"type\":\"Person\",\"data\":{\"name\":\"Ada\",\"email\":\"a@x.org\"}}\n";
    let acme = "{\"type\":\"Company\",\"data\":{\"name\":\"Acme\"}}\n";
    let initech = "{\"type\":\"Company\",\"data\":{\"name\":\"Initech\"}}\n";
    load(&g, "main", Mode::Merge, &format!("{ada}{}{acme}{initech}", person("Bob", 2))).await.unwrap();

    // An edge to a stored node resolves; to a missing one it dangles (with its line).
    load(&g, "main", Mode::Merge, &knows("k1", "Ada", "Bob")).await.unwrap();
    match load(&g, "main", Mode::Merge, &format!("{}{}", knows("k2", "Ada", "Bob"), knows("k3", "Ada", "Nobody"))).await {
        Err(EngineError::Rejected { conflicts, .. }) => {
            assert_eq!(conflicts.len(), 1);
            assert_eq!((conflicts[0].code, conflicts[0].id.as_str(), conflicts[0].line), ("dangling_endpoint", "Nobody", Some(2)));
        }
        other => panic!("{other:?}"),
    }
    let works = |id: &str, to: &str| format!("{{\"edge\":\"WorksAt\",\"id\":\"{id}\",\"from\":\"Ada\",\"to\":\"{to}\"}}\n");
    load(&g, "main", Mode::Merge, &works("w1", "Acme")).await.unwrap();
    let bob_steals = "{\"type\":\"Person\",\"data\":{\"name\":\"Bob\",\"email\":\"a@x.org\"}}\n";
    // Each way a lookup is answered: the key runs this process kept of the
    // fragments it wrote; a fresh process's reads of the fragments; Lance's
    // indexes once maintenance made them (no runs yet); the runs of every
    // key maintenance builds.
    let mut g = g;
    for state in ["written", "reopened", "indexed", "warm"] {
        match state {
            "written" => {}
            "reopened" => g = reopen(&dir).await,
            "indexed" => {
                g = reopen(&dir).await;
                g.optimize(usize::MAX).await.unwrap();
                g = reopen(&dir).await;
            }
            _ => assert!(g.warm_key_runs().await.unwrap() > 0),
        }
        // @unique email against another stored person; re-sending Ada herself is fine.
        assert_eq!(conflicts_of(load(&g, "main", Mode::Merge, bob_steals).await), [triple("unique_violation", "Person", "Bob")], "{state}");
        load(&g, "main", Mode::Merge, ada).await.unwrap();
        // @card(0..1) on WorksAt counts stored edges too; replacing the same edge id is fine.
        assert_eq!(conflicts_of(load(&g, "main", Mode::Merge, &works("w2", "Initech")).await), [triple("card_violation", "WorksAt", "Ada")], "{state}");
        load(&g, "main", Mode::Merge, &works("w1", ["Acme", "Initech"][state.len() % 2])).await.unwrap();
    }
    assert_heads_published(&g).await;
}

#[tokio::test]
async fn invalid_and_empty_batches_commit_nothing() {
    let dir = place().await;
    let g = init(&dir).await;
    let head = g.head("main").await.unwrap().unwrap();
    match load(&g, "main", Mode::Merge, "{\"type\":\"Persn\",\"data\":{}}\n").await {
        Err(EngineError::Invalid { report_json }) => assert!(report_json.contains("unknown_type"), "{report_json}"),
        other => panic!("{other:?}"),
    }
    let r = load(&g, "main", Mode::Merge, "\n\n").await.unwrap();
    assert!(r.commit.is_none() && r.counts().is_empty());
    assert_eq!(g.head("main").await.unwrap().unwrap(), head);
    assert!(matches!(load(&g, "nope", Mode::Merge, &person("A", 1)).await, Err(EngineError::BranchNotFound(_))));
}

/// `unchanged_since`: a load commits on exactly the branch state its
/// client read. A row-changing commit since refuses it (`TargetMoved`,
/// nothing written); a maintenance commit does not; a missing branch is
/// not created.
#[tokio::test]
async fn a_load_unchanged_since_a_commit_is_refused_once_rows_changed() {
    let dir = place().await;
    let g = init(&dir).await;
    let read = load(&g, "main", Mode::Merge, &person("Ada", 36)).await.unwrap().commit.unwrap().seq;
    assert!(g.maintain_step().await.unwrap().is_some(), "a maintenance commit after the read");
    let based_on_read = |batch: String| LoadRequest { unchanged_since: Some(read), ..request("main", Mode::Merge, &batch) };
    let landed = g.load(based_on_read(person("Bob", 40))).await.unwrap().commit.unwrap();
    match g.load(based_on_read(person("Cy", 5))).await {
        Err(EngineError::TargetMoved { expected_seq, head_seq, .. }) => assert_eq!((expected_seq, head_seq), (read, landed.seq)),
        other => panic!("expected target_moved, got {other:?}"),
    }
    let state = export(&g, "main", None).await;
    assert!(state.contains("\"Bob\"") && !state.contains("\"Cy\""), "{state}");
    let fork = LoadRequest { unchanged_since: Some(read), ..fork_request("side", "main", Mode::Merge, &person("Di", 1)) };
    assert!(matches!(g.load(fork).await, Err(EngineError::BranchNotFound(_))));
    assert!(g.head("side").await.unwrap().is_none(), "no branch was forked");
}

#[tokio::test]
async fn edges_without_ids_get_ulids() {
    let dir = place().await;
    let g = init(&dir).await;
    let edge = "{\"edge\":\"Knows\",\"from\":\"A\",\"to\":\"B\"}\n";
    load(&g, "main", Mode::Merge, &format!("{}{}{edge}{edge}", person("A", 1), person("B", 2))).await.unwrap();
    let state = export(&g, "main", None).await;
    let ids: Vec<String> = state
        .lines()
        .filter(|l| l.starts_with("{\"edge\""))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0] != ids[1] && ids.iter().all(|id| id.len() == 26 && id.chars().all(|c| c.is_ascii_alphanumeric())), "{ids:?}");
}

#[tokio::test]
async fn branches_are_isolated_cheap_and_forked_with_their_first_load() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &person("A", 1)).await.unwrap();
    let main_before = export(&g, "main", None).await;

    // A refused fork-with-load leaves no branch.
    let bad = fork_request("feature", "main", Mode::Merge, &knows("k1", "A", "Ghost"));
    assert!(matches!(g.load(bad).await, Err(EngineError::Rejected { .. })));
    assert!(g.head("feature").await.unwrap().is_none());

    // A good one creates it in the same commit.
    let r = g.load(fork_request("feature", "main", Mode::Merge, &person("B", 2))).await.unwrap();
    let commit = r.commit.unwrap();
    assert_eq!((r.created_from.unwrap().branch.as_str(), commit.seq, commit.kind), ("main", 0, CommitKind::Load));
    assert_eq!(export(&g, "main", None).await, main_before, "main does not see the branch's rows");
    assert_eq!(counts(&g, "feature").await["Person"], 2);

    // Loads on main do not reach the branch.
    load(&g, "main", Mode::Merge, &person("M", 3)).await.unwrap();
    assert_eq!(counts(&g, "feature").await["Person"], 2);
    assert_eq!(counts(&g, "main").await["Person"], 2);

    // Plain create, list, delete; a deleted branch can be created again.
    let fork = g.create_branch("exp", "feature", "tester").await.unwrap();
    assert_eq!(fork.kind, CommitKind::Fork);
    assert!(matches!(g.create_branch("exp", "main", "t").await, Err(EngineError::BranchExists(_))));
    load(&g, "exp", Mode::Merge, &person("E", 4)).await.unwrap();
    assert_eq!(counts(&g, "exp").await["Person"], 3);
    let names: Vec<String> = g.branches().await.unwrap().into_iter().map(|c| c.branch).collect();
    assert_eq!(names, ["exp", "feature", "main"]);
    g.delete_branch("exp", "tester").await.unwrap();
    assert!(g.head("exp").await.unwrap().is_none());
    assert!(matches!(load(&g, "exp", Mode::Merge, &person("X", 1)).await, Err(EngineError::BranchNotFound(_))));
    g.create_branch("exp", "main", "tester").await.unwrap();
    assert_eq!(counts(&g, "exp").await["Person"], 2, "the new exp starts from main, not the old exp");
    load(&g, "exp", Mode::Merge, &person("F", 5)).await.unwrap();
    assert_eq!(counts(&g, "exp").await["Person"], 3);
    assert!(matches!(g.delete_branch("main", "t").await, Err(EngineError::MainBranchProtected)));
    assert_heads_published(&g).await;
}

#[tokio::test]
async fn every_commit_can_be_read_again() {
    let dir = place().await;
    let g = init(&dir).await;
    let mut states = vec![export(&g, "main", None).await];
    for (n, batch) in [person("A", 1), person("B", 2), person("A", 3), knows("k", "A", "A")].iter().enumerate() {
        let mode = if n == 2 { Mode::Overwrite } else { Mode::Merge };
        load(&g, "main", mode, batch).await.unwrap();
        states.push(export(&g, "main", None).await);
    }
    for (seq, state) in states.iter().enumerate() {
        assert_eq!(&export(&g, "main", Some(seq as u64)).await, state, "commit {seq}");
    }
    let log = g.log("main").await.unwrap();
    assert_eq!(log.iter().map(|c| c.seq).collect::<Vec<_>>(), [4, 3, 2, 1, 0]);
    assert!(log.windows(2).all(|w| w[0].parent_id.as_deref() == Some(w[1].id.as_str())));
}

#[tokio::test]
async fn export_reloads_unchanged_into_a_fresh_graph() {
    let dir = place().await;
    let g = init(&dir).await;
    let batch = concat!(
        "{\"type\":\"Person\",\"data\":{\"name\":\"Ada \\\"Countess\\\" ✓\",\"age\":36,\"email\":\"ada@example.com\",\"born\":\"1815-12-10\",\"tags\":[\"math\",\"\"]}}\n",
        "{\"type\":\"Person\",\"data\":{\"name\":\"Grace\",\"tags\":[]}}\n",
        "{\"type\":\"Company\",\"data\":{\"name\":\"Acme\",\"founded\":\"1901-02-03\",\"size\":\"large\"}}\n",
        "{\"edge\":\"WorksAt\",\"from\":\"Grace\",\"to\":\"Acme\",\"data\":{\"start\":\"2001-02-03T04:05:06.789+02:00\"}}\n",
        "{\"edge\":\"Knows\",\"id\":\"k1\",\"from\":\"Grace\",\"to\":\"Ada \\\"Countess\\\" ✓\",\"data\":{\"since\":\"1950-01-01\"}}\n",
    );
    load(&g, "main", Mode::Merge, batch).await.unwrap();
    let exported = export(&g, "main", None).await;
    assert_eq!(exported.lines().count(), 5, "{exported}");

    let other = place().await;
    let fresh = init(&other).await;
    load(&fresh, "main", Mode::Merge, &format!("{exported}\n")).await.unwrap();
    assert_eq!(export(&fresh, "main", None).await, exported);
}

#[tokio::test]
async fn dry_run_reports_conflicts_and_writes_nothing() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &person("A", 1)).await.unwrap();
    let head = g.head("main").await.unwrap().unwrap();
    let dry = g.dry_run(&request("main", Mode::Append, &format!("{}{}", person("A", 1), person("B", 1)))).await.unwrap();
    assert_eq!(dry.conflicts.len(), 1);
    assert_eq!(dry.counts["Person"].inserted, 1);
    assert_eq!(g.head("main").await.unwrap().unwrap(), head);
}

#[tokio::test]
async fn a_second_init_is_refused_and_open_reads_the_graph() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &person("A", 1)).await.unwrap();
    assert!(matches!(
        omnigraph_host::Graph::init(root(&dir), SCHEMA, validator(), config()).await,
        Err(EngineError::GraphExists(_))
    ));
    let again = reopen(&dir).await;
    assert_eq!(export(&again, "main", None).await, export(&g, "main", None).await);
    let empty = place().await;
    assert!(matches!(
        omnigraph_host::Graph::open(root(&empty), validator(), config()).await,
        Err(EngineError::NoGraph(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_and_index_merges_keep_every_commit_readable() {
    let dir = place().await;
    let g = init(&dir).await;
    // More small fragments than MIN_SMALL_FRAGMENTS (compaction) and more
    // rows than MAX_UNINDEXED_ROWS (an index fold), maintained between loads
    // (maintenance steps, as the server's background task runs them).
    let big = |n: usize| (0..8_192).map(|i| person(&format!("b{n}-{i}"), (i % 150) as u32)).collect::<String>();
    for n in 0..9 {
        load(&g, "main", Mode::Merge, &big(n)).await.unwrap();
        g.optimize(4).await.unwrap();
    }
    for n in 0..30 {
        load(&g, "main", Mode::Merge, &person(&format!("s{n}"), 1)).await.unwrap();
        g.optimize(4).await.unwrap();
    }
    let limits = (omnigraph_host::limits::MIN_SMALL_FRAGMENTS, omnigraph_host::limits::MAX_UNINDEXED_ROWS);
    assert!(limits.0 < 39 && limits.1 < 9 * 8_192);
    let people = omnigraph_host::tables::latest_on(g.root(), "nodes/Person.lance", None).await.unwrap().unwrap();
    assert!(people.get_fragments().len() <= limits.0 + 1, "compacted: {}", people.get_fragments().len());
    let log = g.log("main").await.unwrap();
    assert!(log.iter().any(|c| c.maintenance.as_deref() == Some("compact small fragments")));
    assert!(log.iter().any(|c| c.maintenance.as_deref().is_some_and(|m| m.starts_with("fold new rows"))));
    assert_eq!(counts(&g, "main").await["Person"], 9 * 8_192 + 30);
    let third = log.iter().filter(|c| c.kind == omnigraph_host::manifest::CommitKind::Load).nth_back(2).unwrap().seq;
    assert_eq!(g.row_counts("main", Some(third)).await.unwrap()["Person"], 3 * 8_192, "an old commit reads as it was");
    // Lookups after the rewrites still find old and new ids.
    let clash = format!("{}{}{}", person("b0-17", 1), person("s29", 1), person("fresh", 1));
    assert_eq!(
        conflicts_of(load(&g, "main", Mode::Append, &clash).await),
        [triple("key_conflict", "Person", "b0-17"), triple("key_conflict", "Person", "s29")]
    );
    assert_heads_published(&g).await;
}

#[tokio::test]
async fn every_value_type_exports_and_reloads_unchanged() {
    let schema = "node Thing { name: String @key  b: Bool?  i: I64?  u: U64?  f: F32?  d: F64?  day: Date?  at: DateTime?  \
                  blob: Blob?  v: Vector(3)?  tier: enum(free, pro)?  ns: [I32]? }";
    let batch = concat!(
        "{\"type\":\"Thing\",\"data\":{\"name\":\"t1\",\"b\":true,\"i\":-9007199254740993,\"u\":18446744073709551615,",
        "\"f\":0.1,\"d\":1e-300,\"day\":\"1970-01-01\",\"at\":\"1969-12-31T23:59:59.999999Z\",\"blob\":\"base64:AAEC/w==\",",
        "\"v\":[1.5,-0.0,3.4028235e38],\"tier\":\"pro\",\"ns\":[1,-2,3]}}\n",
        "{\"type\":\"Thing\",\"data\":{\"name\":\"t2\",\"blob\":\"base64:\",\"ns\":[]}}\n",
    );
    let fresh = |place: &Place| {
        let root = root(place);
        async move { omnigraph_host::Graph::init(root, schema, validator(), config()).await.unwrap() }
    };
    let first = place().await;
    let g = fresh(&first).await;
    load(&g, "main", Mode::Merge, batch).await.unwrap();
    let exported = export(&g, "main", None).await;
    assert!(exported.contains("\"blob\":\"base64:AAEC/w==\""), "{exported}");
    assert!(exported.contains("\"u\":18446744073709551615") && exported.contains("\"i\":-9007199254740993"), "{exported}");
    let second = place().await;
    let again = fresh(&second).await;
    load(&again, "main", Mode::Merge, &format!("{exported}\n")).await.unwrap();
    assert_eq!(export(&again, "main", None).await, exported);
}

#[tokio::test]
async fn an_append_staged_over_a_stored_id_is_refused_not_stored_twice() {
    use std::sync::Arc;
    use arrow_array::{ArrayRef, RecordBatch, StringArray, new_null_array};
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &person("Ada", 1)).await.unwrap();
    // A writer that bypassed the lease and the checks: it stages an append of
    // a stored id on the published version itself.
    let head = g.branches().await.unwrap().into_iter().find(|b| b.branch == "main").unwrap();
    let def = g.schema().types.iter().find(|t| t.name == "Person").unwrap();
    let path = omnigraph_host::manifest::table_path(def.kind, &def.name);
    let schema = omnigraph_host::tables::stored_schema(def);
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "_id" | "name" => Arc::new(StringArray::from(vec!["Ada"])) as ArrayRef,
            _ => new_null_array(f.data_type(), 1),
        })
        .collect();
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let open = || omnigraph_host::tables::open_pinned(g.root(), &path, &head.tables["Person"]);
    let refused = omnigraph_host::tables::stage(g.root(), Arc::new(open().await.unwrap()), Mode::Append, batch.clone(), Default::default(), &[omnigraph_host::keys::Key::id()], &Default::default()).await;
    assert!(matches!(&refused, Err(EngineError::Storage(m)) if m.contains("append: 1 ids exist")), "{:?}", refused.err());
    // The same rows as a merge replace the stored one.
    let merged = omnigraph_host::tables::stage(g.root(), Arc::new(open().await.unwrap()), Mode::Merge, batch, Default::default(), &[omnigraph_host::keys::Key::id()], &Default::default()).await.unwrap();
    assert_eq!(merged.merged, Some((0, 1)));
}
