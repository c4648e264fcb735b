//! Typed values (SPEC §1.3): strict decoding from JSON, canonical rendering
//! (SPEC §2.4), and the calendar arithmetic both need. More in lib.rs.
//!
//! One file of about 750 lines of code: each type's strict decoding sits
//! beside its canonical rendering (they must agree, SPEC §2.4), with the
//! calendar arithmetic both use.

use std::borrow::Cow;

use crate::json::{Cursor, JsonError, Kind, NumLit};
use crate::float::{format_f32, format_f64};
use crate::limits::{MAX_YEAR, MIN_YEAR};
use crate::report::{ErrorCode, echo};
use crate::schema::ValueType;
use crate::words::{digit_bytes, digit_run, word};

/// A decoded property value. Strings borrow from the batch when they can.
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    Null,
    Bool(bool),
    /// I32, I64 and U32 values.
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    /// String and enum values.
    Str(Cow<'a, str>),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since the epoch, UTC.
    Timestamp(i64),
    Blob(Vec<u8>),
    Vector(Vec<f32>),
    List(Vec<Val<'a>>),
    /// A valid blob, vector or list that was only measured: its Arrow
    /// data bytes (validation alone keeps no values, so it builds none).
    Sized(u64),
}

/// Why a value was refused. `pos` is where in the input; `path` a suffix
/// below the property (list items: `/3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub code: ErrorCode,
    pub pos: usize,
    pub path: String,
    pub message: String,
    /// The value has the wrong JSON kind (not merely bad content): what
    /// compat mode may turn into null.
    wrong_kind: bool,
}

impl Invalid {
    fn new(code: ErrorCode, pos: usize, message: String) -> Self {
        Invalid { code, pos, path: String::new(), message, wrong_kind: false }
    }

    /// Compat mode (SPEC §2.6) turns this into null: a value of the wrong
    /// JSON kind for a scalar that is neither a Date nor a DateTime. Lists,
    /// vectors, blobs and dates are never nulled.
    fn nulled_in_compat(&self, ty: &ValueType) -> bool {
        self.wrong_kind
            && matches!(
                ty,
                ValueType::String
                    | ValueType::Enum(_)
                    | ValueType::Bool
                    | ValueType::I32
                    | ValueType::I64
                    | ValueType::U32
                    | ValueType::U64
                    | ValueType::F32
                    | ValueType::F64
            )
    }
}

/// The outcome of decoding one value: JSON errors are fatal for the record,
/// an `Invalid` value is not (the value was consumed).
pub type Decoded<'a> = Result<Result<Val<'a>, Invalid>, JsonError>;

fn mismatch(expected: &str, got: Kind, pos: usize) -> Invalid {
    Invalid { wrong_kind: true, ..Invalid::new(ErrorCode::TypeMismatch, pos, format!("expected {expected}, got {}", got.article())) }
}

/// Decodes the next value as `ty`. `null` gives [`Val::Null`]; the caller
/// applies nullability. In compat mode a scalar of the wrong JSON kind
/// becomes null, and so does a list with such an item (SPEC §2.6; see
/// [`Invalid::nulled_in_compat`]).
pub fn decode<'a>(cur: &mut Cursor<'a>, ty: &ValueType, compat: bool) -> Decoded<'a> {
    let kind = cur.peek_kind()?;
    let pos = cur.pos;
    if kind == Kind::Null {
        cur.parse_null()?;
        return Ok(Ok(Val::Null));
    }
    let decoded = decode_present(cur, ty, kind, pos, compat)?;
    match decoded {
        Err(e) if compat && e.nulled_in_compat(ty) => Ok(Ok(Val::Null)),
        other => Ok(other),
    }
}

fn skip_as<'a>(cur: &mut Cursor<'a>, invalid: Invalid) -> Decoded<'a> {
    cur.skip_value(&mut String::new())?;
    Ok(Err(invalid))
}

