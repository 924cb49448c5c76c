// The same tools over stdio, the way Claude Desktop runs a server: the SDK
// client spawns `mcpgate stdio`. There is no inbound HTTP header over stdio, so
// the upstream token comes from MCPGATE_UPSTREAM_TOKEN.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { checkCalls, checkToolList } from './checks.mjs';
import { MCPGATE_BIN, clearRecorded, recorded, startOrchestrator, stop } from './lib.mjs';

const TOKEN = 'e2e-stdio-token';

describe('stdio', () => {
  let api, client;
  before(async () => {
    api = await startOrchestrator(TOKEN);
    client = new Client({ name: 'mcpgate-e2e', version: '1.0.0' });
    await client.connect(new StdioClientTransport({
      command: MCPGATE_BIN,
      args: ['stdio', '--openapi', `${api.url}/openapi.json`, '--upstream', api.url],
      env: { ...process.env, MCPGATE_UPSTREAM_TOKEN: TOKEN },
      stderr: 'pipe',
    }));
  });
  after(async () => {
    await client?.close();
    await stop(api);
  });

  test('lists the tools with all four hints', async () => {
    await checkToolList(client);
  });

  test('calls tools, and the token reaches the upstream', async () => {
    await clearRecorded(api.url);
    await checkCalls(client);
    const reqs = await recorded(api.url);
    assert.ok(reqs.length >= 5);
    for (const r of reqs) assert.deepEqual(r.headers.Authorization, [`Bearer ${TOKEN}`]);
  });
});
