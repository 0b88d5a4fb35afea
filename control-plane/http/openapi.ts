// The OpenAPI 3.1 document, generated from the route list and the zod schemas the routes validate
// with: an operation's input schema is split into path parameters and query parameters or a JSON
// body, as the route reads them. OpenAPI 3.1 uses JSON Schema 2020-12, which is what zod emits.
import { z } from 'zod';
import { ErrorEnvelope } from '../schemas.ts';
import {
  type AnyRoute,
  type OperationRoute,
  type Route,
  type RouteResponse,
  inputSource,
  isOperationRoute,
  pathParameters,
} from './route.ts';

type Json = Record<string, unknown>;
type ObjectSchema = {
  type?: 'object';
  properties?: Record<string, Json>;
  required?: string[];
  additionalProperties?: unknown;
};

function jsonSchema(schema: z.ZodType): Json {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json;
  return rest;
}

/** What the document says of one route, whichever kind it is. */
interface Described {
  method: Route['method'];
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  pathParams: ObjectSchema;
  queryParams: ObjectSchema;
  headers: Record<string, string>;
  requestBody?: Json;
  responses: Record<number, RouteResponse>;
}

/** An output's next step as REST answers it: `nextCommand`, a string (see route.ts's `nextCommands`). */
function renderedNext(schema: Json): Json {
  const object = schema as ObjectSchema;
  if (!object.properties?.next) return schema;
  const { next: _next, ...properties } = object.properties;
  return {
    ...schema,
    properties: {
      ...properties,
      nextCommand: {
        type: 'string',
        description: 'the request to make next, as METHOD /path and its query or JSON body',
      },
    },
    required: (object.required ?? []).map((name) => (name === 'next' ? 'nextCommand' : name)),
  };
}

const objectOf = (schema: z.ZodType | undefined): ObjectSchema => (schema ? (jsonSchema(schema) as ObjectSchema) : {});

/** Splits an operation's input schema into the path parameters and the rest. */
function describeOperationRoute(route: OperationRoute): Described {
  const { properties = {}, required = [], additionalProperties } = objectOf(route.operation.input);
  const inPath = new Set(pathParameters(route.path));
  const part = (keep: (name: string) => boolean): ObjectSchema => {
    const kept = required.filter(keep);
    return {
      type: 'object',
      properties: Object.fromEntries(Object.entries(properties).filter(([name]) => keep(name))),
      ...(kept.length > 0 ? { required: kept } : {}),
      ...(additionalProperties === false ? { additionalProperties } : {}),
    };
  };
  const rest = part((name) => !inPath.has(name));
  const inBody = inputSource(route) === 'body';
  const status = typeof route.status === 'number' ? route.status : 200;
  return {
    method: route.method,
    path: route.path,
    operationId: route.operationId,
    summary: route.operation.description,
    tag: route.tag,
    pathParams: part((name) => inPath.has(name)),
    queryParams: inBody ? {} : rest,
    headers: {},
    ...(inBody && Object.keys(rest.properties ?? {}).length > 0
      ? { requestBody: { required: true, content: { 'application/json': { schema: rest } } } }
      : {}),
    responses: {
      [status]: { description: route.ok, schema: route.presents ?? route.operation.output },
      ...route.errors,
    },
  };
}

function describeHandlerRoute(route: Route): Described {
  const requestBody = route.body
    ? { required: true, content: { 'application/json': { schema: jsonSchema(route.body) } } }
    : route.rawBody
      ? {
          required: true,
          description: route.rawBody.description,
          content: { [route.rawBody.contentType]: { schema: { type: 'string', format: 'binary' } } },
        }
      : undefined;
  return {
    method: route.method,
    path: route.path,
    operationId: route.operationId,
    summary: route.summary,
    tag: route.tag,
    pathParams: objectOf(route.params),
    queryParams: objectOf(route.query),
    headers: route.headers ?? {},
    ...(requestBody ? { requestBody } : {}),
    responses: route.responses,
  };
}

function parameters(object: ObjectSchema, location: 'path' | 'query'): Json[] {
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

function operation(route: Described): Json {
  const write = !['GET', 'HEAD', 'OPTIONS'].includes(route.method);
  const responses: Json = {};
  for (const [status, response] of Object.entries(route.responses)) {
    const contentType = response.contentType ?? 'application/json';
    responses[status] = {
      description: response.description,
      ...(response.schema || response.contentType
        ? {
            content: {
              [contentType]: {
                schema: response.schema
                  ? renderedNext(jsonSchema(response.schema))
                  : { type: 'string', format: 'binary' },
              },
            },
          }
        : {}),
    };
  }
  responses['400'] ??= errorResponse('invalid input');
  responses['401'] = errorResponse('missing, unknown or revoked API key (code "unauthorized")');
  if (write) responses['403'] = errorResponse('the API key is read-only (code "forbidden")');
  responses['404'] ??= errorResponse('not found, or not visible to this key');

  const headerParameters = Object.entries(route.headers).map(([name, description]) => ({
    name,
    in: 'header',
    required: false,
    description,
    schema: { type: 'string' },
  }));
  return {
    operationId: route.operationId,
    summary: route.summary,
    tags: [route.tag],
    'x-berth-permission': write ? 'WRITE' : 'READ',
    parameters: [
      ...parameters(route.pathParams, 'path'),
      ...parameters(route.queryParams, 'query'),
      ...headerParameters,
    ],
    ...(route.requestBody ? { requestBody: route.requestBody } : {}),
    responses,
  };
}

export function buildOpenApi(routes: AnyRoute[], version: string): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const described = isOperationRoute(route) ? describeOperationRoute(route) : describeHandlerRoute(route);
    const path = openApiPath(described.path);
    paths[path] ??= {};
    paths[path][described.method.toLowerCase()] = operation(described);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Berth API',
      version,
      description:
        'Manage accounts, buckets, sites and files of a Berth instance. Every operation needs an API key; READ keys may only use GET, HEAD and OPTIONS.',
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
