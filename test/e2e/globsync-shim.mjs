// @modelcontextprotocol/conformance 0.1.16 imports { globSync } from "fs",
// which Node added in 22; CI has Node 20. A builtin's named exports are fixed,
// so this preload (node --import ./globsync-shim.mjs) registers a resolve hook
// that hands the conformance package a wrapper of "fs" with a small globSync
// added. Everything else resolves as usual. On Node 22+ it does nothing.
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  register('./globsync-hooks.mjs', import.meta.url);
}
