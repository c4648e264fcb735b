// Files larger than one batch, split the way the CLI splits them
// (crates/omnigraph-host/src/split.rs): a batch holds at most `maxRows`
// records of any one type (the host's rows-per-table bound) and `maxBytes`
// bytes. A file within both goes as it is (pass `a`), one batch however many
// lines it has; a larger one, or one the validator refuses for a size
// bound, is split at line boundaries in a nodes pass (`n`: every line that
// is no edge record) and then an edges pass (`e`), each in file order, each
// batch taking every line it can. A batch the validator refuses for a size
// bound is halved until it fits. Each batch is named
// `<run>:<pass>:<start>-<end>` (file byte range), the key its commit
// carries, so an interrupted upload resumes exactly. The file is read a
// slice at a time: memory is one batch, never the file. Pure module (no
// DOM): the page's Worker and the Node tests import it.
//
// Rows are counted per table as the bounds count them (probeLine, as the
// CLI's Probe); batch lines map back to file lines; an upload catches up by
// the keys its branch has committed; readReport reads a report with its
// refs counted in the text, not parsed.

const LF = 0x0a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const EDGE_NAME = new Uint8Array([0x22, 0x65, 0x64, 0x67, 0x65, 0x22]); // "edge"
const TYPE_NAME = new Uint8Array([0x22, 0x74, 0x79, 0x70, 0x65, 0x22]); // "type"
/** How much of the file is read at once. */
export const READ_SLICE_BYTES = 4 << 20;
/** Errors a whole-file report keeps (the page shows at most 1,000 rows). */
export const MAX_FILE_ERRORS = 1000;

/** Passes in upload order, by their key letter. */
export const PASS = { all: 'a', nodes: 'n', edges: 'e' };

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const NONE = Object.freeze({ edge: false, table: null });

function indexOf(line, needle, from) {
  for (let i = line.indexOf(needle[0], from); i >= 0 && i + needle.length <= line.length; i = line.indexOf(needle[0], i + 1)) {
    let j = 1;
    while (j < needle.length && line[i + j] === needle[j]) j += 1;
    if (j === needle.length) return i;
  }
  return -1;
}

/** `{"type":"` or `{"edge":"` at the start of `line`: which name it is, or null. */
function leadingMember(line) {
  if (line[0] !== 0x7b || line[7] !== 0x3a || line[8] !== QUOTE) return null;
  for (const name of [TYPE_NAME, EDGE_NAME]) {
    if (indexOf(line.subarray(1, 7), name, 0) === 0) return name;
  }
  return null;
}

/**
 * A line's kind and table, as the CLI's `Probe` reads them: an edge record is
 * a JSON object whose `edge` is a string (and whose `type`, if any, is a
 * string or null); its table is its `edge`, a node record's its `type`.
 * Anything else, invalid lines included, goes with the nodes and counts
 * against no table. A record laid out as writers write them
 * (`{"type":"Name",…` or `{"edge":"Name",…`, no escapes, the other name and
 * the same name nowhere else in the line) is read without parsing it: the
 * same answer for every line the validator accepts.
 */
