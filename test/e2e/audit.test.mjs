// mcpgate audit and serve --lock through the real binary: a reviewed lock, a
// spec edit that drops a destructive tag and exposes one more operation, and a
// DELETE tagged read-only.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MCPGATE_BIN, connectHTTP, startGateway, stop, waitUntil } from './lib.mjs';

const ORIGINAL = fs.readFileSync('../../gateway/testdata/orchestrator-tags.yaml', 'utf8');

// run resolves to {code, stdout, stderr} whatever the exit status.
function run(args) {
  return new Promise((resolve) => {
    execFile(MCPGATE_BIN, args, { timeout: 30000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

describe('audit and lock', () => {
  let dir, original, edited, lock, lintFail, gw;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpgate-audit-'));
    original = path.join(dir, 'orchestrator.yaml');
    edited = path.join(dir, 'edited.yaml');
    lintFail = path.join(dir, 'lint-fail.yaml');
    lock = path.join(dir, 'mcpgate.lock.json');
    fs.writeFileSync(original, ORIGINAL);
    const e = ORIGINAL
      .replace('tags: [processes, agent-exposed, agent-destructive]', 'tags: [processes, agent-exposed]')
      .replace('operationId: health\n      summary: Health check\n      tags: [health]', 'operationId: health\n      summary: Health check\n      tags: [health, agent-exposed]');
    assert.notEqual(e, ORIGINAL);
    fs.writeFileSync(edited, e);
    const l = ORIGINAL.replace('operationId: delete_process\n      summary: Delete a process\n      tags: [processes]',
      'operationId: delete_process\n      summary: Delete a process\n      tags: [processes, agent-exposed, agent-readonly]');
    assert.notEqual(l, ORIGINAL);
    fs.writeFileSync(lintFail, l);
  });
  after(async () => {
    await stop(gw);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('audit prints provenance and writes a lock; warnings alone pass', async () => {
    const r = await run(['audit', '--openapi', original, '--write-lock', lock]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /abort_process .*yes \(tag:agent-destructive\)/);
    assert.match(r.stdout, /MCPG004/);
    const locked = JSON.parse(fs.readFileSync(lock, 'utf8'));
    assert.equal(locked.version, 2);
    assert.equal(locked.tools.length, 8);
    for (const t of locked.tools) assert.match(t.descriptionSha256 ?? '', /^[0-9a-f]{64}$/, `${t.name}: the description is locked`);
    assert.equal((await run(['audit', '--openapi', original, '--lock', lock])).code, 0, 'no drift');
    const strict = await run(['audit', '--openapi', original, '--fail-on', 'warning']);
    assert.equal(strict.code, 1, '--fail-on warning fails on MCPG004');
  });

  test('json, markdown and SARIF carry the provenance', async () => {
    const json = JSON.parse((await run(['audit', '--openapi', original, '--format', 'json'])).stdout);
    const search = json.tools.find((t) => t.name === 'search_processes');
    assert.equal(search.provenance.readOnlyHint, 'tag:agent-readonly');
    const md = (await run(['audit', '--openapi', original, '--format', 'markdown'])).stdout;
    assert.match(md, /\| `abort_process` \| `PUT \/api\/processes\/\{process_id\}\/abort` \|/);
    const sarif = JSON.parse((await run(['audit', '--openapi', original, '--format', 'sarif'])).stdout);
    assert.equal(sarif.version, '2.1.0');
    assert.equal(sarif.runs[0].results[0].ruleId, 'MCPG004');
    assert.ok(sarif.runs[0].results[0].locations[0].physicalLocation.region.startLine > 0);
  });

  test('a spec edit that drops a destructive tag and adds an exposed operation fails audit --lock', async () => {
    const r = await run(['audit', '--openapi', edited, '--lock', lock]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /\+ health/);
    assert.match(r.stdout, /~ abort_process: destructiveHint true → false .*CRITICAL/);
  });

  test('serve --lock refuses the drifted tools and says so', async () => {
    gw = await startGateway(['--openapi', edited, '--upstream', 'http://127.0.0.1:9', '--lock', lock]);
    // The drift is written before the listening line; wait for it all the
    // same, in case the pipe hands it over in pieces.
    await waitUntil('the drift report', () => /\[CRITICAL\]\n/.test(gw.output())).catch(() => {});
    assert.match(gw.output(), /not serving the 2 added, renamed or changed tools:\nlock: 2 tools drifted: 1 added, 0 removed, 0 renamed, 1 changed\n\+ health: not in the lock\n~ abort_process: destructiveHint true → false \[CRITICAL\]\n/);
    const client = await connectHTTP(gw.url);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.equal(names.length, 7);
      assert.ok(!names.includes('abort_process') && !names.includes('health'), names.join(','));
    } finally {
      await client.close();
    }
  });

  test('a DELETE tagged read-only fails lint with exit 1', async () => {
    const r = await run(['audit', '--openapi', lintFail]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /error +MCPG002 delete_process/);
    assert.match(r.stdout, /error +MCPG005 delete_process/);
    assert.equal((await run(['audit', '--openapi', lintFail, '--fail-on', 'never'])).code, 0);
  });

  test('bad input exits 2', async () => {
    fs.writeFileSync(path.join(dir, 'bad.lock'), '{"version": 9, "tools": []}');
    const r = await run(['audit', '--openapi', original, '--lock', path.join(dir, 'bad.lock')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /version 9/);
  });
});
