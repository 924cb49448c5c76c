// Playbook tools end to end: the example engine (examples/playbooks) runs
// standalone, mcpgate fronts it from a config file, and the official TS SDK
// client calls the playbooks — a slow run with progress, a run the client
// cancels, and a call sent twice that must start one run.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectHTTP, engineConfig, executions, start, startEngine, startGateway, stop, text, waitUntil } from './lib.mjs';

// run returns the engine's execution whose workload has label, if any.
async function run(engineURL, label) {
  return (await executions(engineURL)).find((x) => x.workload.label === label);
}

describe('playbook tools (TS SDK client, standalone engine)', () => {
  let engine, stateless, stateful;
  before(async () => {
    engine = await startEngine('--step', '600ms');
    const cfg = engineConfig(engine.url, ['poll_interval: 400ms', 'timeout: 30s']);
    stateless = await startGateway(['--config', cfg]);
    stateful = await startGateway(['--config', cfg, '--stateful']);
  });
  after(async () => {
    await stop(stateless);
    await stop(stateful);
    await stop(engine);
  });

  test('lists the exposed playbooks, not the hidden one, with explicit hints', async () => {
    const client = await connectHTTP(stateless.url);
    try {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name).sort();
      assert.deepEqual(names, ['demo_fail', 'demo_fast', 'demo_slow']);
      for (const t of tools) {
        assert.deepEqual(
          [t.annotations.readOnlyHint, t.annotations.destructiveHint, t.annotations.idempotentHint, t.annotations.openWorldHint],
          [false, false, false, false], t.name);
      }
      const slow = tools.find((t) => t.name === 'demo_slow');
      assert.deepEqual(slow.inputSchema.properties.note, {}, 'a null default is unconstrained');
    } finally {
      await client.close();
    }
  });

  test('a slow run reports progress and returns its result', async () => {
    const client = await connectHTTP(stateless.url);
    try {
      const progress = [];
      const res = await client.callTool({ name: 'demo_slow', arguments: { label: 'e2e-progress' } }, undefined, {
        onprogress: (p) => progress.push(p),
        resetTimeoutOnProgress: true,
      });
      assert.equal(res.isError ?? false, false, text(res));
      assert.equal(text(res), 'e2e-progress: counted 5 steps');
      assert.ok(res._meta?.noetl_execution_id, 'the execution id is in _meta');
      assert.ok(progress.length >= 4, `progress notifications: ${JSON.stringify(progress)}`);
      for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress, 'progress grows');
      assert.ok(progress.some((p) => /step \d of 5/.test(p.message ?? '')), 'the engine\'s message is passed on');
    } finally {
      await client.close();
    }
  });

  test('a failed run is isError', async () => {
    const client = await connectHTTP(stateless.url);
    try {
      const res = await client.callTool({ name: 'demo_fail', arguments: {} });
      assert.equal(res.isError, true);
      assert.match(text(res), /fails on purpose/);
    } finally {
      await client.close();
    }
  });

  test('a run the client cancels is cancelled upstream', async () => {
    const client = await connectHTTP(stateful.url);
    try {
      const ac = new AbortController();
      const call = client.callTool({ name: 'demo_slow', arguments: { label: 'e2e-cancel' } }, undefined, { signal: ac.signal });
      call.catch(() => {}); // awaited below; not unhandled meanwhile
      // Abort once the run exists upstream, not after a pause that a
      // loaded machine can outlast before the gateway dispatches it.
      await waitUntil('the run to start upstream', () => run(engine.url, 'e2e-cancel'));
      ac.abort('the user changed their mind');
      await assert.rejects(call);
      // The gateway leaves the run, then cancels it (at once for a
      // cancellation, after its 2 s linger for a hang-up).
      let last;
      await waitUntil('the engine to see the cancel', async () => (last = await run(engine.url, 'e2e-cancel'))?.cancelled).catch(() => {});
      assert.ok(last, 'the run was started');
      assert.equal(last.cancelled, true, 'the engine saw the cancel');
    } finally {
      await client.close();
    }
  });

  test('a call sent again while it runs attaches to the same run', async () => {
    const a = await connectHTTP(stateless.url, { Authorization: 'Bearer same-user' });
    const b = await connectHTTP(stateless.url, { Authorization: 'Bearer same-user' });
    try {
      const args = { name: 'demo_slow', arguments: { label: 'e2e-resend' } };
      const first = a.callTool(args);
      first.catch(() => {}); // awaited below; not unhandled meanwhile
      // The second call is sent while the run is under way upstream.
      await waitUntil('the first call\'s run to start upstream', () => run(engine.url, 'e2e-resend'));
      const [r1, r2] = await Promise.all([first, b.callTool(args)]);
      assert.equal(r1.isError ?? false, false, text(r1));
      assert.equal(r2._meta.noetl_execution_id, r1._meta.noetl_execution_id);
      const runs = (await executions(engine.url)).filter((x) => x.workload.label === 'e2e-resend');
      assert.equal(runs.length, 1, 'one run upstream');
    } finally {
      await a.close();
      await b.close();
    }
  });
});