export function probeLine(line) {
  const leading = line.indexOf(BACKSLASH) < 0 ? leadingMember(line) : null;
  if (leading !== null) {
    const end = line.indexOf(QUOTE, 9);
    if (end > 9 && indexOf(line, EDGE_NAME, end) < 0 && indexOf(line, TYPE_NAME, end) < 0) {
      try {
        return { edge: leading === EDGE_NAME, table: utf8.decode(line.subarray(9, end)) };
      } catch {
        return NONE; // not UTF-8: no JSON either
      }
    }
  }
  // Most node lines never name `edge`, literally or through a \u escape.
  if (indexOf(line, EDGE_NAME, 0) < 0 && indexOf(line, TYPE_NAME, 0) < 0 && line.indexOf(BACKSLASH) < 0) return NONE;
  let value;
  try {
    value = JSON.parse(utf8.decode(line));
  } catch {
    return NONE;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return NONE;
  const named = (v) => v === undefined || v === null || typeof v === 'string';
  if (!named(value.edge) || !named(value.type)) return NONE;
  if (typeof value.edge === 'string') return { edge: true, table: value.edge };
  return { edge: false, table: value.type ?? null };
}

function takes(pass, probe) {
  return pass === PASS.all || (pass === PASS.edges) === probe.edge;
}

/** The key a batch's commit carries. */
export function batchKey(run, batch) {
  return `${run}:${batch.pass}:${batch.start}-${batch.end}`;
}

/** A run name: a ULID (48-bit time, 80 random bits, Crockford base32), like the CLI's. */
export function newRun(now = Date.now(), random = crypto.getRandomValues(new Uint8Array(10))) {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let time = '';
  for (let t = now, i = 0; i < 10; i++, t = Math.floor(t / 32)) time = alphabet[t % 32] + time;
  let bits = 0n;
  for (const byte of random) bits = (bits << 8n) | BigInt(byte);
  let tail = '';
  for (let i = 0; i < 16; i++, bits >>= 5n) tail = alphabet[Number(bits & 31n)] + tail;
  return time + tail;
}

/**
 * Reads a Blob's lines (LF included) from the start, a slice at a time. A
 * line longer than `maxLineBytes` is skipped without being held and
 * returned as `{ tooLong: true }`.
 */
class LineReader {
  constructor(blob, maxLineBytes, onSlice) {
    this.blob = blob;
    this.maxLineBytes = maxLineBytes;
    this.onSlice = onSlice;
    this.chunk = new Uint8Array(0);
    this.chunkStart = 0;
    this.pos = 0;
    this.lineNo = 0;
  }

  async #readSlice() {
    const from = this.chunkStart + this.chunk.length;
    const slice = new Uint8Array(await this.blob.slice(from, from + READ_SLICE_BYTES).arrayBuffer());
    if (slice.length > 0) await this.onSlice?.(slice);
    return slice;
  }

  /** The next line `{bytes, offset, line}` (1-based file line), or null at the end. */
  async next() {
    const offset = this.chunkStart + this.pos;
    let tooLong = false;
    for (;;) {
      const end = this.chunk.indexOf(LF, this.pos);
      if (end >= 0 && !tooLong) {
        const bytes = this.chunk.subarray(this.pos, end + 1);
        if (bytes.length <= this.maxLineBytes) {
          this.pos = end + 1;
          return { bytes, offset, line: ++this.lineNo };
        }
      }
      if (end >= 0) {
        this.pos = end + 1;
        return { tooLong: true, offset, line: ++this.lineNo };
      }
      const slice = await this.#readSlice();
      if (slice.length === 0) {
        if (this.pos === this.chunk.length) return null;
        const bytes = this.chunk.subarray(this.pos);
        this.pos = this.chunk.length;
        ++this.lineNo;
        return tooLong || bytes.length > this.maxLineBytes ? { tooLong: true, offset, line: this.lineNo } : { bytes, offset, line: this.lineNo };
      }
      // Keep the line's start; a line over the bound is dropped as it is read.
      const rest = this.chunk.subarray(this.pos);
      tooLong ||= rest.length > this.maxLineBytes;
      const kept = tooLong ? new Uint8Array(0) : rest;
      const joined = new Uint8Array(kept.length + slice.length);
      joined.set(kept);
      joined.set(slice, kept.length);
      this.chunkStart += this.chunk.length - kept.length;
      this.chunk = joined;
      this.pos = 0;
    }
  }
}

/**
 * The batches of one pass, at most `maxRows` records of any one type and
 * `maxBytes` bytes each: `{pass, start, end, firstLine, bytes, lines: [[fileLine, offset]], ends}`.
 * `firstLine` counts the file lines before `start`. Lines longer than a
 * batch go to `onOversized(fileLine, offset)` and are skipped; each slice
 * read goes to `onSlice(bytes)`, in file order.
 */
export async function* batchesOf(file, pass, { maxRows, maxBytes }, { onOversized = () => {}, onSlice } = {}) {
  const reader = new LineReader(file, maxBytes, onSlice);
  const buffer = new Uint8Array(Math.min(maxBytes, Math.max(file.size, 1)));
  let pending = null;
  let position = 0;
  let linesBefore = 0;
  for (;;) {
    const batch = { pass, start: position, end: position, firstLine: linesBefore, lines: [], ends: [] };
    const rows = new Map();
    let size = 0;
    for (;;) {
      const line = pending ?? (await reader.next());
      pending = null;
      if (!line) break;
      if (line.tooLong) {
        onOversized(line.line, line.offset);
      } else if (takes(pass, (line.probe ??= probeLine(line.bytes)))) {
        const { table } = line.probe;
        const tableRows = table === null ? 0 : (rows.get(table) ?? 0);
        if (tableRows === maxRows || size + line.bytes.length > maxBytes) {
          // Not consumed: the reader stays right after it, its bytes stay valid.
          pending = line;
          break;
        }
        if (table !== null) rows.set(table, tableRows + 1);
        buffer.set(line.bytes, size);
        size += line.bytes.length;
        batch.ends.push(size);
        batch.lines.push([line.line, line.offset]);
      }
      position = reader.chunkStart + reader.pos;
      linesBefore = line.line;
    }
    if (pending === null) position = file.size;
    batch.end = position;
    batch.bytes = buffer.subarray(0, size);
    if (batch.lines.length > 0) yield batch;
    if (pending === null) return;
  }
}

