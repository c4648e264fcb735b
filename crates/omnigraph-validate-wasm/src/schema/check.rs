//! `@check` patterns (SPEC §1.4): decided once, from the pattern's syntax
//! tree, whether a plain substring, prefix, suffix or equality test gives
//! exactly `Regex::is_match`; only other patterns build a regex, and only
//! when a value first needs it.

use std::sync::OnceLock;

use memchr::memmem::Finder;
use regex::{Regex, RegexBuilder};
use regex_syntax::hir::{Hir, HirKind, Look};

use crate::limits::MAX_REGEX_COMPILED_BYTES;

#[derive(Debug, Clone)]
pub struct CheckRule {
    pub prop: usize,
    /// The pattern as written (messages, the catalog).
    pub pattern: String,
    matcher: Matcher,
}

/// How a value is tested. Literals are bytes of valid UTF-8 (the pattern is
/// a `&str` and the translator runs in UTF-8 mode).
#[derive(Clone)]
#[allow(clippy::large_enum_variant, reason = "one per `@check` rule; a box would add a load to every match (64-bit targets only: smaller in wasm32)")]
enum Matcher {
    /// Unanchored literal: `abc`, its searcher built once (building one
    /// per value, as `memmem::find` does, was a loop over the value's bytes
    /// in the artifact: docs/lab/2026-12-04-fewer-loop-turns.md).
    Contains(Finder<'static>),
    /// `^abc`.
    Prefix(String),
    /// `abc$`.
    Suffix(String),
    /// `^abc$`.
    Exact(String),
    /// Anything else, built on first use.
    Regex(OnceLock<Regex>),
}

impl std::fmt::Debug for Matcher {
    /// Whether a regex is built yet is not part of what a rule is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Matcher::Contains(lit) => f.debug_tuple("Contains").field(&String::from_utf8_lossy(lit.needle())).finish(),
            Matcher::Prefix(lit) => f.debug_tuple("Prefix").field(lit).finish(),
            Matcher::Suffix(lit) => f.debug_tuple("Suffix").field(lit).finish(),
            Matcher::Exact(lit) => f.debug_tuple("Exact").field(lit).finish(),
            Matcher::Regex(_) => f.write_str("Regex"),
        }
    }
}

impl CheckRule {
    /// The rule for `pattern`, or the regex crate's error for an invalid one
    /// (a schema error). The regex is built here, literal or not, so a
    /// schema is refused for exactly the patterns the regex crate refuses
    /// (its size limit included).
    pub(crate) fn compile(prop: usize, pattern: String) -> Result<CheckRule, regex::Error> {
        let regex = build(&pattern)?;
        let matcher = literal_matcher(&pattern).unwrap_or_else(|| Matcher::Regex(OnceLock::from(regex)));
        Ok(CheckRule { prop, pattern, matcher })
    }

    /// The rule for a pattern that [`CheckRule::compile`] accepted before
    /// (a compiled schema read back): its regex waits for its first value.
    pub(crate) fn accepted(prop: usize, pattern: String) -> CheckRule {
        let matcher = literal_matcher(&pattern).unwrap_or_else(|| Matcher::Regex(OnceLock::new()));
        CheckRule { prop, pattern, matcher }
    }

    /// Exactly `Regex::new(pattern).is_match(value)`.
    pub fn is_match(&self, value: &str) -> bool {
        match &self.matcher {
            Matcher::Contains(lit) => lit.find(value.as_bytes()).is_some(),
            Matcher::Prefix(lit) => value.starts_with(lit.as_str()),
            Matcher::Suffix(lit) => value.ends_with(lit.as_str()),
            Matcher::Exact(lit) => value == lit,
            Matcher::Regex(regex) => regex
                .get_or_init(|| build(&self.pattern).expect("an accepted pattern builds"))
                .is_match(value),
        }
    }
}

fn build(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern).size_limit(MAX_REGEX_COMPILED_BYTES).build()
}

