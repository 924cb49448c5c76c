// Search mode end to end, through the real binary and the official TS SDK
// client: GitHub's whole API (600+ tools) served with `--catalog search` in
// front of a real HTTP server that records what reaches it; tools/list holds
// the meta-tools, and a client searches, describes and calls through them.
// call_read_only_tool refuses a destructive tool and sends nothing. Then the
// demo orchestrator behind a verifying gateway (a real OpenID provider's
// tokens): a destructive tool behind call_tool still needs its step-up scope.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { clearRecorded, connectHTTP, freePort, recorded, start, startGateway, startOrchestrator, stop, text, MCPGATE_BIN } from './lib.mjs';
import { startIssuer } from './oidc-issuer.mjs';

const corpus = fileURLToPath(new URL('../../../shared/corpus/', import.meta.url));
const github = corpus + 'github-api-2020.json';
const META = ['call_read_only_tool', 'call_tool', 'describe_tools', 'search_tools'];

// fakeGitHub is a real HTTP server answering the two routes the test calls,
// and recording every request.
function fakeGitHub() {
  const requests = [];
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization ?? null });
    if (req.method === 'GET' && /^\/repos\/[^/]+\/[^/]+\/issues(\?|$)/.test(req.url)) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify([{ number: 7, title: 'Search mode', state: 'open' }]));
      return;
    }
    if (req.method === 'DELETE' && /^\/repos\/[^/]+\/[^/]+$/.test(req.url)) {
      res.writeHead(204);
      res.end();
      return;
    }
    res.writeHead(404, { 'Content-Type': 'application/json' });
    res.end('{"message":"Not Found"}');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`, requests, close: () => new Promise((r) => server.close(r)),
  })));
}

describe('search mode over GitHub\'s catalog', { skip: !existsSync(github) && `no ${github}: the shared corpus is not beside this clone` }, () => {
  let api, gw, client;
  before(async () => {
    api = await fakeGitHub();
    gw = await startGateway(['--openapi', github, '--all', '--upstream', api.url, '--catalog', 'search', '--log-level', 'warn']);
    client = await connectHTTP(gw.url, { Authorization: 'Bearer caller-token' });
  });
  after(async () => {
    await client?.close();
    await stop(gw);
    await api?.close();
  });

  test('tools/list holds the meta-tools, in a few KB', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), META);
    assert.ok(JSON.stringify(tools).length < 8 << 10, `${JSON.stringify(tools).length} bytes`);
    const hints = Object.fromEntries(tools.map((t) => [t.name, t.annotations]));
    assert.equal(hints.call_read_only_tool.readOnlyHint, true);
    assert.equal(hints.call_tool.destructiveHint, true);
    assert.equal(hints.search_tools.readOnlyHint, true);
  });

  test('search → describe → call', async () => {
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'list the open issues of a repository' } });
    assert.ok(!found.isError, text(found));
    const cards = found.structuredContent.tools;
    assert.ok(cards.length > 0 && cards.length <= 8);
    const card = cards.find((c) => c.name === 'issues_list-for-repo');
    assert.ok(card, `issues_list-for-repo not among ${cards.map((c) => c.name)}`);
    assert.equal(card.annotations.readOnlyHint, true);
    assert.equal(card.upstream, 'api');
    assert.ok(card.provenance.readOnlyHint, 'a hint carries its provenance');

    const described = await client.callTool({ name: 'describe_tools', arguments: { names: ['issues_list-for-repo'] } });
    const def = described.structuredContent.tools[0];
    assert.deepEqual(def.inputSchema.required.slice().sort(), ['owner', 'repo']);

    api.requests.length = 0;
    const res = await client.callTool({ name: 'call_read_only_tool', arguments: { name: 'issues_list-for-repo', arguments: { owner: 'octo', repo: 'cat', state: 'open' } } });
    assert.ok(!res.isError, text(res));
    assert.equal(res._meta['mcpgate/tool'], 'issues_list-for-repo');
    assert.match(text(res), /Search mode/);
    assert.equal(api.requests.length, 1);
    assert.equal(api.requests[0].method, 'GET');
    assert.match(api.requests[0].url, /^\/repos\/octo\/cat\/issues\?/);
    assert.equal(api.requests[0].authorization, 'Bearer caller-token');
  });

  test('call_read_only_tool refuses a destructive tool, and sends nothing', async () => {
    api.requests.length = 0;
    const res = await client.callTool({ name: 'call_read_only_tool', arguments: { name: 'repos_delete', arguments: { owner: 'octo', repo: 'cat' } } });
    assert.equal(res.isError, true);
    assert.match(text(res), /repos_delete is not read-only/);
    assert.equal(api.requests.length, 0);

    const del = await client.callTool({ name: 'call_tool', arguments: { name: 'repos_delete', arguments: { owner: 'octo', repo: 'cat' } } });
    assert.ok(!del.isError, text(del));
    assert.deepEqual(api.requests.map((r) => `${r.method} ${r.url}`), ['DELETE /repos/octo/cat']);
  });

  test('a real tool stays callable by name', async () => {
    api.requests.length = 0;
    const res = await client.callTool({ name: 'issues_list-for-repo', arguments: { owner: 'octo', repo: 'cat' } });
    assert.ok(!res.isError, text(res));
    assert.equal(api.requests.length, 1);
  });
});


describe('search mode behind a verifying gateway', () => {
  const CALLER = { client_id: 'e2e-search', client_secret: 'search-secret', scope: 'mcp mcp:write mcp:destructive' };
  let orch, issuer, gw, dir, audience;
  before(async () => {
    orch = await startOrchestrator();
    const port = await freePort();
    audience = `http://127.0.0.1:${port}/mcp`;
    issuer = await startIssuer({ resources: { [audience]: 'mcp mcp:write mcp:destructive' }, clients: [CALLER] });
    dir = mkdtempSync(join(tmpdir(), 'mcpgate-search-'));
    const file = join(dir, 'search.yaml');
    writeFileSync(file, JSON.stringify({
      auth: { issuer: issuer.url, audience, scopes: ['mcp'], policy: { write_scope: 'mcp:write', destructive_scope: 'mcp:destructive' } },
      catalog: { mode: 'search', pinned: ['list_workflows'] },
      upstreams: [{ name: 'orchestrator', openapi: `${orch.url}/openapi.json`, base_url: orch.url, auth: { mode: 'forward' } }],
    }));
    const p = await start(MCPGATE_BIN, ['serve', '--config', file, '--addr', `127.0.0.1:${port}`], /listening on (http:\/\/\S+\/mcp)/);
    gw = { ...p, url: p.match[1] };
  });
  after(async () => {
    await stop(gw);
    await stop(orch);
    await issuer?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function connect(scope) {
    const token = await issuer.token(CALLER, { scope, resource: audience });
    const client = new Client({ name: 'mcpgate-e2e-search', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    return client;
  }

  test('a destructive tool behind call_tool needs its step-up scope', async () => {
    const reader = await connect('mcp');
    try {
      const { tools } = await reader.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...META, 'list_workflows'].sort());
      await clearRecorded(orch.url);
      await assert.rejects(
        reader.callTool({ name: 'call_tool', arguments: { name: 'abort_process', arguments: { process_id: 'p-1' } } }),
        /403|insufficient_scope/);
      assert.deepEqual(await recorded(orch.url), [], 'nothing reached the API');
      const ro = await reader.callTool({ name: 'call_read_only_tool', arguments: { name: 'list_workflows' } });
      assert.ok(!ro.isError, text(ro));
    } finally {
      await reader.close();
    }
    const admin = await connect('mcp mcp:write mcp:destructive');
    try {
      await clearRecorded(orch.url);
      const res = await admin.callTool({ name: 'call_tool', arguments: { name: 'abort_process', arguments: { process_id: 'p-1' } } });
      assert.equal(res._meta['mcpgate/tool'], 'abort_process');
      const reqs = await recorded(orch.url);
      assert.equal(reqs.length, 1, JSON.stringify(reqs));
      assert.equal(reqs[0].method, 'PUT');
    } finally {
      await admin.close();
    }
  });
});