/** Two halves of a batch of two lines or more, covering the same range; null for one line. */
export function halves(batch) {
  if (batch.lines.length < 2) return null;
  const mid = batch.lines.length >> 1;
  const cut = batch.ends[mid - 1];
  const [midLine, middle] = batch.lines[mid];
  return [
    { pass: batch.pass, start: batch.start, end: middle, firstLine: batch.firstLine, bytes: batch.bytes.subarray(0, cut), lines: batch.lines.slice(0, mid), ends: batch.ends.slice(0, mid) },
    { pass: batch.pass, start: middle, end: batch.end, firstLine: midLine - 1, bytes: batch.bytes.subarray(cut), lines: batch.lines.slice(mid), ends: batch.ends.slice(mid).map((e) => e - cut) },
  ];
}

/** The report's last member (SPEC §3's fixed member order), as the artifact writes it. */
const REFS_MEMBER = ',"external_refs":[';

/**
 * A batch's report text as an object whose `external_refs` is their count:
 * all the page needs of them. A batch of edges whose nodes are stored lists
 * two refs per line, more bytes than the batch, so they are counted in the
 * text, not parsed. A quote inside a JSON string is escaped, so the member
 * name is found only where it is a member, and each ref has one `"edge":`.
 * A report laid out otherwise is parsed whole: the same answer, slower.
 */
export function readReport(text) {
  const at = text.indexOf(REFS_MEMBER);
  let report;
  try {
    report = at >= 0 && text.endsWith(']}') ? JSON.parse(`${text.slice(0, at)}}`) : null;
  } catch {
    report = null;
  }
  if (report === null || Object.hasOwn(report, 'external_refs')) return countRefs(JSON.parse(text));
  let refs = 0;
  for (let i = text.indexOf('"edge":', at); i >= 0; i = text.indexOf('"edge":', i + 7)) refs += 1;
  return { ...report, external_refs: refs };
}

function countRefs(report) {
  return { ...report, external_refs: report.external_refs.length };
}

/** A size-bound refusal in a report (an error that names its limit): the batch is halved. */
export function hitsBound(report) {
  return report.errors.some((e) => e.limit !== undefined);
}

/**
 * Collects the reports of a file's batches into one report whose lines
 * and offsets are the file's.
 */
export class FileReport {
  constructor() {
    this.stats = { lines: 0, records: 0, blank_lines: 0, bytes: 0, folded: 0, tables: [] };
    this.errors = [];
    this.errorCount = 0;
    this.truncated = false;
    this.externalRefs = 0;
    this.rules = null;
  }

  /** Adds one batch's report. */
  add(batch, report) {
    this.rules ??= report.rules;
    for (const name of ['lines', 'records', 'blank_lines', 'bytes', 'folded']) this.stats[name] += report.stats[name];
    for (const t of report.stats.tables) {
      const seen = this.stats.tables.find((s) => s.kind === t.kind && s.name === t.name);
      if (seen) seen.rows += t.rows;
      else this.stats.tables.push({ ...t });
    }
    this.externalRefs += report.external_refs;
    this.errorCount += report.error_count;
    this.truncated ||= report.errors_truncated;
    for (const e of report.errors) {
      if (this.errors.length === MAX_FILE_ERRORS) {
        this.truncated = true;
        break;
      }
      this.errors.push({ ...e, ...fileLocation(batch, e.line, e.offset) });
    }
  }

  /** A line no batch can hold. */
  addOversized(line, offset, maxBytes) {
    this.errorCount += 1;
    if (this.errors.length < MAX_FILE_ERRORS) {
      this.errors.push({ line, offset, code: 'line_too_long', path: '', message: `the line is longer than one batch may hold (${maxBytes} bytes)` });
    } else {
      this.truncated = true;
    }
  }

  /** The whole file's report, shaped like one batch's (`external_refs` is a count). */
  finish(batches) {
    this.errors.sort((a, b) => a.line - b.line || a.offset - b.offset);
    return {
      ok: this.errorCount === 0,
      rules: this.rules,
      stats: this.stats,
      errors: this.errors,
      errors_truncated: this.truncated,
      error_count: this.errorCount,
      external_refs: this.externalRefs,
      batches,
    };
  }
}