fn decode_present<'a>(cur: &mut Cursor<'a>, ty: &ValueType, kind: Kind, pos: usize, compat: bool) -> Decoded<'a> {
    match ty {
        ValueType::String => match kind {
            Kind::String => Ok(Ok(Val::Str(cur.parse_string()?))),
            _ => skip_as(cur, mismatch("a string", kind, pos)),
        },
        ValueType::Enum(values) => match kind {
            Kind::String => {
                let s = cur.parse_string()?;
                if values.iter().any(|v| *v == *s) {
                    Ok(Ok(Val::Str(s)))
                } else {
                    let hint = crate::suggest::hint(&s, values.iter().map(String::as_str));
                    Ok(Err(Invalid::new(
                        ErrorCode::NotInEnum,
                        pos,
                        format!("{} is not one of {}{hint}", echo(&s), values.join(", ")),
                    )))
                }
            }
            _ => skip_as(cur, mismatch("a string (one of the enum values)", kind, pos)),
        },
        ValueType::Bool => match kind {
            Kind::Bool => Ok(Ok(Val::Bool(cur.parse_bool()?))),
            _ => skip_as(cur, mismatch("true or false", kind, pos)),
        },
        ValueType::I32 | ValueType::I64 | ValueType::U32 | ValueType::U64 => match kind {
            Kind::Number => Ok(integer(cur.parse_number()?, ty, pos)),
            _ => skip_as(cur, mismatch("an integer", kind, pos)),
        },
        ValueType::F32 | ValueType::F64 => match kind {
            Kind::Number => Ok(float(cur.parse_number()?, *ty == ValueType::F32, pos)),
            _ => skip_as(cur, mismatch("a number", kind, pos)),
        },
        ValueType::Date => match kind {
            Kind::String => {
                let s = cur.parse_string()?;
                Ok(parse_date(&s)
                    .map(Val::Date)
                    .map_err(|why| Invalid::new(ErrorCode::InvalidDate, pos, format!("{} is not a date: {why}; expected YYYY-MM-DD", echo(&s)))))
            }
            Kind::Number => {
                let n = cur.parse_number()?;
                Ok(date_from_days(n, pos))
            }
            _ => skip_as(cur, mismatch("a date string \"YYYY-MM-DD\" or integer days", kind, pos)),
        },
        ValueType::DateTime => match kind {
            Kind::String => {
                let s = cur.parse_string()?;
                Ok(parse_datetime(&s).map(Val::Timestamp).map_err(|why| {
                    Invalid::new(
                        ErrorCode::InvalidDatetime,
                        pos,
                        format!("{} is not an RFC 3339 date-time: {why}", echo(&s)),
                    )
                }))
            }
            Kind::Number => {
                let n = cur.parse_number()?;
                Ok(timestamp_from_millis(n, pos))
            }
            _ => skip_as(cur, mismatch("an RFC 3339 date-time string or integer milliseconds", kind, pos)),
        },
        ValueType::Blob => match kind {
            Kind::String => {
                let s = cur.parse_string()?;
                match s.strip_prefix("base64:") {
                    Some(b64) => Ok(decode_base64(b64).map(Val::Blob).map_err(|why| {
                        Invalid::new(ErrorCode::InvalidBase64, pos, format!("blob is not canonical padded base64: {why}"))
                    })),
                    None => Ok(Err(Invalid::new(
                        ErrorCode::ExternalBlobNotAllowed,
                        pos,
                        format!("{} is an external blob reference; this graph allows none: send the bytes as \"base64:…\"", echo(&s)),
                    ))),
                }
            }
            _ => skip_as(cur, mismatch("a string \"base64:…\"", kind, pos)),
        },
        ValueType::Vector(n) => match kind {
            Kind::Array => vector(cur, *n, pos),
            _ => skip_as(cur, mismatch(&format!("an array of {n} numbers"), kind, pos)),
        },
        ValueType::List(item) => match kind {
            Kind::Array => list(cur, item, compat),
            _ => skip_as(cur, mismatch(&format!("an array of {}", item.canonical()), kind, pos)),
        },
    }
}

fn vector<'a>(cur: &mut Cursor<'a>, n: u32, pos: usize) -> Decoded<'a> {
    cur.begin_array()?;
    let mut out = Vec::with_capacity(n as usize);
    let mut first = true;
    let mut problem: Option<Invalid> = None;
    let mut count = 0usize;
    while cur.next_item(&mut first)? {
        let item_pos = cur.pos;
        let kind = cur.peek_kind()?;
        if kind != Kind::Number {
            cur.skip_value(&mut String::new())?;
            if problem.is_none() {
                let mut e = mismatch("a number", kind, item_pos);
                e.path = format!("/{count}");
                problem = Some(e);
            }
        } else {
            match float(cur.parse_number()?, true, item_pos) {
                Ok(Val::F32(v)) => out.push(v),
                Ok(_) => unreachable!("float() gives F32 when asked"),
                Err(mut e) if problem.is_none() => {
                    e.path = format!("/{count}");
                    problem = Some(e);
                }
                Err(_) => {}
            }
        }
        count += 1;
    }
    if let Some(e) = problem {
        return Ok(Err(e));
    }
    if count != n as usize {
        return Ok(Err(Invalid::new(
            ErrorCode::VectorDimension,
            pos,
            format!("expected exactly {n} numbers, got {count}"),
        )));
    }
    Ok(Ok(Val::Vector(out)))
}

