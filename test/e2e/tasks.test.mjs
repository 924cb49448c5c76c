// MCP tasks (2025-11-25) end to end: the example engine runs standalone, two
// stateless mcpgate replicas share a task key (MCPGATE_TASK_KEY) in front of
// it, and the official TS SDK's experimental tasks client calls a playbook as
// a task and polls it to completion, reads a task one replica made through
// the other, and cancels one. A third replica, --stateful, tells a session's
// client when its task ends (notifications/tasks/status).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CallToolResultSchema, TaskStatusNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { MCPGATE_BIN, connectHTTP, engineConfig, executions, start, startEngine, stop, text, waitUntil } from './lib.mjs';

describe('MCP tasks (TS SDK experimental tasks client)', () => {
  let engine, a, b, c;
  before(async () => {
    engine = await startEngine('--step', '300ms');
    const cfg = engineConfig(engine.url, ['poll_interval: 200ms', 'timeout: 30s'], 'tasks:\n  key_env: MCPGATE_TASK_KEY\n');
    const env = { ...process.env, MCPGATE_TASK_KEY: 'e2e-task-key-shared-by-both-replicas-0123456789' };
    const serve = async (...flags) => {
      const p = await start(MCPGATE_BIN, ['serve', '--addr', '127.0.0.1:0', '--config', cfg, ...flags], /listening on (http:\/\/\S+\/mcp)/, { env });
      return { ...p, url: p.match[1] };
    };
    a = await serve();
    b = await serve();
    c = await serve('--stateful');
  });
  after(async () => {
    await stop(a);
    await stop(b);
    await stop(c);
    await stop(engine);
  });

  test('advertises tasks and the playbook tools take them', async () => {
    const client = await connectHTTP(a.url);
    try {
      const caps = client.getServerCapabilities();
      assert.deepEqual(caps.tasks?.requests?.tools?.call, {});
      assert.deepEqual(caps.tasks?.cancel, {});
      const { tools } = await client.listTools();
      for (const t of tools) assert.equal(t.execution?.taskSupport, 'optional', t.name);
    } finally {
      await client.close();
    }
  });

  test('a task-augmented call completes via polling (callToolStream)', async () => {
    const client = await connectHTTP(a.url, { Authorization: 'Bearer alice' });
    try {
      await client.listTools(); // the client learns which tools take tasks
      const seen = [];
      let result;
      for await (const m of client.experimental.tasks.callToolStream({ name: 'demo_slow', arguments: { label: 'e2e-task' } })) {
        seen.push(m.type === 'result' ? 'result' : `${m.type}:${m.task?.status ?? m.error?.message}`);
        if (m.type === 'result') result = m.result;
        if (m.type === 'error') assert.fail(`the stream ended in an error: ${m.error.message}`);
      }
      assert.equal(seen[0], 'taskCreated:working', seen.join(' '));
      assert.ok(seen.filter((s) => s === 'taskStatus:working').length >= 2, `polled while it ran: ${seen.join(' ')}`);
      assert.ok(seen.includes('taskStatus:completed'), seen.join(' '));
      assert.equal(seen.at(-1), 'result');
      assert.equal(result.isError ?? false, false, text(result));
      assert.equal(text(result), 'e2e-task: counted 5 steps');
      assert.ok(result._meta?.['io.modelcontextprotocol/related-task']?.taskId, 'tasks/result names its task');
    } finally {
      await client.close();
    }
  });

  test('another replica answers for the task; another caller cannot see it', async () => {
    const onA = await connectHTTP(a.url, { Authorization: 'Bearer bob' });
    const onB = await connectHTTP(b.url, { Authorization: 'Bearer bob' });
    const mallory = await connectHTTP(b.url, { Authorization: 'Bearer mallory' });
    try {
      await onA.listTools();
      let taskId;
      for await (const m of onA.experimental.tasks.callToolStream({ name: 'demo_slow', arguments: { label: 'e2e-replica' } })) {
        if (m.type === 'taskCreated') {
          taskId = m.task.taskId;
          break; // replica A's client goes away; B takes over
        }
      }
      assert.ok(taskId);
      await assert.rejects(mallory.experimental.tasks.getTask(taskId), /task not found/);
      let task;
      for (let i = 0; i < 100; i++) {
        task = await onB.experimental.tasks.getTask(taskId);
        if (task.status !== 'working') break;
        await new Promise((r) => setTimeout(r, task.pollInterval ?? 200));
      }
      assert.equal(task.status, 'completed', JSON.stringify(task));
      const result = await onB.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      assert.equal(text(result), 'e2e-replica: counted 5 steps');
    } finally {
      await onA.close();
      await onB.close();
      await mallory.close();
    }
  });

  test('a cancelled task is cancelled upstream', async () => {
    const client = await connectHTTP(a.url);
    try {
      await client.listTools();
      let taskId;
      for await (const m of client.experimental.tasks.callToolStream({ name: 'demo_slow', arguments: { label: 'e2e-task-cancel' } })) {
        if (m.type === 'taskCreated') {
          taskId = m.task.taskId;
          break;
        }
      }
      const cancelled = await client.experimental.tasks.cancelTask(taskId);
      assert.equal(cancelled.status, 'cancelled');
      assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'cancelled');
      const run = (await executions(engine.url)).find((x) => x.workload.label === 'e2e-task-cancel');
      assert.equal(run?.cancelled, true, 'the engine saw the cancel');
      await assert.rejects(client.experimental.tasks.cancelTask(taskId), /already cancelled/);
    } finally {
      await client.close();
    }
  });

  test('a stateful session is told when its task ends (notifications/tasks/status)', async () => {
    const client = await connectHTTP(c.url, { Authorization: 'Bearer dana' });
    const told = []; // the SDK parses each with TaskStatusNotificationSchema: a malformed one never gets here
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => told.push(n.params));
    try {
      await client.listTools();
      const create = async (label) => {
        for await (const m of client.experimental.tasks.callToolStream({ name: 'demo_slow', arguments: { label } })) {
          if (m.type === 'taskCreated') return m.task.taskId; // stop polling: the notification tells
        }
        assert.fail('no task created');
      };
      const done = await create('e2e-told');
      const n = await waitUntil('the completed task to be told', () => told.find((p) => p.taskId === done), { timeoutMs: 30000 });
      const got = await client.experimental.tasks.getTask(done);
      assert.equal(n.status, 'completed');
      assert.equal(got.status, 'completed');
      for (const k of ['createdAt', 'ttl', 'pollInterval', 'statusMessage']) assert.deepEqual(n[k], got[k], k);

      const stopped = await create('e2e-told-cancel');
      assert.equal((await client.experimental.tasks.cancelTask(stopped)).status, 'cancelled');
      const m = await waitUntil('the cancelled task to be told', () => told.find((p) => p.taskId === stopped), { timeoutMs: 30000 });
      assert.equal(m.status, 'cancelled');
      assert.equal(told.length, 2, JSON.stringify(told));
    } finally {
      await client.close();
    }
  });
});
