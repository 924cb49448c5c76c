// A fleet, end to end: three `mcpgate serve` replicas sharing state in a
// real Redis (Debian's redis-server), behind a real HAProxy (Debian's
// haproxy) balancing round-robin with no stickiness, in front of one
// playbook engine; the official TS SDK client and raw JSON-RPC POSTs.
//
// It shows what issue 24 found broken: a re-sent playbook call on another
// replica attaches to the first run; a cancellation reaching another
// replica cancels the call; a client's hang-up reaches its replica through
// HAProxy; SIGTERM of a replica under load fails no call,
// and its waiting playbook call is answered with its execution id and
// re-attached by a re-send; SIGHUP with a changed config serves the new
// tools with no call failed; a traced call's traceparent reaches the
// upstream.
//
// redis-server and haproxy come from the distribution (.ci/run installs
// them); without them the suite is skipped, saying so.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { MCPGATE_BIN, connectHTTP, executions, freePort, keepCalling, recorded, start, startEngine, startOrchestrator, stop, text, waitUntil } from './lib.mjs';

const REDIS = '/usr/bin/redis-server';
const HAPROXY = '/usr/sbin/haproxy';
const missing = [REDIS, HAPROXY].filter((b) => !existsSync(b));
const skip = missing.length > 0 ? `${missing.join(' and ')} not installed (apt-get install redis-server haproxy; .ci/run does)` : false;

const HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-11-25' };

