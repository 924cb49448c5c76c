// Remote mode over Streamable HTTP: the example API runs standalone, the
// gateway fronts it over the network, the official SDK client drives the
// gateway — in stateless and stateful mode.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { checkCalls, checkToolList } from './checks.mjs';
import { clearRecorded, connectHTTP, recorded, startGateway, startOrchestrator, stop, text } from './lib.mjs';

const TOKEN = 'e2e-secret-token';

for (const mode of ['stateless', 'stateful']) {
  describe(`remote, ${mode}`, () => {
    let api, gw, client;
    before(async () => {
      api = await startOrchestrator(TOKEN);
      const args = ['--openapi', `${api.url}/openapi.json`, '--upstream', api.url];
      if (mode === 'stateful') args.push('--stateful');
      gw = await startGateway(args);
      client = await connectHTTP(gw.url, {
        Authorization: `Bearer ${TOKEN}`,
        'X-Secret-Header': 'must-not-leak',
        Cookie: 'session=must-not-leak',
      });
    });
    after(async () => {
      await client?.close();
      await stop(gw);
      await stop(api);
    });

    test('lists exactly the exposed tools, with all four hints', async () => {
      await checkToolList(client);
    });

    test('calls read and write tools; errors are results', async () => {
      await clearRecorded(api.url);
      await checkCalls(client);
    });

    test('the bearer token reaches the upstream, and no other inbound header does', async () => {
      const reqs = await recorded(api.url);
      assert.ok(reqs.length >= 5, `the upstream saw ${reqs.length} requests`);
      for (const r of reqs) {
        assert.deepEqual(r.headers.Authorization, [`Bearer ${TOKEN}`], `${r.method} ${r.path}`);
        for (const leak of ['X-Secret-Header', 'Cookie', 'Mcp-Session-Id', 'Mcp-Protocol-Version']) {
          assert.equal(r.headers[leak], undefined, `${leak} reached the upstream on ${r.method} ${r.path}`);
        }
      }
      // The schema violation in checkCalls never reached the upstream.
      assert.ok(!reqs.some((r) => r.method === 'POST' && !r.body.includes('customer_id')));
    });

    test('without a token the upstream refuses, and no Authorization is invented', async () => {
      const anon = await connectHTTP(gw.url);
      try {
        await clearRecorded(api.url);
        const res = await anon.callTool({ name: 'list_workflows', arguments: {} });
        assert.equal(res.isError, true);
        assert.match(text(res), /401/);
        const reqs = await recorded(api.url);
        assert.equal(reqs.length, 1);
        assert.equal(reqs[0].headers.Authorization, undefined);
      } finally {
        await anon.close();
      }
    });
  });
}