fn list<'a>(cur: &mut Cursor<'a>, item: &ValueType, compat: bool) -> Decoded<'a> {
    cur.begin_array()?;
    let mut out = Vec::new();
    let mut first = true;
    let mut problem: Option<Invalid> = None;
    // Compat: an item of the wrong JSON kind makes the list null (lists
    // never hold nulls), unless another item is refused outright.
    let mut nulled = false;
    let mut index = 0usize;
    while cur.next_item(&mut first)? {
        let item_pos = cur.pos;
        let kind = cur.peek_kind()?;
        let decoded = if kind == Kind::Null {
            cur.parse_null()?;
            Err(Invalid::new(ErrorCode::NullNotAllowed, item_pos, "list items cannot be null".into()))
        } else {
            decode_present(cur, item, kind, item_pos, false)?
        };
        match decoded {
            Ok(v) => out.push(v),
            Err(e) if compat && e.nulled_in_compat(item) => nulled = true,
            Err(mut e) => {
                if problem.is_none() {
                    e.path = format!("/{index}{}", e.path);
                    problem = Some(e);
                }
            }
        }
        index += 1;
    }
    Ok(match problem {
        Some(e) => Err(e),
        None if nulled => Ok(Val::Null),
        None => Ok(Val::List(out)),
    })
}

/// An integer literal checked against the type's range, exactly.
pub(crate) fn integer<'a>(n: NumLit<'_>, ty: &ValueType, pos: usize) -> Result<Val<'a>, Invalid> {
    if !n.integer {
        return Err(Invalid::new(
            ErrorCode::TypeMismatch,
            pos,
            format!("expected an integer (no fraction or exponent) for {}, got {}", ty.canonical(), echo(n.text)),
        ));
    }
    let (lo, hi): (i128, i128) = match ty {
        ValueType::I32 => (i32::MIN.into(), i32::MAX.into()),
        ValueType::I64 => (i64::MIN.into(), i64::MAX.into()),
        ValueType::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
    };
    let out_of_range =
        || Invalid::new(ErrorCode::OutOfRange, pos, format!("{} is outside the {} range {lo}..={hi}", echo(n.text), ty.canonical()));
    // More than 40 digits cannot fit any i128, let alone our types.
    let v: i128 = if n.text.len() > 40 { return Err(out_of_range()) } else { n.text.parse().map_err(|_| out_of_range())? };
    if v < lo || v > hi {
        return Err(out_of_range());
    }
    Ok(if *ty == ValueType::U64 { Val::UInt(v as u64) } else { Val::Int(v as i64) })
}

const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];
const POW10_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// A short decimal literal as (negative, mantissa, decimal exponent): all
/// its digits as one integer and minus the number of fraction digits.
pub(crate) type Decimal = (bool, u64, i32);

/// The [`Decimal`] of a literal without exponent and of at most 19 digits.
fn decimal_parts(text: &str) -> Option<Decimal> {
    let b = text.as_bytes();
    let (negative, mut p) = if b.first() == Some(&b'-') { (true, 1) } else { (false, 0) };
    let mut mantissa: u64 = 0;
    let mut exp: i32 = 0;
    let mut digits = 0;
    let mut fraction = false;
    while p < b.len() {
        match b[p] {
            c @ b'0'..=b'9' => {
                digits += 1;
                if digits > 19 {
                    return None;
                }
                mantissa = mantissa * 10 + (c - b'0') as u64;
                if fraction {
                    exp -= 1;
                }
            }
            b'.' => fraction = true,
            _ => return None, // exponents take the general path
        }
        p += 1;
    }
    Some((negative, mantissa, exp))
}

/// Clinger's fast path: when the mantissa and the power of ten are both
/// exact in the target width, one IEEE multiply or divide is correctly
/// rounded. Same answer as the general parser, much cheaper.
fn fast_f32(text: &str) -> Option<f32> {
    decimal_parts(text).and_then(clinger_f32)
}

fn fast_f64(text: &str) -> Option<f64> {
    decimal_parts(text).and_then(clinger_f64)
}

pub(crate) fn clinger_f32((negative, m, e): Decimal) -> Option<f32> {
    if m > 1 << 24 || e.unsigned_abs() as usize >= POW10_F32.len() {
        return None;
    }
    let v = if e < 0 { m as f32 / POW10_F32[-e as usize] } else { m as f32 * POW10_F32[e as usize] };
    Some(if negative { -v } else { v })
}

pub(crate) fn clinger_f64((negative, m, e): Decimal) -> Option<f64> {
    if m > 1 << 53 || e.unsigned_abs() as usize >= POW10_F64.len() {
        return None;
    }
    let v = if e < 0 { m as f64 / POW10_F64[-e as usize] } else { m as f64 * POW10_F64[e as usize] };
    Some(if negative { -v } else { v })
}

