// Execution ids above 2^53, end to end: an engine that answers its ids as
// JSON integers (snowflake ids), fronted by the real mcpgate binary. Read
// through a float64 every such id names another run, which this engine
// answers 404, so a run that is answered, polled and cancelled at all was
// so under its own id. Checked through /mcp with the official TS SDK client
// and through the NoETL-compatible endpoint.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectHTTP, startGateway, stop, text, startEngine, engineConfig } from './lib.mjs';

// runs reads the engine's runs from its raw JSON: JSON.parse would round
// the ids just as a float64 does.
async function runs(engineURL) {
  const res = await fetch(`${engineURL}/api/executions`);
  assert.equal(res.status, 200);
  const raw = await res.text();
  return [...raw.matchAll(/"cancelled":(true|false),"execution_id":(\d+)/g)].map((m) => ({ id: m[2], cancelled: m[1] === 'true' }));
}

async function waitCancelled(engineURL, id) {
  for (let i = 0; i < 200; i++) {
    const run = (await runs(engineURL)).find((r) => r.id === id);
    if (run?.cancelled) return run;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`run ${id} was not cancelled: ${JSON.stringify(await runs(engineURL))}`);
}

describe('numeric execution ids above 2^53, and run caps (TS SDK client, NoETL endpoint)', () => {
  let engine, gateway, capped;
  before(async () => {
    engine = await startEngine('--step', '1h', '--numeric-ids');
    gateway = await startGateway(['--config', engineConfig(engine.url, ['poll_interval: 100ms', 'timeout: 1s'])]);
    capped = await startGateway(['--config', engineConfig(engine.url, ['max_runs: 1'])]);
  });
  after(async () => {
    await stop(capped);
    await stop(gateway);
    await stop(engine);
  });

  test('a run is answered and reaches its ceiling under its own id (/mcp)', async () => {
    const client = await connectHTTP(gateway.url, { Authorization: 'Bearer ids' });
    try {
      const fast = await client.callTool({ name: 'demo_fast', arguments: { name: 'Ada' } });
      assert.equal(fast.isError ?? false, false, text(fast));
      assert.equal(text(fast), 'Hello, Ada!');
      assert.equal(fast._meta.noetl_execution_id, '619162855312458001');

      const slow = await client.callTool({ name: 'demo_slow', arguments: { label: 'ceiling' } });
      assert.equal(slow.isError, true);
      assert.match(text(slow), /did not finish within 1s \(execution 619162855312458002\); it was cancelled upstream/);
      assert.equal(slow._meta.noetl_execution_id, '619162855312458002');
      await waitCancelled(engine.url, '619162855312458002');
    } finally {
      await client.close();
    }
  });

  test('the NoETL endpoint answers and cancels under the same ids', async () => {
    const res = await fetch(`${gateway.url.replace(/\/mcp$/, '')}/api/mcp/playbook/demo/slow/jsonrpc`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ids' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'demo_slow', arguments: { label: 'noetl' } } }),
    });
    assert.equal(res.status, 200);
    const raw = await res.text();
    const answer = JSON.parse(raw);
    assert.equal(answer.error?.code, -32011, raw);
    const id = answer.error.data.execution_id;
    assert.match(id, /^61916285531245800\d$/, raw);
    assert.ok(raw.includes(`"execution_id":${id}`), `the last status carries the engine's own number: ${raw}`);
    assert.equal(answer.error.data.cancelled, true);
    await waitCancelled(engine.url, id);
  });

  test('a call over max_runs is refused, and nothing reaches the engine', async () => {
    const a = await connectHTTP(capped.url, { Authorization: 'Bearer a' });
    const b = await connectHTTP(capped.url, { Authorization: 'Bearer b' });
    const ac = new AbortController();
    try {
      const before = (await runs(engine.url)).length;
      const first = a.callTool({ name: 'demo_slow', arguments: { label: 'cap-1' } }, undefined, { signal: ac.signal });
      first.catch(() => {});
      for (let i = 0; i < 200 && (await runs(engine.url)).length === before; i++) await new Promise((r) => setTimeout(r, 25));
      assert.equal((await runs(engine.url)).length, before + 1, 'the first run started');
      const second = await b.callTool({ name: 'demo_fast', arguments: {} });
      assert.equal(second.isError, true);
      assert.match(text(second), /the engine is busy: the gateway already has 1 runs in flight on this engine \(max_runs is 1\); nothing was sent/);
      assert.equal((await runs(engine.url)).length, before + 1, 'the refused call started no run');
    } finally {
      ac.abort();
      await a.close();
      await b.close();
    }
  });
});
