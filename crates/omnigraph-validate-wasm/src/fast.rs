//! The fast acceptor: decides "this strict line is a valid record, and here is
//! its row" and nothing else. It never reports: any line it does not accept,
//! for whatever reason (an error, an escape, an unusual member order, a bound),
//! goes to the explainer (`record::parse_record`), which is the single source
//! of every diagnostic. A report therefore cannot differ from the explainer's
//! alone, provided the acceptor accepts only lines the explainer accepts, with
//! the same row: `differential` checks exactly that (unit tests, the
//! conformance corpus, the fuzz targets). More in lib.rs.
//!
//! Why it is faster: it reads a line's bytes once, left to right, against
//! the schema: it finds the line's end itself and checks UTF-8 only in
//! strings that have a byte above ASCII (no separate line search or UTF-8
//! pass), compares envelope members, type names and the property expected
//! next as whole words, converts integers while scanning them, keeps no
//! member-name sets and has no error paths. The row's values, id and
//! constraints go through the explainer's own code (`value::`,
//! `record::canonical_id`, `record::meets_constraints`); its Arrow bytes
//! are summed as values are read (`layout::data_bytes`, as `ReadRow::new` sums
//! them).
//!
//! One file of about 780 lines of code: the acceptor reads a line once, left
//! to right, and its scanner's state would be split across files; `differential`
//! pins the whole of it against the explainer.

use std::borrow::Cow;

use crate::json::{NumLit, scan_plain_ascii};
use crate::layout::{data_bytes, envelope_bytes, fixed_bytes, value_bytes};
use crate::limits::Limits;
use crate::record::{ReadRow, canonical_id, meets_constraints};
use crate::report::TableKind;
use crate::schema::{PropDef, Schema, TypeDef, ValueType};
use crate::words::{digit_run, same_bytes, starts_with, word};
use crate::value::{
    Decimal, Val, base64_len, clinger_f32, clinger_f64, date_from_days, decode_base64, decode_base64_into, float, integer, parse_date,
    parse_datetime, timestamp_from_millis,
};

/// Types with more properties than this always take the explainer (their
/// presence set would not fit one word).
const MAX_FAST_PROPS: usize = 64;

/// What the acceptor knows of each type before the first line.
pub struct Plan {
    types: Vec<TypePlan>,
    /// Each type's name as a quoted JSON string, with its index, node types
    /// and edge types apart: the value of `type` or `edge` is resolved by
    /// comparing it in place (a name written with escapes is the
    /// explainer's to read).
    node_names: Vec<(Quoted, usize)>,
    edge_names: Vec<(Quoted, usize)>,
}

struct TypePlan {
    /// Properties that must be present and non-null, as a bit set.
    required: u64,
    /// Every property, as a bit set.
    all: u64,
    /// Per property: it carries an `@range` or `@check`.
    ruled: Vec<bool>,
    /// The type has few enough properties for the acceptor.
    fits: bool,
    /// Per property, `"name":` as written without whitespace or escapes:
    /// the member expected next is recognised by one comparison. `None`
    /// for a name that would need escaping (never for identifiers).
    members: Vec<Option<Quoted>>,
    /// The Arrow bytes every row has whatever its values (`rows::fixed_bytes`).
    fixed_bytes: u64,
    /// Properties whose whole values own a buffer (blobs, vectors, lists),
    /// as a bit set: when values are kept, the last record's buffer in the
    /// slot is refilled instead of a new one allocated.
    buffered: u64,
}

/// A member's `"name":`, and for names of up to 16 bytes the same bytes
/// as two little-endian words with masks, so that it is recognised by two
/// word comparisons instead of a call to `memcmp`.
struct Quoted {
    bytes: Box<[u8]>,
    words: [u64; 2],
    masks: [u64; 2],
}

impl Quoted {
    fn new(bytes: Vec<u8>) -> Quoted {
        let (mut words, mut masks) = ([0u64; 2], [0u64; 2]);
        if bytes.len() <= 16 {
            for (i, &c) in bytes.iter().enumerate() {
                words[i / 8] |= u64::from(c) << (8 * (i % 8));
                masks[i / 8] |= 0xFF << (8 * (i % 8));
            }
        }
        Quoted { bytes: bytes.into(), words, masks }
    }