/// Any JSON number as a float; it must stay finite in the target width.
pub(crate) fn float<'a>(n: NumLit<'_>, f32_wide: bool, pos: usize) -> Result<Val<'a>, Invalid> {
    let too_big = || {
        Invalid::new(
            ErrorCode::OutOfRange,
            pos,
            format!("{} does not fit a finite {}", echo(n.text), if f32_wide { "F32" } else { "F64" }),
        )
    };
    if f32_wide {
        let v: f32 = match fast_f32(n.text) {
            Some(v) => v,
            None => n.text.parse().map_err(|_| too_big())?,
        };
        if !v.is_finite() {
            return Err(too_big());
        }
        Ok(Val::F32(v))
    } else {
        let v: f64 = match fast_f64(n.text) {
            Some(v) => v,
            None => n.text.parse().map_err(|_| too_big())?,
        };
        if !v.is_finite() {
            return Err(too_big());
        }
        Ok(Val::F64(v))
    }
}

fn small_int(n: NumLit<'_>) -> Option<i64> {
    if n.integer && n.text.len() <= 20 { n.text.parse::<i64>().ok() } else { None }
}

pub(crate) fn date_from_days<'a>(n: NumLit<'_>, pos: usize) -> Result<Val<'a>, Invalid> {
    let range = || {
        Invalid::new(
            ErrorCode::InvalidDate,
            pos,
            format!("{} is not a whole number of days between years {MIN_YEAR:04} and {MAX_YEAR}", echo(n.text)),
        )
    };
    let days = small_int(n).ok_or_else(range)?;
    if days < days_from_civil(MIN_YEAR, 1, 1) || days > days_from_civil(MAX_YEAR, 12, 31) {
        return Err(range());
    }
    Ok(Val::Date(days as i32))
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

fn timestamp_bounds() -> (i64, i64) {
    (days_from_civil(MIN_YEAR, 1, 1) * MICROS_PER_DAY, (days_from_civil(MAX_YEAR, 12, 31) + 1) * MICROS_PER_DAY - 1)
}

pub(crate) fn timestamp_from_millis<'a>(n: NumLit<'_>, pos: usize) -> Result<Val<'a>, Invalid> {
    let range = || {
        Invalid::new(
            ErrorCode::InvalidDatetime,
            pos,
            format!("{} is not whole milliseconds between years {MIN_YEAR:04} and {MAX_YEAR}", echo(n.text)),
        )
    };
    let ms = small_int(n).ok_or_else(range)?;
    let us = ms.checked_mul(1000).ok_or_else(range)?;
    let (lo, hi) = timestamp_bounds();
    if us < lo || us > hi {
        return Err(range());
    }
    Ok(Val::Timestamp(us))
}

/// Days since 1970-01-01 of a proleptic Gregorian date of the years
/// [`MIN_YEAR`]..=[`MAX_YEAR`], in unsigned arithmetic with one division
/// by 100 (Neri and Schneider's method): a year counted from March, so
/// February's leap day ends it, and shifted by 400 years, so the year
/// before year 0's March is not negative.
#[inline]
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    i64::from(days_since_shifted_epoch(y as u32, m, d)) - i64::from(UNIX_EPOCH_SHIFTED)
}

const fn days_since_shifted_epoch(y: u32, m: u32, d: u32) -> u32 {
    let january_or_february = (m <= 2) as u32;
    let year = y + 400 - january_or_february;
    let month = m + 12 * january_or_february;
    let century = year / 100;
    let days_before_year = 1461 * year / 4 - century + century / 4;
    let days_before_month = (979 * month - 2919) / 32;
    days_before_year + days_before_month + d - 1
}

const UNIX_EPOCH_SHIFTED: u32 = days_since_shifted_epoch(1970, 1, 1);

/// (year, month, day) of days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + (c - b'0') as u32))
}

/// The bytes of `w` as their digits' values (`b'7'` → 7), or none if one
/// is not an ASCII digit.
#[inline]
fn digit_values(w: u64) -> Option<u64> {
    let (x, non_digits) = digit_bytes(w);
    (non_digits == 0).then_some(x)
}

/// Byte `i` of `x`.
#[inline]
fn byte(x: u64, i: u32) -> u32 {
    (x >> (8 * i)) as u32 & 0xff
}

/// The year, month and day of the `YYYY-MM-DD` that `s` starts with: its
/// first 8 bytes read as one word, the day's two digits put in place of
/// the dashes, and all 8 tested as digits at once.
#[inline]
fn date_fields(s: &[u8]) -> Option<(u32, u32, u32)> {
    const DASHES: u64 = 0xff00_00ff_0000_0000;
    let head = s.get(..10)?;
    let w = word(head, 0);
    if w & DASHES != u64::from_le_bytes(*b"\0\0\0\0-\0\0-") {
        return None;
    }
    let x = digit_values(w & !DASHES | u64::from(head[8]) << 32 | u64::from(head[9]) << 56)?;
    Some((byte(x, 0) * 1000 + byte(x, 1) * 100 + byte(x, 2) * 10 + byte(x, 3), byte(x, 5) * 10 + byte(x, 6), byte(x, 4) * 10 + byte(x, 7)))
}

