//! The validator's options: mode, strict/compat, error cap and bounds
//! ([`Limits`]), read from JSON.

use serde::{Deserialize, Serialize};

use crate::limits::{DEFAULT_MAX_ERRORS, Limits, MAX_ERRORS_CEILING};

/// Load modes (SPEC §4.3). The validator needs the mode for duplicate ids,
/// the rows bound and overwrite's dangling endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Merge,
    Append,
    Overwrite,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Merge => "merge",
            Mode::Append => "append",
            Mode::Overwrite => "overwrite",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    pub mode: Mode,
    /// `true`: the strict NDJSON envelope (SPEC §2.1); `false`: the
    /// compatibility parser (SPEC §2.6).
    pub strict: bool,
    /// How many errors the report lists (1 ..= `MAX_ERRORS_CEILING`); all are counted.
    pub max_errors: u32,
    pub limits: Limits,
    /// Legacy identity (SPEC §2.3): a record of a type that declares no
    /// property `id` may carry its identity as `data.id` when the top-level
    /// `id` is absent; both together are `ambiguous_id`. A keyed node's
    /// `data.id` must equal its canonical key, like a top-level id.
    pub legacy_identity: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Merge,
            strict: true,
            max_errors: DEFAULT_MAX_ERRORS,
            limits: Limits::default(),
            legacy_identity: false,
        }
    }
}

/// Options given as JSON that do not parse or are out of their range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError(pub String);

impl std::fmt::Display for OptionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid options: {}", self.0)
    }
}

impl std::error::Error for OptionsError {}

impl Options {
    /// Parses options from JSON (`{}` gives the defaults) and checks their ranges.
    pub fn from_json(text: &[u8]) -> Result<Options, OptionsError> {
        let options: Options = serde_json::from_slice(text).map_err(|e| OptionsError(e.to_string()))?;
        options.checked()
    }

    pub fn checked(self) -> Result<Options, OptionsError> {
        if self.max_errors == 0 || self.max_errors > MAX_ERRORS_CEILING {
            return Err(OptionsError(format!("max_errors must be between 1 and {MAX_ERRORS_CEILING}")));
        }
        let l = &self.limits;
        if l.max_json_depth == 0 || l.max_json_structure == 0 {
            return Err(OptionsError("JSON bounds must be at least 1".into()));
        }
        Ok(self)
    }
}