    /// True when `b` starts with this member.
    #[inline]
    fn starts(&self, b: &[u8]) -> bool {
        match b.get(..16) {
            Some(window) if self.bytes.len() <= 16 => {
                ((word(window, 0) ^ self.words[0]) & self.masks[0]) | ((word(window, 8) ^ self.words[1]) & self.masks[1]) == 0
            }
            _ => starts_with(b, &self.bytes),
        }
    }
}

impl Plan {
    pub fn new(schema: &Schema) -> Plan {
        let types = schema
            .types
            .iter()
            .map(|def| {
                let fits = def.props.len() <= MAX_FAST_PROPS;
                let bits = |keep: &dyn Fn(&PropDef) -> bool| {
                    let props = def.props.iter().enumerate().filter(|(_, p)| fits && keep(p));
                    props.fold(0u64, |bits, (i, _)| bits | 1 << i)
                };
                let (required, all) = (bits(&|p| !p.nullable), bits(&|_| true));
                let buffered = bits(&|p| matches!(p.ty, ValueType::Blob | ValueType::Vector(_) | ValueType::List(_)));
                let ruled = (0..def.props.len())
                    .map(|i| def.ranges.iter().any(|r| r.prop == i) || def.checks.iter().any(|r| r.prop == i))
                    .collect();
                let members = def
                    .props
                    .iter()
                    .map(|p| {
                        let plain = p.name.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\');
                        plain.then(|| Quoted::new([b"\"", p.name.as_bytes(), b"\":"].concat()))
                    })
                    .collect();
                TypePlan { required, all, ruled, fits, members, fixed_bytes: fixed_bytes(def), buffered }
            })
            .collect();
        let names = |kind: TableKind| {
            let of_kind = schema.types.iter().enumerate().filter(|(_, def)| def.kind == kind);
            of_kind.map(|(t, def)| (Quoted::new([b"\"", def.name.as_bytes(), b"\""].concat()), t)).collect()
        };
        Plan { types, node_names: names(TableKind::Node), edge_names: names(TableKind::Edge) }
    }
}

/// Where a line is in the batch.
#[derive(Clone, Copy)]
pub struct LineAt {
    pub line: u64,
    pub offset: u64,
}

/// A line the acceptor took: its table, its row, and where the line ends
/// (the index of its `\n` in the bytes given, or their length).
pub struct Taken<'a> {
    pub table: usize,
    pub row: ReadRow<'a>,
    pub line_end: usize,
}

/// The row of the strict line at the start of `rest` (the batch from that
/// line on) when the explainer would accept that line with exactly that
/// row; `None` otherwise. The acceptor frames the line itself: it finds the
/// line end where the record and the whitespace after it stop, and checks
/// UTF-8 only in strings with a byte above ASCII (every other byte it takes
/// is ASCII by the grammar), so a line it takes is read once. Its values go
/// to `values`, whole when `keep_values`; otherwise blobs, vectors and
/// lists are checked and measured (`Val::Sized`), not built.
pub fn accept<'a>(
    plan: &Plan,
    schema: &Schema,
    limits: &Limits,
    rest: &'a [u8],
    at: LineAt,
    keep_values: bool,
    values: &mut Vec<Val<'a>>,
) -> Option<Taken<'a>> {
    let max_depth = u64::from(limits.max_json_depth);
    let mut sc = Scan { b: rest, p: 0, max_depth, structure: 0, data_bytes: 0, depth: 0, keep_values };
    sc.open(b'{')?;
    let (mut node_type, mut edge) = (None, None);
    let (mut id, mut from, mut to) = (None, None, None);
    let mut data_read = false;
    let mut seen = 0u8;
    loop {
        let bit = match sc.envelope_member() {
            Some(bit) => bit,
            None => envelope_bit(sc.key()?.as_bytes())?,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        match bit {
            // A type unknown, or of the other kind, is the explainer's to report.
            1 => node_type = Some(sc.type_name(&plan.node_names)?),
            2 => edge = Some(sc.type_name(&plan.edge_names)?),
            4 => id = Some(sc.string()?),
            8 => from = Some(sc.string()?),
            16 => to = Some(sc.string()?),
            _ => {
                // As the explainer does in time: the type is named before `data`.
                let t = match (node_type, edge) {
                    (Some(t), None) | (None, Some(t)) => t,
                    _ => return None,
                };
                sc.data(&plan.types[t], &schema.types[t], values)?;
                data_read = true;
            }
        }
        if !sc.after_member()? {
            break;
        }
    }
    sc.ws();
    let line_end = sc.p;
    if !matches!(rest.get(line_end), None | Some(b'\n')) || sc.structure > limits.max_json_structure {
        return None;
    }
    let (t, kind) = match (node_type, edge) {
        (Some(t), None) => (t, TableKind::Node),
        (None, Some(t)) => (t, TableKind::Edge),
        _ => return None,
    };
    let def = &schema.types[t];
    let (src, dst) = match kind {
        TableKind::Node if from.is_none() && to.is_none() => ("", ""),
        TableKind::Edge => (from?, to?),
        TableKind::Node => return None,
    };
    if !data_read {
        // Without `data` every property is null: only a type that requires
        // none (and that the acceptor reads at all) may leave it out.
        let plan = &plan.types[t];
        if !plan.fits || plan.required != 0 {
            return None;
        }
        values.clear();
        values.resize(def.props.len(), Val::Null);
    }
    let id = match canonical_id(def, values) {
        None => id.map(Cow::Borrowed),
        Some(canonical) if id.is_none_or(|given| given == canonical) => Some(canonical),
        Some(_) => return None,
    };
    let arrow_bytes = envelope_bytes(def, id.as_deref(), src, dst) + plan.types[t].fixed_bytes + sc.data_bytes;
    let row = ReadRow::measured(at.line, at.offset, id, Cow::Borrowed(src), Cow::Borrowed(dst), arrow_bytes);
    Some(Taken { table: t, row, line_end })
}