/// The hours, minutes and seconds of `s`, an `HH:MM:SS` (8 bytes): the
/// colons read as zeros, the 8 bytes tested at once.
#[inline]
fn time_fields(s: &[u8]) -> Option<(u32, u32, u32)> {
    const COLONS: u64 = 0x0000_ff00_00ff_0000;
    let w = word(s, 0);
    if w & COLONS != u64::from_le_bytes(*b"\0\0:\0\0:\0\0") {
        return None;
    }
    let x = digit_values(w & !COLONS | COLONS & u64::from_le_bytes(*b"00000000"))?;
    Some((byte(x, 0) * 10 + byte(x, 1), byte(x, 3) * 10 + byte(x, 4), byte(x, 6) * 10 + byte(x, 7)))
}

/// RFC 3339 full-date → days.
fn full_date(s: &[u8]) -> Result<i64, &'static str> {
    let (y, m, d) = date_fields(s).ok_or("wrong shape")?;
    if !(1..=12).contains(&m) {
        return Err("month out of range");
    }
    if d == 0 || d > days_in_month(y as i64, m) {
        return Err("no such day in that month");
    }
    Ok(days_from_civil(y as i64, m, d))
}

pub fn parse_date(s: &str) -> Result<i32, &'static str> {
    if s.len() != 10 {
        return Err("wrong shape");
    }
    full_date(s.as_bytes()).map(|d| d as i32)
}

/// RFC 3339 date-time → microseconds since the epoch (UTC).
pub fn parse_datetime(s: &str) -> Result<i64, &'static str> {
    let b = s.as_bytes();
    let days = full_date(b)?;
    if !matches!(b.get(10), Some(b'T' | b't')) {
        return Err("expected 'T' between date and time");
    }
    let Some((h, mi, sec)) = b.get(11..19).and_then(time_fields) else {
        return Err("time must be HH:MM:SS");
    };
    if h > 23 || mi > 59 {
        return Err("time out of range");
    }
    if sec == 60 {
        return Err("leap seconds cannot be stored");
    }
    if sec > 59 {
        return Err("time out of range");
    }
    let mut p = 19;
    let mut micros: i64 = 0;
    if b.get(p) == Some(&b'.') {
        let (end, fraction) = digit_run(b, p + 1, 0);
        let digits = end - (p + 1);
        p = end;
        if digits == 0 || digits > 9 {
            return Err("the fraction needs 1 to 9 digits");
        }
        // Nine digits at most: `fraction` is their value, not wrapped.
        let beyond_micros = 10u64.pow(digits.saturating_sub(6) as u32);
        if fraction % beyond_micros != 0 {
            return Err("digits beyond microseconds must be zero (they would be lost)");
        }
        micros = (fraction / beyond_micros * 10u64.pow(6u32.saturating_sub(digits as u32))) as i64;
    }
    let offset_secs: i64 = match b.get(p) {
        Some(b'Z' | b'z') if b.len() == p + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == p + 6 && b[p + 3] == b':' => {
            let (Some(oh), Some(om)) = (digits(b, p + 1, 2), digits(b, p + 4, 2)) else {
                return Err("offset must be ±HH:MM");
            };
            if oh > 23 || om > 59 {
                return Err("offset out of range");
            }
            let o = (oh * 3600 + om * 60) as i64;
            if *sign == b'-' { -o } else { o }
        }
        None => return Err("a time zone offset (Z or ±HH:MM) is required"),
        _ => return Err("offset must be Z or ±HH:MM"),
    };
    let secs = days * 86_400 + (h * 3600 + mi * 60 + sec) as i64 - offset_secs;
    let us = secs * 1_000_000 + micros;
    let (lo, hi) = timestamp_bounds();
    if us < lo || us > hi {
        return Err("outside years 0000-9999 in UTC");
    }
    Ok(us)
}

pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// RFC 3339 in UTC with `Z` and exactly 6 fraction digits.
pub fn format_timestamp(us: i64) -> String {
    let days = us.div_euclid(MICROS_PER_DAY);
    let rest = us.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let secs = rest / 1_000_000;
    let frac = rest % 1_000_000;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Like [`render_key`], borrowing strings from the batch when they are.
pub fn key_text<'a>(v: &Val<'a>) -> Option<Cow<'a, str>> {
    match v {
        Val::Str(s) => Some(s.clone()),
        other => render_key(other).map(Cow::Owned),
    }
}