// rpc POSTs one JSON-RPC message to url and returns the parsed answer (the
// JSON body, or the one message of an SSE stream), or null for a 202.
async function rpc(url, msg, { headers = {}, signal } = {}) {
  const res = await fetch(url, { method: 'POST', headers: { ...HEADERS, ...headers }, body: JSON.stringify(msg), signal });
  if (res.status === 202) return null;
  const body = await res.text();
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${body}`);
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const data = body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
    return data.find((m) => m.id !== undefined) ?? null;
  }
  return JSON.parse(body);
}

function writeConfig(file, body) {
  writeFileSync(`${file}.tmp`, body);
  renameSync(`${file}.tmp`, file);
}

function config({ redis, engine, orchestrator, otlp }) {
  let s = `drain_delay: 2s
shutdown_timeout: 4s
tracing: {otlp_endpoint: "http://127.0.0.1:${otlp}", service_name: mcpgate-fleet}
state:
  backend: redis
  redis: {url: "redis://127.0.0.1:${redis}/0", key_prefix: "mcpgate-e2e:"}
tasks: {key_env: MCPGATE_TASK_KEY}
upstreams:
  - name: noetl
    base_url: ${engine}
    openapi: ${engine}/openapi.json
    auth: {mode: forward}
    playbooks: {poll_interval: 200ms, timeout: 120s}
`;
  if (orchestrator) {
    s += `  - name: orchestrator
    base_url: ${orchestrator}
    openapi: ${orchestrator}/openapi.json
    auth: {mode: none}
`;
  }
  return s;
}

function haproxyConfig(port, replicas) {
  return `global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  retries 3
  option redispatch
  retry-on conn-failure empty-response
  option abortonclose
  option http-server-close
frontend mcp
  bind 127.0.0.1:${port}
  default_backend gateways
backend gateways
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 300ms fall 1 rise 1
${replicas.map((r, i) => `  server r${i + 1} 127.0.0.1:${r} check`).join('\n')}
`;
}

describe('a fleet: three replicas, Redis, HAProxy round-robin (TS SDK client)', { skip }, () => {
  let redis, redisPort, engine, api, lb, cfg, lbURL, otlp, otlpPort;
  const exported = []; // OTLP/HTTP protobuf bodies the replicas sent
  const replicas = [];
  const env = { ...process.env, MCPGATE_TASK_KEY: 'k'.repeat(43) };

  async function startReplica(i) {
    const p = await start(MCPGATE_BIN, ['serve', '--addr', `127.0.0.1:${replicas[i].port}`, '--config', cfg], /listening on (http:\/\/\S+\/mcp)/, { env });
    replicas[i].p = p;
    replicas[i].url = p.match[1];
  }

  before(async () => {
    redisPort = await freePort();
    redis = await start(REDIS, ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], /Ready to accept connections/);
    engine = await startEngine('--step', '2s'); // demo/slow: 10 s, longer than a drain
    api = await startOrchestrator();
    // A trace collector: what reaches /v1/traces, kept whole.
    otlp = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') exported.push(Buffer.concat(chunks));
        res.writeHead(200, { 'Content-Type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise((r) => otlp.listen(0, '127.0.0.1', r));
    otlpPort = otlp.address().port;
    cfg = join(mkdtempSync(join(tmpdir(), 'mcpgate-fleet-')), 'mcpgate.yaml');
    writeConfig(cfg, config({ redis: redisPort, engine: engine.url, otlp: otlpPort }));
    for (let i = 0; i < 3; i++) replicas.push({ port: await freePort() });
    await Promise.all(replicas.map((_, i) => startReplica(i)));
    const lbPort = await freePort();
    const hcfg = join(mkdtempSync(join(tmpdir(), 'mcpgate-haproxy-')), 'haproxy.cfg');
    writeFileSync(hcfg, haproxyConfig(lbPort, replicas.map((r) => r.port)));
    // HAProxy says nothing when it starts well: wait for it to serve.
    const proc = spawn(HAPROXY, ['-db', '-f', hcfg], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (c) => { out += c; });
    proc.stderr.on('data', (c) => { out += c; });
    lb = { proc, output: () => out };
    lbURL = `http://127.0.0.1:${lbPort}/mcp`;
    await waitUntil('HAProxy to serve', async () => {
      if (proc.exitCode !== null) throw new Error(`haproxy exited ${proc.exitCode}: ${out}`);
      return (await rpc(lbURL, { jsonrpc: '2.0', id: 1, method: 'tools/list' }).catch(() => null))?.result;
    });
    replicas.api = api;
  });
  after(async () => {
    for (const r of replicas) await stop(r.p);
    await stop(lb);
    await stop(api);
    await stop(engine);
    await stop(redis);
    otlp?.close();
  });

  test('a re-sent playbook call on another replica attaches to the first run', async () => {
    const label = `resend-${Date.now()}`;
    const call = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'demo_slow', arguments: { label } } });
    const ac = new AbortController();
    const first = rpc(replicas[0].url, call(1), { headers: { Authorization: 'Bearer alice' }, signal: ac.signal }).catch((e) => e);
    await waitUntil('the run to start', async () => (await executions(engine.url)).some((x) => x.workload.label === label));
    ac.abort(); // the client hangs up: the run lingers for a re-send
    await first;
    const answer = await rpc(replicas[1].url, call(2), { headers: { Authorization: 'Bearer alice' } });
    assert.equal(answer.result.isError, undefined, JSON.stringify(answer));
    assert.match(text(answer.result), /counted 5 steps/);
    const runs = (await executions(engine.url)).filter((x) => x.workload.label === label);
    assert.equal(runs.length, 1, `${runs.length} runs for one call re-sent on another replica`);
    assert.equal(runs[0].cancelled, false);
  });

  test('a notifications/cancelled reaching another replica cancels the call', async () => {
    const label = `cancel-${Date.now()}`;
    const pending = rpc(replicas[0].url, { jsonrpc: '2.0', id: 41, method: 'tools/call', params: { name: 'demo_slow', arguments: { label } } },
      { headers: { Authorization: 'Bearer alice' } }).catch((e) => e);
    await waitUntil('the run to start', async () => (await executions(engine.url)).some((x) => x.workload.label === label));
    const ack = await rpc(replicas[2].url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 41, reason: 'changed my mind' } },
      { headers: { Authorization: 'Bearer alice' } });
    assert.equal(ack, null);
    await pending; // answered (or cut) once cancelled
    const run = await waitUntil('the run to be cancelled upstream', async () =>
      (await executions(engine.url)).find((x) => x.workload.label === label && x.cancelled), { timeoutMs: 5000 });
    assert.ok(run);
  });

  test('a client that hangs up on HAProxy is gone for its replica too: the run is cancelled after the linger', async () => {
    // HAProxy (option abortonclose, http-server-close) closes its connection
    // to the replica when the client's goes: the replica sees the hang-up
    // and cancels the run it left, after the 2 s linger (no re-send came).
    // Were the hang-up lost at HAProxy, demo/slow would run its 10 s out.
    const label = `hangup-${Date.now()}`;
    const ac = new AbortController();
    const pending = rpc(lbURL, { jsonrpc: '2.0', id: 51, method: 'tools/call', params: { name: 'demo_slow', arguments: { label } } },
      { headers: { Authorization: 'Bearer erin' }, signal: ac.signal }).catch((e) => e);
    await waitUntil('the run to start', async () => (await executions(engine.url)).some((x) => x.workload.label === label));
    const started = Date.now();
    ac.abort();
    await pending;
    const run = await waitUntil('the run to be cancelled upstream', async () =>
      (await executions(engine.url)).find((x) => x.workload.label === label && x.cancelled), { timeoutMs: 9000 });
    assert.ok(run, 'the run was cancelled');
    assert.ok(Date.now() - started < 9000, `cancelled ${Date.now() - started} ms after the hang-up: before the run's own end`);
  });

  test('tasks/list on any replica lists the caller\'s tasks made on another, and only theirs', async () => {
    const onA = await connectHTTP(replicas[0].url, { Authorization: 'Bearer carol' });
    const onC = await connectHTTP(replicas[2].url, { Authorization: 'Bearer carol' });
    const dave = await connectHTTP(replicas[1].url, { Authorization: 'Bearer dave' });
    try {
      await onA.listTools();
      let taskId;
      for await (const m of onA.experimental.tasks.callToolStream({ name: 'demo_fast', arguments: { name: 'carol' } })) {
        if (m.type === 'taskCreated') taskId = m.task.taskId;
      }
      assert.ok(taskId);
      const listed = await waitUntil('the task to be listed completed on another replica', async () => {
        const { tasks } = await onC.experimental.tasks.listTasks();
        const t = tasks.find((x) => x.taskId === taskId);
        return t?.status === 'completed' && t;
      });
      assert.equal(listed.ttl > 0, true, JSON.stringify(listed));
      const { tasks: daves } = await dave.experimental.tasks.listTasks();
      assert.equal(daves.some((x) => x.taskId === taskId), false, 'another caller lists carol\'s task');
    } finally {
      await onA.close();
      await onC.close();
      await dave.close();
    }
  });

  test('SIGTERM of a replica under load: no call fails; its waiting playbook call is answered and re-attached', async () => {
    const client = await connectHTTP(lbURL, { Authorization: 'Bearer bob' });
    let result;
    const load = keepCalling(client, 'demo_fast', { name: 'load' });
    const label = `drain-${Date.now()}`;
    const slow = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'demo_slow', arguments: { label } } };
    const victim = replicas[2];
    const code = new Promise((r) => victim.p.proc.once('exit', r));
    try {
      const waiting = rpc(victim.url, slow, { headers: { Authorization: 'Bearer bob' } });
      await waitUntil('the run to start', async () => (await executions(engine.url)).some((x) => x.workload.label === label));
      victim.p.proc.kill('SIGTERM');
      const answer = await waiting;
      const run = (await executions(engine.url)).find((x) => x.workload.label === label);
      assert.equal(answer.result.isError, true);
      assert.ok(text(answer.result).includes(`execution ${run.execution_id}`), text(answer.result));
      assert.match(text(answer.result), /the run goes on/);
      assert.match(text(answer.result), /attaches to this run on any gateway of the fleet/);
      assert.equal(await code, 0, victim.p.output());
      // The re-send, through the balancer, attaches to the same run.
      const again = await rpc(lbURL, slow, { headers: { Authorization: 'Bearer bob' } });
      assert.match(text(again.result), /counted 5 steps/, JSON.stringify(again));
      assert.equal((await executions(engine.url)).filter((x) => x.workload.label === label).length, 1);
      const before = load.calls();
      await waitUntil('more calls after the drain', () => load.calls() > before + 20);
    } finally {
      result = await load.stop();
      victim.p.proc.kill('SIGTERM');
      await code;
      await startReplica(2); // for the tests after this one
    }
    assert.deepEqual(result.failures, [], `${result.failures.length} of ${result.calls} calls failed`);
    await client.close();
  });

  test('SIGHUP with a changed config: the new tools served by every replica, no call failed', async () => {
    const client = await connectHTTP(lbURL);
    let result;
    const load = keepCalling(client, 'demo_fast', { name: 'hup' });
    try {
      writeConfig(cfg, config({ redis: redisPort, engine: engine.url, orchestrator: replicas.api.url, otlp: otlpPort }));
      for (const r of replicas) r.p.proc.kill('SIGHUP');
      for (const r of replicas) {
        await waitUntil(`replica ${r.port} to serve list_workflows`, async () =>
          (await rpc(r.url, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).result.tools.some((t) => t.name === 'list_workflows'));
      }
      const before = load.calls();
      await waitUntil('more calls after the reload', () => load.calls() > before + 20);
    } finally {
      result = await load.stop();
    }
    assert.deepEqual(result.failures, [], `${result.failures.length} of ${result.calls} calls failed`);
    const res = await client.callTool({ name: 'list_workflows', arguments: {} });
    assert.equal(res.isError, undefined, text(res));
    await client.close();
  });

  test('a traced call: the caller\'s trace continues to the upstream, and the spans reach the collector', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parent = randomBytes(8).toString('hex');
    const answer = await rpc(lbURL, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'list_workflows', arguments: {} } },
      { headers: { traceparent: `00-${traceId}-${parent}-01` } });
    assert.equal(answer.result.isError, undefined, JSON.stringify(answer));
    const reqs = await recorded(replicas.api.url);
    const seen = reqs.filter((r) => (r.headers.Traceparent ?? [])[0]?.startsWith(`00-${traceId}-`));
    assert.equal(seen.length, 1, 'the upstream request carries the caller\'s trace id');
    const [, , span] = seen[0].headers.Traceparent[0].split('-');
    assert.notEqual(span, parent, 'the upstream call is a span of its own');
    assert.ok((seen[0].headers['X-Request-Id'] ?? [])[0], 'the request id reached the upstream');
    const id = Buffer.from(traceId, 'hex');
    await waitUntil('the spans to reach the collector', () => exported.some((b) => b.includes(id)), { timeoutMs: 20000 });
  });
});