/// The envelope's members, each a bit of a set.
const ENVELOPE: [(&[u8], u8); 6] = [(b"type", 1), (b"edge", 2), (b"id", 4), (b"from", 8), (b"to", 16), (b"data", 32)];

fn envelope_bit(name: &[u8]) -> Option<u8> {
    ENVELOPE.iter().find(|(member, _)| *member == name).map(|&(_, bit)| bit)
}

/// `"name":` of each envelope member, as a little-endian word and the mask
/// of its bytes (every one is at most 8 bytes long).
const ENVELOPE_WORDS: [(u64, u64, usize, u8); 6] = {
    let mut out = [(0, 0, 0, 0); 6];
    let mut m = 0;
    while m < ENVELOPE.len() {
        let (name, bit) = ENVELOPE[m];
        let len = name.len() + 3;
        let mut word = b'"' as u64 | (b'"' as u64) << (8 * (len - 2)) | (b':' as u64) << (8 * (len - 1));
        let mut i = 0;
        while i < name.len() {
            word |= (name[i] as u64) << (8 * (i + 1));
            i += 1;
        }
        let mask = if len == 8 { u64::MAX } else { (1 << (8 * len)) - 1 };
        out[m] = (word, mask, len, bit);
        m += 1;
    }
    out
};

/// A left-to-right reader that gives up (`None`) at anything unusual. It
/// counts structural characters and depth exactly as `json::Cursor` does.
/// It never passes a line end: strings stop at control characters, and
/// `\n` is not whitespace to it.
///
/// In this order (`repr(C)`), no two counters that one step updates are
/// neighbours: with `structure` next to `depth`, LLVM added 1 to both in
/// one 16-byte load and store, and that load, spanning two 8-byte stores
/// just made, waited for them to reach the cache (a failed store-to-load
/// forward, 14 % of `accept`'s samples; docs/lab/2026-12-05-values-into-slots.md).
#[repr(C)]
struct Scan<'a> {
    b: &'a [u8],
    p: usize,
    /// The depth limit: deeper, the line is the explainer's.
    max_depth: u64,
    structure: u64,
    /// The Arrow data bytes of the values read (`layout::data_bytes`).
    data_bytes: u64,
    depth: u64,
    /// Build blobs, vectors and lists (else only measure them).
    keep_values: bool,
}

/// `bytes` as text: the caller has seen that every one of them is ASCII.
#[inline]
fn ascii(bytes: &[u8]) -> &str {
    debug_assert!(bytes.is_ascii(), "only ASCII is taken as text unchecked");
    // SAFETY: ASCII bytes are valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

/// A number literal and, without exponent and for at most 19 digits, its
/// [`Decimal`] (converted while scanned, as `value::decimal_parts` would).
type Number<'a> = (NumLit<'a>, Option<Decimal>);

