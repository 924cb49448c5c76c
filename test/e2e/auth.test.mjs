// Auth end to end: a real OpenID provider (npm oidc-provider) issues RS256
// at+jwt access tokens through real client-credentials grants; mcpgate
// verifies them (go-oidc), applies the step-up policy, and gives each of
// three recording upstreams exactly the credential its mode names: forward
// (the caller's token), client_credentials (the gateway's own token for that
// upstream) and none. The official TS SDK client drives the gateway, stateless
// and stateful. A third gateway takes the provider's opaque tokens, checked at
// its RFC 7662 introspection endpoint, and lists each caller only the tools
// it may call (auth.list: callable).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { discoverOAuthProtectedResourceMetadata, extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import { clearRecorded, freePort, recorded, start, startOrchestrator, stop, text, EXPECTED_TOOLS, MCPGATE_BIN } from './lib.mjs';
import { decodeJWT, startIssuer } from './oidc-issuer.mjs';

const CALLER = { client_id: 'e2e-caller', client_secret: 'caller-secret', scope: 'mcp mcp:write mcp:destructive' };
const GATEWAY = { client_id: 'gw-client', client_secret: 'gw-secret', scope: 'orders:read' };
const POLICY = { write_scope: 'mcp:write', destructive_scope: 'mcp:destructive' };


// connect runs the SDK client with a bearer token (or none) and records every
// HTTP response it gets, so a test can read the status and challenge of a
// refusal that the client turns into an exception.
async function connect(url, token) {
  const responses = [];
  const recordingFetch = async (input, init) => {
    const res = await fetch(input, init);
    // Refusals only: a clone of an open SSE answer would hold its stream.
    if (res.status >= 400) responses.push(res.clone());
    return res;
  };
  const headers = token ? { Authorization: `Bearer ${token}`, Cookie: 'session=must-not-leak' } : {};
  const client = new Client({ name: 'mcpgate-e2e-auth', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, fetch: recordingFetch });
  const last = () => responses[responses.length - 1];
  try {
    await client.connect(transport);
  } catch (err) {
    return { client: null, error: err, last };
  }
  return { client, last };
}

const allRequests = (reqs) => reqs.map((r) => JSON.stringify(r)).join('\n');