/// A literal test equal to the regex, when the pattern's syntax tree is a
/// literal with at most a start-of-text and an end-of-text anchor (no
/// flags: `(?i)` turns literals into classes, `(?m)` changes the anchors'
/// look-around kind, so neither is taken here).
fn literal_matcher(pattern: &str) -> Option<Matcher> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let parts: Vec<&Hir> = match hir.kind() {
        HirKind::Concat(parts) => parts.iter().collect(),
        _ => vec![&hir],
    };
    let (start, rest) = match parts.split_first() {
        Some((first, rest)) if is_look(first, Look::Start) => (true, rest),
        _ => (false, parts.as_slice()),
    };
    let (end, middle) = match rest.split_last() {
        Some((last, middle)) if is_look(last, Look::End) => (true, middle),
        _ => (false, rest),
    };
    let mut literal = Vec::new();
    for part in middle {
        match part.kind() {
            HirKind::Literal(lit) => literal.extend_from_slice(&lit.0),
            HirKind::Empty => {}
            _ => return None,
        }
    }
    let literal = String::from_utf8(literal).ok()?;
    Some(match (start, end) {
        (false, false) => Matcher::Contains(Finder::new(&literal).into_owned()),
        (true, false) => Matcher::Prefix(literal),
        (false, true) => Matcher::Suffix(literal),
        (true, true) => Matcher::Exact(literal),
    })
}

fn is_look(hir: &Hir, look: Look) -> bool {
    matches!(hir.kind(), HirKind::Look(l) if *l == look)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind(pattern: &str) -> &'static str {
        match CheckRule::compile(0, pattern.into()).unwrap().matcher {
            Matcher::Contains(_) => "contains",
            Matcher::Prefix(_) => "prefix",
            Matcher::Suffix(_) => "suffix",
            Matcher::Exact(_) => "exact",
            Matcher::Regex(_) => "regex",
        }
    }

    #[test]
    fn literal_patterns_skip_the_regex() {
        assert_eq!(kind("@"), "contains");
        assert_eq!(kind("a\\.b"), "contains");
        assert_eq!(kind(""), "contains");
        assert_eq!(kind("^SN-"), "prefix");
        assert_eq!(kind("\\.com$"), "suffix");
        assert_eq!(kind("^ok$"), "exact");
        assert_eq!(kind("^$"), "exact");
        // Anything else keeps the regex: classes, repetition, flags,
        // multi-line anchors, word boundaries, alternation.
        for pattern in ["^[^@ ]+@[^@ ]+$", "a+", "(?i)abc", "(?m)^a$", "\\bword", "a|b", "a.c", "$a", "a^"] {
            assert_eq!(kind(pattern), "regex", "{pattern}");
        }
    }

    #[test]
    fn accepted_rules_build_their_regex_on_first_use() {
        let rule = CheckRule::accepted(0, "^[a-z]+$".into());
        let Matcher::Regex(cell) = &rule.matcher else { panic!("not a regex") };
        assert!(cell.get().is_none());
        assert!(rule.is_match("abc") && !rule.is_match("a1"));
        assert!(cell.get().is_some());
    }

    proptest! {
        // Patterns and values over an alphabet rich in anchors, escapes and
        // multi-byte characters: every matcher answers exactly as the regex.
        #[test]
        fn every_matcher_agrees_with_the_regex(
            pattern in proptest::string::string_regex("[\\^$ab.é\\\\]{0,6}").unwrap(),
            values in proptest::collection::vec(proptest::string::string_regex("[ab.é^$\\\\]{0,8}").unwrap(), 1..8),
        ) {
            let Ok(regex) = Regex::new(&pattern) else { return Ok(()) };
            let compiled = CheckRule::compile(0, pattern.clone()).unwrap();
            let accepted = CheckRule::accepted(0, pattern.clone());
            for value in &values {
                prop_assert_eq!(compiled.is_match(value), regex.is_match(value), "{:?} on {:?}", pattern, value);
                prop_assert_eq!(accepted.is_match(value), regex.is_match(value), "{:?} on {:?}", pattern, value);
            }
        }
    }
}
