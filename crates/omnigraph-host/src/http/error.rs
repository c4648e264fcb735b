//! Error answers: `{"error", "code", "details"?}` with the validator's
//! report as it wrote it, and the mapping of engine and auth errors to
//! status codes and codes (docs/errors.md).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::auth::AuthError;
use crate::error::{EngineError, report_bound};
use crate::limits::RETRY_AFTER_SECONDS;

/// An error answer: `{"error", "code", "details"?}`.
pub struct ApiError {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
    pub(super) details: Option<Value>,
    /// `details.report`: the validator's report as it wrote it.
    pub(super) report: Option<Box<RawValue>>,
    pub(super) retry_after: bool,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), details: None, report: None, retry_after: false }
    }

    pub(super) fn details(mut self, details: Value) -> ApiError {
        self.details = Some(details);
        self
    }

    pub(super) fn report(mut self, report_json: &str) -> ApiError {
        self.report = Some(raw_report(report_json).to_owned());
        self
    }
}

/// A validator's report as the validator wrote it: the API carries its very
/// bytes (SPEC §3), neither re-ordered nor re-read into a DOM (the report
/// of a batch of edges whose nodes are stored is larger than the batch).
pub(super) fn raw_report(report_json: &str) -> &RawValue {
    serde_json::from_str(report_json).unwrap_or(RawValue::NULL)
}

/// An error's JSON body: `details` are the error's own members, then the report.
#[derive(Serialize)]
pub(super) struct ErrorBody<'a> {
    pub(super) error: &'a str,
    pub(super) code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) details: Option<ErrorDetails<'a>>,
}

#[derive(Serialize)]
pub(super) struct ErrorDetails<'a> {
    #[serde(flatten)]
    pub(super) members: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) report: Option<&'a RawValue>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let details = (self.details.is_some() || self.report.is_some())
            .then_some(ErrorDetails { members: self.details.as_ref(), report: self.report.as_deref() });
        let body = ErrorBody { error: &self.message, code: self.code, details };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        match e {
            AuthError::Unauthenticated => {
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", "a valid bearer token is required")
            }
            AuthError::Forbidden { actor, permission } => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("actor {actor:?} lacks the {} permission on this graph", permission.as_str()),
            ),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let message = e.to_string();
        let code = e.code();
        let status = match &e {
            EngineError::InvalidBranchName(_) | EngineError::UnknownType(_) | EngineError::MainBranchProtected => {
                StatusCode::BAD_REQUEST
            }
            EngineError::NoGraph(_) | EngineError::BranchNotFound(_) | EngineError::CommitNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            EngineError::GraphExists(_)
            | EngineError::BranchExists(_)
            | EngineError::CommitConflict { .. }
            | EngineError::TargetMoved { .. } => StatusCode::CONFLICT,
            EngineError::Invalid { report_json } => {
                return match report_bound(report_json) {
                    Some((code, limit)) => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
                        .details(json!({"resource": limit["resource"], "limit": limit["limit"], "actual": limit["actual"]}))
                        .report(report_json),
                    None => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message).report(report_json),
                };
            }
            EngineError::BoundExceeded { code, resource, limit, actual } => {
                return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
                    .details(json!({"resource": resource, "limit": limit, "actual": actual}));
            }
            EngineError::Rejected { report_json, conflicts } => {
                let status = if code == "key_conflict" { StatusCode::CONFLICT } else { StatusCode::UNPROCESSABLE_ENTITY };
                return ApiError::new(status, code, message).details(json!({"conflicts": conflicts})).report(report_json);
            }
            EngineError::Validator(crate::validator::ValidatorError::InputTooLarge { bytes, limit }) => {
                return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "bound_exceeded", message)
                    .details(json!({"resource": "validator_memory", "limit": limit, "actual": bytes}));
            }
            EngineError::LeaseBusy { .. }
            | EngineError::LeaseExpired
            | EngineError::RecoveryRequired { .. }
            | EngineError::RecoveryInProgress
            | EngineError::Validator(_) => {
                let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
                e.retry_after = true;
                return e;
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, code, message)
    }
}

pub(super) type ApiResult = Result<Response, ApiError>;