impl<'a> Scan<'a> {
    /// Skips whitespace within the line (`\n` ends it).
    #[inline]
    fn ws(&mut self) {
        let _ = self.peek();
    }

    /// [`Scan::peek`]'s loop.
    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r') = self.b.get(self.p) {
            self.p += 1;
        }
    }

    /// The next byte after whitespace. Tokens mostly follow each other
    /// without whitespace: one test before the loop, whose every turn costs
    /// more in wasmtime's code (an epoch check and the spills around it,
    /// docs/lab/2026-12-04-epoch-checks.md). Everything above a space is a token: one
    /// comparison for most.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        let c = *self.b.get(self.p)?;
        if c > b' ' {
            return Some(c);
        }
        self.skip_ws();
        self.b.get(self.p).copied()
    }

    #[inline]
    fn structural(&mut self) {
        self.structure += 1;
        self.p += 1;
    }

    /// Opens a container; `None` past the depth limit (checked here, where
    /// the depth grows, not by keeping the deepest depth for the end).
    #[inline]
    fn open(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then_some(())?;
        self.structural();
        self.depth += 1;
        (self.depth <= self.max_depth).then_some(())
    }

    #[inline]
    fn close(&mut self) {
        self.structural();
        self.depth -= 1;
    }

    /// After an object member: true at `,` (another follows), false at `}`.
    #[inline]
    fn after_member(&mut self) -> Option<bool> {
        self.after(b'}')
    }

    #[inline]
    fn after(&mut self, end: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.structural();
                Some(true)
            }
            c if c == end => {
                self.close();
                Some(false)
            }
            _ => None,
        }
    }

    /// True (and consumed) when the container just opened is empty.
    #[inline]
    fn empty(&mut self, end: u8) -> bool {
        if self.peek() == Some(end) {
            self.close();
            return true;
        }
        false
    }

    /// A string without escapes (escapes are left to the explainer), its
    /// UTF-8 checked when it has a byte above ASCII.
    #[inline(always)]
    fn string(&mut self) -> Option<&'a str> {
        (self.peek()? == b'"').then_some(())?;
        let start = self.p + 1;
        let (end, high) = scan_plain_ascii(self.b, start);
        (self.b.get(end) == Some(&b'"')).then_some(())?;
        self.p = end + 1;
        let bytes = &self.b[start..end];
        if high { std::str::from_utf8(bytes).ok() } else { Some(ascii(bytes)) }
    }

    #[inline]
    fn key(&mut self) -> Option<&'a str> {
        let key = self.string()?;
        (self.peek()? == b':').then_some(())?;
        self.structural();
        Some(key)
    }

    /// The envelope member whose `"name":` comes next, written plainly (its
    /// `:` counted), by one word comparison each; `None` for anything else,
    /// which `key` then reads.
    #[inline]
    fn envelope_member(&mut self) -> Option<u8> {
        self.ws();
        let word = u64::from_le_bytes(self.b.get(self.p..self.p + 8)?.try_into().expect("8 bytes"));
        let &(_, _, len, bit) = ENVELOPE_WORDS.iter().find(|&&(member, mask, _, _)| word & mask == member)?;
        self.p += len - 1;
        self.structural();
        Some(bit)
    }

    /// The type whose quoted name comes next, among `names`.
    #[inline]
    fn type_name(&mut self, names: &[(Quoted, usize)]) -> Option<usize> {
        (self.peek()? == b'"').then_some(())?;
        let (quoted, t) = names.iter().find(|(quoted, _)| quoted.starts(&self.b[self.p..]))?;
        self.p += quoted.bytes.len();
        Some(*t)
    }

    /// True (and consumed, its `:` counted) when `"name":` comes next.
    #[inline]
    fn member(&mut self, quoted: Option<&Quoted>) -> bool {
        self.ws();
        match quoted {
            Some(q) if q.starts(&self.b[self.p..]) => {
                self.p += q.bytes.len() - 1;
                self.structural();
                true
            }
            _ => false,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        starts_with(&self.b[self.p..], word).then_some(())?;
        self.p += word.len();
        Some(())
    }

    /// The JSON number grammar, as `Cursor::parse_number`.
    #[inline(always)]
    fn number(&mut self) -> Option<Number<'a>> {
        self.ws();
        let b = self.b;
        let start = self.p;
        let mut p = start;
        let negative = b.get(p) == Some(&b'-');
        p += negative as usize;
        let mut mantissa: u64 = 0;
        let int_at = p;
        match b.get(p) {
            Some(b'0') => p += 1,
            Some(b'1'..=b'9') => (p, mantissa) = digit_run(b, p, mantissa),
            _ => return None,
        }
        let mut digits = p - int_at;
        let mut fraction = 0;
        let mut integer = true;
        if b.get(p) == Some(&b'.') {
            integer = false;
            p += 1;
            let from = p;
            (p, mantissa) = digit_run(b, p, mantissa);
            fraction = p - from;
            (fraction > 0).then_some(())?;
            digits += fraction;
        }
        let mut decimal = digits <= 19;
        if let Some(b'e' | b'E') = b.get(p) {
            integer = false;
            decimal = false;
            p += 1;
            if let Some(b'+' | b'-') = b.get(p) {
                p += 1;
            }
            let from = p;
            p = digit_run(b, p, 0).0;
            (p > from).then_some(())?;
        }
        // A digit here ("01") is refused by the caller, which expects `,`,
        // `}` or `]` after every value.
        self.p = p;
        let parts = decimal.then_some((negative, mantissa, -(fraction as i32)));
        // The grammar above took only ASCII bytes.
        Some((NumLit { text: ascii(&b[start..p]), integer }, parts))
    }

    /// `data`, decoded into `values` like `record::parse_data` would, when
    /// every property is valid.
    fn data(&mut self, plan: &TypePlan, def: &TypeDef, values: &mut Vec<Val<'a>>) -> Option<()> {
        if !plan.fits {
            return None;
        }
        self.open(b'{')?;
        // Every slot is overwritten below (given, or null when absent), so a
        // buffer of the right length is reused as it is.
        if values.len() != def.props.len() {
            values.clear();
            values.resize(def.props.len(), Val::Null);
        }
        let mut present = 0u64;
        let buffered = if self.keep_values { plan.buffered } else { 0 };
        if !self.empty(b'}') {
            let mut next = 0;
            loop {
                // Records usually list properties in the schema's order.
                let i = if self.member(plan.members.get(next).and_then(Option::as_ref)) { next } else { def.prop(self.key()?)? };
                next = i + 1;
                if present & 1 << i != 0 {
                    return None;
                }
                present |= 1 << i;
                let prop = &def.props[i];
                // Decoded into its slot, not returned: a `Val` returned
                // through memory and moved was copied in pieces that
                // straddled the stores that wrote it, each copy waiting for
                // them to reach the cache (docs/lab/2026-12-05-values-into-slots.md).
                let slot = &mut values[i];
                match buffered & 1 << i {
                    0 => {
                        release(slot);
                        self.value(&prop.ty, slot)?;
                    }
                    _ => self.refill(&prop.ty, slot)?,
                }
                let v = &values[i];
                if matches!(v, Val::Null) {
                    prop.nullable.then_some(())?;
                } else if plan.ruled[i] && !meets_constraints(def, i, v) {
                    return None;
                }
                self.data_bytes += data_bytes(&prop.ty, v);
                if !self.after_member()? {
                    break;
                }
            }
        }
        (plan.required & !present == 0).then_some(())?;
        let mut absent = !present & plan.all;
        while absent != 0 {
            let slot = &mut values[absent.trailing_zeros() as usize];
            release(slot);
            put(slot, Val::Null);
            absent &= absent - 1;
        }
        Some(())
    }

    /// A value of type `ty` or null, into `out` (which owns no memory).
    fn value(&mut self, ty: &ValueType, out: &mut Val<'a>) -> Option<()> {
        if self.null()? {
            put(out, Val::Null);
            return Some(());
        }
        self.present(ty, out)
    }

    /// True (and consumed) when `null` comes next; `None` when a value
    /// starting with `n` is not `null`.
    #[inline]
    fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null").map(|()| true)
    }

    /// [`Scan::value`] of a blob, vector or list kept whole, written into
    /// the buffer that `slot` holds when it has one of the type: the same
    /// property's value in the last record of its table, which `Columns`
    /// has copied. So preparing allocates once per such property, not once
    /// per value.
    fn refill(&mut self, ty: &ValueType, slot: &mut Val<'a>) -> Option<()> {
        let spare = std::mem::replace(slot, Val::Null);
        if self.null()? {
            return Some(());
        }
        let v = match (ty, spare) {
            (ValueType::Blob, Val::Blob(mut bytes)) => {
                bytes.clear();
                decode_base64_into(self.string()?.strip_prefix("base64:")?, &mut bytes).ok()?;
                Val::Blob(bytes)
            }
            (ValueType::Vector(n), Val::Vector(mut items)) => {
                items.clear();
                Val::Vector(self.vector(*n, items)?)
            }
            (ValueType::List(item), Val::List(mut items)) => {
                items.clear();
                Val::List(self.list(item, items)?)
            }
            (ty, _) => return self.present(ty, slot),
        };
        put(slot, v);
        Some(())
    }

    /// A vector's `n` items appended to `out`, read straight as F32. Out of
    /// line, as [`Scan::list`]: only preparing reads them, and inlined they
    /// grow `present`, which validating calls for every value.
    #[inline(never)]
    fn vector(&mut self, n: u32, mut out: Vec<f32>) -> Option<Vec<f32>> {
        self.items(|sc| {
            out.push(sc.f32()?);
            Some(())
        })?;
        (out.len() == n as usize).then_some(out)
    }

    /// A list's items appended to `out`, whole, each decoded in its place.
    #[inline(never)]
    fn list(&mut self, item: &ValueType, mut out: Vec<Val<'a>>) -> Option<Vec<Val<'a>>> {
        self.items(|sc| {
            out.push(Val::Null);
            sc.present(item, out.last_mut().expect("just pushed"))
        })?;
        Some(out)
    }

    /// A value that is not null, as `value::decode_present` decodes it,
    /// into `out` (which owns no memory).
    fn present(&mut self, ty: &ValueType, out: &mut Val<'a>) -> Option<()> {
        put(out, match ty {
            ValueType::String => Val::Str(Cow::Borrowed(self.string()?)),
            ValueType::Enum(allowed) => {
                let s = self.string()?;
                allowed.iter().any(|v| same_bytes(v.as_bytes(), s.as_bytes())).then_some(())?;
                Val::Str(Cow::Borrowed(s))
            }
            ValueType::Bool => match self.peek()? {
                b't' => self.literal(b"true").map(|_| Val::Bool(true))?,
                _ => self.literal(b"false").map(|_| Val::Bool(false))?,
            },
            ValueType::I32 | ValueType::I64 | ValueType::U32 | ValueType::U64 => match self.number()? {
                (lit, Some((negative, magnitude, 0))) if lit.integer => small_integer(ty, negative, magnitude)?,
                (lit, _) => integer(lit, ty, 0).ok()?,
            },
            ValueType::F32 => Val::F32(self.f32()?),
            ValueType::F64 => match self.number()? {
                (_, Some(parts)) if let Some(v) = clinger_f64(parts) => Val::F64(v),
                (lit, _) => float(lit, false, 0).ok()?,
            },
            ValueType::Date => match self.peek()? {
                b'"' => Val::Date(parse_date(self.string()?).ok()?),
                _ => date_from_days(self.number()?.0, 0).ok()?,
            },
            ValueType::DateTime => match self.peek()? {
                b'"' => Val::Timestamp(parse_datetime(self.string()?).ok()?),
                _ => timestamp_from_millis(self.number()?.0, 0).ok()?,
            },
            ValueType::Blob => {
                let text = self.string()?.strip_prefix("base64:")?;
                match self.keep_values {
                    true => Val::Blob(decode_base64(text).ok()?),
                    false => Val::Sized(base64_len(text).ok()? as u64),
                }
            }
            ValueType::Vector(n) if self.keep_values => Val::Vector(self.vector(*n, Vec::with_capacity(*n as usize))?),
            ValueType::Vector(n) => {
                let mut count = 0;
                // Items read straight as F32, not through `present`.
                self.items(|sc| {
                    sc.f32()?;
                    count += 1;
                    Some(())
                })?;
                (count == *n as usize).then_some(())?;
                // A vector's bytes are all fixed width: nothing to measure.
                Val::Sized(0)
            }
            ValueType::List(item) if self.keep_values => Val::List(self.list(item, Vec::new())?),
            ValueType::List(item) => {
                let (mut bytes, mut v) = (0, Val::Null);
                self.items(|sc| {
                    sc.present(item, &mut v)?;
                    bytes += value_bytes(item, &v);
                    Some(())
                })?;
                Val::Sized(bytes)
            }
        });
        Some(())
    }

    /// An F32 value, as `value::float` decodes it.
    #[inline(always)]
    fn f32(&mut self) -> Option<f32> {
        match self.number()? {
            (_, Some(parts)) if let Some(v) = clinger_f32(parts) => Some(v),
            (lit, _) => match float(lit, true, 0).ok()? {
                Val::F32(v) => Some(v),
                _ => None,
            },
        }
    }

    /// A JSON array whose items `item` reads, in order.
    fn items(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.open(b'[')?;
        if !self.empty(b']') {
            loop {
                item(self)?;
                if !self.after(b']')? {
                    break;
                }
            }
        }
        Some(())
    }
}

