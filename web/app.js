// The upload page: pick a graph and branch, validate a file of any size in a
// Web Worker with the host's own validator (the bytes checked by SHA-256),
// show the whole file's report, and upload it only when it is valid: one
// batch per commit, split as the CLI splits it, resumable by batch key after
// a reload or a network error. Behind `serve --auth` the page sends the
// bearer token from its token field (kept in sessionStorage only) on every
// API call.
//
// The page (index.html, app.js, load.js, worker.js, warm.js, style.css) is
// served at `/` and `/web/*`, embedded in the host binary, each file with
// its SHA-256 as ETag and `no-cache`: a revisit gets 304s. Here: graph,
// branch, mode and token; the SHA-256 check against /rules (the Worker gets
// the WebAssembly.Module compiled by compileStreaming from the response
// whose clone was hashed: streamed, so V8's code cache serves a revisit);
// WebAssembly.validate of those bytes (an older browser is told which
// browsers run the validator); the report summary and error table; upload
// progress; resume checkpoints in localStorage (run, plan index, work
// branch; no token).

import { loadValidator } from '/web/load.js';

const $ = (id) => document.getElementById(id);
const MAX_ROWS_SHOWN = 1000;

const state = { graph: null, schemaSource: null, bounds: null, legacyIdentity: false, file: null, report: null, plan: null, fingerprint: null, uploadKey: null, sort: 'line', ascending: true };
const worker = new Worker('/web/worker.js', { type: 'module' });

// The proposals the artifact needs (tests/wasm-features.json) and the first
// browser versions with them and with module Workers.
const UNSUPPORTED_BROWSER = 'This browser cannot run the validator: it needs WebAssembly with SIMD, reference types, bulk memory and multi-value (Chrome or Edge 96+, Firefox 114+, Safari 16.4+). Validation is disabled; use a newer browser, or validate with the CLI.';

/** sessionStorage key of the bearer token: this tab only, gone when it closes. */
const TOKEN_KEY = 'omnigraph.token';
/** localStorage key prefix of interrupted uploads' checkpoints (no secrets: run, position, work branch). */
const CHECKPOINT_KEY = 'omnigraph.upload';
/** Bumped by each openGraph, so an older, slower open cannot overwrite a newer one's verdict. */
let openSeq = 0;
/** Bumped by each validation, so a stale report is dropped. */
let validationSeq = 0;
/** Whether the Worker got the validator (once; the same module for every graph). */
let workerLoaded = false;
/** The page's validator, loaded once (pageValidator()); null until asked for or after a failed load. */
let validatorLoad = null;

function status(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}

/**
 * The page's validator (web/load.js), loaded once per page, so an upgraded
 * host is told apart by its SHA-256 (reload the page); a failed load is
 * tried again at the next open.
 */
function pageValidator() {
  validatorLoad ??= loadValidator().catch((e) => {
    validatorLoad = null;
    throw e;
  });
  return validatorLoad;
}

function token() {
  return $('token').value.trim();
}

/** fetch() for the host's API: adds `Authorization: Bearer` when the token field is not empty. */
function api(path, init = {}) {
  const headers = new Headers(init.headers);
  if (token()) headers.set('authorization', `Bearer ${token()}`);
  return fetch(path, { ...init, headers });
}

const VERBS = { read: 'read', change: 'change', branch_create: 'create branches in', admin: 'administer' };

/** A clear sentence for the host's 401 and 403 (null for other answers). Never shows the token. */
function authMessage(status, body, graph) {
  if (status === 401) {
    return token()
      ? 'The host did not accept the token (401): check the token, then open the graph again.'
      : 'The host requires a bearer token (401): enter it in the Token field, then open the graph again.';
  }
  if (status === 403) {
    const permission = /lacks the (\w+) permission/.exec(body?.error ?? '')?.[1];
    const what = permission ? `${VERBS[permission] ?? permission}` : 'use';
    return `This token may not ${what} graph ${graph} (403${permission ? `: it lacks the ${permission} permission` : ''}).`;
  }
  return null;
}

async function getJson(path, graph) {
  const res = await api(path);
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new Error(authMessage(res.status, body, graph) ?? body?.error ?? `${path}: HTTP ${res.status}`);
  return body;
}

