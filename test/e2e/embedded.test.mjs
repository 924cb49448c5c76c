// The in-process pattern (examples/embedded): one process serves a notes REST
// API and mounts the gateway beside it at /mcp. The official SDK client drives
// /mcp; the API checks the bearer token itself, so the client's token decides,
// and a refused one comes back as the API's own 401 in an isError result.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectHTTP, start, stop, text } from './lib.mjs';

const EMBEDDED_BIN = process.env.EMBEDDED_BIN;
if (!EMBEDDED_BIN) throw new Error('set EMBEDDED_BIN (go test ./test/e2e does)');

const TOKEN = 'e2e-embedded-token';

// The notes operations and the hints orchestrator-core's rule gives them.
const EXPECTED = {
  list_notes: { ro: true, destr: false, idem: true },
  get_note: { ro: true, destr: false, idem: true },
  create_note: { ro: false, destr: false, idem: false },
  delete_note: { ro: false, destr: true, idem: true }, // DELETE + agent-destructive
};

describe('embedded (in-process)', () => {
  let svc, client;
  before(async () => {
    svc = await start(EMBEDDED_BIN, ['--addr', '127.0.0.1:0', '--token', TOKEN],
      /embedded: listening on (http:\/\/\S+) \(MCP at (http:\/\/\S+\/mcp)\)/);
    svc.url = svc.match[1];
    svc.mcp = svc.match[2];
    client = await connectHTTP(svc.mcp, { Authorization: `Bearer ${TOKEN}`, Cookie: 'session=must-not-leak' });
  });
  after(async () => {
    await client?.close();
    await stop(svc);
  });

  test('lists the four notes tools, with all four hints', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), Object.keys(EXPECTED).sort());
    for (const t of tools) {
      const a = t.annotations;
      const want = EXPECTED[t.name];
      assert.deepEqual(
        { ro: a.readOnlyHint, destr: a.destructiveHint, idem: a.idempotentHint, open: a.openWorldHint },
        { ...want, open: false }, t.name);
    }
  });

  test('read and write tools reach the API with the caller token', async () => {
    const created = await client.callTool({ name: 'create_note', arguments: { title: 'From TS', body: 'via /mcp' } });
    assert.equal(created.isError, undefined, text(created));
    const id = created.structuredContent.id;
    assert.ok(id >= 1);

    const got = await client.callTool({ name: 'get_note', arguments: { note_id: id } });
    assert.equal(got.structuredContent.title, 'From TS');

    const list = await client.callTool({ name: 'list_notes', arguments: { title_contains: 'from ts' } });
    assert.deepEqual(list.structuredContent.result.map((n) => n.id), [id]);

    const del = await client.callTool({ name: 'delete_note', arguments: { note_id: id } });
    assert.notEqual(del.isError, true, text(del));
    const gone = await client.callTool({ name: 'get_note', arguments: { note_id: id } });
    assert.equal(gone.isError, true);
    assert.match(text(gone), new RegExp(`404.*note ${id} not found`));
  });

  for (const [name, headers, detail] of [
    ['no token', {}, 'missing bearer token'],
    ['a wrong token', { Authorization: 'Bearer wrong' }, 'invalid bearer token'],
  ]) {
    test(`with ${name}, the API's own 401 comes back as isError`, async () => {
      const anon = await connectHTTP(svc.mcp, headers);
      try {
        const res = await anon.callTool({ name: 'create_note', arguments: { title: 'must not be written' } });
        assert.equal(res.isError, true);
        assert.match(text(res), /401/);
        assert.ok(text(res).includes(detail), text(res));
      } finally {
        await anon.close();
      }
      // Nothing was written.
      const notes = await (await fetch(`${svc.url}/api/notes`, { headers: { Authorization: `Bearer ${TOKEN}` } })).json();
      assert.ok(!notes.some((n) => n.title === 'must not be written'));
    });
  }

  test('the REST API answers beside /mcp, with its own check', async () => {
    assert.equal((await fetch(`${svc.url}/api/notes`)).status, 401);
    const ok = await fetch(`${svc.url}/api/notes`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200);
    assert.ok((await ok.json()).length >= 2);
  });
});
