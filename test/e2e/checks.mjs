// The checks every transport runs against the orchestrator example: the tool
// list with its hints, a read call, a write call, error results.
import assert from 'node:assert/strict';
import { EXPECTED_TOOLS, text } from './lib.mjs';

// extra are the tools expected beside the orchestrator's (the built-in
// demo's playbooks), with their hints.
export async function checkToolList(client, extra = {}) {
  const expected = { ...EXPECTED_TOOLS, ...extra };
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, Object.keys(expected).sort(), 'exactly the agent-exposed operations');
  for (const tool of tools) {
    const a = tool.annotations;
    for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
      assert.equal(typeof a?.[hint], 'boolean', `${tool.name}.${hint} is explicit`);
    }
    const want = expected[tool.name];
    assert.equal(a.readOnlyHint, want.ro, `${tool.name} readOnlyHint`);
    assert.equal(a.destructiveHint, want.destr, `${tool.name} destructiveHint`);
    assert.equal(a.idempotentHint, want.idem, `${tool.name} idempotentHint`);
    assert.equal(a.openWorldHint, false, `${tool.name} openWorldHint`);
    assert.equal(tool.inputSchema.type, 'object');
    assert.ok(tool._meta?.['mcpgate/provenance'], `${tool.name} carries provenance`);
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(byName.get_workflow_by_id.inputSchema.required, ['workflow_id']);
  assert.equal(byName.get_workflow_by_id.title, 'Get Workflow By Id');
  const create = byName.create_process.inputSchema;
  assert.ok(create.properties.workflow_name, 'path parameter');
  assert.ok(create.properties.customer_id, 'body property');
  assert.deepEqual([...create.required].sort(), ['customer_id', 'workflow_name']);
  return tools;
}

// checkCalls makes a read and a write call, and checks error results.
export async function checkCalls(client) {
  const products = await client.callTool({ name: 'list_products', arguments: {} });
  assert.equal(products.isError ?? false, false, text(products));
  assert.ok(Array.isArray(products.structuredContent?.result), 'a JSON array comes back wrapped as {result}');
  assert.match(text(products), /Node Cisco/);

  const created = await client.callTool({
    name: 'create_process',
    arguments: { workflow_name: 'create_node', customer_id: 'c-e2e', note: 'from the e2e test' },
  });
  assert.equal(created.isError ?? false, false, text(created));
  const id = created.structuredContent?.process_id;
  assert.ok(id, 'structuredContent carries the new process id');
  assert.equal(created.structuredContent.status, 'suspended');

  const got = await client.callTool({ name: 'get_process_by_id', arguments: { process_id: id } });
  assert.equal(got.isError ?? false, false, text(got));
  assert.equal(got.structuredContent.customer_id, 'c-e2e');

  const aborted = await client.callTool({ name: 'abort_process', arguments: { process_id: id } });
  assert.equal(aborted.isError ?? false, false, text(aborted));
  const again = await client.callTool({ name: 'abort_process', arguments: { process_id: id } });
  assert.equal(again.isError, true, 'aborting twice is a 409');
  assert.match(text(again), /409/);

  const missing = await client.callTool({ name: 'get_workflow_by_id', arguments: { workflow_id: 'nope' } });
  assert.equal(missing.isError, true);
  assert.match(text(missing), /404/);

  // A value cannot change the path: "a/b" stays one encoded segment, and
  // "../../admin" (which a normalising proxy would decode into dot segments)
  // is refused before anything is sent.
  const slash = await client.callTool({ name: 'get_workflow_by_id', arguments: { workflow_id: 'a/b' } });
  assert.equal(slash.isError, true);
  assert.match(text(slash), /404 Not Found.*a\/b/);
  const traversal = await client.callTool({ name: 'get_workflow_by_id', arguments: { workflow_id: '../../admin' } });
  assert.equal(traversal.isError, true);
  assert.match(text(traversal), /workflow_id: a path value must not make a '\.' or '\.\.' segment/);

  const invalid = await client.callTool({ name: 'create_process', arguments: { workflow_name: 'create_node' } });
  assert.equal(invalid.isError, true, 'a schema violation is an error result');
  assert.match(text(invalid), /customer_id/, 'it names the field');
  return id;
}
