// A replica started from a snapshot (`mcpgate build`, then `serve --snapshot`)
// serves what one started from the documents serves: the same tools/list,
// page for page through the official TS SDK client (cursors included, on
// Kubernetes' 1,123 tools), and the same answers from a real upstream. A
// snapshot that no longer matches its document is not used: one line says
// why, and the documents are loaded.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MCPGATE_BIN, connectHTTP, recorded, startGateway, startOrchestrator, stop, text } from './lib.mjs';

const corpus = fileURLToPath(new URL('../../../shared/corpus/', import.meta.url));
const kubernetes = join(corpus, 'kubernetes-swagger-2.0.json');

function build(args) {
  const out = join(mkdtempSync(join(tmpdir(), 'mcpgate-snapshot-')), 'catalog.snapshot');
  const r = spawnSync(MCPGATE_BIN, ['build', ...args, '-o', out], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^mcpgate: wrote .* \(\d+ tools, \d+ resources\)\n$/);
  return out;
}

async function listAll(client) {
  const pages = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor);
  return pages;
}

describe('starting from a snapshot', () => {
  test('the same tools and answers as from the document, from a real upstream', async () => {
    const api = await startOrchestrator();
    const serve = ['--openapi', `${api.url}/openapi.json`, '--upstream', api.url];
    let full, snap, a, b;
    try {
      const file = build(serve);
      [full, snap] = await Promise.all([startGateway(serve), startGateway([...serve, '--snapshot', file])]);
      assert.match(snap.output(), /catalog from snapshot/);
      assert.doesNotMatch(full.output(), /catalog from snapshot/);
      [a, b] = await Promise.all([connectHTTP(full.url), connectHTTP(snap.url)]);
      assert.deepEqual(await listAll(b), await listAll(a));
      for (const [name, args] of [['list_workflows', {}], ['get_process_by_id', { process_id: 'p-1' }], ['get_process_by_id', { process_id: 7 }]]) {
        const [ra, rb] = await Promise.all([a.callTool({ name, arguments: args }), b.callTool({ name, arguments: args })]);
        assert.deepEqual(rb, ra, `${name} ${JSON.stringify(args)}`);
        assert.equal(text(rb).length > 0, true);
      }
      // The snapshot's calls reached the upstream as the document's did.
      const paths = (await recorded(api.url)).map((r) => `${r.method} ${r.path}`);
      assert.equal(paths.filter((p) => p === 'GET /api/processes/p-1').length, 2, paths.join('\n'));
    } finally {
      await Promise.all([a?.close(), b?.close()]);
      await Promise.all([stop(full), stop(snap), stop(api)]);
    }
  });

  test("Kubernetes' 1,123 tools: every page and cursor the same", { skip: !existsSync(kubernetes) && `no corpus at ${corpus}` }, async () => {
    const serve = ['--openapi', kubernetes, '--all', '--upstream', 'http://127.0.0.1:1', '--log-level', 'info'];
    let full, snap, a, b;
    try {
      const file = build(serve);
      [full, snap] = await Promise.all([startGateway(serve), startGateway([...serve, '--snapshot', file])]);
      assert.match(snap.output(), /catalog from snapshot.*tools=1123/);
      [a, b] = await Promise.all([connectHTTP(full.url), connectHTTP(snap.url)]);
      const [pa, pb] = await Promise.all([listAll(a), listAll(b)]);
      assert.equal(pa.length > 1, true, 'listed over more than one page');
      assert.deepEqual(pb, pa);
      assert.equal(pb.flatMap((p) => p.tools).length, 1123);
    } finally {
      await Promise.all([a?.close(), b?.close()]);
      await Promise.all([stop(full), stop(snap)]);
    }
  });

  test('a snapshot whose document changed is not used: one line says why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcpgate-snapshot-doc-'));
    const doc = join(dir, 'petstore.yaml');
    copyFileSync(fileURLToPath(new URL('../../gateway/testdata/swagger-petstore-3.0.yaml', import.meta.url)), doc);
    const serve = ['--openapi', doc, '--all', '--upstream', 'http://127.0.0.1:1'];
    const file = build(serve);
    appendFileSync(doc, '\n# edited after the snapshot was built\n');
    const gw = await startGateway([...serve, '--snapshot', file]);
    let client;
    try {
      assert.match(gw.output(), /snapshot not used: loading the documents.*reason="snapshot: upstream \S+: the hash of document .* differs"/);
      client = await connectHTTP(gw.url);
      const tools = (await listAll(client)).flatMap((p) => p.tools);
      assert.equal(tools.length, Number(/\((\d+) tools/.exec(gw.output())[1]));
    } finally {
      await client?.close();
      await stop(gw);
    }
  });
});
