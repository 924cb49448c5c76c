// Results a strict client accepts: every operation of a small real upstream
// declares a JSON answer (so every tool advertises an outputSchema), and
// answers with something else — an HTML login page, nothing, JSON null, a
// value off its schema, more than the 4 MiB cap. The official SDK client
// throws on a success without conforming structuredContent; through the
// gateway it must never throw, and get either conforming structuredContent or
// an isError that says what happened.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connectHTTP, startGateway, stop, text } from './lib.mjs';

const thing = { $ref: '#/components/schemas/Thing' };
const LOGIN = '<!doctype html><html><head><title>Sign in</title></head><body><form method="post" action="/login"><input name="user"></form></body></html>';
const HUGE = JSON.stringify({ id: 1, name: 'x'.repeat(5 << 20) }); // over the 4 MiB cap

// Each route: the schema its document declares for 200, and what it answers.
const ROUTES = {
  '/login-page': { schema: thing, status: 200, type: 'text/html; charset=utf-8', body: LOGIN },
  '/empty': { schema: thing, status: 200, type: 'application/json', body: '' },
  '/no-content': { schema: thing, status: 204 },
  '/null': { schema: thing, status: 200, type: 'application/json', body: 'null' },
  '/mismatch': { schema: thing, status: 200, type: 'application/json', body: '{"id":"seven","name":"x"}' },
  '/huge': { schema: thing, status: 200, type: 'application/json', body: HUGE },
  '/good': { schema: thing, status: 200, type: 'application/json', body: '{"id":1,"name":"good"}' },
  '/things': { schema: { type: 'array', items: thing }, status: 200, type: 'application/json', body: '[{"id":1,"name":"a"},{"id":2,"name":"b"}]' },
  '/no-things': { schema: { type: 'array', items: thing }, status: 200, type: 'application/json', body: 'null' },
};

// operationId from a route: /login-page → get_login_page.
const opId = (path) => 'get_' + path.slice(1).replaceAll('-', '_');

function openapi() {
  const paths = {};
  for (const [path, r] of Object.entries(ROUTES)) {
    paths[path] = {
      get: {
        operationId: opId(path),
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: r.schema } } } },
      },
    };
  }
  return {
    openapi: '3.0.3',
    info: { title: 'results', version: '1' },
    paths,
    components: {
      schemas: {
        Thing: {
          type: 'object',
          required: ['id', 'name'],
          properties: { id: { type: 'integer' }, name: { type: 'string' } },
        },
      },
    },
  };
}

// What each tool must answer: ok (conforming structuredContent, checked by the
// client itself) with a check of it, or isError with words matching a pattern.
const EXPECT = {
  get_login_page: { error: /the API answered HTTP 200 with text\/html where JSON was declared: <!doctype html>/ },
  get_empty: { ok: (sc, t) => { assert.deepEqual(sc, {}); assert.match(t, /HTTP 200 OK with no content/); } },
  get_no_content: { ok: (sc, t) => { assert.deepEqual(sc, {}); assert.match(t, /HTTP 204 No Content with no content/); } },
  get_null: { error: /the API answered HTTP 200 with JSON null where an object was declared/ },
  get_mismatch: { error: /does not match the API's documented schema: id: must be an integer, got "seven"; the answer was: \{"id":"seven","name":"x"\}/ },
  get_huge: { error: /the API answered HTTP 200, but its response exceeded 4 MiB and was cut; narrow the request/ },
  get_good: { ok: (sc) => assert.deepEqual(sc, { id: 1, name: 'good' }) },
  get_things: { ok: (sc) => assert.deepEqual(sc, { result: [{ id: 1, name: 'a' }, { id: 2, name: 'b' }] }) },
  get_no_things: { error: /does not match the API's documented schema: result: must be an array, got null/ },
};

describe('results a strict client accepts', () => {
  let api, apiURL, gw, client;
  before(async () => {
    api = createServer((req, res) => {
      const path = new URL(req.url, 'http://x').pathname;
      if (path === '/openapi.json') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(openapi()));
        return;
      }
      const r = ROUTES[path];
      if (!r || req.method !== 'GET') {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(r.status, r.type ? { 'Content-Type': r.type } : {});
      res.end(r.body ?? '');
    });
    await new Promise((resolve) => api.listen(0, '127.0.0.1', resolve));
    apiURL = `http://127.0.0.1:${api.address().port}`;
    gw = await startGateway(['--openapi', `${apiURL}/openapi.json`, '--upstream', apiURL, '--all']);
    client = await connectHTTP(gw.url);
  });
  after(async () => {
    await client?.close();
    await stop(gw);
    await new Promise((resolve) => (api ? api.close(resolve) : resolve()));
  });

  test('every tool advertises an object outputSchema', async () => {
    // Listing also arms the client's outputSchema validators for callTool.
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), Object.keys(EXPECT).sort());
    for (const t of tools) {
      assert.equal(t.outputSchema?.type, 'object', `${t.name} advertises an object outputSchema`);
    }
  });

  for (const [name, want] of Object.entries(EXPECT)) {
    test(`${name}: ${want.ok ? 'conforming structuredContent' : 'isError in plain words'}`, async () => {
      // callTool throws if a success lacks structuredContent or it fails the
      // outputSchema: that is the failure this test exists to catch.
      const res = await client.callTool({ name, arguments: {} });
      if (want.ok) {
        assert.equal(res.isError ?? false, false, text(res));
        assert.ok(res.structuredContent, 'a success carries structuredContent');
        want.ok(res.structuredContent, text(res));
      } else {
        assert.equal(res.isError, true, `want isError, got ${JSON.stringify(res).slice(0, 300)}`);
        assert.equal(res.structuredContent, undefined, 'an error carries no structuredContent');
        assert.match(text(res), want.error);
        assert.ok(text(res).length < 20000, `error text of ${text(res).length} bytes`);
      }
    });
  }
});
