// OpenAPI GET operations served as MCP resources (issue 23 §1): the real
// mcpgate binary fronts a real HTTP upstream (a small server in this file),
// and the official SDK client lists resources and templates and reads text,
// JSON, binary and a 404 — stateless and stateful.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectHTTP, startGateway, stop } from './lib.mjs';

const TOKEN = 'resources-token';
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe]);

const doc = {
  openapi: '3.0.3',
  info: { title: 'pets', version: '1' },
  paths: {
    '/readme': {
      get: {
        operationId: 'readme', summary: 'The API readme', tags: ['agent-resource'],
        responses: { 200: { description: 'ok', content: { 'text/markdown': {} } } },
      },
    },
    '/notes/{id}': {
      get: {
        operationId: 'get_note',
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { 200: { description: 'ok', content: { 'text/plain': {} } } },
      },
    },
    '/pets': {
      post: { operationId: 'add_pet', 'x-mcp-resource': true, responses: { 201: { description: 'ok' } } },
    },
    '/pets/{petId}': {
      get: {
        operationId: 'get_pet', summary: 'One pet', 'x-mcp-resource': true,
        parameters: [
          { name: 'petId', in: 'path', required: true, schema: { type: 'integer' } },
          { name: 'fields', in: 'query', schema: { type: 'string' } },
        ],
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
    '/pets/{petId}/photo': {
      get: {
        operationId: 'get_photo', 'x-mcp-resource': { name: 'pet_photo', mimeType: 'image/png' },
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'integer' } }],
        responses: { 200: { description: 'ok', content: { 'image/png': {} } } },
      },
    },
  },
};

// startUpstream serves doc and its routes on a free port, recording each
// request's path and Authorization header.
async function startUpstream() {
  const seen = [];
  const srv = createServer((req, res) => {
    seen.push({ url: req.url, auth: req.headers.authorization });
    const url = new URL(req.url, 'http://x');
    const send = (status, type, body) => {
      res.writeHead(status, { 'Content-Type': type });
      res.end(body);
    };
    let m;
    if (url.pathname === '/openapi.json') return send(200, 'application/json', JSON.stringify(doc));
    if (url.pathname === '/readme') return send(200, 'text/markdown; charset=utf-8', '# Pets\n');
    if ((m = /^\/notes\/([^/]+)$/.exec(url.pathname))) return send(200, 'text/plain', `note ${decodeURIComponent(m[1])}`);
    if (url.pathname === '/pets/404') return send(404, 'application/json', '{"detail":"no such pet"}');
    if (url.pathname === '/pets/500') return send(500, 'text/plain', 'boom');
    if ((m = /^\/pets\/(\d+)\/photo$/.exec(url.pathname))) return send(200, 'image/png', PNG);
    if ((m = /^\/pets\/(\d+)$/.exec(url.pathname))) {
      return send(200, 'application/json', JSON.stringify({ id: Number(m[1]), fields: url.searchParams.get('fields') }));
    }
    send(404, 'text/plain', 'not found');
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { srv, seen, url: `http://127.0.0.1:${srv.address().port}` };
}

for (const mode of ['stateless', 'stateful']) {
  describe(`OpenAPI resources, ${mode}`, () => {
    let up, gw, client;
    before(async () => {
      up = await startUpstream();
      const file = join(mkdtempSync(join(tmpdir(), 'mcpgate-e2e-')), 'mcpgate.yaml');
      writeFileSync(file, `upstreams:
  - name: petstore
    openapi: ${up.url}/openapi.json
    base_url: ${up.url}
    resources: ["GET /notes/{id}"]
`);
      const args = ['--config', file];
      if (mode === 'stateful') args.push('--stateful');
      gw = await startGateway(args);
      client = await connectHTTP(gw.url, { Authorization: `Bearer ${TOKEN}` });
    });
    after(async () => {
      await client?.close();
      await stop(gw);
      await new Promise((r) => up?.srv.close(r));
    });

    test('the refused POST is a start-up warning', () => {
      assert.match(gw.output(), /POST \/pets: not a resource \(selected by x-mcp-resource\): only GET operations are resources/);
    });

    test('lists resources and templates with names and types', async () => {
      const { resources } = await client.listResources();
      assert.deepEqual(resources.map((r) => [r.uri, r.name, r.mimeType, r.title]), [
        ['petstore://readme', 'readme', 'text/markdown', 'The API readme'],
      ]);
      const { resourceTemplates } = await client.listResourceTemplates();
      assert.deepEqual(resourceTemplates.map((r) => [r.uriTemplate, r.name, r.mimeType]).sort(), [
        ['petstore://notes/{id}', 'get_note', 'text/plain'],
        ['petstore://pets/{petId}/photo', 'pet_photo', 'image/png'],
        ['petstore://pets/{petId}{?fields}', 'get_pet', 'application/json'],
      ]);
    });

    test('reads text, JSON and binary with the caller token', async () => {
      up.seen.length = 0;
      let { contents } = await client.readResource({ uri: 'petstore://readme' });
      assert.deepEqual(contents, [{ uri: 'petstore://readme', mimeType: 'text/markdown', text: '# Pets\n' }]);

      ({ contents } = await client.readResource({ uri: 'petstore://notes/a%20b' }));
      assert.deepEqual(contents, [{ uri: 'petstore://notes/a%20b', mimeType: 'text/plain', text: 'note a b' }]);

      ({ contents } = await client.readResource({ uri: 'petstore://pets/7?fields=name' }));
      assert.equal(contents.length, 1);
      assert.equal(contents[0].mimeType, 'application/json');
      assert.deepEqual(JSON.parse(contents[0].text), { id: 7, fields: 'name' });

      ({ contents } = await client.readResource({ uri: 'petstore://pets/7/photo' }));
      assert.equal(contents.length, 1);
      assert.equal(contents[0].mimeType, 'image/png');
      assert.equal(contents[0].text, undefined);
      assert.deepEqual(Buffer.from(contents[0].blob, 'base64'), PNG);

      assert.deepEqual(up.seen.map((s) => s.url), ['/readme', '/notes/a%20b', '/pets/7?fields=name', '/pets/7/photo']);
      for (const s of up.seen) assert.equal(s.auth, `Bearer ${TOKEN}`, s.url);
    });

    test('a 404 is -32002 with the URI; a 500 names the status', async () => {
      await assert.rejects(client.readResource({ uri: 'petstore://pets/404' }), (err) => {
        assert.equal(err.code, -32002, err.message);
        assert.match(err.message, /Resource not found: petstore:\/\/pets\/404/);
        assert.equal(err.data?.uri, 'petstore://pets/404');
        return true;
      });
      await assert.rejects(client.readResource({ uri: 'petstore://pets/500' }), (err) => {
        assert.equal(err.code, -32603, err.message);
        assert.match(err.message, /HTTP 500/);
        return true;
      });
    });

    test('a hostile value never reaches the upstream', async () => {
      up.seen.length = 0;
      await assert.rejects(client.readResource({ uri: 'petstore://notes/..%2F..%2Fadmin' }), (err) => {
        assert.equal(err.code, -32602, err.message);
        return true;
      });
      await client.readResource({ uri: 'petstore://notes/a%2Fb' });
      assert.deepEqual(up.seen.map((s) => s.url), ['/notes/a%2Fb']);
    });
  });
}
