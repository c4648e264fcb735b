//! A pull parser for strict JSON (RFC 8259 + the I-JSON rules we need).
//!
//! It never builds a tree: the envelope and value decoders pull tokens and
//! decode straight into typed values. It counts structural tokens and depth as
//! it goes, so a hostile line is refused before it costs more than a scan.
//! Strings borrow from the input unless they contain escapes. More in lib.rs.
//!
//! Over 600 lines only with its unit tests: the tokenizer is one loop over
//! the input, its states in one place.

use std::borrow::Cow;

/// A fatal problem: the rest of the record cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    Syntax { pos: usize, message: String },
    /// The input ended inside a value (an unterminated record).
    Eof { pos: usize },
    TooComplex { pos: usize, message: String },
    LoneSurrogate { pos: usize },
}

impl JsonError {
    fn syntax(pos: usize, message: impl Into<String>) -> Self {
        JsonError::Syntax { pos, message: message.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

impl Kind {
    pub fn article(self) -> &'static str {
        match self {
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Bool => "a boolean",
            Kind::Null => "null",
        }
    }
}

/// A number literal exactly as written (grammar already checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumLit<'a> {
    pub text: &'a str,
    /// No fraction and no exponent.
    pub integer: bool,
}

/// A duplicate member found while parsing; not fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    pub pos: usize,
    pub path: String,
}

/// Member names of one object: a short list, then a hash set once objects
/// get large, so hostile objects stay linear.
#[derive(Default)]
pub struct KeySet<'a> {
    small: Vec<Cow<'a, str>>,
    large: std::collections::HashSet<Cow<'a, str>>,
}

const KEYSET_SMALL: usize = 16;

impl<'a> KeySet<'a> {
    /// False if the key was already present.
    pub fn insert(&mut self, key: Cow<'a, str>) -> bool {
        if self.large.is_empty() {
            if self.small.contains(&key) {
                return false;
            }
            if self.small.len() < KEYSET_SMALL {
                self.small.push(key);
                return true;
            }
            self.large.extend(self.small.drain(..));
        }
        self.large.insert(key)
    }
}

pub struct Cursor<'a> {
    src: &'a str,
    pub pos: usize,
    depth: u32,
    structure: u64,
    max_depth: u32,
    max_structure: u64,
    /// In compat mode duplicates are allowed (the last one wins).
    pub reject_duplicates: bool,
    pub duplicates: Vec<Duplicate>,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each of the 8 bytes in `w` that is `"`, `\` or a control
/// character (the SWAR zero-byte test). A test can only misfire on a byte
/// above one that truly matched, through the borrow, so the lowest bit set
/// is exactly the first byte that needs attention.
#[inline]
fn attention(w: u64) -> u64 {
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let quote = zero_byte(w ^ (ONES * b'"' as u64));
    let backslash = zero_byte(w ^ (ONES * b'\\' as u64));
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    quote | backslash | control
}

/// Advances `p` past string bytes that need no attention.
#[inline]
pub(crate) fn scan_plain(b: &[u8], p: usize) -> usize {
    scan_plain_ascii(b, p).0
}

/// Advances `p` past string bytes that need no attention, 16 at a time in
/// vector registers, then 8 at a time in a word, then byte by byte; also
/// tells whether any byte passed is not ASCII (only then does the text need
/// a UTF-8 check).
#[inline(always)]
pub(crate) fn scan_plain_ascii(b: &[u8], mut p: usize) -> (usize, bool) {
    let mut high_lanes = 0u32;
    while let Some(chunk) = b.get(p..p + lanes::WIDTH) {
        let (stop, high) = lanes::attention(chunk.try_into().expect("16 bytes"));
        if stop != 0 {
            let passed = stop.trailing_zeros();
            // The lanes before the stop: fewer than 16, so the shift fits.
            high_lanes |= high & ((1u32 << passed) - 1);
            return (p + passed as usize, high_lanes != 0);
        }
        high_lanes |= high;
        p += lanes::WIDTH;
    }
    let (end, high) = scan_plain_words(b, p);
    (end, high || high_lanes != 0)
}

/// 16 bytes at once, as one SSE2 register (every x86-64 has SSE2) or one
/// wasm `simd128` value (the artifact is built with it; the target feature
/// is fixed at build time, so every engine runs the same instructions).
/// Elsewhere (a native build for another architecture) a byte loop.
mod lanes {
    pub const WIDTH: usize = 16;

    /// Bit `i` of the first mask is set when byte `i` is `"`, `\` or a
    /// control character; bit `i` of the second when byte `i` is above ASCII.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    pub fn attention(chunk: &[u8; WIDTH]) -> (u32, u32) {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the load is unaligned and reads
        // exactly the 16 bytes of `chunk`.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // Unsigned `v <= 0x1F`: SSE2 compares bytes as signed only.
            let control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1F)), _mm_set1_epi8(0x1F));
            let stop = _mm_or_si128(_mm_or_si128(quote, backslash), control);
            (_mm_movemask_epi8(stop) as u32, _mm_movemask_epi8(v) as u32)
        }
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline]
    pub fn attention(chunk: &[u8; WIDTH]) -> (u32, u32) {
        use std::arch::wasm32::*;
        // SAFETY: an unaligned load of exactly the 16 bytes of `chunk`.
        let v = unsafe { v128_load(chunk.as_ptr().cast()) };
        let quote = u8x16_eq(v, u8x16_splat(b'"'));
        let backslash = u8x16_eq(v, u8x16_splat(b'\\'));
        let control = u8x16_lt(v, u8x16_splat(0x20));
        let stop = v128_or(v128_or(quote, backslash), control);
        (u32::from(u8x16_bitmask(stop)), u32::from(u8x16_bitmask(v)))
    }

    #[cfg(not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128"))))]
    pub use portable_attention as attention;

    /// `attention` without vector instructions: what other architectures
    /// run, and what the tests hold the vector versions to.
    #[cfg(any(test, not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))))]
    #[inline]
    pub fn portable_attention(chunk: &[u8; WIDTH]) -> (u32, u32) {
        let (mut stop, mut high) = (0u32, 0u32);
        for (i, &c) in chunk.iter().enumerate() {
            stop |= u32::from(c < 0x20 || c == b'"' || c == b'\\') << i;
            high |= u32::from(c >= 0x80) << i;
        }
        (stop, high)
    }
}

