// The Worker's warm-up, run as soon as the validator loads, before any
// file is chosen, so that the first batch of the user's file runs as fast
// as the ones after it (docs/lab/2026-12-03-chromium-page-warm-up.md,
// "Chromium's first call").
// Two costs would otherwise land on that first batch:
// * V8 runs a wasm function on its baseline code (Liftoff) until it is hot,
//   then compiles it optimised (TurboFan) in the background and uses that
//   code from the next call on. So a generated batch of a built-in schema
//   is validated a few times. The user's schema is not known yet; this one
//   has every value type, an interface, edges and every annotation the
//   fast path checks, so the functions a user's schema needs are warmed.
// * The module's memory grows for a batch and the OS maps each new page on
//   first touch. So a buffer just over the host's batch bound (the largest
//   batch the page sends; at most WARM_MEMORY_CAP) is passed in: it is
//   refused unread, but its copy into the module's memory has mapped the
//   pages that the user's first batch is then copied into.
// The generated batch is about 1 MiB, validated 4x; the page's body records
// the warm-up's "N ms" or "failed: …".
// Pure: no I/O.

/** Every value type of the schema language, nullable and not, with @key, @unique, @range, @check and @card. */
export const WARM_SCHEMA = `// The page's warm-up schema (web/warm.js).
interface Labelled { label: String @key }
node Sensor implements Labelled {
  on: Bool
  count: I32?
  total: I64?
  code: U32?
  serial: U64?
  gain: F32?
  reading: F64?
  installed: Date?
  at: DateTime?
  raw: Blob?
  shape: Vector(4)?
  notes: [String]?
  samples: [I64]?
  grade: enum(low, mid, high)?
  contact: String? @unique
  @range(count, 0..100000)
  @check(contact, "@")
}
node Site { label: String @key  opened: Date?  floors: U32? }
edge Feeds: Sensor -> Sensor @card(0..100) { weight: F64?  since: Date? }
edge LocatedAt: Sensor -> Site { role: enum(primary, backup)  from: DateTime? }
`;

/** Batch options of the warm-up: merge mode, the validator's default bounds. */
export const WARM_OPTIONS = '{"mode":"merge"}';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * About `bytes` bytes of NDJSON for WARM_SCHEMA: sites, sensors with every
 * property (some null or absent), Feeds and LocatedAt edges between them,
 * the same bytes every time (a fixed linear congruential sequence).
 */
export function warmBatch(bytes) {
  let seed = 0x2545f491;
  const next = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed;
  };
  // The high bits: an LCG's low bits repeat with short periods.
  const pick = (n) => Math.floor((next() / 2 ** 32) * n);
  const pad = (n, width) => String(n).padStart(width, '0');
  const date = () => `${1950 + pick(70)}-${pad(1 + pick(12), 2)}-${pad(1 + pick(28), 2)}`;
  const lines = [];
  let size = 0;
  const push = (record) => {
    const line = JSON.stringify(record);
    lines.push(line);
    size += line.length + 1;
  };
  const sites = 20;
  for (let i = 0; i < sites; i++) push({ type: 'Site', data: { label: `site-${i}`, opened: date(), floors: pick(40) } });
  for (let i = 0; size < bytes; i++) {
    const data = {
      label: `sensor-${i}`,
      on: pick(2) === 1,
      count: pick(100000),
      total: next() * 4096 + pick(4096),
      code: next(),
      serial: next() * 65536 + pick(65536),
      gain: pick(4096) / 16,
      reading: pick(1000000) / 1000,
      installed: date(),
      at: `${date()}T${pad(pick(24), 2)}:${pad(pick(60), 2)}:${pad(pick(60), 2)}.${pad(pick(1000000), 6)}Z`,
      raw: `base64:${Array.from({ length: 4 * (1 + pick(4)) }, () => BASE64[pick(64)]).join('')}`,
      shape: Array.from({ length: 4 }, () => (pick(20000) - 10000) / 10000),
      notes: Array.from({ length: pick(4) }, () => `n${pick(100)}`),
      samples: Array.from({ length: pick(4) }, () => pick(1000) - 500),
      grade: ['low', 'mid', 'high'][pick(3)],
      contact: `sensor-${i}@example.com`,
    };
    // Nullable properties are sometimes null and sometimes absent.
    for (const name of ['count', 'gain', 'raw', 'notes']) {
      const roll = pick(8);
      if (roll === 0) data[name] = null;
      else if (roll === 1) delete data[name];
    }
    push({ type: 'Sensor', data });
    push({ edge: 'LocatedAt', from: `sensor-${i}`, to: `site-${pick(sites)}`, data: { role: pick(2) ? 'primary' : 'backup', from: data.at } });
    if (i > 0) push({ edge: 'Feeds', from: `sensor-${i}`, to: `sensor-${pick(i)}`, data: { weight: pick(1000) / 100, since: date() } });
  }
  return new TextEncoder().encode(lines.join('\n') + '\n');
}

/** The warm-up batch's size and how many times it is validated. */
export const WARM_BYTES = 1 << 20;
export const WARM_ROUNDS = 4;

/**
 * The most memory the warm-up maps before a file is chosen, whatever the
 * host's batch bound: a page that opens must not hold more than this for a
 * batch that may never come (a host allowing 1 GiB batches maps 32 MiB).
 */
export const WARM_MEMORY_CAP = 32 * 1024 * 1024;

/**
 * Validates the warm-up batch WARM_ROUNDS times, then passes in one zero
 * byte more than `maxBatchBytes` (the host's bound, capped at
 * WARM_MEMORY_CAP) with that bound as the batch's limit, so it is refused
 * before a byte is read; with `compileSchema` (the validator package's).
 * Returns both reports (a test checks that the batch is accepted, so the
 * whole fast path runs, and that the buffer is refused unread, so it costs
 * only its copy).
 */
export function warmUp(compileSchema, maxBatchBytes) {
  const schema = compileSchema(WARM_SCHEMA);
  try {
    const batch = warmBatch(WARM_BYTES);
    let report = null;
    for (let round = 0; round < WARM_ROUNDS; round++) report = schema.validate(batch, WARM_OPTIONS);
    const bound = Math.min(maxBatchBytes, WARM_MEMORY_CAP);
    const memory = schema.validate(new Uint8Array(bound + 1), JSON.stringify({ limits: { max_batch_bytes: bound } }));
    return { report, memory };
  } finally {
    schema.free();
  }
}
