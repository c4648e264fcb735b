//! Promises of SPEC §2.3, §4.3, §4.5 and §5 kept by the engine (issue
//! "Every promise kept"): a multi-batch overwrite published in one commit,
//! an empty fork that really forks, the removed-id allowance, configured
//! bounds, lines on stateful conflicts, legacy identity.

mod common;

use std::collections::BTreeSet;

use common::*;
use omnigraph_host::manifest::CommitKind;
use omnigraph_host::{EngineConfig, EngineError, Graph, GraphSettings, OverwritePublish};
use omnigraph_validate_wasm::Mode;

fn publish(work: &str, base_seq: u64, types: &[&str]) -> OverwritePublish {
    OverwritePublish {
        branch: "main".into(),
        work: work.into(),
        base_seq,
        types: types.iter().map(|t| (*t).to_owned()).collect(),
        actor: "tester".into(),
        batch_key: Some("run:publish".into()),
    }
}

#[tokio::test]
async fn a_multi_batch_overwrite_replaces_the_types_in_one_commit() {
    let dir = place().await;
    let g = init(&dir).await;
    let old = format!("{}{}{}", person("Old", 1), person("Ada", 2), company("Acme"));
    load(&g, "main", Mode::Merge, &old).await.unwrap();
    let before = export(&g, "main", None).await;

    // The file names Person and Knows; Company is not named and stays.
    let fork = g
        .create_work_branch("ow-1", "main", &["Person".into(), "Knows".into()], "tester")
        .await
        .unwrap();
    let base_seq = fork.parent.as_ref().unwrap().seq;
    assert_eq!(base_seq, 1);
    assert!(
        export(&g, "ow-1", None).await.contains("Acme"),
        "untouched types come from the target"
    );
    assert!(
        !export(&g, "ow-1", None).await.contains("Old"),
        "replaced types start empty"
    );
    load(
        &g,
        "ow-1",
        Mode::Append,
        &format!("{}{}", person("Ada", 3), person("Bo", 4)),
    )
    .await
    .unwrap();
    load(&g, "ow-1", Mode::Append, &knows("k1", "Ada", "Bo")).await.unwrap();
    assert_eq!(
        export(&g, "main", None).await,
        before,
        "the target is untouched until the publish"
    );

    let receipt = g
        .publish_overwrite(publish("ow-1", base_seq, &["Person", "Knows"]))
        .await
        .unwrap();
    let commit = receipt.commit.unwrap();
    assert_eq!(
        (commit.seq, commit.kind, commit.mode.as_deref()),
        (2, CommitKind::Load, Some("overwrite"))
    );
    let person_counts = &commit.counts["Person"];
    assert_eq!(
        (person_counts.inserted, person_counts.updated, person_counts.removed),
        (1, 1, 1)
    );
    let after = export(&g, "main", None).await;
    let expected = [
        ("Company", "Acme"),
        ("Knows", "k1"),
        ("Person", "Ada"),
        ("Person", "Bo"),
    ];
    assert_eq!(
        records(&after),
        expected
            .iter()
            .map(|(t, i)| ((*t).to_owned(), (*i).to_owned()))
            .collect(),
        "{after}"
    );
    assert!(after.contains("\"age\":3"), "the file's version of Ada: {after}");
    assert!(
        g.head("ow-1").await.unwrap().is_none(),
        "the work branch is deleted once published"
    );
    assert_eq!(
        export(&g, "main", Some(1)).await,
        before,
        "the old state stays readable"
    );
    // A retried publish (same key) answers the same commit, changes nothing.
    let again = g
        .publish_overwrite(publish("ow-1", base_seq, &["Person", "Knows"]))
        .await
        .unwrap();
    assert_eq!(again.commit.unwrap().seq, 2);
    assert_heads_published(&g).await;
}

