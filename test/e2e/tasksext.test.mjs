// The MCP tasks extension (io.modelcontextprotocol/tasks, 2026-07-28) end to
// end: the example engine runs standalone, two mcpgate replicas share a task
// key in front of it (A stateless, B --stateful: the extension is keyed on
// the request's protocol version, not the mode), and the extension's own
// client (@modelcontextprotocol/ext-tasks, withTasks) calls playbooks, gets
// tasks, resumes one on the other replica and cancels one; demo/fail is
// marked task: required, so a client without the extension is refused it.
// The session runs over a port that speaks the 2026-07-28 wire with fetch:
// the package's adapter for an SDK client needs a raw request dispatcher
// the v2 SDK client does not expose (@modelcontextprotocol/client is
// installed only because the package's client entry point imports it).
// Every extension request and answer that crosses the port is validated
// against the draft's JSON Schema (testdata/ext-tasks-schema.json).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import { withTasks } from '@modelcontextprotocol/ext-tasks/client';
import { MCPGATE_BIN, engineConfig, executions, start, startEngine, stop, text, waitUntil } from './lib.mjs';

const VERSION = '2026-07-28';
const EXT = 'io.modelcontextprotocol/tasks';
const SCHEMA_ID = 'https://modelcontextprotocol.io/ext-tasks/schema.json';

// The draft's definitions, compiled once.
const ajv = new Ajv2020({ strict: false, validateFormats: false });
ajv.addSchema(JSON.parse(readFileSync(new URL('./testdata/ext-tasks-schema.json', import.meta.url), 'utf8')));
const def = (name) => {
  const v = ajv.getSchema(`${SCHEMA_ID}#/$defs/${name}`);
  assert.ok(v, `the schema has no ${name}`);
  return v;
};
const requestDefs = { 'tasks/get': 'GetTaskRequest', 'tasks/cancel': 'CancelTaskRequest', 'tasks/update': 'UpdateTaskRequest' };
const resultDefs = { 'tasks/get': 'GetTaskResult', 'tasks/cancel': 'CancelTaskResult', 'tasks/update': 'UpdateTaskResult' };

// checks counts the messages validated, by definition: a test that
// validated nothing proves nothing.
const checks = {};
function validate(name, value) {
  const v = def(name);
  assert.ok(v(value), `${name} does not validate: ${ajv.errorsText(v.errors)}\n${JSON.stringify(value)}`);
  checks[name] = (checks[name] ?? 0) + 1;
}

// checkWire validates one exchange of the extension: the request, and the
// answer (a CreateTaskResult for a tools/call answered with a task).
function checkWire(msg, answer) {
  const caps = msg.params?._meta?.['io.modelcontextprotocol/clientCapabilities'];
  if (caps?.extensions?.[EXT] !== undefined) validate('TasksExtensionCapability', caps.extensions[EXT]);
  if (requestDefs[msg.method]) validate(requestDefs[msg.method], msg);
  if (answer.error) {
    if (requestDefs[msg.method] || msg.method === 'tools/call') validate('Error', answer.error);
  } else if (resultDefs[msg.method]) {
    validate(resultDefs[msg.method], answer.result);
  } else if (msg.method === 'tools/call' && answer.result?.resultType === 'task') {
    validate('CreateTaskResult', answer.result);
  }
}

// readAnswer reads a JSON-RPC answer sent as JSON or as one SSE event.
async function readAnswer(res) {
  const body = await res.text();
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const data = body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
    const answer = data.find((m) => 'result' in m || 'error' in m);
    assert.ok(answer, `no answer in the event stream: ${body}`);
    return answer;
  }
  try {
    return JSON.parse(body);
  } catch {
    throw new Error(`HTTP ${res.status}: not JSON-RPC: ${body}`);
  }
}

// post sends one 2026-07-28 request as the spec frames it: the _meta fields
// (the client capabilities declare the extension unless undeclared), and the
// Mcp-Method and Mcp-Name headers (the tool's name for tools/call, the task
// id for tasks/*), extra headers last.
let nextID = 0;
async function post(url, method, params = {}, { headers = {}, undeclared = false, signal } = {}) {
  const meta = { ...(params._meta ?? {}), 'io.modelcontextprotocol/protocolVersion': VERSION };
  const caps = meta['io.modelcontextprotocol/clientCapabilities'] ?? {};
  meta['io.modelcontextprotocol/clientCapabilities'] = undeclared ? {} : { ...caps, extensions: { ...(caps.extensions ?? {}), [EXT]: {} } };
  const msg = { jsonrpc: '2.0', id: ++nextID, method, params: { ...params, _meta: meta } };
  const h = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'Mcp-Protocol-Version': VERSION,
    'Mcp-Method': method,
  };
  if (method === 'tools/call') h['Mcp-Name'] = params.name;
  if (method.startsWith('tasks/')) h['Mcp-Name'] = params.taskId;
  const res = await fetch(url, { method: 'POST', headers: { ...h, ...headers }, body: JSON.stringify(msg), signal });
  const answer = await readAnswer(res);
  checkWire(msg, answer);
  return { status: res.status, answer };
}

