//! The HTTP API against a real server on 127.0.0.1 (random port) over
//! temporary local graphs, with a real HTTP client: every route, status
//! code and the order of auth checks.

mod common;

use std::time::Duration;

use common::*;
use omnigraph_host::auth::{Auth, sha256_hex};
use serde_json::Value;

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post_ndjson(s: &Server, path: &str, body: &str) -> reqwest::Response {
    client().post(format!("{}{path}", s.url)).header("content-type", "application/x-ndjson").body(body.to_owned()).send().await.unwrap()
}

async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn sample() -> String {
    std::fs::read_to_string(common::sample("people.ndjson")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers() {
    let s = start(Auth::Open, |_| {}).await;
    let c = client();

    let (status, receipt) = json_of(post_ndjson(&s, "/graphs/g/load/ndjson", &sample()).await).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!((receipt["branch"].as_str(), receipt["created"].as_bool(), receipt["mode"].as_str()), (Some("main"), Some(false), Some("merge")));
    assert_eq!(receipt["counts"]["Person"]["inserted"], 2);
    assert_eq!(receipt["commit"]["seq"], 1);
    assert_eq!(receipt["commit"]["actor"], "anonymous");

    let compat = c
        .post(format!("{}/graphs/g/load", s.url))
        .json(&serde_json::json!({"mode": "merge", "data": "{\"type\":\"Person\",\"data\":{\"name\":\"Cy\",\"age\":\"old\"}} {\"type\":\"Company\",\"data\":{\"name\":\"Co\"}}"}))
        .send()
        .await
        .unwrap();
    assert_eq!(compat.headers()["deprecation"], "true");
    assert!(compat.headers()["link"].to_str().unwrap().contains("/graphs/g/load/ndjson"));
    let (status, body) = json_of(compat).await;
    assert_eq!(status, 200, "compat coerces a wrong-typed nullable value to null: {body}");

    let (status, dry) = json_of(post_ndjson(&s, "/graphs/g/validate?mode=append", &person("Ada", 1)).await).await;
    assert_eq!((status, dry["ok"].as_bool()), (200, Some(false)), "{dry}");
    assert_eq!(dry["conflicts"][0]["code"], "key_conflict");

    let (status, schema) = json_of(c.get(format!("{}/graphs/g/schema", s.url)).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert!(schema["source"].as_str().unwrap().contains("node Person"));
    assert_eq!(schema["catalog"]["nodes"][0]["name"], "Company");
    let (_, rules) = json_of(c.get(format!("{}/graphs/g/rules", s.url)).send().await.unwrap()).await;
    assert_eq!(rules["validator_sha256"], validator().artifact_sha256());
    assert_eq!(rules["schema_hash"], schema["schema_hash"]);
    assert_eq!(rules["bounds"]["max_batch_bytes"], 32 * 1024 * 1024);

    let created = c.post(format!("{}/graphs/g/branches", s.url)).json(&serde_json::json!({"name": "dev", "from": "main"})).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let (_, branches) = json_of(c.get(format!("{}/graphs/g/branches", s.url)).send().await.unwrap()).await;
    let names: Vec<&str> = branches["branches"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["dev", "main"]);
    assert_eq!(c.delete(format!("{}/graphs/g/branches/dev", s.url)).send().await.unwrap().status(), 200);
    assert_eq!(c.delete(format!("{}/graphs/g/branches/dev", s.url)).send().await.unwrap().status(), 404);

    let (_, log) = json_of(c.get(format!("{}/graphs/g/commits?branch=main", s.url)).send().await.unwrap()).await;
    assert_eq!(log["commits"].as_array().unwrap().len(), 3);

    // Export, load it through the strict route into a fresh graph: same export.
    let exported = c.get(format!("{}/graphs/g/export", s.url)).send().await.unwrap();
    assert_eq!(exported.headers()["content-type"], "application/x-ndjson");
    let exported = exported.text().await.unwrap();
    let loaded = sample().lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(exported.lines().count(), loaded + 2, "{exported}");
    assert_eq!(post_ndjson(&s, "/graphs/empty/load/ndjson", &exported).await.status(), 200);
    let again = c.get(format!("{}/graphs/empty/export", s.url)).send().await.unwrap().text().await.unwrap();
    let sorted = |t: &str| {
        let mut l: Vec<String> = t.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    assert_eq!(sorted(&again), sorted(&exported));
    let at_one = c.get(format!("{}/graphs/g/export?commit=1", s.url)).send().await.unwrap().text().await.unwrap();
    assert_eq!(at_one.lines().count(), loaded);

    assert_eq!(c.get(format!("{}/healthz", s.url)).send().await.unwrap().text().await.unwrap(), "ok\n");
    let metrics = c.get(format!("{}/metrics", s.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("omnigraph_loads_total{outcome=\"committed\"} 3"), "{metrics}");
    assert!(metrics.contains("omnigraph_rows_total{table=\"Person\"}") && metrics.contains("omnigraph_commit_seconds_count 3"), "{metrics}");
    let page = c.get(format!("{}/", s.url)).send().await.unwrap();
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let wasm = c.get(format!("{}/web/pkg/web/validate_bg.wasm", s.url)).send().await.unwrap();
    assert_eq!(wasm.headers()["content-type"], "application/wasm");
    let tag = wasm.headers()["etag"].clone();
    assert_eq!(wasm.headers()["cache-control"], "no-cache", "browsers keep the files and revalidate them");
    assert_eq!(wasm.bytes().await.unwrap().as_ref(), omnigraph_host::validator::ARTIFACT, "the page gets the host's own validator");
    let again = c.get(format!("{}/web/pkg/web/validate_bg.wasm", s.url)).header("if-none-match", &tag).send().await.unwrap();
    assert_eq!(again.status(), 304, "a revisit does not download the validator again");
    assert!(again.bytes().await.unwrap().is_empty());
    let other = c.get(format!("{}/web/app.js", s.url)).header("if-none-match", &tag).send().await.unwrap();
    assert_eq!(other.status(), 200, "each file has its own tag");
    assert_ne!(other.headers()["etag"], tag);
    let page_tag = page.headers()["etag"].clone();
    let page_again = c.get(format!("{}/", s.url)).header("if-none-match", format!("W/{}, \"x\"", page_tag.to_str().unwrap())).send().await.unwrap();
    assert_eq!(page_again.status(), 304, "the page too, whatever list the browser sends");
    assert_eq!(c.get(format!("{}/web/../Cargo.toml", s.url)).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn openapi_lists_every_route() {
    let s = start(Auth::Open, |_| {}).await;
    let (_, doc) = json_of(client().get(format!("{}/openapi.json", s.url)).send().await.unwrap()).await;
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/graphs/{id}/load/ndjson", "post"),
        ("/graphs/{id}/load", "post"),
        ("/graphs/{id}/validate", "post"),
        ("/graphs/{id}/schema", "get"),
        ("/graphs/{id}/rules", "get"),
        ("/graphs/{id}/branches", "get"),
        ("/graphs/{id}/branches", "post"),
        ("/graphs/{id}/branches/{name}", "delete"),
        ("/graphs/{id}/overwrite", "post"),
        ("/graphs/{id}/access", "get"),
        ("/graphs/{id}/commits", "get"),
        ("/graphs/{id}/export", "get"),
        ("/healthz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
        ("/", "get"),
        ("/web/{path}", "get"),
    ] {
        assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path} missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_codes_follow_the_spec() {
    let s = start(Auth::Open, |c| c.engine.limits.max_batch_bytes = 4096).await;
    let c = client();
    post_ndjson(&s, "/graphs/g/load/ndjson", &person("Ada", 1)).await;
    let code = |r: (u16, Value)| (r.0, r.1["code"].as_str().unwrap_or("").to_owned(), r.1);

    let (st, cd, _) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson?mode=upsert", &person("A", 1)).await).await);
    assert_eq!((st, cd.as_str()), (400, "invalid_mode"));
    let (st, _, _) = code(json_of(post_ndjson(&s, "/graphs/nope/load/ndjson", &person("A", 1)).await).await);
    assert_eq!(st, 404);
    let (st, cd, _) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson?branch=ghost", &person("A", 1)).await).await);
    assert_eq!((st, cd.as_str()), (404, "branch_not_found"));
    let (st, cd, body) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson?mode=append", &format!("{}{}", person("Ada", 2), person("Bo", 1))).await).await);
    assert_eq!((st, cd.as_str()), (409, "key_conflict"), "{body}");
    assert_eq!((body["details"]["conflicts"][0]["type"].as_str(), body["details"]["conflicts"][0]["id"].as_str()), (Some("Person"), Some("Ada")));
    let (st, cd, body) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson", "{\"type\":\"Persn\"}\n").await).await);
    assert_eq!((st, cd.as_str()), (422, "validation_failed"));
    assert_eq!(body["details"]["report"]["errors"][0]["code"], "unknown_type");
    let (st, cd, _) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson", &knows("k", "Ada", "Nobody")).await).await);
    assert_eq!((st, cd.as_str()), (422, "stateful_check_failed"));
    let wrong_type = c.post(format!("{}/graphs/g/load/ndjson", s.url)).header("content-type", "application/json").body(person("A", 1)).send().await.unwrap();
    assert_eq!(wrong_type.status(), 415);
    let with_charset = c.post(format!("{}/graphs/g/load/ndjson", s.url)).header("content-type", "application/x-ndjson; charset=utf-8").body(person("Cy", 1)).send().await.unwrap();
    assert_eq!(with_charset.status(), 200);
    let big = person("Big", 1).repeat(200);
    let (st, cd, body) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson", &big).await).await);
    assert_eq!((st, cd.as_str()), (413, "batch_bytes_limit"), "{body}");
    assert_eq!((body["details"]["limit"].as_u64(), body["details"]["actual"].as_u64()), (Some(4096), Some(big.len() as u64)));
    assert_eq!(c.get(format!("{}/healthz", s.url)).send().await.unwrap().status(), 200);
    let (st, cd, _) = code(json_of(post_ndjson(&s, "/graphs/g/load/ndjson?branch=a%2Fb", &person("A", 1)).await).await);
    assert_eq!((st, cd.as_str()), (400, "invalid_branch_name"));
    let dup = c.post(format!("{}/graphs/g/branches", s.url)).json(&serde_json::json!({"name": "main"})).send().await.unwrap();
    assert_eq!(dup.status(), 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_with_load_creates_the_branch_only_when_the_load_commits() {
    let s = start(Auth::Open, |_| {}).await;
    post_ndjson(&s, "/graphs/g/load/ndjson", &person("Ada", 1)).await;
    let bad = post_ndjson(&s, "/graphs/g/load/ndjson?branch=try&from=main", &knows("k", "Ada", "Ghost")).await;
    assert_eq!(bad.status(), 422);
    let (_, branches) = json_of(client().get(format!("{}/graphs/g/branches", s.url)).send().await.unwrap()).await;
    assert_eq!(branches["branches"].as_array().unwrap().len(), 1);
    let (status, receipt) = json_of(post_ndjson(&s, "/graphs/g/load/ndjson?branch=try&from=main", &person("Bo", 2)).await).await;
    assert_eq!((status, receipt["created"].as_bool()), (200, Some(true)));
    assert_eq!(receipt["base"]["branch"], "main");
}

/// `unchanged_since` over HTTP: a load based on a commit the branch has
/// since changed after is a 409 `target_moved` and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_unchanged_since_a_stale_commit_is_a_409() {
    let s = start(Auth::Open, |_| {}).await;
    let (_, first) = json_of(post_ndjson(&s, "/graphs/g/load/ndjson", &person("Ada", 1)).await).await;
    let read = first["commit"]["seq"].as_u64().expect("a commit seq");
    let (status, _) = json_of(post_ndjson(&s, &format!("/graphs/g/load/ndjson?unchanged_since={read}"), &person("Bo", 2)).await).await;
    assert_eq!(status, 200);
    let (status, refused) = json_of(post_ndjson(&s, &format!("/graphs/g/load/ndjson?unchanged_since={read}"), &person("Cy", 3)).await).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("target_moved")), "{refused}");
    let export = client().get(format!("{}/graphs/g/export", s.url)).send().await.unwrap().text().await.unwrap();
    assert!(export.contains("\"Bo\"") && !export.contains("\"Cy\""), "{export}");
}

/// Sends a request head promising a body it never sends; the answer must
/// come anyway (the body was never read).
fn head_only(addr: std::net::SocketAddr, head: &str) -> String {
    raw_exchange(addr, vec![head.as_bytes().to_vec()], Duration::ZERO)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_comes_before_the_body_and_grants_are_enforced() {
    let config = format!(
        "[[token]]\nactor = \"reader\"\nsha256 = \"{}\"\ngraphs = {{ g = [\"read\"] }}\n\
         [[token]]\nactor = \"loader\"\nsha256 = \"{}\"\ngraphs = {{ g = [\"read\", \"change\"] }}\n",
        sha256_hex(b"read-token"),
        sha256_hex(b"load-token")
    );
    let s = start(Auth::from_toml(&config).unwrap(), |c| c.engine.limits.max_batch_bytes = 1000).await;
    let addr = s.addr;
    // No token; a body that would never arrive.
    let answer = tokio::task::spawn_blocking(move || {
        head_only(addr, "POST /graphs/g/load/ndjson HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 500\r\n\r\n")
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // Wrong permission: 403, also without reading.
    let answer = tokio::task::spawn_blocking(move || {
        head_only(addr, "POST /graphs/g/load/ndjson HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer read-token\r\nContent-Type: application/x-ndjson\r\nContent-Length: 500\r\n\r\n")
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    // Over the bound by Content-Length: 413 before reading.
    let answer = tokio::task::spawn_blocking(move || {
        head_only(addr, "POST /graphs/g/load/ndjson HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer load-token\r\nContent-Type: application/x-ndjson\r\nContent-Length: 5000\r\n\r\n")
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    let c = client();
    let url = format!("{}/graphs/g/load/ndjson", s.url);
    let load = |token: &'static str| c.post(&url).bearer_auth(token).header("content-type", "application/x-ndjson").body(person("Ada", 1)).send();
    assert_eq!(load("wrong").await.unwrap().status(), 401);
    assert_eq!(load("read-token").await.unwrap().status(), 403);
    let (status, receipt) = json_of(load("load-token").await.unwrap()).await;
    assert_eq!((status, receipt["commit"]["actor"].as_str()), (200, Some("loader")), "the actor is recorded");
    assert_eq!(c.get(format!("{}/graphs/g/schema", s.url)).bearer_auth("read-token").send().await.unwrap().status(), 200);
    assert_eq!(c.get(format!("{}/graphs/empty/schema", s.url)).bearer_auth("read-token").send().await.unwrap().status(), 403);
    assert_eq!(c.get(format!("{}/graphs/g/schema", s.url)).send().await.unwrap().status(), 401);
    // Forking needs branch_create.
    let fork = c.post(format!("{url}?branch=x&from=main")).bearer_auth("load-token").header("content-type", "application/x-ndjson").body(person("B", 1)).send().await.unwrap();
    assert_eq!(fork.status(), 403);
}

/// A strict load of `body` sent in two parts, `pause` apart, on a raw
/// connection; the answer's first bytes.
fn slow_load(addr: std::net::SocketAddr, body: String, pause: Duration) -> String {
    let head = format!(
        "POST /graphs/g/load/ndjson HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (first, rest) = body.split_at(body.len() / 2);
    raw_exchange(addr, vec![[head.as_bytes(), first.as_bytes()].concat(), rest.as_bytes().to_vec()], pause)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_holds_a_slot_from_before_the_body_until_the_load_ends() {
    let s = start(Auth::Open, |c| c.max_loads_per_actor = 2).await;
    let addr = s.addr;
    // Two loads whose bodies take 2 s to arrive: both admitted at once.
    let slow: Vec<_> = (0..2)
        .map(|i| tokio::task::spawn_blocking(move || slow_load(addr, person(&format!("slow{i}"), 1), Duration::from_secs(2))))
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    // The third is refused before its body is read: the slots are taken.
    let r = post_ndjson(&s, "/graphs/g/load/ndjson", &person("third", 1)).await;
    assert_eq!(r.status(), 429, "{:?}", r.text().await);
    for answer in slow {
        let answer = answer.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // Finished loads give their slots back.
    let r = post_ndjson(&s, "/graphs/g/load/ndjson", &person("fourth", 1)).await;
    assert_eq!(r.status(), 200);
    let zero = start(Auth::Open, |c| c.max_loads_per_actor = 0).await;
    let r = post_ndjson(&zero, "/graphs/g/load/ndjson", &person("A", 1)).await;
    assert_eq!((r.status().as_u16(), r.headers()["retry-after"].to_str().unwrap()), (429, "1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rights_a_missing_graph_looks_like_an_existing_one() {
    let config = format!("[[token]]\nactor = \"reader\"\nsha256 = \"{}\"\ngraphs = {{ g = [\"read\"] }}\n", sha256_hex(b"read-token"));
    let s = start(Auth::from_toml(&config).unwrap(), |_| {}).await;
    let get = |graph: &str| client().get(format!("{}/graphs/{graph}/schema", s.url)).bearer_auth("read-token").send();
    assert_eq!(get("empty").await.unwrap().status(), 403, "exists, no rights");
    assert_eq!(get("missing").await.unwrap().status(), 403, "missing, no rights: the same answer");
    assert_eq!(get("g").await.unwrap().status(), 200);
    // The gateway's question: may this caller do X here? The load's own answers.
    let access = |graph: &str, permission: &str, token: Option<&str>| {
        let call = client().get(format!("{}/graphs/{graph}/access?permission={permission}", s.url));
        match token {
            Some(t) => call.bearer_auth(t),
            None => call,
        }
        .send()
    };
    assert_eq!(access("g", "read", Some("read-token")).await.unwrap().status(), 204);
    assert_eq!(access("g", "change", Some("read-token")).await.unwrap().status(), 403);
    assert_eq!(access("g", "change", None).await.unwrap().status(), 401);
    assert_eq!(access("missing", "read", Some("read-token")).await.unwrap().status(), 403);
    assert_eq!(access("g", "fly", Some("read-token")).await.unwrap().status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_bounds_are_enforced_and_reported_on_every_route() {
    let s = start(Auth::Open, |c| c.engine.limits.max_table_rows = 2).await;
    let three = format!("{}{}{}", person("A", 1), person("B", 1), person("C", 1));
    let (_, rules) = json_of(client().get(format!("{}/graphs/g/rules", s.url)).send().await.unwrap()).await;
    assert_eq!(rules["bounds"]["max_table_rows"], 2, "/rules reports what is enforced");
    assert_eq!(rules["legacy_identity"], false);
    for route in ["/graphs/g/load/ndjson", "/graphs/g/validate"] {
        let (status, body) = json_of(post_ndjson(&s, route, &three).await).await;
        assert_eq!((status, body["code"].as_str()), (413, Some("table_rows_limit")), "{route}: {body}");
        assert_eq!((body["details"]["resource"].as_str(), body["details"]["limit"].as_u64(), body["details"]["actual"].as_u64()), (Some("rows:Person"), Some(2), Some(3)));
    }
    let compat = client().post(format!("{}/graphs/g/load", s.url)).json(&serde_json::json!({"data": three})).send().await.unwrap();
    assert_eq!(compat.status(), 413);
    let (status, _) = json_of(post_ndjson(&s, "/graphs/g/validate", &person("A", 1)).await).await;
    assert_eq!(status, 200);
    assert_eq!(counts(&reopen(&s.place.child("g")).await, "main").await["Person"], 0, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_an_in_flight_load_finish() {
    let mut s = start(Auth::Open, |_| {}).await;
    let body: String = (0..8_000).map(|i| person(&format!("p{i}"), 1)).collect();
    let url = format!("{}/graphs/g/load/ndjson", s.url);
    let load = tokio::spawn(async move {
        client().post(url).header("content-type", "application/x-ndjson").body(body).send().await.unwrap().status()
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    s.stop.take().unwrap().send(()).unwrap();
    assert_eq!(load.await.unwrap(), 200, "the load in flight was answered");
    let graph = reopen(&s.place.child("g")).await;
    assert_eq!(counts(&graph, "main").await["Person"], 8_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_another_host_is_writing_answers_503_with_retry_after() {
    let s = start(Auth::Open, |c| c.engine.lease_wait = Duration::from_millis(200)).await;
    // Another host holds the write lease for a while.
    let until = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64 + 60_000;
    s.place
        .child("g")
        .root()
        .put(
            &format!("_graph/lease/{:020}.json", 999),
            format!("{{\"owner\":\"other-host\",\"generation\":999,\"expires_at_ms\":{until}}}").into_bytes(),
        )
        .await
        .unwrap();
    let r = post_ndjson(&s, "/graphs/g/load/ndjson", &person("A", 1)).await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let (_, body) = json_of(r).await;
    assert_eq!(body["code"], "graph_busy");
}

/// The member `name` of a JSON object, as its text in `body`.
fn raw_member(body: &str, name: &str) -> String {
    let members: std::collections::HashMap<String, Box<serde_json::value::RawValue>> = serde_json::from_str(body).unwrap();
    members[name].get().to_owned()
}

/// Every answer that carries a report carries the validator's very bytes
/// (SPEC §3: byte for byte), not a re-serialization: a dry run, a batch
/// refused by the validator, and one refused by the stateful checks, each
/// with external refs (the part of a report that can outgrow the batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_carry_the_validators_report_byte_for_byte() {
    let s = start(Auth::Open, |_| {}).await;
    post_ndjson(&s, "/graphs/g/load/ndjson", &format!("{}{}", person("Ada", 1), person("Bo", 2))).await;
    let schema = omnigraph_validate_wasm::Schema::compile(SCHEMA).unwrap();
    let report = |batch: &str| {
        let options = omnigraph_validate_wasm::Options::default();
        omnigraph_validate_wasm::validate(&schema, &options, batch.as_bytes()).to_json()
    };
    let text = |r: reqwest::Response| async move { (r.status().as_u16(), r.text().await.unwrap()) };

    let resolvable = format!("{}{}", knows("k1", "Ada", "Bo"), knows("k2", "Bo", "Ada"));
    let (status, body) = text(post_ndjson(&s, "/graphs/g/validate", &resolvable).await).await;
    assert_eq!(status, 200, "{body}");
    assert!(report(&resolvable).contains("\"external_refs\":[{"), "the batch's endpoints are stored, not in it");
    assert_eq!(raw_member(&body, "report"), report(&resolvable));

    let invalid = format!("{}{{\"type\":\"Persn\"}}\n", knows("k3", "Ada", "Bo"));
    let (status, body) = text(post_ndjson(&s, "/graphs/g/validate", &invalid).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(raw_member(&body, "report"), report(&invalid));
    let (status, body) = text(post_ndjson(&s, "/graphs/g/load/ndjson", &invalid).await).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(raw_member(&raw_member(&body, "details"), "report"), report(&invalid));

    let dangling = knows("k4", "Ada", "Nobody");
    let (status, body) = text(post_ndjson(&s, "/graphs/g/load/ndjson", &dangling).await).await;
    assert_eq!(status, 422, "{body}");
    let details = raw_member(&body, "details");
    assert_eq!(raw_member(&details, "report"), report(&dangling));
    assert!(raw_member(&details, "conflicts").contains("dangling_endpoint"), "{details}");
}
