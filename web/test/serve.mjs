// A static file server on 127.0.0.1 for browser tests: the repository's
// web/, tests/vectors/ and tests/bench/ trees, plus /cases.json (the corpus case names).
// Files are served as the host serves its embedded ones: `no-cache` with a
// strong ETag (their SHA-256), so a browser keeps them and revalidates (304).
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT, caseNames, sha256Hex } from './corpus.mjs';

const TYPES = { '.wasm': 'application/wasm', '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html',
  '.json': 'application/json', '.css': 'text/css', '.pg': 'text/plain; charset=utf-8', '.ndjson': 'application/x-ndjson' };
const SERVED = ['/web/', '/tests/vectors/', '/tests/bench/'];

/** `extra` maps a path to [content type, body] for callers' own routes. */
export async function serve(extra = {}) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (Object.hasOwn(extra, url.pathname)) {
      const [type, body] = extra[url.pathname];
      res.writeHead(200, { 'content-type': type });
      res.end(body);
      return;
    }
    if (url.pathname === '/cases.json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(caseNames()));
      return;
    }
    const file = path.normalize(path.join(ROOT, decodeURIComponent(url.pathname)));
    if (!SERVED.some((p) => url.pathname.startsWith(p)) || !file.startsWith(ROOT + path.sep)) {
      res.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file);
      const cache = { 'cache-control': 'no-cache', etag: `"${sha256Hex(body)}"` };
      if (req.headers['if-none-match'] === cache.etag) {
        res.writeHead(304, cache).end();
        return;
      }
      res.writeHead(200, { ...cache, 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}