// fetchPort is the ext-tasks client's ConnectedMcpSessionPort over post:
// the session it is given speaks the extension (generation v2). sent lists
// the methods it dispatched.
function fetchPort(url, headers) {
  const sent = [];
  return {
    sent,
    endpointId: 'mcpgate-e2e', // both replicas are one endpoint: a task made on one resumes on the other
    taskCapabilities: { generation: 'v2', capabilities: {} },
    invalidated: false,
    async dispatch(request, options) {
      sent.push(request.method);
      const { answer } = await post(url, request.method, request.params ?? {}, {
        headers: { ...headers, ...(options?.context?.headers ?? {}) },
        signal: options?.signal,
      });
      return answer.error ? { kind: 'error', error: answer.error } : { kind: 'result', result: answer.result };
    },
    onServerRequest: () => () => {},
    onNotification: () => () => {},
    onInvalidated: () => () => {},
  };
}

describe('MCP tasks extension, 2026-07-28 (ext-tasks client)', () => {
  let engine, a, b;
  before(async () => {
    engine = await startEngine('--step', '300ms');
    const cfg = engineConfig(engine.url, ['poll_interval: 200ms', 'timeout: 30s', 'items:', '  - path: demo/fail', '    task: required'],
      'tasks:\n  key_env: MCPGATE_TASK_KEY\n');
    const env = { ...process.env, MCPGATE_TASK_KEY: 'e2e-task-key-shared-by-both-replicas-0123456789' };
    const serve = async (...flags) => {
      const p = await start(MCPGATE_BIN, ['serve', '--addr', '127.0.0.1:0', '--config', cfg, ...flags], /listening on (http:\/\/\S+\/mcp)/, { env });
      return { ...p, url: p.match[1] };
    };
    a = await serve();
    b = await serve('--stateful');
  });
  after(async () => {
    await stop(a);
    await stop(b);
    await stop(engine);
  });

  test('server/discover advertises the extension', async () => {
    const { status, answer } = await post(a.url, 'server/discover');
    assert.equal(status, 200, JSON.stringify(answer));
    const ext = answer.result.capabilities?.extensions?.[EXT];
    assert.deepEqual(ext, {}, JSON.stringify(answer.result.capabilities));
    validate('TasksExtensionCapability', ext);
    assert.ok(answer.result.supportedVersions.includes(VERSION));
  });

  test('a playbook call is a task, polled to its result', async () => {
    const port = fetchPort(a.url, { Authorization: 'Bearer alice' });
    const session = withTasks(port, { onError: (e) => assert.fail(e) });
    try {
      const execution = await session.callTool('demo_slow', { label: 'e2e-ext' });
      assert.equal(execution.kind, 'task');
      const outcome = await execution.result();
      assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
      assert.equal(outcome.result.isError ?? false, false, text(outcome.result));
      assert.equal(text(outcome.result), 'e2e-ext: counted 5 steps');
      assert.ok(port.sent.filter((m) => m === 'tasks/get').length >= 2, `polled while it ran: ${port.sent.join(' ')}`);
    } finally {
      await session.close();
    }
  });

  test('a failed playbook is a completed task with an isError result', async () => {
    const session = withTasks(fetchPort(a.url, {}), { onError: (e) => assert.fail(e) });
    try {
      const execution = await session.callTool('demo_fail', {});
      assert.equal(execution.kind, 'task');
      const outcome = await execution.result();
      assert.equal(outcome.status, 'completed', `${outcome.error?.message} ${JSON.stringify(outcome.error?.cause?.cause)}`);
      assert.equal(outcome.result.isError, true);
      assert.match(text(outcome.result), /fails on purpose/);
    } finally {
      await session.close();
    }
  });

  test('the other replica (stateful) answers tasks/get; another caller cannot', async () => {
    const onA = withTasks(fetchPort(a.url, { Authorization: 'Bearer bob' }), { onError: (e) => assert.fail(e) });
    const portB = fetchPort(b.url, { Authorization: 'Bearer bob' });
    // B's session resumes a task: it needs no tool list (and a --stateful
    // gateway's go-sdk answers 2026-07-28 tools/list only once issue 25's
    // point 1 routes it as stateless).
    const onB = withTasks(portB, { onError: (e) => assert.fail(e), tools: { currentTool: () => undefined } });
    try {
      const execution = await onA.callTool('demo_slow', { label: 'e2e-ext-replica' });
      assert.equal(execution.kind, 'task');
      const reference = execution.serializeReference();
      await execution.detach(); // A's client lets go; B takes over
      const { status, answer } = await post(b.url, 'tasks/get', { taskId: reference.taskId }, { headers: { Authorization: 'Bearer mallory' } });
      assert.equal(status, 400);
      assert.equal(answer.error?.code, -32602);
      assert.match(answer.error.message, /task not found/);
      const resumed = await onB.resumeTask(reference);
      const outcome = await resumed.result();
      assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
      assert.equal(text(outcome.result), 'e2e-ext-replica: counted 5 steps');
      assert.ok(portB.sent.includes('tasks/get'), `B was polled: ${portB.sent.join(' ')}`);
    } finally {
      await onA.close();
      await onB.close();
    }
  });

  test('a cancelled task is cancelled upstream', async () => {
    const port = fetchPort(a.url, {});
    const session = withTasks(port, { onError: (e) => assert.fail(e) });
    try {
      const execution = await session.callTool('demo_slow', { label: 'e2e-ext-cancel' });
      assert.equal(execution.kind, 'task');
      await execution.cancel();
      assert.ok(port.sent.includes('tasks/cancel'), port.sent.join(' '));
      await waitUntil('the engine to see the cancel', async () => (await executions(engine.url)).find((x) => x.workload.label === 'e2e-ext-cancel')?.cancelled);
      const { answer } = await post(b.url, 'tasks/get', { taskId: execution.handle.taskId });
      assert.equal(answer.result?.status, 'cancelled', JSON.stringify(answer));
    } finally {
      await session.close();
    }
  });

  test('refusals: no extension, no Mcp-Name, another Mcp-Name, a required task', async () => {
    const { answer: created } = await post(a.url, 'tools/call', { name: 'demo_fast', arguments: {} });
    const taskId = created.result.taskId;
    assert.ok(taskId, JSON.stringify(created));
    for (const [what, opts, code, re] of [
      ['undeclared', { undeclared: true }, -32021, /missing required client capability/],
      ['no Mcp-Name', { headers: { 'Mcp-Name': '' } }, -32020, /missing required Mcp-Name header/],
      ['another Mcp-Name', { headers: { 'Mcp-Name': 'someone-else' } }, -32020, /does not match params.taskId/],
    ]) {
      const { status, answer } = await post(a.url, 'tasks/get', { taskId }, opts);
      assert.equal(status, 400, what);
      assert.equal(answer.error?.code, code, `${what}: ${JSON.stringify(answer)}`);
      assert.match(answer.error.message, re, what);
      if (code === -32021) assert.deepEqual(answer.error.data, { requiredCapabilities: { extensions: { [EXT]: {} } } });
    }
    // A playbook marked task: required, called without the extension.
    const { status: reqStatus, answer: req } = await post(a.url, 'tools/call', { name: 'demo_fail', arguments: {} }, { undeclared: true });
    assert.equal(reqStatus, 400);
    assert.equal(req.error?.code, -32021, JSON.stringify(req));
    assert.match(req.error.message, /tool "demo_fail" runs only as a task/);
    // Undeclared, a call of an optional playbook is no task: the call's own result.
    const { answer: plain } = await post(a.url, 'tools/call', { name: 'demo_fast', arguments: {} }, { undeclared: true });
    assert.equal(plain.result?.resultType, 'complete', JSON.stringify(plain));
    assert.equal(text(plain.result), 'Hello, world!');
    // tasks/update is acknowledged (a playbook run never asks for input).
    const { answer: ack } = await post(a.url, 'tasks/update', { taskId, inputResponses: {} });
    assert.deepEqual(ack.result, { resultType: 'complete' });
  });

  test('every definition the wire used was validated', () => {
    for (const name of ['TasksExtensionCapability', 'CreateTaskResult', 'GetTaskRequest', 'GetTaskResult', 'CancelTaskRequest', 'CancelTaskResult', 'UpdateTaskRequest', 'UpdateTaskResult', 'Error']) {
      assert.ok(checks[name] > 0, `nothing validated against ${name}: ${JSON.stringify(checks)}`);
    }
  });
});