/// Empties a row's value slot, which holds the last line's value, when
/// that owns memory (whole values, kept when preparing), so that [`put`]
/// may write over it. Only then is the drop glue called: assigning calls it
/// for every value, a function call each in the artifact (an epoch check
/// and a prologue in wasmtime's code).
#[inline]
fn release(slot: &mut Val<'_>) {
    if owns_memory(slot) {
        *slot = Val::Null;
    }
}

fn owns_memory(v: &Val<'_>) -> bool {
    match v {
        Val::Str(Cow::Owned(_)) | Val::Blob(_) | Val::Vector(_) | Val::List(_) => true,
        // Every variant is named, so a new one must be sorted into an arm.
        Val::Null
        | Val::Bool(_)
        | Val::Int(_)
        | Val::UInt(_)
        | Val::F32(_)
        | Val::F64(_)
        | Val::Str(Cow::Borrowed(_))
        | Val::Date(_)
        | Val::Timestamp(_)
        | Val::Sized(_) => false,
    }
}

/// Writes `v` over `slot`, which owns no memory ([`release`]d), without
/// its drop glue.
#[inline(always)]
fn put<'a>(slot: &mut Val<'a>, v: Val<'a>) {
    let old = std::mem::replace(slot, v);
    debug_assert!(!owns_memory(&old), "a slot is released before it is written");
    std::mem::forget(old);
}

