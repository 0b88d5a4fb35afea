// The OpenAPI 3.1 document, generated from the route list and the zod schemas the routes validate
// with. OpenAPI 3.1 uses JSON Schema 2020-12, which is what zod emits.
import { z } from 'zod';
import { ErrorEnvelope } from '../schemas.ts';
import type { Route } from './route.ts';

type Json = Record<string, unknown>;

function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

function parameters(schema: z.ZodType | undefined, location: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const object = jsonSchema(schema) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(object.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: location,
      required: location === 'path' || (object.required ?? []).includes(name),
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

const openApiPath = (path: string) => path.replace(/\{\*(\w+)\}/g, '{$1}').replace(/:(\w+)/g, '{$1}');

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: jsonSchema(ErrorEnvelope) } },
});

function operation(route: Route): Json {
  const write = !['GET', 'HEAD', 'OPTIONS'].includes(route.method);
  const responses: Json = {};
  for (const [status, response] of Object.entries(route.responses)) {
    const contentType = response.contentType ?? 'application/json';
    responses[status] = {
      description: response.description,
      ...(response.schema || response.contentType
        ? { content: { [contentType]: { schema: response.schema ? jsonSchema(response.schema) : { type: 'string', format: 'binary' } } } }
        : {}),
    };
  }
  responses['400'] ??= errorResponse('invalid input');
  responses['401'] = errorResponse('missing, unknown or revoked API key (code "unauthorized")');
  if (write) responses['403'] = errorResponse('the API key is read-only (code "forbidden")');
  responses['404'] ??= errorResponse('not found, or not visible to this key');

  const headerParameters = Object.entries(route.headers ?? {}).map(([name, description]) => ({
    name,
    in: 'header',
    required: false,
    description,
    schema: { type: 'string' },
  }));
  const requestBody = route.body
    ? { required: true, content: { 'application/json': { schema: jsonSchema(route.body) } } }
    : route.rawBody
      ? { required: true, description: route.rawBody.description, content: { [route.rawBody.contentType]: { schema: { type: 'string', format: 'binary' } } } }
      : undefined;
  return {
    operationId: route.operationId,
    summary: route.summary,
    tags: [route.tag],
    'x-berth-permission': write ? 'WRITE' : 'READ',
    parameters: [...parameters(route.params, 'path'), ...parameters(route.query, 'query'), ...headerParameters],
    ...(requestBody ? { requestBody } : {}),
    responses,
  };
}

export function buildOpenApi(routes: Route[], version: string): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Berth API',
      version,
      description: 'Manage accounts, buckets, sites and files of a Berth instance. Every operation needs an API key; READ keys may only use GET, HEAD and OPTIONS.',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <key>' },
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
      },
    },
    paths,
  };
}
