// A real `omnigraph-host` process for the web tests (built by `cargo test`;
// OMNIGRAPH_HOST_BIN overrides where it is).
import { spawn } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';

const targetDir = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache/omnigraph-ingest/target');
export const HOST_BIN = process.env.OMNIGRAPH_HOST_BIN ?? join(targetDir, 'debug/omnigraph-host');

/**
 * Starts `omnigraph-host serve <args>` on a random 127.0.0.1 port; resolves
 * {url, process}. Background maintenance is off, so the tests' commit
 * numbers are exact (the Rust suites test maintenance).
 */
export function startHost(args) {
  const child = spawn(HOST_BIN, ['serve', ...args, '--listen', '127.0.0.1:0', '--maintenance-interval-ms', '0']);
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stderr.on('data', (d) => {
      seen += d;
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(seen);
      if (m) resolve({ url: m[1], process: child });
    });
    child.on('exit', (code) => reject(new Error(`host exited ${code}: ${seen}`)));
  });
}
