// The upload page: pick a graph and branch, validate a file in a Web Worker
// with the host's own validator (checked by SHA-256), show the report, and
// upload the exact bytes only when they are valid. Behind `serve --auth` the
// page sends the bearer token from its token field (kept in sessionStorage
// only) on every API call.

const $ = (id) => document.getElementById(id);
const MAX_ROWS_SHOWN = 1000;

const state = { graph: null, schemaSource: null, bounds: null, legacyIdentity: false, file: null, report: null, sort: 'line', ascending: true };
const worker = new Worker('/web/worker.js', { type: 'module' });
/** sessionStorage key of the bearer token: this tab only, gone when it closes. */
const TOKEN_KEY = 'omnigraph.token';
/** Bumped by each openGraph, so an older, slower open cannot overwrite a newer one's verdict. */
let openSeq = 0;

function status(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}

async function hex(buffer) {
  return [...new Uint8Array(await crypto.subtle.digest('SHA-256', buffer))].map((b) => b.toString(16).padStart(2, '0')).join('');
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
    const [schema, rules, branches, wasm] = await Promise.all([
      getJson(`/graphs/${id}/schema`, id),
      getJson(`/graphs/${id}/rules`, id),
      getJson(`/graphs/${id}/branches`, id),
      fetch('/web/pkg/web/validate_bg.wasm').then((r) => r.arrayBuffer()),
    ]);
    const ours = await hex(wasm);
    if (seq !== openSeq) return;
    if (ours !== rules.validator_sha256) {
      $('rules').textContent = `This page's validator (sha256 ${ours.slice(0, 12)}…) differs from the host's (${String(rules.validator_sha256).slice(0, 12)}…): reload the page; validation is disabled.`;
      $('rules').classList.add('error');
      return;
    }
    $('rules').classList.remove('error');
    $('rules').textContent = `Graph ${id}: validator ${rules.validator_version}, same build as the host (sha256 ${ours.slice(0, 12)}…), schema ${schema.schema_hash.slice(0, 19)}…, at most ${(rules.bounds.max_batch_bytes / 1048576).toFixed(0)} MiB per upload.`;
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

function validateFile(file) {
  state.file = file;
  state.report = null;
  $('upload').disabled = true;
  $('commit').textContent = '';
  $('summary').textContent = '';
  $('errors-box').hidden = true;
  if (!state.graph) return status('Open a graph first.', true);
  if (file.size > state.bounds.max_batch_bytes) {
    status(`${file.name} is ${(file.size / 1048576).toFixed(1)} MiB, more than one upload may hold (${(state.bounds.max_batch_bytes / 1048576).toFixed(0)} MiB). Load it with the CLI, which splits it into batches: omnigraph-host load --server ${location.origin} --graph ${state.graph}${token() ? ' --token YOUR_TOKEN' : ''} ${file.name}`, true);
    return;
  }
  $('progress').max = Math.max(file.size, 1);
  $('progress').value = 0;
  status(`Reading ${file.name}…`);
  const options = { mode: $('mode').value, limits: state.bounds, legacy_identity: state.legacyIdentity };
  worker.postMessage({ file, schemaSource: state.schemaSource, options });
}

worker.onmessage = ({ data }) => {
  if (data.kind === 'progress') {
    $('progress').value = data.done;
  } else if (data.kind === 'validating') {
    status(`Validating ${state.file.name}…`);
  } else if (data.kind === 'error') {
    status(`Validation failed to run: ${data.message}`, true);
  } else if (data.kind === 'report') {
    state.report = JSON.parse(data.report);
    showReport(state.report);
  }
};

function showReport(report) {
  const s = report.stats;
  const tables = s.tables.map((t) => `${t.rows} ${t.kind} ${t.name}`).join(', ') || 'no rows';
  $('summary').innerHTML = '';
  const p = document.createElement('p');
  p.textContent = `${s.records} records on ${s.lines} lines: ${tables}. ${s.folded} folded duplicates, ${report.external_refs.length} references to stored nodes (the host checks them).`;
  $('summary').append(p);
  if (report.ok) {
    status(`${state.file.name} is valid.`);
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

async function upload() {
  $('upload').disabled = true;
  $('commit').textContent = 'Uploading…';
  const params = new URLSearchParams({ branch: $('branch').value, mode: $('mode').value });
  try {
    const res = await api(`/graphs/${state.graph}/load/ndjson?${params}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: state.file,
    });
    const body = await res.json();
    if (!res.ok) {
      const refusal = authMessage(res.status, body, state.graph);
      if (refusal) {
        $('commit').textContent = `The host refused the upload; nothing was committed. ${refusal}`;
        $('commit').classList.add('error');
        return;
      }
      const conflicts = (body.details?.conflicts ?? []).slice(0, 10).map((c) => `${c.code}: ${c.message}`).join('\n');
      $('commit').textContent = `The host refused the upload (HTTP ${res.status}, ${body.code}): ${body.error}${conflicts ? `\n${conflicts}` : ''}`;
      $('commit').classList.add('error');
      return;
    }
    $('commit').classList.remove('error');
    const counts = Object.entries(body.counts).map(([t, c]) => `${t}: +${c.inserted} new, ${c.updated} replaced, ${c.removed} removed`).join('; ');
    $('commit').textContent = body.commit
      ? `Committed ${body.commit.id} (#${body.commit.seq} on ${body.branch}) at ${body.commit.time}. ${counts}`
      : 'The file holds no records: nothing was committed.';
  } catch (e) {
    $('commit').textContent = `Upload failed: ${e.message}`;
    $('commit').classList.add('error');
    $('upload').disabled = false;
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
