//! Request bodies: media type (415), the bound (413), a share of the
//! in-flight byte budget (503 `server_busy`) and the read deadline (408),
//! checked in that order before a byte is read.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use crate::limits::MAX_CONTROL_BODY_BYTES;

use super::error::*;
use super::state::*;

/// Content-Length over the bound is refused before anything is read.
pub(super) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
}

/// What a request body is: its media type (else 415), its bound and its
/// 413's code.
#[derive(Clone, Copy)]
pub(super) enum BodyKind {
    /// An NDJSON batch (strict loads, dry runs): `limits.max_batch_bytes`, SPEC §5.
    Ndjson,
    /// The compat route's JSON wrapper of a batch: the same bound.
    CompatJson,
    /// A small JSON request (branch creation): [`MAX_CONTROL_BODY_BYTES`].
    Control,
}

impl BodyKind {
    pub(super) fn media_type(self) -> &'static str {
        match self {
            BodyKind::Ndjson => "application/x-ndjson",
            BodyKind::CompatJson | BodyKind::Control => "application/json",
        }
    }

    pub(super) fn limit(self, state: &AppState) -> u64 {
        match self {
            BodyKind::Ndjson | BodyKind::CompatJson => state.config.engine.limits.max_batch_bytes,
            BodyKind::Control => MAX_CONTROL_BODY_BYTES,
        }
    }

    pub(super) fn too_large(self, limit: u64, actual: u64) -> ApiError {
        let (code, resource) = match self {
            BodyKind::Ndjson | BodyKind::CompatJson => ("batch_bytes_limit", "batch_bytes"),
            BodyKind::Control => ("body_too_large", "body_bytes"),
        };
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, format!("the body exceeds {limit} bytes"))
            .details(json!({"resource": resource, "limit": limit, "actual": actual}))
    }

    /// 415 unless the request's media type (parameters aside) is this kind's.
    pub(super) fn check_media_type(self, headers: &HeaderMap) -> Result<(), ApiError> {
        let expected = self.media_type();
        let given = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if given.split(';').next().map(str::trim).is_some_and(|t| t.eq_ignore_ascii_case(expected)) {
            return Ok(());
        }
        Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", format!("this route takes Content-Type: {expected}")))
    }
}

/// A request body and its share of the server's in-flight byte budget;
/// keep `budget` alive as long as the bytes (or a copy of them) are held.
pub(super) struct HeldBody {
    pub(super) bytes: Bytes,
    pub(super) budget: OwnedSemaphorePermit,
}

/// The body, within the server's bounds: refused by media type (415) and by
/// `Content-Length` before reading, refused (503) when the in-flight budget cannot hold it, cut off
/// while reading a body that runs over, and timed out (408) when it trickles.
pub(super) async fn read_bounded(state: &AppState, headers: &HeaderMap, body: Body, kind: BodyKind) -> Result<HeldBody, ApiError> {
    kind.check_media_type(headers)?;
    let limit = kind.limit(state);
    let declared = content_length(headers);
    if let Some(len) = declared
        && len > limit
    {
        return Err(kind.too_large(limit, len));
    }
    let reserve = declared.unwrap_or(limit).max(1);
    let mut budget = u32::try_from(reserve)
        .ok()
        .and_then(|n| state.body_budget.clone().try_acquire_many_owned(n).ok())
        .ok_or_else(|| {
            let mut e = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                format!("the server holds its limit of {} body bytes in flight", state.config.max_inflight_bytes),
            );
            e.retry_after = true;
            e
        })?;
    let timeout = state.config.body_read_timeout;
    let read = tokio::time::timeout(timeout, axum::body::to_bytes(body, limit as usize)).await.map_err(|_| {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", format!("the body did not arrive within {} ms", timeout.as_millis()))
    })?;
    let bytes = read.map_err(|e| {
        let text = e.to_string();
        if text.contains("length limit") {
            // The stream ran over the bound: the actual size is unknown.
            kind.too_large(limit, limit + 1)
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "body_error", format!("reading the body: {text}"))
        }
    })?;
    // A body of unknown length gives back what it did not use.
    let used = bytes.len().clamp(1, budget.num_permits());
    drop(budget.split(budget.num_permits() - used));
    Ok(HeldBody { bytes, budget })
}