async function openGraph(id) {
  const seq = ++openSeq;
  state.graph = null;
  $('file').disabled = true;
  $('upload').disabled = true;
  $('branch').disabled = true;
  $('rules').classList.remove('error');
  $('rules').textContent = `Opening ${id}…`;
  try {
    const [schema, rules, branches, validator] = await Promise.all([
      getJson(`/graphs/${id}/schema`, id),
      getJson(`/graphs/${id}/rules`, id),
      getJson(`/graphs/${id}/branches`, id),
      pageValidator(),
    ]);
    const ours = validator.sha256;
    if (seq !== openSeq) return;
    if (ours !== rules.validator_sha256) {
      $('rules').textContent = `This page's validator (sha256 ${ours.slice(0, 12)}…) differs from the host's (${String(rules.validator_sha256).slice(0, 12)}…): reload the page; validation is disabled.`;
      $('rules').classList.add('error');
      return;
    }
    if (!validator.module) {
      $('rules').textContent = UNSUPPORTED_BROWSER;
      $('rules').classList.add('error');
      return;
    }
    if (!workerLoaded) {
      // The Worker runs the module compiled from exactly the bytes hashed.
      worker.postMessage({ kind: 'init', module: validator.module, maxBatchBytes: rules.bounds.max_batch_bytes });
      workerLoaded = true;
    }
    $('rules').classList.remove('error');
    $('rules').textContent = `Graph ${id}: validator ${rules.validator_version}, same build as the host (sha256 ${ours.slice(0, 12)}…), schema ${schema.schema_hash.slice(0, 19)}…, files of any size, sent in batches of at most ${(rules.bounds.max_batch_bytes / 1048576).toFixed(0)} MiB.`;
    $('schema').textContent = schema.source;
    const select = $('branch');
    select.replaceChildren(...branches.branches.map((b) => new Option(`${b.name} (commit ${b.head.seq})`, b.name)));
    select.disabled = false;
    Object.assign(state, { graph: id, schemaSource: schema.source, bounds: rules.bounds, legacyIdentity: rules.legacy_identity === true });
    $('file').disabled = false;
    if (state.file) validateFile(state.file);
  } catch (e) {
    if (seq !== openSeq) return;
    $('branch').replaceChildren();
    $('schema').textContent = '';
    $('rules').textContent = `Could not open graph ${id}: ${e.message}`;
    $('rules').classList.add('error');
  }
}

/** The batch bounds a file is split with: the host's, from /rules (as the CLI takes them). */
function splitBounds() {
  return { maxRows: state.bounds.max_table_rows, maxBytes: state.bounds.max_batch_bytes };
}

function validateFile(file) {
  state.file = file;
  state.report = null;
  state.plan = null;
  $('upload').disabled = true;
  $('upload').textContent = 'Upload and commit';
  $('commit').textContent = '';
  $('commit').classList.remove('error');
  $('summary').textContent = '';
  $('errors-box').hidden = true;
  if (!state.graph) return status('Open a graph first.', true);
  $('progress').max = 1;
  $('progress').value = 0;
  $('upload-progress').value = 0;
  status(`Validating ${file.name}…`);
  const options = { mode: $('mode').value, limits: state.bounds, legacy_identity: state.legacyIdentity };
  worker.postMessage({ kind: 'validate', id: ++validationSeq, file, schemaSource: state.schemaSource, options, bounds: splitBounds() });
}

/** Where an interrupted upload of this file to this graph, branch and mode is kept. */
function checkpointKey() {
  const { maxRows, maxBytes } = splitBounds();
  return [CHECKPOINT_KEY, state.graph, $('branch').value, $('mode').value, state.fingerprint, maxRows, maxBytes].join(':');
}

function savedCheckpoint() {
  try {
    return JSON.parse(localStorage.getItem(checkpointKey()) ?? 'null');
  } catch {
    return null;
  }
}

