//! Hostile HTTP: what a public ingestion endpoint receives from broken or
//! malicious clients (slow-loris bodies and heads, chunked bodies over the
//! bound, the in-flight budget, content types, invalid UTF-8 and malformed
//! URLs, path traversal, enormous headers: 431). Each case gets the right
//! status (a JSON error where the request reaches a handler), and the host
//! stays healthy afterwards: `/healthz` answers and a valid load still
//! commits.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use omnigraph_host::auth::Auth;
use serde_json::Value;

const LOAD_HEAD: &str = "POST /graphs/g/load/ndjson HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n";

async fn exchange(addr: SocketAddr, chunks: Vec<Vec<u8>>, pause: Duration) -> String {
    tokio::task::spawn_blocking(move || raw_exchange(addr, chunks, pause)).await.unwrap()
}

/// The status and JSON error of a raw answer.
fn answer_of(raw: &str) -> (u16, Value) {
    let status = raw.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status line: {raw:?}"));
    let body = raw.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `/healthz` answers and a fresh valid load commits.
async fn assert_healthy(s: &Server, name: &str) {
    let c = reqwest::Client::new();
    assert_eq!(c.get(format!("{}/healthz", s.url)).send().await.unwrap().status(), 200);
    let r = c
        .post(format!("{}/graphs/g/load/ndjson", s.url))
        .header("content-type", "application/x-ndjson")
        .body(person(name, 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "a valid load after the attack: {}", r.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_bodies_time_out_and_do_not_starve_other_clients() {
    // Admission is per actor and taken before the body is read, so one
    // actor's slow bodies hold its own slots; here every client is the open
    // mode's `anonymous`, so the slots are made plenty: the deadline and the
    // body budget are what this test is about.
    let s = start(Auth::Open, |c| {
        c.body_read_timeout = Duration::from_millis(800);
        c.max_loads_per_actor = 64;
    })
    .await;
    // Twenty clients trickle a byte every 100 ms of bodies they promise in full.
    let line = person("Slow", 1).into_bytes();
    let mut lorises = Vec::new();
    for _ in 0..20 {
        let mut chunks = vec![format!("{LOAD_HEAD}Content-Length: {}\r\n\r\n", line.len()).into_bytes()];
        chunks.extend(line.iter().map(|b| vec![*b]));
        lorises.push(tokio::spawn(exchange(s.addr, chunks, Duration::from_millis(100))));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Meanwhile an honest client loads.
    assert_healthy(&s, "Honest").await;
    let started = Instant::now();
    for loris in lorises {
        let (status, body) = answer_of(&loris.await.unwrap());
        assert_eq!((status, body["code"].as_str()), (408, Some("body_timeout")), "{body}");
    }
    assert!(started.elapsed() < Duration::from_secs(5), "cut off at the deadline, not at the end of the trickle");
    let graph = reopen(&s.place.child("g")).await;
    assert_eq!(counts(&graph, "main").await["Person"], 1, "only the honest load landed");
    assert_healthy(&s, "After").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_heads_are_disconnected() {
    let s = start(Auth::Open, |c| c.header_read_timeout = Duration::from_millis(500)).await;
    // A request head that trickles in a byte every 100 ms never completes.
    let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghijklmnopqrstuvwxyz0123456789\r\n\r\n";
    let started = Instant::now();
    let answer = exchange(s.addr, head.iter().map(|b| vec![*b]).collect(), Duration::from_millis(100)).await;
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "closed at the deadline, not after the whole trickle");
    assert_healthy(&s, "After").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_bound_without_content_length_are_cut_off() {
    let s = start(Auth::Open, |c| c.engine.limits.max_batch_bytes = 4096).await;
    let line = person("Big", 1);
    let mut chunks = vec![format!("{LOAD_HEAD}Transfer-Encoding: chunked\r\n\r\n").into_bytes()];
    chunks.extend((0..200).map(|_| format!("{:x}\r\n{line}\r\n", line.len()).into_bytes()));
    let (status, body) = answer_of(&exchange(s.addr, chunks, Duration::ZERO).await);
    assert_eq!((status, body["code"].as_str()), (413, Some("batch_bytes_limit")), "{body}");
    // Branch creation bodies have their own small bound, also when chunked.
    let head = "POST /graphs/g/branches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut chunks = vec![head.as_bytes().to_vec()];
    chunks.extend((0..100).map(|_| format!("{:x}\r\n{}\r\n", 1024, " ".repeat(1024)).into_bytes()));
    let (status, body) = answer_of(&exchange(s.addr, chunks, Duration::ZERO).await);
    assert_eq!((status, body["code"].as_str()), (413, Some("body_too_large")), "{body}");
    assert_healthy(&s, "After").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_held_at_once_stay_within_the_in_flight_budget() {
    let s = start(Auth::Open, |c| {
        c.engine.limits.max_batch_bytes = 1000;
        c.max_inflight_bytes = 1500;
        c.body_read_timeout = Duration::from_secs(2);
    })
    .await;
    // A client promises 900 bytes and sends none: they are reserved.
    let holder = tokio::spawn(exchange(s.addr, vec![format!("{LOAD_HEAD}Content-Length: 900\r\n\r\n").into_bytes()], Duration::ZERO));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // 900 + 700 > 1500: refused before reading, with Retry-After.
    let c = reqwest::Client::new();
    let body = person("A", 1).repeat(20);
    assert!(body.len() > 600 && body.len() <= 1000);
    let busy = c.post(format!("{}/graphs/g/load/ndjson", s.url)).header("content-type", "application/x-ndjson").body(body.clone()).send().await.unwrap();
    assert_eq!(busy.status(), 503);
    assert_eq!(busy.headers()["retry-after"], "1");
    assert_eq!(busy.json::<Value>().await.unwrap()["code"], "server_busy");
    // A body of unknown length reserves the whole batch bound: refused too.
    let mut chunks = vec![format!("{LOAD_HEAD}Transfer-Encoding: chunked\r\n\r\n").into_bytes()];
    chunks.push(b"1\r\n\n\r\n0\r\n\r\n".to_vec());
    assert_eq!(answer_of(&exchange(s.addr, chunks, Duration::ZERO).await).0, 503);
    // A small one still fits.
    assert_healthy(&s, "Small").await;
    // Once the holder times out its reservation is returned.
    assert_eq!(answer_of(&holder.await.unwrap()).0, 408);
    let ok = c.post(format!("{}/graphs/g/load/ndjson", s.url)).header("content-type", "application/x-ndjson").body(body).send().await.unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_and_missing_content_types_are_415_and_read_nothing() {
    let s = start(Auth::Open, |_| {}).await;
    let cases = [
        ("/graphs/g/load/ndjson", None),
        ("/graphs/g/load/ndjson", Some("text/plain")),
        ("/graphs/g/load/ndjson", Some("application/json")),
        ("/graphs/g/load/ndjson", Some("application/x-ndjsonx")),
        ("/graphs/g/validate", Some("multipart/form-data; boundary=x")),
        ("/graphs/g/load", Some("application/x-ndjson")),
        ("/graphs/g/load", None),
        ("/graphs/g/branches", Some("text/plain")),
    ];
    for (path, content_type) in cases {
        // The head promises a body that never comes: the answer must not wait for it.
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{}Content-Length: 100\r\n\r\n",
            content_type.map(|t| format!("Content-Type: {t}\r\n")).unwrap_or_default()
        );
        let (status, body) = answer_of(&exchange(s.addr, vec![head.into_bytes()], Duration::ZERO).await);
        assert_eq!((status, body["code"].as_str()), (415, Some("unsupported_media_type")), "{path} {content_type:?}: {body}");
    }
    assert_healthy(&s, "After").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_malformed_urls_are_400() {
    let s = start(Auth::Open, |_| {}).await;
    let c = reqwest::Client::new();
    for (query, code) in [
        ("branch=%FF%FE", "invalid_branch_name"),
        ("branch=main&from=%C3%28", "invalid_branch_name"),
        ("mode=%C0%AF", "invalid_mode"),
        ("branch=%00", "invalid_branch_name"),
    ] {
        let r = c.post(format!("{}/graphs/g/load/ndjson?{query}", s.url)).header("content-type", "application/x-ndjson").body(person("A", 1)).send().await.unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!((status, body["code"].as_str()), (400, Some(code)), "{query}: {body}");
    }
    for (path, code) in [("/graphs/g/export?commit=%FF", "invalid_query"), ("/graphs/g/commits?branch=a&branch=b", "invalid_query"), ("/graphs/%FF%FE/schema", "invalid_path")] {
        let r = c.get(format!("{}{path}", s.url)).send().await.unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!((status, body["code"].as_str()), (400, Some(code)), "{path}: {body}");
    }
    // Raw bytes that are not even URL characters: hyper refuses the request line.
    let mut head = b"GET /graphs/g/export?branch=".to_vec();
    head.extend([0xFF, 0xFE]);
    head.extend(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    let raw = exchange(s.addr, vec![head], Duration::ZERO).await;
    assert!(raw.starts_with("HTTP/1.1 400"), "{raw:?}");
    assert_healthy(&s, "After").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_traversal_in_graph_and_branch_names_reaches_nothing() {
    // The server's root holds `g`; a graph `secret` sits next to the root.
    let base = place().await;
    let root = base.child("root");
    init(&root.child("g")).await;
    let secret = init(&base.child("secret")).await;
    load(&secret, "main", omnigraph_validate_wasm::Mode::Merge, &person("Hidden", 1)).await.unwrap();
    let s = start_at(root, Auth::Open, |_| {}).await;
    let c = reqwest::Client::new();
    for path in [
        "/graphs/..%2Fsecret/export",
        "/graphs/%2E%2E%2Fsecret/export",
        "/graphs/..%5Csecret/export",
        "/graphs/.%2E/schema",
        "/graphs/..%2F..%2F..%2Fetc/schema",
        "/graphs/g%2F..%2F..%2Fsecret/export",
    ] {
        let r = c.get(format!("{}{path}", s.url)).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert_eq!(status, 404, "{path}: {text}");
        assert!(!text.contains("Hidden"), "{path} leaked the other graph: {text}");
    }
    for branch in ["..", "..%2F..%2Fsecret", "%2E%2E%2Fmain", "a%2F..%2F..%2Fx", ".hidden", "main%2F..", "%2Fetc"] {
        let r = c
            .post(format!("{}/graphs/g/load/ndjson?branch={branch}&from=main", s.url))
            .header("content-type", "application/x-ndjson")
            .body(person("X", 1))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_branch_name")), "{branch}: {body}");
    }
    let r = c.post(format!("{}/graphs/g/branches", s.url)).json(&serde_json::json!({"name": "../../secret", "from": "main"})).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let r = c.delete(format!("{}/graphs/g/branches/..%2F..%2Fsecret%2F_graph", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    // Nothing was written anywhere: the secret graph and g's branches are as they were.
    let secret = reopen(&base.child("secret")).await;
    assert_eq!(secret.log("main").await.unwrap().len(), 2);
    assert_eq!(reopen(&s.place.child("g")).await.branches().await.unwrap().len(), 1);
    assert_healthy(&s, "After").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enormous_headers_are_refused_431() {
    let s = start(Auth::Open, |_| {}).await;
    // Ten thousand headers.
    let mut head = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for i in 0..10_000 {
        head.push_str(&format!("X-Header-{i}: v\r\n"));
    }
    head.push_str("\r\n");
    let raw = exchange(s.addr, vec![head.into_bytes()], Duration::ZERO).await;
    assert!(raw.starts_with("HTTP/1.1 431"), "{raw:?}");
    // One header of 1 MiB.
    let head = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "v".repeat(1 << 20));
    let raw = exchange(s.addr, vec![head.into_bytes()], Duration::ZERO).await;
    assert!(raw.starts_with("HTTP/1.1 431"), "{raw:?}");
    assert_healthy(&s, "After").await;
}
