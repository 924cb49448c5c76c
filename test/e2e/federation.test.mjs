// Federation: mcpgate fronts real third-party MCP servers — the official
// server-everything and server-filesystem, each a stdio child — and the
// official SDK client drives them through it, stateless and stateful.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectHTTP, MCPGATE_BIN, start, startGateway, stop, text, waitUntil } from './lib.mjs';

const modules = join(dirname(fileURLToPath(import.meta.url)), 'node_modules', '@modelcontextprotocol');
const everything = join(modules, 'server-everything', 'dist', 'index.js');
const filesystem = join(modules, 'server-filesystem', 'dist', 'index.js');

// startEverythingHTTP starts server-everything over Streamable HTTP on
// 127.0.0.1:port (0: a free one; match[1] is the address it got).
function startEverythingHTTP(port) {
  const preload = join(dirname(fileURLToPath(import.meta.url)), 'loopback-only.mjs');
  return start(process.execPath, ['--import', preload, everything, 'streamableHttp'], /loopback-only: listening on (127\.0\.0\.1:\d+)/, {
    env: { ...process.env, PORT: String(port) },
  });
}

// fedConfig writes a gateway config federating both servers over stdio,
// with a folder of its own for the filesystem server.
function fedConfig(extra = '') {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgate-fed-'));
  const data = join(dir, 'data');
  mkdirSync(data);
  writeFileSync(join(data, 'hello.txt'), 'hello from the filesystem server\n');
  const file = join(dir, 'mcpgate.yaml');
  writeFileSync(file, `upstreams:
  - name: ev
    mcp: {command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(everything)}, stdio]}
  - name: fs
    mcp: {command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(filesystem)}, ${JSON.stringify(data)}]}
    exclude: [edit_file]
    annotations: {create_directory: {destructive: true}}
${extra}`);
  return { file, data };
}

describe('federation: tools and audit read the MCP servers', () => {
  test('tools --format json lists federated tools with their provenance; audit names them', () => {
    const { file } = fedConfig();
    const tools = spawnSync(MCPGATE_BIN, ['tools', '--config', file, '--format', 'json'], { encoding: 'utf8', timeout: 60000 });
    assert.equal(tools.status, 0, tools.stderr);
    const listing = JSON.parse(tools.stdout);
    const byName = Object.fromEntries(listing.tools.map((t) => [t.name, t]));
    assert.ok(byName.ev_echo && byName.fs_read_text_file && byName.fs_write_file, Object.keys(byName).join(' '));
    assert.equal(byName.fs_edit_file, undefined, 'exclude: [edit_file] did not hold');
    assert.equal(byName.fs_read_text_file.provenance.readOnlyHint, 'upstream:fs');
    assert.equal(byName.fs_read_text_file.upstream.tool, 'read_text_file');
    assert.equal(byName.fs_create_directory.provenance.destructiveHint, 'config');
    assert.equal(byName.fs_create_directory.annotations.destructiveHint, true);

    const audit = spawnSync(MCPGATE_BIN, ['audit', '--config', file, '--format', 'json', '--fail-on', 'never'], { encoding: 'utf8', timeout: 60000 });
    assert.equal(audit.status, 0, audit.stderr);
    const report = JSON.parse(audit.stdout);
    const echo = report.tools.find((t) => t.name === 'ev_echo');
    assert.equal(echo.provenance.readOnlyHint, 'upstream:ev');
    assert.match(echo.inputSchemaSha256, /^[0-9a-f]{64}$/);
  });

  test('two servers under one prefix are a start-up error naming both; a prefix resolves it', () => {
    const { file } = fedConfig(`  - name: ev2
    tool_prefix: ev_
    mcp: {command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(everything)}, stdio]}
`);
    const r = spawnSync(MCPGATE_BIN, ['tools', '--config', file], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /tool name "ev_echo" is declared by ev \(tool echo\) and by ev2 \(tool echo\)/);
    const ok = readFileSync(file, 'utf8').replace('tool_prefix: ev_', 'tool_prefix: other_');
    writeFileSync(file, ok);
    const r2 = spawnSync(MCPGATE_BIN, ['tools', '--config', file], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r2.status, 0, r2.stderr);
    assert.match(r2.stdout, /other_echo/);
  });
});

