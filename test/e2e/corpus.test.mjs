// Every catalog of the shared corpus of real OpenAPI documents, listed by the
// official TS SDK client: it rejects the whole tools/list when one tool's
// inputSchema or outputSchema root is not {"type": "object"}, and compiles every
// outputSchema (ajv) to check later results against it. Slack's document is
// invalid Swagger 2.0 and must be refused at start-up instead, in one line.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { MCPGATE_BIN, connectHTTP, startGateway, stop } from './lib.mjs';

// ajv warns on every non-standard "format" (Twilio's date-time-rfc-2822):
// JSON Schema treats unknown formats as annotations, so the noise is dropped.
const warn = console.warn;
console.warn = (msg, ...rest) => { if (!/^unknown format/.test(String(msg))) warn(msg, ...rest); };

const corpus = fileURLToPath(new URL('../../../shared/corpus/', import.meta.url));
const refused = new Set(['slack-web-api-2.0.json']);

describe('corpus catalogs through the TS SDK client', { skip: !existsSync(corpus) && `no corpus at ${corpus}` }, () => {
  const docs = existsSync(corpus) ? readdirSync(corpus).filter((f) => /\.(json|yaml)$/.test(f)).sort() : [];
  for (const doc of docs) {
    if (refused.has(doc)) {
      test(`${doc} is refused in one line`, () => {
        const r = spawnSync(MCPGATE_BIN, ['serve', '--addr', '127.0.0.1:0', '--all', '--upstream', 'http://127.0.0.1:1', '--openapi', corpus + doc], { encoding: 'utf8', timeout: 30000 });
        assert.equal(r.status, 2, r.stderr);
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
        assert.match(r.stderr, new RegExp(doc.replace(/\./g, '\\.')));
      });
      continue;
    }
    test(`${doc}: tools/list is accepted whole`, async () => {
      const gw = await startGateway(['--all', '--upstream', 'http://127.0.0.1:1', '--log-level', 'error', '--openapi', corpus + doc]);
      const client = await connectHTTP(gw.url);
      try {
        const tools = [];
        let cursor;
        do {
          const page = await client.listTools(cursor ? { cursor } : {});
          tools.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor);
        const served = Number(/\((\d+) tools/.exec(gw.output())[1]);
        assert.equal(tools.length, served, 'every served tool is listed');
        for (const t of tools) {
          assert.equal(t.inputSchema.type, 'object', `${t.name} inputSchema`);
          if (t.outputSchema) assert.equal(t.outputSchema.type, 'object', `${t.name} outputSchema`);
        }
      } finally {
        await client.close();
        await stop(gw);
      }
    });
  }
});