/// The canonical rendering of a key component (SPEC §2.4). `None` for
/// values that cannot be keys.
pub fn render_key(v: &Val<'_>) -> Option<String> {
    Some(match v {
        Val::Str(s) => s.to_string(),
        Val::Int(i) => i.to_string(),
        Val::UInt(u) => u.to_string(),
        Val::Bool(b) => b.to_string(),
        Val::Date(d) => format_date(*d),
        Val::Timestamp(t) => format_timestamp(*t),
        Val::F32(f) => format_f32(*f),
        Val::F64(f) => format_f64(*f),
        Val::Null | Val::Blob(_) | Val::Vector(_) | Val::List(_) | Val::Sized(_) => return None,
    })
}

const BASE64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Each byte's value in [`BASE64_ALPHABET`], or [`NOT_BASE64`]: one load a
/// character instead of a chain of range tests.
const BASE64_VALUES: [u8; 256] = {
    let mut values = [NOT_BASE64; 256];
    let mut i = 0;
    while i < BASE64_ALPHABET.len() {
        values[BASE64_ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    values
};
/// Above every value of the alphabet's (0-63), so one of them in an OR of
/// values shows.
const NOT_BASE64: u8 = 0xFF;
const BASE64_PADDING_MISPLACED: &str = "'=' may only end the text, at most twice";
const BASE64_OUTSIDE_ALPHABET: &str = "character outside the standard alphabet (A-Z a-z 0-9 + /)";
const BASE64_LENGTH: &str = "length is not a multiple of 4 (padding '=' is required)";
const BASE64_PADDING_BITS: &str = "non-zero padding bits (not canonical)";

/// The 24 bits that `digits` (at most 4 characters) stand for, left-aligned,
/// or `None` if one is outside the alphabet.
fn base64_bits(digits: &[u8]) -> Option<u32> {
    let (mut acc, mut seen) = (0u32, 0u8);
    for &c in digits {
        let value = BASE64_VALUES[c as usize];
        seen |= value;
        acc = acc << 6 | u32::from(value);
    }
    (seen < 64).then_some(acc << (6 * (4 - digits.len())))
}

/// Standard, padded, canonical base64 (unused bits zero).
pub fn decode_base64(s: &str) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::new();
    decode_base64_into(s, &mut out)?;
    Ok(out)
}

/// [`decode_base64`] appended to `out` (left with part of the bytes on an error).
pub(crate) fn decode_base64_into(s: &str, out: &mut Vec<u8>) -> Result<(), &'static str> {
    out.reserve(s.len() / 4 * 3);
    base64_groups(s, |bytes| out.extend_from_slice(bytes))
}

/// How many bytes [`decode_base64`] would give, decoding nothing.
pub(crate) fn base64_len(s: &str) -> Result<usize, &'static str> {
    let mut len = 0;
    base64_groups(s, |bytes| len += bytes.len())?;
    Ok(len)
}

/// The three bytes of a group's 24 bits ([`base64_bits`]), first byte first.
fn group_bytes(acc: u32) -> [u8; 3] {
    [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]
}

/// Checks `s` as [`decode_base64`] reads it and gives each group's bytes.
fn base64_groups(s: &str, mut group: impl FnMut(&[u8])) -> Result<(), &'static str> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return Err(BASE64_LENGTH);
    }
    let Some((body, last)) = b.split_last_chunk::<4>() else { return Ok(()) };
    // Every group but the last has four digits: '=' there (outside the
    // alphabet) is misplaced padding when it ends the group.
    for chunk in body.chunks_exact(4) {
        let acc = base64_bits(chunk).ok_or(if chunk[3] == b'=' { BASE64_PADDING_MISPLACED } else { BASE64_OUTSIDE_ALPHABET })?;
        group(&group_bytes(acc));
    }
    let pad = last.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return Err(BASE64_PADDING_MISPLACED);
    }
    let acc = base64_bits(&last[..4 - pad]).ok_or(BASE64_OUTSIDE_ALPHABET)?;
    let bytes = group_bytes(acc);
    let keep = 3 - pad;
    if bytes[keep..].iter().any(|&x| x != 0) {
        return Err(BASE64_PADDING_BITS);
    }
    group(&bytes[..keep]);
    Ok(())
}