/// `scan_plain_ascii` 8 bytes at a time in a word (SWAR), for what is left
/// after the vector loop.
#[inline]
fn scan_plain_words(b: &[u8], mut p: usize) -> (usize, bool) {
    let mut seen = 0u64;
    while let Some(word) = b.get(p..p + 8) {
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let stop = attention(w);
        if stop != 0 {
            let passed = stop.trailing_zeros() as usize / 8;
            // The bytes before the stop: fewer than 8, so the shift fits.
            seen |= w & ((1u64 << (8 * passed)) - 1);
            return (p + passed, seen & HIGHS != 0);
        }
        seen |= w;
        p += 8;
    }
    let mut high = seen & HIGHS != 0;
    while let Some(&c) = b.get(p) {
        if c < 0x20 || c == b'"' || c == b'\\' {
            break;
        }
        high |= c >= 0x80;
        p += 1;
    }
    (p, high)
}

impl<'a> Cursor<'a> {
    pub fn new(src: &'a str, max_depth: u32, max_structure: u64) -> Self {
        Cursor { src, pos: 0, depth: 0, structure: 0, max_depth, max_structure, reject_duplicates: true, duplicates: Vec::new() }
    }

    /// Starts counting structure and depth afresh (one record per count).
    pub fn reset_bounds(&mut self) {
        self.depth = 0;
        self.structure = 0;
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    pub fn skip_ws(&mut self) {
        let b = self.bytes();
        while let Some(&c) = b.get(self.pos) {
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn structural(&mut self) -> Result<(), JsonError> {
        self.structure += 1;
        if self.structure > self.max_structure {
            return Err(JsonError::TooComplex {
                pos: self.pos,
                message: format!("more than {} structural characters ({{ }} [ ] , :) in one record", self.max_structure),
            });
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(JsonError::TooComplex {
                pos: self.pos,
                message: format!("nesting deeper than {} levels", self.max_depth),
            });
        }
        self.structural()
    }

    fn unexpected(&self, expected: &str) -> JsonError {
        match self.src[self.pos.min(self.src.len())..].chars().next() {
            None => JsonError::Eof { pos: self.pos },
            Some(c) => JsonError::syntax(self.pos, format!("expected {expected}, found {c:?}")),
        }
    }

    /// The kind of the next value (after whitespace), without consuming it.
    pub fn peek_kind(&mut self) -> Result<Kind, JsonError> {
        self.skip_ws();
        match self.bytes().get(self.pos) {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b't' | b'f') => Ok(Kind::Bool),
            Some(b'n') => Ok(Kind::Null),
            _ => Err(self.unexpected("a JSON value")),
        }
    }

    fn literal(&mut self, word: &str) -> Result<(), JsonError> {
        if self.src[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            let rest = &self.bytes()[self.pos..];
            if word.as_bytes().starts_with(rest) {
                return Err(JsonError::Eof { pos: self.src.len() });
            }
            Err(JsonError::syntax(self.pos, format!("invalid literal; expected {word}")))
        }
    }

    pub fn parse_null(&mut self) -> Result<(), JsonError> {
        self.skip_ws();
        self.literal("null")
    }

    pub fn parse_bool(&mut self) -> Result<bool, JsonError> {
        self.skip_ws();
        if self.bytes().get(self.pos) == Some(&b't') {
            self.literal("true").map(|_| true)
        } else {
            self.literal("false").map(|_| false)
        }
    }

    pub fn parse_number(&mut self) -> Result<NumLit<'a>, JsonError> {
        self.skip_ws();
        let b = self.bytes();
        let start = self.pos;
        let mut p = start;
        if b.get(p) == Some(&b'-') {
            p += 1;
        }
        match b.get(p) {
            Some(b'0') => p += 1,
            Some(b'1'..=b'9') => {
                while matches!(b.get(p), Some(b'0'..=b'9')) {
                    p += 1;
                }
            }
            None => return Err(JsonError::Eof { pos: p }),
            _ => return Err(JsonError::syntax(p, "invalid number: expected a digit")),
        }
        let mut integer = true;
        if b.get(p) == Some(&b'.') {
            integer = false;
            p += 1;
            let digits = p;
            while matches!(b.get(p), Some(b'0'..=b'9')) {
                p += 1;
            }
            if p == digits {
                return Err(JsonError::syntax(p, "invalid number: expected a digit after '.'"));
            }
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            integer = false;
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            let digits = p;
            while matches!(b.get(p), Some(b'0'..=b'9')) {
                p += 1;
            }
            if p == digits {
                return Err(JsonError::syntax(p, "invalid number: expected a digit in the exponent"));
            }
        }
        if matches!(b.get(p), Some(b'0'..=b'9')) {
            return Err(JsonError::syntax(start, "invalid number: leading zeros are not allowed"));
        }
        self.pos = p;
        Ok(NumLit { text: &self.src[start..p], integer })
    }

    /// A string; borrowed unless it had escapes. Returns it and its start.
    pub fn parse_string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        self.skip_ws();
        let b = self.bytes();
        if b.get(self.pos) != Some(&b'"') {
            return Err(self.unexpected("a string"));
        }
        self.pos += 1;
        let start = self.pos;
        let mut p = scan_plain(b, start);
        match b.get(p) {
            Some(b'"') => {
                self.pos = p + 1;
                return Ok(Cow::Borrowed(&self.src[start..p]));
            }
            None => return Err(JsonError::Eof { pos: p }),
            Some(b'\\') => {}
            Some(_) => return Err(JsonError::syntax(p, "control character in string; escape it (\\n, \\t, \\u0001…)")),
        }
        let mut out = String::with_capacity(p - start + 16);
        out.push_str(&self.src[start..p]);
        loop {
            let run = p;
            p = scan_plain(b, p);
            out.push_str(&self.src[run..p]);
            match b.get(p) {
                Some(b'"') => {
                    self.pos = p + 1;
                    return Ok(Cow::Owned(out));
                }
                None => return Err(JsonError::Eof { pos: p }),
                Some(b'\\') => {
                    let esc = p;
                    p += 1;
                    let c = match b.get(p) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hi = self.hex4(p + 1)?;
                            p += 4;
                            if (0xD800..0xDC00).contains(&hi) {
                                if b.get(p + 1) != Some(&b'\\') || b.get(p + 2) != Some(&b'u') {
                                    return Err(JsonError::LoneSurrogate { pos: esc });
                                }
                                let lo = self.hex4(p + 3)?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(JsonError::LoneSurrogate { pos: esc });
                                }
                                p += 6;
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)).expect("valid pair")
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(JsonError::LoneSurrogate { pos: esc });
                            } else {
                                char::from_u32(hi).expect("not a surrogate")
                            }
                        }
                        None => return Err(JsonError::Eof { pos: p }),
                        Some(_) => {
                            return Err(JsonError::syntax(esc, "invalid escape; JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"));
                        }
                    };
                    out.push(c);
                    p += 1;
                }
                Some(_) => return Err(JsonError::syntax(p, "control character in string; escape it (\\n, \\t, \\u0001…)")),
            }
        }
    }

    fn hex4(&self, at: usize) -> Result<u32, JsonError> {
        let b = self.bytes();
        if at + 4 > b.len() {
            return Err(JsonError::Eof { pos: b.len() });
        }
        let mut v = 0u32;
        for &c in &b[at..at + 4] {
            let d = (c as char).to_digit(16).ok_or_else(|| JsonError::syntax(at, "invalid \\u escape: expected 4 hex digits"))?;
            v = v * 16 + d;
        }
        Ok(v)
    }

    pub fn begin_object(&mut self) -> Result<(), JsonError> {
        self.skip_ws();
        if self.bytes().get(self.pos) != Some(&b'{') {
            return Err(self.unexpected("'{'"));
        }
        self.enter()?;
        self.pos += 1;
        Ok(())
    }

    /// The next member's key (its value comes next), or `None` at `}`.
    /// `first` must start `true` for each object.
    pub fn next_key(&mut self, first: &mut bool) -> Result<Option<(Cow<'a, str>, usize)>, JsonError> {
        self.skip_ws();
        match self.bytes().get(self.pos) {
            Some(b'}') => {
                self.structural()?;
                self.pos += 1;
                self.depth -= 1;
                return Ok(None);
            }
            Some(b',') if !*first => {
                self.structural()?;
                self.pos += 1;
                self.skip_ws();
            }
            _ if *first => {}
            _ => return Err(self.unexpected("',' or '}'")),
        }
        *first = false;
        let at = self.pos;
        if self.bytes().get(self.pos) != Some(&b'"') {
            return Err(self.unexpected("a member name in double quotes"));
        }
        let key = self.parse_string()?;
        self.skip_ws();
        if self.bytes().get(self.pos) != Some(&b':') {
            return Err(self.unexpected("':' after the member name"));
        }
        self.structural()?;
        self.pos += 1;
        Ok(Some((key, at)))
    }

    pub fn begin_array(&mut self) -> Result<(), JsonError> {
        self.skip_ws();
        if self.bytes().get(self.pos) != Some(&b'[') {
            return Err(self.unexpected("'['"));
        }
        self.enter()?;
        self.pos += 1;
        Ok(())
    }

    /// True if another item follows (positioned at it), false at `]`.
    pub fn next_item(&mut self, first: &mut bool) -> Result<bool, JsonError> {
        self.skip_ws();
        match self.bytes().get(self.pos) {
            Some(b']') => {
                self.structural()?;
                self.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            Some(b',') if !*first => {
                self.structural()?;
                self.pos += 1;
                *first = false;
                Ok(true)
            }
            _ if *first => {
                *first = false;
                Ok(true)
            }
            _ => Err(self.unexpected("',' or ']'")),
        }
    }

    /// Parses and discards a value, still checking syntax, bounds and
    /// duplicate members; `path` is the value's JSON Pointer.
    pub fn skip_value(&mut self, path: &mut String) -> Result<(), JsonError> {
        match self.peek_kind()? {
            Kind::Object => {
                self.begin_object()?;
                let mut first = true;
                let mut seen = KeySet::default();
                while let Some((key, at)) = self.next_key(&mut first)? {
                    let len = path.len();
                    pointer_segment(path, &key);
                    if !seen.insert(key) && self.reject_duplicates {
                        self.duplicates.push(Duplicate { pos: at, path: path.clone() });
                    }
                    self.skip_value(path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Kind::Array => {
                self.begin_array()?;
                let mut first = true;
                let mut index = 0usize;
                while self.next_item(&mut first)? {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&index.to_string());
                    self.skip_value(path)?;
                    path.truncate(len);
                    index += 1;
                }
                Ok(())
            }
            Kind::String => self.parse_string().map(drop),
            Kind::Number => self.parse_number().map(drop),
            Kind::Bool => self.parse_bool().map(drop),
            Kind::Null => self.parse_null(),
        }
    }

    /// A cursor at `at` over the same input without bounds or duplicate
    /// checks, for re-reading a value this cursor already checked.
    pub fn reread(&self, at: usize) -> Cursor<'a> {
        Cursor {
            src: self.src,
            pos: at,
            depth: 0,
            structure: 0,
            max_depth: u32::MAX,
            max_structure: u64::MAX,
            reject_duplicates: false,
            duplicates: Vec::new(),
        }
    }
}

/// JSON Pointer (RFC 6901) segment escaping.
pub fn pointer_segment(out: &mut String, segment: &str) {
    out.push('/');
    for ch in segment.chars() {
        match ch {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            _ => out.push(ch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte by byte: where a plain string run ends, and whether it passed a
    /// byte above ASCII.
    fn scan_plain_slowly(b: &[u8], p: usize) -> (usize, bool) {
        let end = (p..b.len()).find(|&i| b[i] < 0x20 || b[i] == b'"' || b[i] == b'\\').unwrap_or(b.len());
        (end, b[p..end].iter().any(|&c| c >= 0x80))
    }

    proptest::proptest! {
        /// The word-at-a-time scan stops exactly where the byte loop does,
        /// whatever the bytes around the stop (a borrow in the SWAR test
        /// could only misfire above it) and wherever the high bytes are.
        #[test]
        fn scan_plain_stops_where_the_byte_loop_does(
            bytes in proptest::collection::vec(proptest::sample::select(vec![b'a', b' ', b'"', b'\\', 0x00, 0x1F, 0x20, 0x7F, 0x80, 0xA2, 0xFF, b'!', b'#', b']']), 0..80),
            from in 0usize..80,
        ) {
            let from = from.min(bytes.len());
            proptest::prop_assert_eq!(scan_plain_ascii(&bytes, from), scan_plain_slowly(&bytes, from));
        }

        /// The vector test marks exactly the lanes the byte loop marks, on
        /// arbitrary 16 bytes (the wasm `simd128` version is held to the
        /// native reports by `parity.rs`: every byte value at every string
        /// position, and the fuzz corpora).
        #[test]
        fn vector_lanes_mark_what_the_byte_loop_marks(chunk in proptest::array::uniform16(proptest::num::u8::ANY)) {
            proptest::prop_assert_eq!(lanes::attention(&chunk), lanes::portable_attention(&chunk));
        }
    }

    fn skip(src: &str) -> Result<Vec<Duplicate>, JsonError> {
        let mut c = Cursor::new(src, 64, 1000);
        c.skip_value(&mut String::new())?;
        Ok(c.duplicates)
    }

    #[test]
    fn finds_duplicates_at_depth() {
        let d = skip(r#"{"a":{"b":[{"c":1,"c":2}]}}"#).unwrap();
        assert_eq!(d, vec![Duplicate { pos: 18, path: "/a/b/0/c".into() }]);
    }

    #[test]
    fn rejects_bad_numbers_and_escapes() {
        assert!(matches!(skip("01"), Err(JsonError::Syntax { .. })));
        assert!(matches!(skip("1."), Err(JsonError::Syntax { .. })));
        assert!(matches!(skip(r#""\ud800""#), Err(JsonError::LoneSurrogate { .. })));
        assert!(matches!(skip(r#""\udc00\ud800""#), Err(JsonError::LoneSurrogate { .. })));
        assert!(matches!(skip("{\"a\":"), Err(JsonError::Eof { .. })));
    }

    #[test]
    fn decodes_escapes_and_pairs() {
        let mut c = Cursor::new(r#""a\n\u00e9\ud83d\ude00""#, 64, 10);
        assert_eq!(c.parse_string().unwrap(), "a\né😀");
    }

    #[test]
    fn fast_scan_stops_at_every_special_byte() {
        for special in ["\\\"", "\\\\", "\\u0001", "\\n"] {
            for at in 0..20 {
                let body = format!("{}{special}{}", "a".repeat(at), "é".repeat(5));
                let json = format!("\"{body}\"");
                let mut c = Cursor::new(&json, 64, 10);
                let expected: String = serde_json::from_str(&json).unwrap();
                assert_eq!(c.parse_string().unwrap(), expected, "{json}");
            }
        }
        let raw_control = format!("\"{}\u{1}\"", "a".repeat(9));
        assert!(Cursor::new(&raw_control, 64, 10).parse_string().is_err());
    }

    #[test]
    fn enforces_depth() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(matches!(skip(&deep), Err(JsonError::TooComplex { .. })));
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(skip(&ok).is_ok());
    }
}