/// An integer of at most 19 digits in the range of `ty` (an integer type),
/// as `value::integer` gives it (U32 as `Int`, U64 as `UInt`, `-0` as zero).
fn small_integer<'a>(ty: &ValueType, negative: bool, magnitude: u64) -> Option<Val<'a>> {
    let fits = match (ty, negative) {
        (ValueType::I32, false) => magnitude <= i32::MAX as u64,
        (ValueType::I32, true) => magnitude <= 1 << 31,
        (ValueType::I64, false) => magnitude <= i64::MAX as u64,
        (ValueType::I64, true) => magnitude <= 1 << 63,
        (ValueType::U32, false) => magnitude <= u32::MAX as u64,
        (_, false) => true,
        (_, true) => magnitude == 0,
    };
    fits.then_some(())?;
    Some(match ty {
        ValueType::U64 => Val::UInt(magnitude),
        // `magnitude` ≤ 2^63 here; 2^63 wraps to i64::MIN, which is -2^63.
        _ if negative => Val::Int((magnitude as i64).wrapping_neg()),
        _ => Val::Int(magnitude as i64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Two masked word comparisons say what `starts_with` says, for
        /// names on either side of 8 and 16 bytes and text of any length.
        #[test]
        fn quoted_names_match_as_starts_with_does(
            name in proptest::collection::vec(proptest::sample::select(b"ab\":".to_vec()), 1..20),
            text in proptest::collection::vec(proptest::sample::select(b"ab\":".to_vec()), 0..24),
        ) {
            proptest::prop_assert_eq!(Quoted::new(name.clone()).starts(&text), text.starts_with(&name));
        }
    }

    #[test]
    fn envelope_words_are_the_quoted_members() {
        for ((name, bit), (word, mask, len, word_bit)) in ENVELOPE.iter().zip(ENVELOPE_WORDS) {
            let quoted = format!("\"{}\":", std::str::from_utf8(name).unwrap());
            let mut padded = quoted.clone().into_bytes();
            padded.resize(8, b'x');
            assert_eq!((len, word_bit), (quoted.len(), *bit));
            assert_eq!(u64::from_le_bytes(padded.try_into().unwrap()) & mask, word, "{quoted}");
        }
    }
}
