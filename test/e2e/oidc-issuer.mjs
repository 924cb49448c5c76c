// A real OpenID provider on loopback for the auth tests: npm oidc-provider
// (pinned in package-lock.json), with the client-credentials grant and RFC
// 8707 resource indicators, issuing RS256 `at+jwt` access tokens (RFC 9068)
// for the resources it is told about, and nothing else. It records every
// request it receives, so a test can check what the gateway sent it.
import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import { Provider, errors } from 'oidc-provider';

// startIssuer starts the provider on 127.0.0.1 and resolves to
// {url, token(client, {scope, resource}), requests(), close()}.
//
// resources maps each resource indicator (a token's future aud) to the
// scopes it may be granted; clients are {client_id, client_secret, scope}.
export async function startIssuer({ resources, clients }) {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'e2e-rs256', use: 'sig', alg: 'RS256' };

  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;

  const allScopes = new Set(Object.values(resources).flatMap((s) => s.split(' ')));
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
      resourceIndicators: {
        enabled: true,
        // No resource, no JWT: the grant must name the audience it wants.
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          const scope = resources[resource];
          if (scope === undefined) throw new errors.InvalidTarget();
          return { audience: resource, scope, accessTokenFormat: 'jwt', accessTokenTTL: 600, jwt: { sign: { alg: 'RS256' } } };
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
