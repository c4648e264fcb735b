// The page's Worker: validates a file of any size with the web build of the
// validator (the module the page compiled from the very bytes it checked
// against the host's SHA-256),
// split into batches the way the CLI splits it (split.js), and uploads the
// planned batches one commit each, resuming an interrupted upload by its
// batch keys. Memory is one batch, never the file.
//
// It warms the validator as it loads (warm.js). The page follows the CLI's
// flow (crates/omnigraph-host/src/split.rs) with the same bounds and keys,
// in two phases: the Worker first validates every batch of the file
// (planFile; halving there, on the validator's bound refusals) before
// anything is sent and keeps the plan of ranges; the upload then reads
// each planned range again from the `File`, one commit per batch (a
// multi-batch overwrite: work branch + POST /overwrite). Its checkpoint is
// a plan index in `localStorage`, caught up with the branch's logged keys
// like `--resume`.
import init, { compileSchema } from '/web/pkg/web/validate.js';
import { batchKey, catchUp, newRun, planFile, readBatch, readReport, fileLocation } from '/web/split.js';
import { warmUp } from '/web/warm.js';

let ready = null;
let compiled = null;
let compiledSource = null;

const post = (message) => self.postMessage(message);

self.onmessage = async ({ data }) => {
  try {
    if (data.kind === 'init') {
      // Warmed before any file is chosen, so the first one runs on
      // optimised code (warm.js). A failed warm-up costs speed, not service.
      ready = init({ module_or_path: data.module }).then(() => {
        const start = performance.now();
        try {
          warmUp(compileSchema, data.maxBatchBytes);
          post({ kind: 'warmed', ms: performance.now() - start });
        } catch (e) {
          post({ kind: 'warmed', failed: String(e?.message ?? e) });
        }
      });
    } else if (data.kind === 'validate') {
      await validateFile(data);
    } else if (data.kind === 'upload') {
      await upload(data);
    }
  } catch (e) {
    post({ kind: 'error', job: data.kind, message: String(e?.message ?? e) });
  }
};

/** Validates every batch of the file; posts the whole file's report, the upload plan and the file's fingerprint. */
async function validateFile({ id, file, schemaSource, options, bounds }) {
  if (!ready) throw new Error('the validator is not loaded');
  await ready;
  if (compiledSource !== schemaSource) {
    compiled = compileSchema(schemaSource);
    compiledSource = schemaSource;
  }
  // options: the mode plus the host's bounds and identity rule from /rules,
  // so the page judges with exactly the host's numbers.
  const optionsJson = JSON.stringify(options);
  const validate = (bytes) => readReport(compiled.validate(bytes, optionsJson));
  const { report, plan, fingerprint } = await planFile(file, bounds, validate, (fraction) => post({ kind: 'progress', id, fraction }));
  post({ kind: 'report', id, report, plan, fingerprint });
}

/** fetch() against the host with the caller's token. */
function api(token, path, init = {}) {
  const headers = new Headers(init.headers);
  if (token) headers.set('authorization', `Bearer ${token}`);
  return fetch(path, { ...init, headers });
}

/** A host answer that is not 2xx, as a message the page shows (`fileLines` maps batch lines). */
class Refused extends Error {
  constructor(status, body, batch) {
    super(body?.error ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.batch = batch;
  }
}

async function call(token, path, init) {
  const res = await api(token, path, init);
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new Refused(res.status, body);
  return body;
}

/** Batch keys committed on a branch (none if it does not exist). */
async function committedKeys(token, graph, branch) {
  try {
    const { commits } = await call(token, `/graphs/${graph}/commits?${new URLSearchParams({ branch })}`);
    return commits.map((c) => c.batch_key).filter(Boolean);
  } catch (e) {
    if (e instanceof Refused && e.body?.code === 'branch_not_found') return [];
    throw e;
  }
}

/**
 * Commits the plan's batches in order, each with its key. A checkpoint
 * (posted to the page after each commit, kept in localStorage there)
 * plus the keys in the branch's log say where an interrupted upload
 * stands. An overwrite of several batches loads into a work branch forked
 * with the file's types empty and publishes it in one commit.
 */
async function upload({ file, plan, graph, branch, mode, token, checkpoint, types }) {
  const state = checkpoint ?? { run: newRun(), next: 0, overwrite: null };
  const multiBatchOverwrite = mode === 'overwrite' && plan.length > 1;
  const publishKey = `${state.run}:publish`;
  if (state.overwrite && (await committedKeys(token, graph, branch)).includes(publishKey)) {
    post({ kind: 'done', receipts: [], alreadyPublished: true });
    return;
  }
  const into = state.overwrite?.branch ?? branch;
  state.next = catchUp(plan, state.run, state.next, checkpoint ? await committedKeys(token, graph, into) : []);
  post({ kind: 'checkpoint', checkpoint: state });
  if (multiBatchOverwrite && !state.overwrite) {
    const name = `ow-${state.run.toLowerCase()}`;
    const created = await call(token, `/graphs/${graph}/branches`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name, from: branch, clear: types }),
    });
    state.overwrite = { branch: name, base_seq: created.base?.seq ?? 0, types };
    post({ kind: 'checkpoint', checkpoint: state });
  }
  const target = state.overwrite ? { branch: state.overwrite.branch, mode: 'append' } : { branch, mode };
  const receipts = [];
  for (; state.next < plan.length; ) {
    const batch = await readBatch(file, plan[state.next]);
    const params = new URLSearchParams({ ...target, batch_key: batchKey(state.run, batch) });
    try {
      const body = await call(token, `/graphs/${graph}/load/ndjson?${params}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson' },
        body: batch.bytes,
      });
      receipts.push(body);
    } catch (e) {
      if (e instanceof Refused) {
        // Conflicts name batch lines; stored edges an overwrite strands have none.
        const conflicts = (e.body?.details?.conflicts ?? []).map((c) => (c.line ? { ...c, line: fileLocation(batch, c.line).line } : c));
        post({ kind: 'refused', status: e.status, body: e.body, conflicts, index: state.next, batch: { first: batch.lines[0]?.[0], last: batch.lines.at(-1)?.[0] } });
        return;
      }
      throw e;
    }
    state.next += 1;
    post({ kind: 'checkpoint', checkpoint: state });
    post({ kind: 'uploaded', done: state.next, total: plan.length });
  }
  if (state.overwrite) {
    const { branch: from, base_seq, types: cleared } = state.overwrite;
    try {
      const body = await call(token, `/graphs/${graph}/overwrite`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ branch, from, base_seq, types: cleared, batch_key: publishKey }),
      });
      receipts.push(body);
    } catch (e) {
      if (e instanceof Refused) {
        post({ kind: 'refused', status: e.status, body: e.body, conflicts: e.body?.details?.conflicts ?? [], publish: true });
        return;
      }
      throw e;
    }
  }
  post({ kind: 'done', receipts });
}