/// (type, id) of every exported record.
fn records(export: &str) -> BTreeSet<(String, String)> {
    export
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let ty = v
                .get("type")
                .or_else(|| v.get("edge"))
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned();
            (ty, v["id"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn company(name: &str) -> String {
    format!("{{\"type\":\"Company\",\"data\":{{\"name\":\"{name}\"}}}}\n")
}

#[tokio::test]
async fn an_overwrite_publish_is_refused_when_the_target_moved_or_edges_would_dangle() {
    let dir = place().await;
    let g = init(&dir).await;
    load(
        &g,
        "main",
        Mode::Merge,
        &format!("{}{}{}", person("Ada", 1), person("Bo", 2), knows("k", "Ada", "Bo")),
    )
    .await
    .unwrap();

    // Removing Bo would strand the stored Knows edge (Knows is not replaced).
    g.create_work_branch("ow-a", "main", &["Person".into()], "tester")
        .await
        .unwrap();
    load(&g, "ow-a", Mode::Append, &person("Ada", 5)).await.unwrap();
    let before = export(&g, "main", None).await;
    match g.publish_overwrite(publish("ow-a", 1, &["Person"])).await {
        Err(EngineError::Rejected { conflicts, .. }) => {
            assert_eq!(
                (conflicts[0].code, conflicts[0].id.as_str()),
                ("dangling_endpoint", "k"),
                "{conflicts:?}"
            )
        }
        other => panic!("expected stranded edges, got {other:?}"),
    }
    assert_eq!(export(&g, "main", None).await, before);

    // The target moves after the fork: publishing would drop that commit.
    g.create_work_branch("ow-b", "main", &["Company".into()], "tester")
        .await
        .unwrap();
    load(&g, "main", Mode::Merge, &person("Cy", 3)).await.unwrap();
    let before = export(&g, "main", None).await;
    match g.publish_overwrite(publish("ow-b", 1, &["Company"])).await {
        Err(EngineError::TargetMoved {
            expected_seq: 1,
            head_seq: 2,
            ..
        }) => {}
        other => panic!("expected target_moved, got {other:?}"),
    }
    assert_eq!(export(&g, "main", None).await, before);
    assert!(matches!(
        g.create_work_branch("ow-c", "main", &["Nope".into()], "tester").await,
        Err(EngineError::UnknownType(_))
    ));
}

#[tokio::test]
async fn an_empty_load_that_names_a_base_creates_the_branch() {
    let dir = place().await;
    let g = init(&dir).await;
    load(&g, "main", Mode::Merge, &person("Ada", 1)).await.unwrap();
    let receipt = g.load(fork_request("side", "main", Mode::Merge, "\n\n")).await.unwrap();
    assert!(receipt.created_from.is_some() && receipt.empty());
    let head = g
        .head("side")
        .await
        .unwrap()
        .expect("the receipt said created: the branch exists");
    assert_eq!(head.kind, CommitKind::Fork);
    assert_eq!(receipt.commit.unwrap().id, head.id);
    assert!(export(&g, "side", None).await.contains("Ada"));
    // Again: the branch exists now, nothing is created or committed.
    let again = g.load(fork_request("side", "main", Mode::Merge, "")).await.unwrap();
    assert!(again.created_from.is_none() && again.commit.is_none());
}

async fn graph_with(dir: &Place, tweak: impl FnOnce(&mut EngineConfig)) -> Graph {
    let mut config = config();
    tweak(&mut config);
    Graph::init(root(dir), SCHEMA, validator(), config).await.expect("init")
}

#[tokio::test]
async fn the_removed_id_allowance_bounds_an_overwrite() {
    let dir = place().await;
    let ids: Vec<String> = (0..50).map(|i| format!("person-{i:04}")).collect();
    // Each removed id costs 11 + 24 = 35 bytes: 40 fit in 1,400, 50 do not.
    let g = graph_with(&dir, |c| c.limits.max_removed_id_bytes = 40 * 35).await;
    load(
        &g,
        "main",
        Mode::Merge,
        &ids.iter().map(|n| person(n, 1)).collect::<String>(),
    )
    .await
    .unwrap();
    let before = export(&g, "main", None).await;
    match load(&g, "main", Mode::Overwrite, &person("New", 1)).await {
        Err(EngineError::BoundExceeded {
            code: "removed_ids_limit",
            limit,
            actual,
            ..
        }) => {
            assert_eq!((limit, actual), (40 * 35, 50 * 35))
        }
        other => panic!("expected removed_ids_limit, got {other:?}"),
    }
    assert_eq!(
        export(&g, "main", None).await,
        before,
        "a refused overwrite changes nothing"
    );
    // Keeping 20 of them removes 30: within the allowance.
    let kept: String = ids[..20].iter().map(|n| person(n, 2)).collect();
    let receipt = load(&g, "main", Mode::Overwrite, &kept).await.unwrap();
    assert_eq!(receipt.commit.unwrap().counts["Person"].removed, 30);
}

#[tokio::test]
async fn loads_are_validated_with_the_configured_bounds() {
    let dir = place().await;
    let g = graph_with(&dir, |c| c.limits.max_table_rows = 2).await;
    assert_eq!(g.limits().max_table_rows, 2);
    let three = format!("{}{}{}", person("A", 1), person("B", 1), person("C", 1));
    match load(&g, "main", Mode::Merge, &three).await {
        Err(EngineError::Invalid { report_json }) => assert!(report_json.contains("table_rows_limit"), "{report_json}"),
        other => panic!("expected the configured rows bound, got {other:?}"),
    }
    match g.dry_run(&request("main", Mode::Merge, &three)).await {
        Err(EngineError::Invalid { report_json }) => assert!(report_json.contains("table_rows_limit")),
        other => panic!("the dry run applies the same bounds, got {other:?}"),
    }
    load(&g, "main", Mode::Merge, &three[..three.len() / 3 * 2])
        .await
        .unwrap();
}

#[tokio::test]
async fn stateful_conflicts_name_their_batch_lines() {
    let dir = place().await;
    let g = init(&dir).await;
    let stored = format!(
        "{}{}{}",
        person("Ada", 1),
        "{\"type\":\"Person\",\"data\":{\"name\":\"Bo\",\"email\":\"bo@x\"}}\n",
        person("Cy", 1)
    );
    load(&g, "main", Mode::Merge, &stored).await.unwrap();
    let batch = format!(
        "{}\n{}{}{}",
        person("New", 1),
        "{\"type\":\"Person\",\"data\":{\"name\":\"Dee\",\"email\":\"bo@x\"}}\n",
        person("Cy", 2),
        knows("k", "Ada", "Ghost")
    );
    let conflicts = match load(&g, "main", Mode::Append, &batch).await {
        Err(EngineError::Rejected { conflicts, .. }) => conflicts,
        other => panic!("expected conflicts, got {other:?}"),
    };
    let found: Vec<(&str, Option<u64>)> = conflicts.iter().map(|c| (c.code, c.line)).collect();
    assert_eq!(
        found,
        [
            ("unique_violation", Some(3)),
            ("key_conflict", Some(4)),
            ("dangling_endpoint", Some(5))
        ],
        "{conflicts:?}"
    );
    assert!(
        conflicts
            .iter()
            .all(|c| c.message.starts_with(&format!("line {}:", c.line.unwrap()))),
        "{conflicts:?}"
    );
}

#[tokio::test]
async fn a_legacy_identity_graph_takes_data_id_as_the_identity() {
    let dir = place().await;
    let schema = "node Note { text: String }\nedge Links: Note -> Note\n";
    let settings = GraphSettings { legacy_identity: true };
    let g = Graph::init_with(root(&dir), schema, settings, validator(), config())
        .await
        .unwrap();
    let batch = "{\"type\":\"Note\",\"data\":{\"id\":\"n1\",\"text\":\"a\"}}\n{\"type\":\"Note\",\"id\":\"n2\",\"data\":{\"text\":\"b\"}}\n{\"edge\":\"Links\",\"id\":\"l\",\"from\":\"n1\",\"to\":\"n2\"}\n";
    load(&g, "main", Mode::Merge, batch).await.unwrap();
    let state = export(&g, "main", None).await;
    assert!(state.contains("\"id\":\"n1\""), "{state}");
    let both = "{\"type\":\"Note\",\"id\":\"n3\",\"data\":{\"id\":\"n3\",\"text\":\"c\"}}\n";
    assert!(matches!(
        load(&g, "main", Mode::Merge, both).await,
        Err(EngineError::Invalid { .. })
    ));
    let reopened = Graph::open(root(&dir), validator(), config()).await.unwrap();
    assert!(reopened.settings().legacy_identity, "the setting is the graph's");
    // The default graph refuses data.id (no declared `id` property).
    let other = place().await;
    let plain = Graph::init(root(&other), schema, validator(), config()).await.unwrap();
    assert!(matches!(
        load(&plain, "main", Mode::Merge, batch).await,
        Err(EngineError::Invalid { .. })
    ));
}
