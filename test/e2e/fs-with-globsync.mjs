// node:fs plus a globSync for Node 20 (see globsync-shim.mjs). The conformance
// package calls it with one pattern shape only, "**/<file name>" and {cwd}:
// that is all this implements, and it throws on anything else.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

export function globSync(pattern, options = {}) {
  const cwd = options.cwd ?? process.cwd();
  const m = /^\*\*\/([^*?[\]{}/]+)$/.exec(pattern);
  if (!m) throw new Error(`fs-with-globsync: unsupported pattern ${pattern}`);
  const out = [];
  const walk = (dir) => {
    let entries;
    try {
      entries = fs.readdirSync(path.join(cwd, dir), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const rel = dir ? path.join(dir, e.name) : e.name;
      if (e.isDirectory()) walk(rel);
      else if (e.name === m[1]) out.push(rel);
    }
  };
  walk('');
  return out;
}
