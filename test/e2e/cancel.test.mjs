// notifications/cancelled against a stateless gateway, end to end: the
// official TS SDK client aborts a call, which sends notifications/cancelled
// in a POST of its own (in stateless mode go-sdk alone would drop it); the
// gateway's registry of calls in flight cancels the call, and the playbook
// run is cancelled upstream at once — not by the 2 s linger a hang-up gets.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectHTTP, engineConfig, executions, startEngine, startGateway, stop, waitUntil } from './lib.mjs';

describe('notifications/cancelled, stateless (TS SDK client)', () => {
  let engine, gateway;
  before(async () => {
    engine = await startEngine('--step', '10s');
    const cfg = engineConfig(engine.url, ['poll_interval: 200ms', 'timeout: 60s']);
    gateway = await startGateway(['--config', cfg]);
  });
  after(async () => {
    await stop(gateway);
    await stop(engine);
  });

  test('an aborted call cancels its run upstream at once; another caller cannot', async () => {
    const alice = await connectHTTP(gateway.url, { Authorization: 'Bearer alice' });
    try {
      const ac = new AbortController();
      const call = alice.callTool({ name: 'demo_slow', arguments: { label: 'e2e-stateless-cancel' } }, undefined, { signal: ac.signal });
      let run;
      for (let i = 0; i < 50 && !run; i++) {
        await new Promise((r) => setTimeout(r, 100));
        run = (await executions(engine.url)).find((x) => x.workload.label === 'e2e-stateless-cancel');
      }
      assert.ok(run, 'the run was started');

      // Mallory sends the same cancellation (the TS client counts ids from
      // 0, so she can guess it): 202, and nothing happens.
      for (const id of [0, 1, 2, 3]) {
        const res = await fetch(gateway.url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: 'Bearer mallory', 'Mcp-Protocol-Version': '2025-11-25' },
          body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } }),
        });
        assert.equal(res.status, 202);
        assert.equal(await res.text(), '');
      }
      await new Promise((r) => setTimeout(r, 300));
      run = (await executions(engine.url)).find((x) => x.workload.label === 'e2e-stateless-cancel');
      assert.equal(run.cancelled, false, "another caller's cancellation cancelled the run");

      const aborted = Date.now();
      ac.abort('the user changed their mind');
      await assert.rejects(call);
      await waitUntil('the run to be cancelled upstream', async () =>
        (await executions(engine.url)).find((x) => x.workload.label === 'e2e-stateless-cancel' && x.cancelled));
      console.log(`run cancelled upstream within ${Date.now() - aborted} ms of the abort`);
      // At once, not after the 2 s linger a hang-up gets — told by the
      // gateway's log, not by the clock (a loaded machine is slow either
      // way): the call saw the notification (its line says at_once), or
      // it saw the hang-up first and the notification then cut the run's
      // linger short (the runner's line says so).
      const line = await waitUntil('the call\'s log line', () =>
        gateway.output().split('\n').find((l) => l.includes('msg="playbook call"') && l.includes('upstream_cancel=')));
      assert.ok(line.includes('upstream_cancel=at_once') ||
        gateway.output().includes('the client cancelled the call it had left (no linger)'),
      `cancelled by the linger, not the notification:\n${gateway.output()}`);
    } finally {
      await alice.close();
    }
  });
});
