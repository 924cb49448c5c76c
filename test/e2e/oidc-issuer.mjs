// A real OpenID provider on loopback for the auth tests: npm oidc-provider
// (pinned in package-lock.json), with the client-credentials grant and RFC
// 8707 resource indicators, issuing RS256 `at+jwt` access tokens (RFC 9068)
// — or opaque ones, checked at its RFC 7662 introspection endpoint — for
// the resources it is told about, and nothing else; tokens can be revoked
// (RFC 7009). It records every request it receives, so a test can check what
// the gateway sent it.
import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import { Provider, errors } from 'oidc-provider';

// startIssuer starts the provider on 127.0.0.1 and resolves to
// {url, token(client, {scope, resource}), requests(), close()}.
//
// resources maps each resource indicator (a token's future aud) to the
// scopes it may be granted (its tokens are JWTs), or to {scope, opaque: true};
// clients are {client_id, client_secret, scope}.
export async function startIssuer({ resources, clients }) {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'e2e-rs256', use: 'sig', alg: 'RS256' };

  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;

  const rs = Object.fromEntries(Object.entries(resources).map(([k, v]) => [k, typeof v === 'string' ? { scope: v } : v]));
  const allScopes = new Set(Object.values(rs).flatMap((r) => r.scope.split(' ')));
  const provider = new Provider(url, {
    clients: clients.map((c) => ({
      ...c,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    jwks: { keys: [jwk] },
    scopes: [...allScopes],
    ttl: { ClientCredentials: 600 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Any confidential client may introspect; a client revokes its own.
      introspection: { enabled: true, allowedPolicy: (_ctx, client) => client.clientAuthMethod !== 'none' },
      revocation: { enabled: true, allowedPolicy: (_ctx, client, token) => token.clientId === client.clientId },
      resourceIndicators: {
        enabled: true,
        // No resource, no JWT: the grant must name the audience it wants.
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          const r = rs[resource];
          if (r === undefined) throw new errors.InvalidTarget();
          if (r.opaque) return { audience: resource, scope: r.scope, accessTokenFormat: 'opaque', accessTokenTTL: 600 };
          return { audience: resource, scope: r.scope, accessTokenFormat: 'jwt', accessTokenTTL: 600, jwt: { sign: { alg: 'RS256' } } };
        },
      },
    },
  });
  provider.on('server_error', (_ctx, err) => console.error('oidc-issuer: server_error', err));

  const seen = [];
  provider.use(async (ctx, next) => {
    await next();
    // After the provider ran: the parsed form body is on ctx.oidc.
    seen.push({
      method: ctx.method,
      path: ctx.path,
      authorization: ctx.get('authorization') || undefined,
      body: ctx.oidc?.body ? { ...ctx.oidc.body } : undefined,
      status: ctx.status,
    });
  });
  server.on('request', provider.callback());

  return {
    url,
    // token runs a real client-credentials grant and returns the access token.
    async token({ client_id, client_secret }, { scope, resource }) {
      const res = await fetch(`${url}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: 'Basic ' + Buffer.from(`${encodeURIComponent(client_id)}:${encodeURIComponent(client_secret)}`).toString('base64'),
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope, resource }),
      });
      const body = await res.json();
      if (!res.ok) throw new Error(`token endpoint: HTTP ${res.status}: ${JSON.stringify(body)}`);
      return body.access_token;
    },
    // revoke revokes a token (RFC 7009) as the client it was issued to.
    async revoke({ client_id, client_secret }, token) {
      const res = await fetch(`${url}/token/revocation`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: 'Basic ' + Buffer.from(`${encodeURIComponent(client_id)}:${encodeURIComponent(client_secret)}`).toString('base64'),
        },
        body: new URLSearchParams({ token }),
      });
      if (!res.ok) throw new Error(`revocation endpoint: HTTP ${res.status}`);
    },
    requests: () => seen.slice(),
    clearRequests: () => { seen.length = 0; },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

// claims decodes a JWT's header and payload, unverified: for assertions only.
export function decodeJWT(token) {
  const [h, p] = token.split('.');
  const dec = (s) => JSON.parse(Buffer.from(s, 'base64url').toString());
  return { header: dec(h), payload: dec(p) };
}