worker.onmessage = ({ data }) => {
  if (data.id !== undefined && data.id !== validationSeq) return;
  if (data.kind === 'progress') {
    $('progress').value = data.fraction;
  } else if (data.kind === 'error') {
    if (data.job === 'upload') uploadFailed(data.message);
    else status(`Validation failed to run: ${data.message}`, true);
  } else if (data.kind === 'report') {
    Object.assign(state, { report: data.report, plan: data.plan, fingerprint: data.fingerprint });
    showReport(state.report);
  } else if (data.kind === 'checkpoint') {
    localStorage.setItem(state.uploadKey, JSON.stringify(data.checkpoint));
  } else if (data.kind === 'uploaded') {
    $('upload-progress').value = data.done / data.total;
    $('commit').textContent = `Uploading… ${data.done} of ${data.total} batches committed.`;
  } else if (data.kind === 'refused') {
    // The target moved under a multi-batch overwrite: its work branch can never be published.
    if (data.body?.code === 'target_moved') localStorage.removeItem(state.uploadKey);
    showRefusal(data);
  } else if (data.kind === 'done') {
    localStorage.removeItem(state.uploadKey);
    showCommitted(data);
  } else if (data.kind === 'warmed') {
    // Not shown: a failed warm-up costs the first batch speed, nothing else.
    document.body.dataset.warmUp = data.failed ? `failed: ${data.failed}` : `${Math.round(data.ms)} ms`;
    if (data.failed) console.warn('validator warm-up failed', data.failed);
  }
};

function showReport(report) {
  const s = report.stats;
  const tables = s.tables.map((t) => `${t.rows} ${t.kind} ${t.name}`).join(', ') || 'no rows';
  $('summary').innerHTML = '';
  const p = document.createElement('p');
  const batches = report.batches > 1 ? ` It is uploaded in ${report.batches} batches, one commit each${$('mode').value === 'overwrite' ? ', published as one overwrite' : ''}.` : '';
  p.textContent = `${s.records} records on ${s.lines} lines: ${tables}. ${s.folded} folded duplicates, ${report.external_refs} references to stored nodes (the host checks them).${batches}`;
  $('summary').append(p);
  if (report.ok) {
    const resume = savedCheckpoint();
    if (resume) {
      status(`${state.file.name} is valid. Its upload to ${state.graph}/${$('branch').value} was interrupted after ${resume.next} of ${report.batches} batches: uploading resumes it.`);
      $('upload').textContent = 'Resume upload';
    } else {
      status(`${state.file.name} is valid.`);
    }
    $('upload').disabled = false;
  } else {
    status(`${state.file.name} has ${report.error_count} error(s); fix them to upload.`, true);
  }
  const codes = [...new Set(report.errors.map((e) => e.code))].sort();
  $('code-filter').replaceChildren(new Option('all codes', ''), ...codes.map((c) => new Option(c, c)));
  $('errors-box').hidden = report.errors.length === 0;
  $('errors-count').textContent = report.errors_truncated || report.error_count > MAX_ROWS_SHOWN
    ? `Showing the first ${Math.min(report.errors.length, MAX_ROWS_SHOWN)} of ${report.error_count} errors.`
    : `${report.error_count} error(s).`;
  renderErrors();
}

function renderErrors() {
  const filter = $('code-filter').value;
  const key = state.sort;
  const rows = (state.report?.errors ?? [])
    .filter((e) => !filter || e.code === filter)
    .slice(0, MAX_ROWS_SHOWN)
    .sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : a.line - b.line) * (state.ascending ? 1 : -1));
  $('errors').tBodies[0].replaceChildren(...rows.map((e) => {
    const tr = document.createElement('tr');
    for (const v of [e.line, e.code, e.path, e.message]) {
      const td = document.createElement('td');
      td.textContent = v;
      tr.append(td);
    }
    return tr;
  }));
  for (const th of $('errors').tHead.querySelectorAll('th')) {
    const b = th.querySelector('button');
    th.setAttribute('aria-sort', b.dataset.sort === key ? (state.ascending ? 'ascending' : 'descending') : 'none');
  }
}

/** Hands the planned batches to the Worker, with the interrupted run's checkpoint if there is one. */
function upload() {
  $('upload').disabled = true;
  $('commit').classList.remove('error');
  $('commit').textContent = 'Uploading…';
  $('upload-progress').value = 0;
  state.uploadKey = checkpointKey();
  const types = [...new Set(state.report.stats.tables.map((t) => t.name))];
  worker.postMessage({
    kind: 'upload', file: state.file, plan: state.plan, graph: state.graph, branch: $('branch').value,
    mode: $('mode').value, token: token(), checkpoint: savedCheckpoint(), types,
  });
}

function uploadFailed(message) {
  $('commit').textContent = `Upload stopped: ${message}. What was committed stays committed; upload again to resume.`;
  $('commit').classList.add('error');
  $('upload').disabled = false;
  $('upload').textContent = 'Resume upload';
}

