// The first command of the README: `mcpgate serve` with no arguments serves the
// built-in demo in-process.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { checkCalls, checkToolList } from './checks.mjs';
import { connectHTTP, startGateway, stop, waitUntil } from './lib.mjs';

describe('built-in demo (in-process)', () => {
  let gw, client;
  before(async () => {
    gw = await startGateway([]);
    // The snippets follow the listening line, maybe in another chunk.
    await waitUntil('the snippets', () => /Cursor[^\n]*\n[^\n]*"url": "[^"]+"\}\}\}/.test(gw.output()))
      .catch(() => {}); // the test below says what is missing
    client = await connectHTTP(gw.url, { Authorization: 'Bearer demo-user' });
  });
  after(async () => {
    await client?.close();
    await stop(gw);
  });

  test('prints Claude Desktop and Cursor snippets', () => {
    const out = gw.output();
    assert.match(out, /Claude Desktop/);
    assert.match(out, /Cursor/);
    assert.match(out, /"mcpServers"/);
    assert.ok(out.includes(gw.url), 'the snippets name the real URL');
  });

  test('lists at least 5 tools with four explicit hints, and calls them', async () => {
    // The example engine's playbooks are served beside the orchestrator:
    // writes, neither idempotent nor destructive.
    const playbook = { ro: false, destr: false, idem: false };
    const tools = await checkToolList(client, { demo_fast: playbook, demo_slow: playbook, demo_fail: playbook });
    assert.ok(tools.length >= 5);
    const res = await client.callTool({ name: 'list_workflows', arguments: {} });
    assert.equal(res.isError ?? false, false);
    assert.ok(res.structuredContent.result.length >= 3);
    await checkCalls(client);
  });

  test('serves a prompt beside the tools: listed, rendered, refused, completed', async () => {
    const { prompts } = await client.listPrompts();
    const triage = prompts.find((p) => p.name === 'triage_subscription');
    assert.ok(triage, JSON.stringify(prompts));
    assert.deepEqual(triage.arguments.map((a) => [a.name, a.required]), [['subscription_id', true], ['depth', true]]);
    const got = await client.getPrompt({ name: 'triage_subscription', arguments: { subscription_id: 'sub-42', depth: 'brief' } });
    assert.equal(got.messages.length, 1);
    assert.equal(got.messages[0].role, 'user');
    assert.match(got.messages[0].content.text, /subscription sub-42: .* give a brief triage/s);
    await assert.rejects(client.getPrompt({ name: 'triage_subscription', arguments: { depth: 'brief' } }), /argument "subscription_id" is required/);
    await assert.rejects(
      client.getPrompt({ name: 'triage_subscription', arguments: { subscription_id: 'x', depth: 'endless' } }),
      /argument "depth" is "endless", not one of brief, detailed/,
    );
    const done = await client.complete({ ref: { type: 'ref/prompt', name: 'triage_subscription' }, argument: { name: 'depth', value: 'd' } });
    assert.deepEqual(done.completion.values, ['detailed']);
  });

  test("serves a playbook's mcp.prompts (NoETL's MCP schema extension) under the playbook tool's name", async () => {
    const { prompts } = await client.listPrompts();
    const greet = prompts.find((p) => p.name === 'demo_fast_greet');
    assert.ok(greet, JSON.stringify(prompts));
    assert.deepEqual(greet.arguments.map((a) => [a.name, a.required ?? false]), [['tone', false], ['name', true]]);
    const got = await client.getPrompt({ name: 'demo_fast_greet', arguments: { tone: 'warm', name: 'Ada' } });
    assert.equal(got.messages[0].content.text, 'Write a warm greeting for Ada.\n');
    await assert.rejects(client.getPrompt({ name: 'demo_fast_greet', arguments: { tone: 'warm' } }), /argument "name" is required/);
    const done = await client.complete({ ref: { type: 'ref/prompt', name: 'demo_fast_greet' }, argument: { name: 'tone', value: 'f' } });
    assert.deepEqual(done.completion.values, ['formal']);
  });

  test('serves a resource and a resource template from the API\'s GET operations', async () => {
    const { resources } = await client.listResources();
    const list = resources.find((r) => r.uri === 'orchestrator://api/workflows');
    assert.ok(list, JSON.stringify(resources));
    assert.equal(list.mimeType, 'application/json');
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'orchestrator://api/workflows/{workflow_id}'), JSON.stringify(resourceTemplates));
    const { contents } = await client.readResource({ uri: list.uri });
    const workflows = JSON.parse(contents[0].text);
    assert.ok(workflows.length >= 3);
    const one = await client.readResource({ uri: `orchestrator://api/workflows/${workflows[0].workflow_id}` });
    assert.equal(JSON.parse(one.contents[0].text).workflow_id, workflows[0].workflow_id);
    await assert.rejects(client.readResource({ uri: 'orchestrator://api/workflows/no-such-workflow' }), (err) => err.code === -32002);
  });

  test('calls a playbook of the demo engine', async () => {
    const res = await client.callTool({ name: 'demo_fast', arguments: { name: 'Ada' } });
    assert.equal(res.isError ?? false, false);
    assert.equal(res.content[0].text, 'Hello, Ada!');
  });
});