describe('auth with a real OpenID provider', () => {
  let issuer, fwd, cc, anon;
  const gws = {};
  const tokens = {};
  const opaque = {};
  const ports = {};
  let dir;

  before(async () => {
    [fwd, cc, anon] = await Promise.all([startOrchestrator(), startOrchestrator(), startOrchestrator()]);
    ports.stateless = await freePort();
    ports.stateful = await freePort();
    ports.opaque = await freePort();
    const audience = (mode) => `http://127.0.0.1:${ports[mode]}/mcp`;
    issuer = await startIssuer({
      resources: {
        [audience('stateless')]: 'mcp mcp:write mcp:destructive',
        [audience('stateful')]: 'mcp mcp:write mcp:destructive',
        [audience('opaque')]: { scope: 'mcp mcp:write mcp:destructive', opaque: true },
        [cc.url]: 'orders:read',
      },
      clients: [CALLER, GATEWAY],
    });
    for (const mode of ['stateless', 'stateful']) {
      const resource = audience(mode);
      tokens[mode] = {
        read: await issuer.token(CALLER, { scope: 'mcp', resource }),
        write: await issuer.token(CALLER, { scope: 'mcp mcp:write', resource }),
        all: await issuer.token(CALLER, { scope: 'mcp mcp:write mcp:destructive', resource }),
        noMCP: await issuer.token(CALLER, { scope: 'mcp:write', resource }),
        // Same issuer, same key, another audience: the upstream's.
        wrongAud: await issuer.token(GATEWAY, { scope: 'orders:read', resource: cc.url }),
      };
    }
    for (const [name, scope] of [['read', 'mcp'], ['write', 'mcp mcp:write'], ['all', 'mcp mcp:write mcp:destructive'], ['revoked', 'mcp']]) {
      opaque[name] = await issuer.token(CALLER, { scope, resource: audience('opaque') });
    }
    await issuer.revoke(CALLER, opaque.revoked);
    issuer.clearRequests();

    dir = mkdtempSync(join(tmpdir(), 'mcpgate-auth-'));
    for (const mode of ['stateless', 'stateful']) {
      const cfg = {
        stateful: mode === 'stateful',
        auth: { issuer: issuer.url, audience: audience(mode), scopes: ['mcp'], policy: POLICY },
        upstreams: [
          { name: 'fwd', openapi: `${fwd.url}/openapi.json`, base_url: fwd.url, auth: { mode: 'forward' } },
          {
            name: 'cc', openapi: `${cc.url}/openapi.json`, base_url: cc.url, tool_prefix: 'cc_',
            auth: { mode: 'client_credentials', client_id: GATEWAY.client_id, client_secret_env: 'E2E_GW_SECRET', audience: cc.url, scopes: ['orders:read'] },
          },
          { name: 'anon', openapi: `${anon.url}/openapi.json`, base_url: anon.url, tool_prefix: 'anon_', auth: { mode: 'none' } },
        ],
      };
      const file = join(dir, `${mode}.yaml`);
      writeFileSync(file, JSON.stringify(cfg, null, 2)); // JSON is YAML
      const p = await start(MCPGATE_BIN, ['serve', '--config', file, '--addr', `127.0.0.1:${ports[mode]}`],
        /listening on (http:\/\/\S+\/mcp)/, { env: { ...process.env, E2E_GW_SECRET: GATEWAY.client_secret } });
      gws[mode] = { ...p, url: p.match[1] };
      assert.equal(gws[mode].url, audience(mode));
    }
    const file = join(dir, 'opaque.yaml');
    writeFileSync(file, JSON.stringify({
      auth: {
        issuer: issuer.url, audience: audience('opaque'), scopes: ['mcp'], policy: POLICY, list: 'callable',
        introspection: { url: `${issuer.url}/token/introspection`, client_id: GATEWAY.client_id, client_secret_env: 'E2E_GW_SECRET' },
      },
      upstreams: [{ name: 'fwd', openapi: `${fwd.url}/openapi.json`, base_url: fwd.url, auth: { mode: 'forward' } }],
    }));
    const p = await start(MCPGATE_BIN, ['serve', '--config', file, '--addr', `127.0.0.1:${ports.opaque}`],
      /listening on (http:\/\/\S+\/mcp)/, { env: { ...process.env, E2E_GW_SECRET: GATEWAY.client_secret } });
    gws.opaque = { ...p, url: p.match[1] };
  });

  after(async () => {
    for (const gw of Object.values(gws)) await stop(gw);
    await Promise.all([stop(fwd), stop(cc), stop(anon)]);
    await issuer?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the issued tokens are RS256 at+jwt for the gateway', () => {
    const { header, payload } = decodeJWT(tokens.stateless.all);
    assert.equal(header.alg, 'RS256');
    assert.equal(header.typ, 'at+jwt');
    assert.equal(payload.iss, issuer.url);
    assert.equal(payload.aud, gws.stateless.url);
    assert.equal(payload.scope, 'mcp mcp:write mcp:destructive');
  });

  for (const mode of ['stateless', 'stateful']) {
    describe(mode, () => {
      const gw = () => gws[mode];
      const tok = () => tokens[mode];

      test('metadata at both well-known paths names the issuer and the gateway', async () => {
        const origin = new URL(gw().url).origin;
        for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
          const res = await fetch(origin + path);
          assert.equal(res.status, 200, path);
          const md = await res.json();
          assert.equal(md.resource, gw().url, path);
          assert.deepEqual(md.authorization_servers, [issuer.url], path);
          assert.deepEqual(md.scopes_supported, ['mcp', 'mcp:write', 'mcp:destructive'], path);
        }
        // And the SDK client's own discovery finds it.
        const md = await discoverOAuthProtectedResourceMetadata(gw().url);
        assert.equal(md.resource, gw().url);
      });

      test('no token, a forged token, a wrong audience: 401 invalid_token with resource_metadata', async () => {
        const forged = tok().all.slice(0, -8) + 'AAAAAAAA';
        for (const [what, token] of [['no token', undefined], ['forged', forged], ['wrong aud', tok().wrongAud], ['garbage', 'not-a-jwt']]) {
          const { client, error, last } = await connect(gw().url, token);
          assert.equal(client, null, `${what}: connected`);
          assert.equal(error?.code, 401, `${what}: ${error}`);
          const res = last();
          assert.equal(res.status, 401, what);
          const params = extractWWWAuthenticateParams(res);
          assert.equal(params.error, 'invalid_token', what);
          assert.equal(params.resourceMetadataUrl?.href, `${new URL(gw().url).origin}/.well-known/oauth-protected-resource/mcp`, what);
          const body = await res.text();
          assert.ok(!token || !body.includes(token), `${what}: the body echoes the token`);
        }
      });

      test('a token without the required scope: 403 insufficient_scope on every request', async () => {
        const { client, error, last } = await connect(gw().url, tok().noMCP);
        assert.equal(client, null);
        assert.equal(error?.code, 403, String(error));
        const params = extractWWWAuthenticateParams(last());
        assert.equal(params.error, 'insufficient_scope');
        assert.equal(params.scope, 'mcp');
      });

      test('a read token lists every tool and calls read-only ones, through each upstream', async () => {
        const { client } = await connect(gw().url, tok().read);
        try {
          const { tools } = await client.listTools();
          assert.equal(tools.length, 39, 'auth.list all: every tool, so a client can discover step-up');
                    for (const name of ['list_workflows', 'cc_list_workflows', 'anon_list_workflows']) {
            const res = await client.callTool({ name, arguments: {} });
            assert.equal(res.isError ?? false, false, `${name}: ${text(res)}`);
          }
        } finally {
          await client.close();
        }
      });

      test('step-up: a destructive tool needs the destructive scope; with it, it works', async () => {
        const reader = await connect(gw().url, tok().read);
        const writer = await connect(gw().url, tok().write);
        const admin = await connect(gw().url, tok().all);
        try {
          // The writer may create; the reader may not.
          await assert.rejects(
            reader.client.callTool({ name: 'create_process', arguments: { workflow_name: 'create_node', customer_id: 'c-auth' } }),
            (err) => err.code === 403);
          let params = extractWWWAuthenticateParams(reader.last());
          assert.equal(params.error, 'insufficient_scope');
          assert.equal(params.scope, 'mcp mcp:write');
          const created = await writer.client.callTool({ name: 'create_process', arguments: { workflow_name: 'create_node', customer_id: 'c-auth' } });
          assert.equal(created.isError ?? false, false, text(created));
          const id = created.structuredContent.process_id;
          assert.ok(id, text(created));

          for (const c of [reader, writer]) {
            await assert.rejects(c.client.callTool({ name: 'abort_process', arguments: { process_id: id } }), (err) => err.code === 403);
            params = extractWWWAuthenticateParams(c.last());
            assert.equal(c.last().status, 403);
            assert.equal(params.error, 'insufficient_scope');
            assert.equal(params.scope, 'mcp mcp:write mcp:destructive');
          }
          const aborted = await admin.client.callTool({ name: 'abort_process', arguments: { process_id: id } });
          assert.equal(aborted.isError ?? false, false, text(aborted));
        } finally {
          await Promise.all([reader, writer, admin].map((c) => c.client?.close()));
        }
      });
    });
  }

  describe('opaque tokens: introspection, auth.list: callable', () => {
    const gw = () => gws.opaque;
    const ro = Object.keys(EXPECTED_TOOLS).filter((n) => EXPECTED_TOOLS[n].ro).sort();

    test('the tokens are opaque', () => {
      for (const t of Object.values(opaque)) assert.ok(!t.includes('.'), 'a JWS-shaped token');
    });

    test('each caller lists exactly the tools it may call', async () => {
      for (const [name, want] of [
        ['read', ro],
        ['write', [...ro, 'create_process', 'resume_process'].sort()],
        ['all', Object.keys(EXPECTED_TOOLS).sort()],
      ]) {
        const { client } = await connect(gw().url, opaque[name]);
        try {
          const res = await client.listTools();
          assert.deepEqual(res.tools.map((t) => t.name).sort(), want, name);
          // Every tool listed is callable; one not listed is refused.
          if (name === 'read') {
            const ok = await client.callTool({ name: 'list_workflows', arguments: {} });
            assert.equal(ok.isError ?? false, false, text(ok));
            await assert.rejects(client.callTool({ name: 'create_process', arguments: { workflow_name: 'create_node', customer_id: 'c-opaque' } }),
              (err) => err.code === 403);
          }
        } finally {
          await client.close();
        }
      }
    });

    test('a revoked token is refused: 401 invalid_token', async () => {
      const { client, error, last } = await connect(gw().url, opaque.revoked);
      assert.equal(client, null);
      assert.equal(error?.code, 401, String(error));
      assert.equal(extractWWWAuthenticateParams(last()).error, 'invalid_token');
    });

    test('a JWT for another gateway is not introspected into acceptance', async () => {
      const { client, error } = await connect(gw().url, tokens.stateless.all);
      assert.equal(client, null);
      assert.equal(error?.code, 401, String(error));
    });
  });

  test('each upstream got exactly its credential, and the caller tokens went nowhere else', async () => {
    const callerTokens = Object.values(tokens).flatMap((t) => Object.values(t));
    const usedByCallers = new Set([...Object.values(tokens).flatMap((t) => [t.read, t.write, t.all]), opaque.read, opaque.write, opaque.all]);

    const fwdReqs = await recorded(fwd.url);
    assert.ok(fwdReqs.length >= 6, `forward upstream saw ${fwdReqs.length} requests`);
    for (const r of fwdReqs) {
      const auth = r.headers.Authorization ?? [];
      assert.equal(auth.length, 1, `${r.method} ${r.path}: ${auth.length} Authorization headers`);
      const token = auth[0].replace(/^Bearer /, '');
      assert.ok(usedByCallers.has(token), `${r.method} ${r.path}: not exactly a caller's token`);
      assert.equal(r.headers.Cookie, undefined);
    }

    const ccReqs = await recorded(cc.url);
    assert.ok(ccReqs.length >= 2, `client_credentials upstream saw ${ccReqs.length} requests`);
    for (const r of ccReqs) {
      const auth = r.headers.Authorization ?? [];
      assert.equal(auth.length, 1);
      const token = auth[0].replace(/^Bearer /, '');
      assert.ok(!callerTokens.includes(token), 'a caller token reached the client_credentials upstream');
      const { payload } = decodeJWT(token);
      assert.equal(payload.aud, cc.url);
      assert.equal(payload.iss, issuer.url);
      assert.equal(payload.client_id, GATEWAY.client_id);
      assert.equal(payload.scope, 'orders:read');
      assert.equal(r.headers.Cookie, undefined);
    }

    const anonReqs = await recorded(anon.url);
    assert.ok(anonReqs.length >= 2, `none upstream saw ${anonReqs.length} requests`);
    for (const r of anonReqs) {
      assert.equal(r.headers.Authorization, undefined, `${r.method} ${r.path}: Authorization reached the none upstream`);
      assert.equal(r.headers.Cookie, undefined);
    }

    // The provider saw only the gateways' own requests: discovery, the
    // JWKS, the client-credentials grant for the cc upstream, and the opaque
    // tokens' introspection — never a caller's JWT.
    const seen = issuer.requests();
    const everything = allRequests(seen);
    for (const t of callerTokens) assert.ok(!everything.includes(t), 'a caller token reached the provider');
    const gwBasic = 'Basic ' + Buffer.from(`${GATEWAY.client_id}:${GATEWAY.client_secret}`).toString('base64');
    for (const r of seen) {
      assert.ok(['/.well-known/openid-configuration', '/jwks', '/token', '/token/introspection'].includes(r.path), `unexpected ${r.method} ${r.path}`);
      if (r.path === '/token/introspection') {
        assert.ok(Object.values(opaque).includes(r.body.token), 'introspected a token that is not an opaque caller token');
        assert.equal(r.authorization, gwBasic);
      }
      if (r.path === '/token') {
        assert.equal(r.body.grant_type, 'client_credentials');
        assert.equal(r.body.resource, cc.url);
        assert.equal(r.authorization, gwBasic);
      }
    }
    assert.ok(seen.some((r) => r.path === '/token'), 'the gateway never asked for a client-credentials token');
    // Each opaque token was introspected once: the answer is cached.
    const introspected = seen.filter((r) => r.path === '/token/introspection').map((r) => r.body.token);
    assert.equal(introspected.length, new Set(introspected).size, 'an opaque token was introspected twice');
    await Promise.all([fwd, cc, anon].map((a) => clearRecorded(a.url)));
  });

  test('no token, cookie or claim appears in the gateways\' logs', () => {
    const callerTokens = [...Object.values(tokens).flatMap((t) => Object.values(t)), ...Object.values(opaque)];
    for (const gw of Object.values(gws)) {
      const out = gw.output();
      for (const t of callerTokens) assert.ok(!out.includes(t), 'a token in the log');
      assert.ok(!out.includes('must-not-leak'), 'a cookie in the log');
      assert.ok(!out.includes(CALLER.client_id), 'a claim (client_id/sub) in the log');
    }
  });
});