pub fn encode_base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let mut acc = 0u32;
        for (i, &x) in chunk.iter().enumerate() {
            acc |= (x as u32) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64_ALPHABET[(acc >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_float_paths_agree_with_the_general_parser() {
        let mut state = 1u64;
        for _ in 0..200_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let digits = (state >> 40) % 100_000_000;
            let scale = (state >> 20) % 12;
            let text = if scale == 0 { format!("{digits}") } else { format!("{}.{:0>w$}", digits / 10u64.pow(scale as u32 % 8), digits % 10u64.pow(scale as u32 % 8), w = (scale % 8) as usize) };
            let text = if state & 1 == 1 { format!("-{text}") } else { text };
            if let Some(v) = fast_f32(&text) {
                assert_eq!(v.to_bits(), text.parse::<f32>().unwrap().to_bits(), "{text}");
            }
            if let Some(v) = fast_f64(&text) {
                assert_eq!(v.to_bits(), text.parse::<f64>().unwrap().to_bits(), "{text}");
            }
        }
        assert_eq!(fast_f32("0.1"), Some(0.1f32));
        assert_eq!(fast_f64("123.456"), Some(123.456));
        assert_eq!(fast_f64("1e5"), None);
    }

    /// Every day of years 0000-9999: `days_from_civil` inverts
    /// `civil_from_days` (an independent method), and its text parses back.
    #[test]
    fn every_day_of_every_year_converts_both_ways() {
        let (first, last) = (days_from_civil(MIN_YEAR, 1, 1), days_from_civil(MAX_YEAR, 12, 31));
        assert_eq!((civil_from_days(first), civil_from_days(last)), ((MIN_YEAR, 1, 1), (MAX_YEAR, 12, 31)));
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        for days in first..=last {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y:04}-{m:02}-{d:02}");
            assert_eq!(parse_date(&format_date(days as i32)), Ok(days as i32));
        }
    }

    /// Every byte of a date replaced by every other byte value: accepted
    /// exactly when the shape (digits and dashes) and the day are right,
    /// with the error of the first thing wrong.
    #[test]
    fn a_date_is_read_byte_by_byte_as_its_shape_says() {
        for date in ["2024-02-29", "1999-12-31", "0000-01-01"] {
            for at in 0..date.len() {
                for byte in 0..=255u8 {
                    let mut text = date.as_bytes().to_vec();
                    text[at] = byte;
                    let shaped = text.iter().enumerate().all(|(i, &c)| if i == 4 || i == 7 { c == b'-' } else { c.is_ascii_digit() });
                    let got = full_date(&text);
                    if !shaped {
                        assert_eq!(got, Err("wrong shape"), "{text:?}");
                        continue;
                    }
                    let field = |from: usize, to: usize| std::str::from_utf8(&text[from..to]).unwrap().parse::<u32>().unwrap();
                    let (y, m, d) = (field(0, 4), field(5, 7), field(8, 10));
                    let expected = if !(1..=12).contains(&m) {
                        Err("month out of range")
                    } else if d == 0 || d > days_in_month(y as i64, m) {
                        Err("no such day in that month")
                    } else {
                        let days = civil_from_days(got.unwrap_or_default());
                        assert_eq!(days, (y as i64, m, d), "{text:?}");
                        got
                    };
                    assert_eq!(got, expected, "{text:?}");
                }
            }
        }
        assert_eq!(full_date(b"2024-02-2"), Err("wrong shape"));
    }

    /// Every byte of a time replaced by every other byte value: read as
    /// its shape (digits and colons) and ranges say, with the error of the
    /// first thing wrong; and fractions of every length read as their
    /// first six digits, the rest required to be zeros.
    #[test]
    fn a_time_is_read_byte_by_byte_as_its_shape_says() {
        let day = parse_date("2026-06-07").unwrap() as i64 * 86_400_000_000;
        for at in 11..19 {
            for byte in 0..=255u8 {
                let mut text = b"2026-06-07T21:15:11Z".to_vec();
                text[at] = byte;
                let text = String::from_utf8_lossy(&text).into_owned();
                let time = &text.as_bytes()[11..19];
                let shaped = time.iter().enumerate().all(|(i, &c)| if i == 2 || i == 5 { c == b':' } else { c.is_ascii_digit() });
                let expected = if !shaped {
                    Err("time must be HH:MM:SS")
                } else {
                    let field = |i: usize| std::str::from_utf8(&time[i..i + 2]).unwrap().parse::<i64>().unwrap();
                    match (field(0), field(3), field(6)) {
                        (h, mi, _) if h > 23 || mi > 59 => Err("time out of range"),
                        (_, _, 60) => Err("leap seconds cannot be stored"),
                        (_, _, sec) if sec > 59 => Err("time out of range"),
                        (h, mi, sec) => Ok(day + ((h * 60 + mi) * 60 + sec) * 1_000_000),
                    }
                };
                assert_eq!(parse_datetime(&text), expected, "{text:?}");
            }
        }
        let noon = day + 12 * 3_600_000_000;
        for fraction in ["", "5", "05", "123", "123456", "1234560", "123456000", "1234567", "000000001", "1234560000", "12a"] {
            let text = format!("2026-06-07T12:00:00.{fraction}Z");
            let expected = match fraction.len() {
                _ if fraction.contains('a') => Err("offset must be Z or ±HH:MM"),
                0 | 10.. => Err("the fraction needs 1 to 9 digits"),
                _ if fraction.bytes().skip(6).any(|c| c != b'0') => Err("digits beyond microseconds must be zero (they would be lost)"),
                _ => Ok(noon + format!("{:0<6}", &fraction[..fraction.len().min(6)]).parse::<i64>().unwrap()),
            };
            assert_eq!(parse_datetime(&text), expected, "{text:?}");
        }
    }

    #[test]
    fn dates_round_trip() {
        for s in ["0000-01-01", "1970-01-01", "2024-02-29", "9999-12-31", "1969-12-31"] {
            assert_eq!(format_date(parse_date(s).unwrap()), s);
        }
        assert!(parse_date("2023-02-29").is_err());
        assert!(parse_date("2024-13-01").is_err());
    }

    #[test]
    fn datetimes_convert_offsets_and_keep_precision() {
        let a = parse_datetime("2026-01-02T03:04:05.123456+01:00").unwrap();
        assert_eq!(format_timestamp(a), "2026-01-02T02:04:05.123456Z");
        assert!(parse_datetime("2026-01-02T03:04:05.1234567Z").is_err());
        assert!(parse_datetime("2026-01-02T03:04:05.123456000Z").is_ok());
        assert!(parse_datetime("2026-01-02T03:04:05").is_err());
        assert!(parse_datetime("9999-12-31T23:00:00-05:00").is_err());
    }

    #[test]
    fn base64_is_canonical() {
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"\xff\x00\x10"] {
            assert_eq!(decode_base64(&encode_base64(data)).unwrap(), data);
        }
        assert!(decode_base64("Zh==").is_err());
        assert!(decode_base64("Zg").is_err());
        assert!(decode_base64("Zg=a").is_err());
    }

    /// Base64 read the plain way, a character at a time, group by group:
    /// what the table-driven reading must agree with, error messages included.
    fn plain_base64(s: &str) -> Result<Vec<u8>, &'static str> {
        let b = s.as_bytes();
        if !b.len().is_multiple_of(4) {
            return Err(BASE64_LENGTH);
        }
        let mut out = Vec::new();
        for (i, chunk) in b.chunks(4).enumerate() {
            let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
            if pad > 2 || (pad > 0 && i + 1 < b.len() / 4) {
                return Err("'=' may only end the text, at most twice");
            }
            let mut acc = 0u32;
            for &c in &chunk[..4 - pad] {
                let digit = BASE64_ALPHABET.iter().position(|&a| a == c);
                acc = acc << 6 | digit.ok_or("character outside the standard alphabet (A-Z a-z 0-9 + /)")? as u32;
            }
            acc <<= 6 * pad;
            let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
            if bytes[3 - pad..].iter().any(|&x| x != 0) {
                return Err("non-zero padding bits (not canonical)");
            }
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        Ok(out)
    }

    /// Every text of up to 8 characters over digits of zero and non-zero
    /// low bits, padding and a stranger; then every character (ASCII and
    /// some wider) at every place of one and of two groups.
    #[test]
    fn base64_reads_as_the_plain_way() {
        let mut texts: Vec<String> = vec![String::new()];
        let mut last: Vec<String> = vec![String::new()];
        for _ in 0..8 {
            last = last.iter().flat_map(|t| ['A', 'Q', 'g', '/', '=', '-'].map(|c| format!("{t}{c}"))).collect();
            texts.extend(last.iter().cloned());
        }
        let wide = ['é', '€', '\u{10348}', '\u{7f}'];
        for c in (0u8..0x80).map(char::from).chain(wide) {
            for base in ["Zm9v", "Zm9vYmFy", "Zg==Zm9v", "Zm9vZg=="] {
                for at in 0..base.len() {
                    let mut text = base.to_string();
                    text.replace_range(at..at + 1, c.encode_utf8(&mut [0; 4]));
                    texts.push(text);
                }
            }
        }
        for text in &texts {
            let plain = plain_base64(text);
            assert_eq!(decode_base64(text), plain, "{text:?}");
            assert_eq!(base64_len(text), plain.map(|bytes| bytes.len()), "{text:?}");
        }
    }

    #[test]
    fn base64_len_measures_what_decoding_gives() {
        let texts = ["", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "/wAQ", "Zh==", "Zg", "Zg=a", "Z===", "Zm9v====", "Zm-v"];
        for text in texts {
            assert_eq!(base64_len(text), decode_base64(text).map(|bytes| bytes.len()), "{text:?}");
        }
    }
}
