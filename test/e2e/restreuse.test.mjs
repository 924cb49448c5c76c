// A reload keeps a REST upstream's keep-alive connections when its transport
// is unchanged (gateway/restreuse.go), end to end: the real binary, the
// official TS SDK client, and a real HTTP server as the upstream that counts
// the connections it accepts and sees closed.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { writeFileSync, mkdtempSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectHTTP, startGateway, stop, text, waitUntil } from './lib.mjs';

const doc = {
  openapi: '3.0.3',
  info: { title: 'things', version: '1' },
  paths: {
    '/things/{id}': {
      get: {
        operationId: 'get_thing', tags: ['agent-exposed'],
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
  },
};

function writeConfig(file, body) {
  writeFileSync(`${file}.tmp`, body);
  renameSync(`${file}.tmp`, file);
}

describe('reload keeps a REST upstream\'s connections (TS SDK client)', () => {
  let api, gateway, client;
  after(async () => {
    await client?.close().catch(() => {});
    await stop(gateway);
    api?.closeAllConnections();
    api?.close();
  });

  test('unchanged transport: no new connection after SIGHUP; a new host: one, and the old one closed', async () => {
    let opened = 0;
    let closed = 0;
    api = createServer((req, res) => {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ id: req.url.split('/').pop(), name: 'thing' }));
    });
    // Node closes an idle connection after 5 s by default: a slow run
    // would then see a redial that is not the gateway's.
    api.keepAliveTimeout = 0;
    api.on('connection', (s) => {
      opened++;
      s.on('close', () => closed++);
    });
    await new Promise((r) => api.listen(0, '127.0.0.1', r));
    const port = api.address().port;

    // The document is a file: reading it opens no connection to the API.
    const dir = mkdtempSync(join(tmpdir(), 'mcpgate-e2e-'));
    writeFileSync(join(dir, 'things.json'), JSON.stringify(doc));
    const cfg = join(dir, 'mcpgate.yaml');
    const config = (base, timeout) => `upstreams:\n  - name: things\n    openapi: things.json\n    base_url: ${base}\n    timeout: ${timeout}\n    auth: {mode: none}\n`;
    writeConfig(cfg, config(`http://127.0.0.1:${port}`, '10s'));
    gateway = await startGateway(['--config', cfg]);
    client = await connectHTTP(gateway.url);
    const call = async () => {
      const res = await client.callTool({ name: 'get_thing', arguments: { id: 'x' } });
      assert.equal(res.isError, undefined, text(res));
    };
    const reloads = () => (gateway.output().match(/reloaded trigger=SIGHUP/g) ?? []).length;

    await call();
    await call();
    assert.equal(opened, 1, 'two calls in a row opened more than one connection');

    // Another timeout: the client is new, its transport is kept.
    writeConfig(cfg, config(`http://127.0.0.1:${port}`, '11s'));
    gateway.proc.kill('SIGHUP');
    await waitUntil('the first reload', () => reloads() === 1);
    await call();
    await call();
    assert.equal(opened, 1, 'the reload dialed an unchanged upstream again');
    assert.equal(closed, 0, 'the reload closed the connection the new gateway uses');

    // Another host: a new transport, and the old one's connection closed
    // with the old gateway.
    writeConfig(cfg, config(`http://localhost:${port}`, '11s'));
    gateway.proc.kill('SIGHUP');
    await waitUntil('the second reload', () => reloads() === 2);
    await call();
    assert.equal(opened, 2, 'a new host: want one new connection');
    await waitUntil('the old gateway\'s connection to close', () => closed === 1);
  });
});