function showRefusal({ status: code, body, conflicts, batch, publish }) {
  const refusal = authMessage(code, body, state.graph);
  const where = batch && state.plan.length > 1 ? ` Batch of file lines ${batch.first}–${batch.last} was refused; earlier batches stay committed.` : '';
  const overwrite = publish || (state.plan.length > 1 && $('mode').value === 'overwrite') ? ' The overwrite was not published: the branch is unchanged.' : '';
  const again = body?.code === 'target_moved' ? ' Someone committed to the branch meanwhile: upload again to overwrite the branch as it is now.' : '';
  const head = refusal
    ? `The host refused the upload; nothing was committed by this request. ${refusal}`
    : `The host refused the upload (HTTP ${code}, ${body?.code}): ${body?.error}`;
  const lines = conflicts.slice(0, 10).map((c) => `${c.line ? `line ${c.line}: ` : ''}${c.code}: ${c.message}`).join('\n');
  $('commit').textContent = `${head}${where}${overwrite}${again}${lines ? `\n${lines}` : ''}`;
  $('commit').classList.add('error');
}

function showCommitted({ receipts, alreadyPublished }) {
  $('upload-progress').value = 1;
  $('commit').classList.remove('error');
  $('upload').textContent = 'Upload and commit';
  if (alreadyPublished) {
    $('commit').textContent = 'This overwrite was already published before the upload was interrupted: nothing more to do.';
    return;
  }
  const last = receipts.at(-1);
  const counts = {};
  for (const r of receipts) {
    for (const [t, c] of Object.entries(r.counts)) {
      const sum = (counts[t] ??= { inserted: 0, updated: 0, removed: 0 });
      for (const k of Object.keys(sum)) sum[k] += c[k] ?? 0;
    }
  }
  // A multi-batch overwrite's publish receipt counts the whole replacement.
  const published = $('mode').value === 'overwrite' && receipts.length > 1;
  const text = Object.entries(published ? last.counts : counts)
    .map(([t, c]) => `${t}: +${c.inserted} new, ${c.updated} replaced, ${c.removed} removed`).join('; ');
  if (!last?.commit) {
    $('commit').textContent = 'The file holds no records: nothing was committed.';
  } else if (receipts.length === 1) {
    $('commit').textContent = `Committed ${last.commit.id} (#${last.commit.seq} on ${last.branch}) at ${last.commit.time}. ${text}`;
  } else if (published) {
    $('commit').textContent = `Committed the overwrite as ${last.commit.id} (#${last.commit.seq} on ${last.branch}) at ${last.commit.time}, after ${receipts.length - 1} batches on a work branch. ${text}`;
  } else {
    const first = receipts[0].commit;
    $('commit').textContent = `Committed ${receipts.length} batches as commits #${first.seq}–#${last.commit.seq} on ${last.branch}, the last ${last.commit.id} at ${last.commit.time}. ${text}`;
  }
}

$('target').addEventListener('submit', (e) => {
  e.preventDefault();
  openGraph($('graph').value);
});
// The token lives in this tab's sessionStorage only: never localStorage, the URL or the log.
$('token').value = sessionStorage.getItem(TOKEN_KEY) ?? '';
$('token').addEventListener('input', () => {
  if (token()) sessionStorage.setItem(TOKEN_KEY, token());
  else sessionStorage.removeItem(TOKEN_KEY);
});
$('file').addEventListener('change', () => $('file').files[0] && validateFile($('file').files[0]));
$('mode').addEventListener('change', () => state.file && validateFile(state.file));
$('code-filter').addEventListener('change', renderErrors);
$('upload').addEventListener('click', upload);
for (const b of document.querySelectorAll('[data-sort]')) {
  b.addEventListener('click', () => {
    state.ascending = state.sort === b.dataset.sort ? !state.ascending : true;
    state.sort = b.dataset.sort;
    renderErrors();
  });
}
const drop = $('drop');
drop.addEventListener('dragover', (e) => {
  e.preventDefault();
  drop.classList.add('over');
});
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  if (e.dataTransfer.files[0]) validateFile(e.dataTransfer.files[0]);
});
drop.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' || e.key === ' ') $('file').click();
});

const initial = new URLSearchParams(location.search).get('graph');
if (initial) $('graph').value = initial;
openGraph($('graph').value);
