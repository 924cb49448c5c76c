// Shared helpers of the end-to-end tests: start the real binaries, wait for the
// line that says they listen, and stop them.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const MCPGATE_BIN = process.env.MCPGATE_BIN;
export const ORCHESTRATOR_BIN = process.env.ORCHESTRATOR_BIN;
if (!MCPGATE_BIN || !ORCHESTRATOR_BIN) {
  throw new Error('set MCPGATE_BIN and ORCHESTRATOR_BIN (go test ./test/e2e does)');
}

// start runs a binary and resolves, once a stderr line matches re, to
// {proc, match, output()}. It rejects if the process exits first or after
// timeoutMs.
export function start(bin, args, re, { timeoutMs = 20000, env } = {}) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${bin} ${args.join(' ')}: no line matching ${re} within ${timeoutMs} ms; output:\n${out}`));
    }, timeoutMs);
    const onData = (chunk) => {
      out += chunk;
      const m = re.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, match: m, output: () => out });
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${bin} exited with ${code} before it was ready; output:\n${out}`));
    });
  });
}

// waitUntil calls fn (sync or async) every intervalMs until it returns a
// truthy value, and resolves to that value; it rejects, naming what, after
// timeoutMs. Tests wait for what they need to have happened, not for a
// time: a loaded machine makes any fixed pause too short.
export async function waitUntil(what, fn, { timeoutMs = 15000, intervalMs = 50 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// stop ends a process started by start and waits for it to exit. Two
// SIGTERMs: mcpgate serve drains on the first (drain_delay, 5 s by default)
// and stops at once on the second; other programs end on the first.
export async function stop(p) {
  if (!p || p.proc.exitCode !== null) return;
  const exited = new Promise((r) => p.proc.once('exit', r));
  p.proc.kill('SIGTERM');
  p.proc.kill('SIGTERM');
  const t = setTimeout(() => p.proc.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

// startEngine starts the example playbook engine (examples/playbooks)
// standalone on a free port, with extra flags (--step, --numeric-ids, …).
export async function startEngine(...flags) {
  const p = await start(process.env.PLAYBOOKS_BIN, ['--addr', '127.0.0.1:0', ...flags], /playbooks: listening on (http:\/\/\S+)/);
  return { ...p, url: p.match[1] };
}

// engineConfig writes a gateway config that fronts the engine at url, its
// playbooks block holding the given YAML lines (indented for it) and the
// file ending with tail, and returns the file's path.
export function engineConfig(url, playbooks, tail = '') {
  const file = join(mkdtempSync(join(tmpdir(), 'mcpgate-e2e-')), 'mcpgate.yaml');
  writeFileSync(file, `upstreams:
  - name: noetl
    base_url: ${url}
    openapi: ${url}/openapi.json
    playbooks:
${playbooks.map((l) => `      ${l}\n`).join('')}${tail}`);
  return file;
}

// startOrchestrator starts the example API standalone on a free port.
export async function startOrchestrator(token) {
  const args = ['--addr', '127.0.0.1:0', '--record-requests'];
  if (token) args.push('--token', token);
  const p = await start(ORCHESTRATOR_BIN, args, /orchestrator: listening on (http:\/\/\S+)/);
  return { ...p, url: p.match[1] };
}

// startGateway runs `mcpgate serve` with args on a free port.
export async function startGateway(args) {
  const p = await start(MCPGATE_BIN, ['serve', '--addr', '127.0.0.1:0', ...args], /listening on (http:\/\/\S+\/mcp)/);
  return { ...p, url: p.match[1] };
}

// connectHTTP connects the official SDK client over Streamable HTTP, sending
// headers with every request.
export async function connectHTTP(url, headers = {}) {
  const client = new Client({ name: 'mcpgate-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

// recorded returns the requests the orchestrator saw (its --record-requests log).
export async function recorded(orchestratorURL) {
  const res = await fetch(`${orchestratorURL}/_debug/requests`);
  if (!res.ok) throw new Error(`/_debug/requests: HTTP ${res.status}`);
  return res.json();
}

export async function clearRecorded(orchestratorURL) {
  await fetch(`${orchestratorURL}/_debug/requests`, { method: 'DELETE' });
}

// The orchestrator's exposed operations and the hints orchestrator-core's rule
// gives them: readOnly = GET or agent-readonly; destructive = DELETE or
// agent-destructive; idempotent = readOnly or PUT or DELETE; openWorld = false.
export const EXPECTED_TOOLS = {
  list_workflows: { ro: true, destr: false, idem: true },
  get_workflow_by_id: { ro: true, destr: false, idem: true },
  list_processes: { ro: true, destr: false, idem: true },
  get_process_by_id: { ro: true, destr: false, idem: true },
  search_processes: { ro: true, destr: false, idem: true }, // POST + agent-readonly
  create_process: { ro: false, destr: false, idem: false }, // POST
  resume_process: { ro: false, destr: false, idem: true }, // PUT
  abort_process: { ro: false, destr: true, idem: true }, // PUT + agent-destructive
  list_products: { ro: true, destr: false, idem: true },
  get_product_by_id: { ro: true, destr: false, idem: true },
  list_subscriptions: { ro: true, destr: false, idem: true },
  get_subscription_by_id: { ro: true, destr: false, idem: true },
  get_subscription_domain_model: { ro: true, destr: false, idem: true },
};

export function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// executions returns the runs the example playbook engine at engineURL has
// started (its GET /api/executions): execution_id, path, workload, cancelled.
export async function executions(engineURL) {
  const res = await fetch(`${engineURL}/api/executions`);
  if (res.status !== 200) throw new Error(`${engineURL}/api/executions: HTTP ${res.status}`);
  return (await res.json()).executions;
}

// freePort asks the kernel for a free loopback port: a gateway's URL is its
// audience, which an OpenID provider must know before the gateway starts.
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// keepCalling calls a tool with client over and over, one call at a time,
// until stop() — which resolves to {calls, failures} (the texts of the calls
// that failed or threw) once the call in flight has ended. calls() is the
// count so far: wait for it to grow to know calls went through.
export function keepCalling(client, name, args) {
  let calls = 0;
  const failures = [];
  let going = true;
  const loop = (async () => {
    while (going) {
      const res = await client.callTool({ name, arguments: args }).catch((e) => ({ isError: true, content: [{ text: String(e) }] }));
      calls++;
      if (res.isError) failures.push(text(res));
    }
  })();
  return {
    calls: () => calls,
    stop: async () => {
      going = false;
      await loop;
      return { calls, failures };
    },
  };
}