for (const mode of ['stateless', 'stateful']) {
  describe(`federation, ${mode}`, () => {
    let gw, client, data;
    const progress = [];
    before(async () => {
      const cfg = fedConfig();
      data = cfg.data;
      const args = ['--config', cfg.file];
      if (mode === 'stateful') args.push('--stateful');
      gw = await startGateway(args);
      client = await connectHTTP(gw.url);
    });
    after(async () => {
      await client?.close();
      await stop(gw);
    });

    test('calls pass through: text, structured content, images', async () => {
      const echo = await client.callTool({ name: 'ev_echo', arguments: { message: 'hi there' } });
      assert.equal(echo.isError, undefined);
      assert.match(text(echo), /hi there/);
      const sum = await client.callTool({ name: 'ev_get-sum', arguments: { a: 2, b: 3 } });
      assert.match(text(sum), /5/);
      const sc = await client.callTool({ name: 'ev_get-structured-content', arguments: { location: 'New York' } });
      assert.ok(sc.structuredContent && typeof sc.structuredContent === 'object', JSON.stringify(sc));
      const img = await client.callTool({ name: 'ev_get-tiny-image', arguments: {} });
      assert.ok(img.content.some((c) => c.type === 'image' && c.mimeType === 'image/png' && c.data.length > 0), JSON.stringify(img.content.map((c) => c.type)));
    });

    test('the filesystem server reads and writes through the gateway', async () => {
      const read = await client.callTool({ name: 'fs_read_text_file', arguments: { path: join(data, 'hello.txt') } });
      assert.match(text(read), /hello from the filesystem server/);
      const wrote = await client.callTool({ name: 'fs_write_file', arguments: { path: join(data, 'new.txt'), content: `written ${mode}` } });
      assert.notEqual(wrote.isError, true, text(wrote));
      assert.equal(readFileSync(join(data, 'new.txt'), 'utf8'), `written ${mode}`);
    });

    test('bad arguments are refused before anything is sent', async () => {
      const res = await client.callTool({ name: 'ev_get-sum', arguments: { a: 'two', b: 3 } });
      assert.equal(res.isError, true);
      assert.match(text(res), /invalid arguments/);
    });

    test("progress reaches the caller under the caller's token", async () => {
      const res = await client.callTool(
        { name: 'ev_trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
        undefined,
        { onprogress: (p) => progress.push(p) },
      );
      assert.notEqual(res.isError, true, text(res));
      await waitUntil('three progress notifications', () => progress.length >= 3);
      assert.deepEqual(progress.map((p) => p.progress).slice(0, 3), [1, 2, 3]);
    });

    test('prompts and resources are served, under the prefix', async () => {
      const prompts = await client.listPrompts();
      const names = prompts.prompts.map((p) => p.name);
      assert.ok(names.includes('ev_simple-prompt'), names.join(' '));
      const got = await client.getPrompt({ name: 'ev_simple-prompt', arguments: {} });
      assert.ok(got.messages.length > 0);
      const resources = await client.listResources();
      assert.ok(resources.resources.length > 0, 'no resources');
      const first = resources.resources[0];
      assert.match(first.uri, /^ev\+/);
      const read = await client.readResource({ uri: first.uri });
      assert.equal(read.contents[0].uri, first.uri);
      const templates = await client.listResourceTemplates();
      assert.ok(templates.resourceTemplates.every((t) => t.uriTemplate.startsWith('ev+')), JSON.stringify(templates));
    });
  });
}

// server-everything over Streamable HTTP (its own sessions, answers as
// event streams): a stateless gateway forwards a 2025-11-25 caller's calls
// itself, on an upstream session of that version (the lean hop).
describe('federation over Streamable HTTP, stateless', () => {
  let ev, gw, client;
  before(async () => {
    ev = await startEverythingHTTP(0);
    const dir = mkdtempSync(join(tmpdir(), 'mcpgate-fedhttp-'));
    const file = join(dir, 'mcpgate.yaml');
    writeFileSync(file, `upstreams:
  - name: evh
    mcp: {url: "http://${ev.match[1]}/mcp"}
    auth: {mode: none}
`);
    gw = await startGateway(['--config', file]);
    client = await connectHTTP(gw.url);
  });
  after(async () => {
    await client?.close();
    await stop(gw);
    await stop(ev);
  });

  test('calls pass through: text, structured content, images, resource links, errors', async () => {
    for (let i = 0; i < 3; i++) {
      const echo = await client.callTool({ name: 'evh_echo', arguments: { message: `hi ${i}` } });
      assert.equal(echo.isError, undefined);
      assert.match(text(echo), new RegExp(`hi ${i}`));
    }
    const sum = await client.callTool({ name: 'evh_get-sum', arguments: { a: 2, b: 3 } });
    assert.match(text(sum), /5/);
    const sc = await client.callTool({ name: 'evh_get-structured-content', arguments: { location: 'New York' } });
    assert.ok(sc.structuredContent && typeof sc.structuredContent === 'object', JSON.stringify(sc));
    const img = await client.callTool({ name: 'evh_get-tiny-image', arguments: {} });
    assert.ok(img.content.some((c) => c.type === 'image' && c.mimeType === 'image/png' && c.data.length > 0), JSON.stringify(img).slice(0, 500));
    const links = await client.callTool({ name: 'evh_get-resource-links', arguments: { count: 2 } });
    assert.ok(links.content.some((c) => c.type === 'resource_link'), JSON.stringify(links).slice(0, 500));
    const bad = await client.callTool({ name: 'evh_get-sum', arguments: { a: 'two', b: 3 } });
    assert.equal(bad.isError, true);
    assert.match(text(bad), /invalid arguments/);
  });

  test('concurrent callers each get their own answer', async () => {
    const others = await Promise.all([1, 2, 3].map(() => connectHTTP(gw.url)));
    try {
      const got = await Promise.all(others.flatMap((c, i) => [0, 1, 2, 3].map((j) => c.callTool({ name: 'evh_echo', arguments: { message: `c${i}-${j}` } }))));
      got.forEach((r, k) => assert.match(text(r), new RegExp(`c${Math.floor(k / 4)}-${k % 4}\\b`)));
    } finally {
      await Promise.all(others.map((c) => c.close()));
    }
  });
});

// An MCP upstream that is not up when the gateway starts does not stop it;
// once it answers (the gateway's next ping), its tools, prompts and
// resources are all served, without a restart.
describe('federation: an upstream that comes up after the gateway', () => {
  let ev, gw, client;
  after(async () => {
    await client?.close();
    await stop(gw);
    await stop(ev);
  });

  test('its tools, prompts and resources arrive once it answers', async () => {
    // A port with nothing on it yet, for the server to take later.
    const probe = net.createServer();
    await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = probe.address().port;
    await new Promise((resolve) => probe.close(resolve));
    const dir = mkdtempSync(join(tmpdir(), 'mcpgate-fedlate-'));
    const file = join(dir, 'mcpgate.yaml');
    writeFileSync(file, `upstreams:
  - name: late
    mcp: {url: "http://127.0.0.1:${port}/mcp"}
    auth: {mode: none}
`);
    gw = await startGateway(['--config', file]);
    client = await connectHTTP(gw.url);
    assert.equal((await client.listPrompts()).prompts.length, 0);
    assert.equal((await client.listResources()).resources.length, 0);

    ev = await startEverythingHTTP(port);
    // The gateway pings an upstream every 15 s; its first answer sets off
    // the re-read.
    await waitUntil('the late upstream\'s prompts to be served', async () => (await client.listPrompts()).prompts.length > 0, { timeoutMs: 45000, intervalMs: 500 });
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === 'late_echo'), JSON.stringify(tools.tools.map((t) => t.name)));
    const prompts = (await client.listPrompts()).prompts;
    assert.ok(prompts.every((p) => p.name.startsWith('late_')), JSON.stringify(prompts));
    const simple = prompts.find((p) => !(p.arguments ?? []).some((a) => a.required));
    assert.ok(simple, JSON.stringify(prompts));
    const got = await client.getPrompt({ name: simple.name, arguments: {} });
    assert.ok(got.messages.length > 0, JSON.stringify(got));
    const resources = (await client.listResources()).resources;
    assert.ok(resources.length > 0 && resources.every((r) => r.uri.startsWith('late+')), JSON.stringify(resources.slice(0, 3)));
    const read = await client.readResource({ uri: resources[0].uri });
    assert.ok(read.contents.length > 0, JSON.stringify(read).slice(0, 300));
  });
});

test('the npm servers these tests need are installed (npm ci in test/e2e)', () => {
  assert.ok(existsSync(everything), `${everything}: run npm ci in test/e2e`);
  assert.ok(existsSync(filesystem), `${filesystem}: run npm ci in test/e2e`);
});
