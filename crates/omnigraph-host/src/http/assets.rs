//! The upload page and its files (`web/`), embedded at build time and
//! served with entity tags, so a returning browser revalidates (304).

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::auth::sha256_hex;

use super::error::*;
use super::request::*;

/// The upload page (`web/`), embedded at build time so the binary serves it
/// from anywhere.
pub(super) const INDEX_HTML: &str = include_str!("../../../../web/index.html");

/// Files under `/web/`: path, content type, bytes. The validator is the very
/// artifact the host runs.
pub(super) const ASSETS: [(&str, &str, &[u8]); 8] = [
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("../../../../web/app.js")),
    ("load.js", "text/javascript; charset=utf-8", include_bytes!("../../../../web/load.js")),
    ("worker.js", "text/javascript; charset=utf-8", include_bytes!("../../../../web/worker.js")),
    ("split.js", "text/javascript; charset=utf-8", include_bytes!("../../../../web/split.js")),
    ("warm.js", "text/javascript; charset=utf-8", include_bytes!("../../../../web/warm.js")),
    ("style.css", "text/css; charset=utf-8", include_bytes!("../../../../web/style.css")),
    ("pkg/web/validate.js", "text/javascript; charset=utf-8", include_bytes!("../../../../web/pkg/web/validate.js")),
    ("pkg/web/validate_bg.wasm", "application/wasm", crate::validator::ARTIFACT),
];

/// The upload page.
#[utoipa::path(get, path = "/", responses((status = 200, description = "the upload page")))]
pub(super) async fn index(headers: HeaderMap) -> Response {
    static TAG: LazyLock<String> = LazyLock::new(|| entity_tag(INDEX_HTML.as_bytes()));
    revalidated(&headers, &TAG, "text/html; charset=utf-8", INDEX_HTML.as_bytes())
}

/// A strong entity tag for an embedded file: its SHA-256.
pub(super) fn entity_tag(bytes: &[u8]) -> String {
    format!("\"{}\"", sha256_hex(bytes))
}

/// An embedded file that browsers keep but ask about on every visit
/// (`no-cache`): a page reload moves 304s, not the 1 MB validator.
pub(super) fn revalidated(headers: &HeaderMap, tag: &str, content_type: &'static str, bytes: &'static [u8]) -> Response {
    let cache = [(header::CACHE_CONTROL, "no-cache"), (header::ETAG, tag)];
    let unchanged = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == tag);
    if unchanged {
        (StatusCode::NOT_MODIFIED, cache).into_response()
    } else {
        (cache, [(header::CONTENT_TYPE, content_type)], bytes).into_response()
    }
}

/// The upload page's scripts, styles and the validator module.
#[utoipa::path(get, path = "/web/{path}", params(("path" = String, Path)),
    responses((status = 200, description = "the file"), (status = 404, description = "no such file")))]
pub(super) async fn asset(Checked(Path(path)): Checked<Path<String>>, headers: HeaderMap) -> Response {
    static TAGS: LazyLock<Vec<String>> = LazyLock::new(|| ASSETS.iter().map(|(_, _, bytes)| entity_tag(bytes)).collect());
    match ASSETS.iter().position(|(name, _, _)| *name == path) {
        Some(i) => revalidated(&headers, &TAGS[i], ASSETS[i].1, ASSETS[i].2),
        None => ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no file /web/{path}")).into_response(),
    }
}