/** The file line and offset of a batch's line `n` (1-based; 0 names the batch). */
export function fileLocation(batch, n, offset = 0) {
  const index = Math.max(n, 1) - 1;
  const entry = batch.lines[index];
  if (!entry) return { line: n, offset };
  const lineStart = index === 0 ? 0 : batch.ends[index - 1];
  return { line: entry[0], offset: entry[1] + Math.max(offset - lineStart, 0) };
}

/**
 * Validates a file batch by batch with `validate(bytes) → report` (as
 * `readReport` gives it) and plans its upload: `{report, plan, fingerprint}`, `plan` being the
 * batches' ranges `{pass, start, end, firstLine}` in upload order, and
 * `fingerprint` the file's name for resuming (hashed as it is read, no
 * extra read). `onProgress(fraction)`.
 */
export async function planFile(file, bounds, validate, onProgress = () => {}) {
  const total = new FileReport();
  const plan = [];
  const check = (batch) => {
    const report = validate(batch.bytes);
    return { report, bound: hitsBound(report) };
  };
  // The first pass that reads the whole file also names it.
  let whole = new Fingerprint();
  if (file.size <= bounds.maxBytes) {
    // Within both bounds exactly when its first batch of the whole file reaches the end.
    const first = await batchesOf(file, PASS.all, bounds, { onSlice: (s) => whole.add(s) }).next();
    const fits = first.done || first.value.end === file.size;
    const checked = first.done ? null : check(first.value);
    if (fits && !checked?.bound) {
      if (checked) {
        total.add(first.value, checked.report);
        plan.push({ pass: PASS.all, start: 0, end: file.size, firstLine: 0 });
      }
      onProgress(1);
      return { report: total.finish(plan.length), plan, fingerprint: await whole.finish() };
    }
    whole = new Fingerprint();
  }
  for (const [index, pass] of [PASS.nodes, PASS.edges].entries()) {
    const hooks = pass === PASS.nodes
      ? { onOversized: (line, offset) => total.addOversized(line, offset, bounds.maxBytes), onSlice: (s) => whole.add(s) }
      : {};
    for await (const batch of batchesOf(file, pass, bounds, hooks)) {
      const stack = [batch];
      while (stack.length > 0) {
        const next = stack.pop();
        const { report, bound } = check(next);
        const split = bound ? halves(next) : null;
        if (split) {
          stack.push(split[1], split[0]);
        } else {
          total.add(next, report);
          plan.push({ pass, start: next.start, end: next.end, firstLine: next.firstLine });
        }
      }
      onProgress((index + batch.end / Math.max(file.size, 1)) / 2);
    }
  }
  onProgress(1);
  return { report: total.finish(plan.length), plan, fingerprint: await whole.finish() };
}

/** SHA-256 of the SHA-256s of a file's slices, in order: names the file for resuming. */
class Fingerprint {
  constructor() {
    this.digests = [];
  }

  async add(slice) {
    this.digests.push(new Uint8Array(await crypto.subtle.digest('SHA-256', slice)));
  }

  async finish() {
    const joined = new Uint8Array(this.digests.length * 32);
    this.digests.forEach((d, i) => joined.set(d, i * 32));
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', joined));
    return [...digest].map((b) => b.toString(16).padStart(2, '0')).join('');
  }
}

/**
 * One planned batch read again from the file: its bytes and, per batch
 * line, `[fileLine, offset]` (to name the file lines of a host's refusal).
 */
export async function readBatch(file, entry) {
  const range = new Uint8Array(await file.slice(entry.start, entry.end).arrayBuffer());
  const parts = [];
  const lines = [];
  const ends = [];
  let size = 0;
  let line = entry.firstLine;
  for (let from = 0; from < range.length; ) {
    const lf = range.indexOf(LF, from);
    const to = lf < 0 ? range.length : lf + 1;
    const bytes = range.subarray(from, to);
    line += 1;
    if (takes(entry.pass, probeLine(bytes))) {
      parts.push(bytes);
      size += bytes.length;
      ends.push(size);
      lines.push([line, entry.start + from]);
    }
    from = to;
  }
  const joined = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    joined.set(p, at);
    at += p.length;
  }
  return { ...entry, bytes: joined, lines, ends };
}

/** Moves `next` (a plan index) past batches whose keys are committed (after the last checkpoint write). */
export function catchUp(plan, run, next, committedKeys) {
  const keys = new Set(committedKeys);
  while (next < plan.length && keys.has(batchKey(run, plan[next]))) next += 1;
  return next;
}
