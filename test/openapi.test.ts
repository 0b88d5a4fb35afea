import test from 'ava';
import { apiRoutes } from '../control-plane/http/routes/index.ts';
import { type TestBerth, json, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        operationId: string;
        parameters: Array<{ name: string; in: string; required: boolean }>;
        requestBody?: { content: Record<string, { schema: Record<string, unknown> }> };
        responses: Record<string, unknown>;
        'x-berth-permission': string;
      }
    >
  >;
  components: { securitySchemes: Record<string, unknown> };
};

test('the OpenAPI 3.1 document is public and lists every route', async (t) => {
  const res = await t0.anonymous.get('v0/openapi.json');
  t.is(res.statusCode, 200);
  const doc = json<Doc>(res);
  t.is(doc.openapi, '3.1.0');
  t.deepEqual(Object.keys(doc.components.securitySchemes).sort(), ['apiKey', 'bearer']);
  const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods).map((op) => op.operationId));
  t.deepEqual(operations.sort(), apiRoutes.map((r) => r.operationId).sort());
  t.truthy(doc.paths['/v0/buckets/{bucketId}/objects/{path}']?.put);
});

test('the document is generated from the validation schemas', async (t) => {
  const doc = json<Doc>(await t0.anonymous.get('v0/openapi.json'));
  const createSite = doc.paths['/v0/sites']!.post!;
  t.is(createSite['x-berth-permission'], 'WRITE');
  const schema = createSite.requestBody!.content['application/json']!.schema as {
    properties: Record<string, Record<string, unknown>>;
    required: string[];
  };
  t.deepEqual(schema.required.sort(), ['accountId', 'name']);
  t.like(schema.properties.subdomain, { type: 'string', minLength: 3, maxLength: 63 });
  t.like(schema.properties.name, { type: 'string', minLength: 1, maxLength: 100 });
  t.deepEqual(schema.properties.access!.enum, ['PUBLIC', 'PRIVATE']);

  const listSites = doc.paths['/v0/sites']!.get!;
  t.is(listSites['x-berth-permission'], 'READ');
  const accountId = listSites.parameters.find((p) => p.name === 'accountId');
  t.like(accountId, { in: 'query', required: true });
  t.like(
    listSites.parameters.find((p) => p.name === 'limit'),
    { in: 'query', required: false },
  );

  const getBucket = doc.paths['/v0/buckets/{bucketId}']!.get!;
  t.like(getBucket.parameters[0], { name: 'bucketId', in: 'path', required: true });
  t.truthy(getBucket.responses['401']);
});
