// Client commands generated from the operation catalogue: each names an operation, says which of its
// input fields come from the command's arguments, from --site or from the key's account, and every
// other field becomes an option. The description, the options and their checks are the operation's;
// the request is the REST route that serves it. Loaded only when one of these commands runs.
import { z } from 'zod';
import { operationByName } from '../../operations/index.ts';
import { apiRoutes } from '../../http/routes/index.ts';
import { type OperationRoute, inputSource, isOperationRoute, requestFor } from '../../http/route.ts';
import type { CommandContext, CommandDefinition, CommandGroup, OptionDefinition } from '../command.ts';
import { siteDatabase } from '../database.ts';
import { UsageError } from '../usage-error.ts';
import { formatAnswer } from './answer.ts';
import { findDeployment } from '../deploy/deployment-ref.ts';
import { deploymentText, deploymentsText } from './deployments.ts';
import { domainsText } from './domains.ts';

interface Generated {
  usage: string;
  operation: string;
  examples: string[];
  /** Input fields taken from the positional arguments, in order. */
  args?: string[];
  /** Input fields fixed by the command itself. */
  fixed?: Record<string, unknown>;
  /** The input field that --site fills: the site's id or its bucket's. */
  site?: 'siteId' | 'bucketId';
  /** accountId comes from the key's own account. */
  account?: boolean;
  /** databaseId is the site's database. */
  database?: boolean;
  /** The answer as text, where the generic form would hide what a person needs from it. */
  text?: (answer: never) => string;
  /** Turns an argument as people write it into the input field's value (a deployment's short id into its id). */
  resolve?: Record<string, (context: CommandContext, value: string) => Promise<string>>;
}

const GROUPS: Array<{ name: string; summary: string; commands: Generated[] }> = [
  {
    name: 'sites',
    summary: 'the account’s sites',
    commands: [
      {
        usage: 'ls',
        operation: 'list_sites',
        account: true,
        examples: ['berth sites ls', 'berth sites ls --status ARCHIVED --json'],
      },
      {
        usage: 'create <name>',
        operation: 'create_site',
        account: true,
        args: ['name'],
        examples: ['berth sites create "My blog" --subdomain blog'],
      },
      { usage: 'get', operation: 'get_site', site: 'siteId', examples: ['berth sites get --site blog'] },
      {
        usage: 'update',
        operation: 'update_site',
        site: 'siteId',
        examples: ['berth sites update --site blog --name "Our blog" --access PRIVATE'],
      },
      {
        usage: 'archive',
        operation: 'update_site',
        site: 'siteId',
        fixed: { status: 'ARCHIVED' },
        examples: ['berth sites archive --site blog'],
      },
      {
        usage: 'activate',
        operation: 'update_site',
        site: 'siteId',
        fixed: { status: 'ACTIVE' },
        examples: ['berth sites activate --site blog'],
      },
    ],
  },
  {
    name: 'files',
    summary: 'the files of a site’s bucket',
    commands: [
      {
        usage: 'ls',
        operation: 'list_files',
        site: 'bucketId',
        examples: ['berth files ls --site blog', 'berth files ls --site blog --prefix web/'],
      },
      {
        usage: 'rm <path>',
        operation: 'delete_file',
        site: 'bucketId',
        args: ['path'],
        examples: ['berth files rm web/old.html --site blog'],
      },
      {
        usage: 'versions <fileId>',
        operation: 'list_file_versions',
        args: ['fileId'],
        examples: ['berth files versions 5f0c…'],
      },
      {
        usage: 'restore <fileId> <versionId>',
        operation: 'restore_file_version',
        args: ['fileId', 'versionId'],
        examples: ['berth files restore 5f0c… 91ab… --current-version-id 77de…'],
      },
      {
        usage: 'rm-version <fileId> <versionId>',
        operation: 'delete_file_version',
        args: ['fileId', 'versionId'],
        examples: ['berth files rm-version 5f0c… 91ab…'],
      },
      {
        usage: 'prune <fileId>',
        operation: 'prune_file_versions',
        args: ['fileId'],
        examples: ['berth files prune 5f0c…'],
      },
    ],
  },
  {
    name: 'secrets',
    summary: 'the site’s secrets, read by its functions with ctx.secrets',
    commands: [
      { usage: 'ls', operation: 'list_secrets', site: 'siteId', examples: ['berth secrets ls --site blog'] },
      {
        usage: 'get <name>',
        operation: 'get_secret_value',
        site: 'siteId',
        args: ['name'],
        examples: ['berth secrets get STRIPE_KEY --site blog'],
      },
      {
        usage: 'rm <name>',
        operation: 'delete_secret',
        site: 'siteId',
        args: ['name'],
        examples: ['berth secrets rm STRIPE_KEY --site blog'],
      },
    ],
  },
  {
    name: 'domains',
    summary: 'the site’s own domains, served once their DNS says they are yours',
    commands: [
      {
        usage: 'ls',
        operation: 'list_domains',
        site: 'siteId',
        examples: ['berth domains ls --site blog'],
        text: domainsText,
      },
      {
        usage: 'add <hostname>',
        operation: 'add_domain',
        site: 'siteId',
        args: ['hostname'],
        examples: ['berth domains add www.example.com --site blog', 'berth domains add example.com --site blog'],
        text: domainsText,
      },
      {
        usage: 'verify <hostname>',
        operation: 'verify_domain',
        site: 'siteId',
        args: ['hostname'],
        examples: ['berth domains verify www.example.com --site blog'],
        text: domainsText,
      },
      {
        usage: 'canonical <hostname>',
        operation: 'update_domain',
        site: 'siteId',
        args: ['hostname'],
        fixed: { canonical: true },
        examples: [
          'berth domains canonical www.example.com --site blog',
          'berth domains canonical www.example.com --redirect-subdomain true --site blog',
        ],
        text: domainsText,
      },
      {
        usage: 'rm <hostname>',
        operation: 'remove_domain',
        site: 'siteId',
        args: ['hostname'],
        examples: ['berth domains rm www.example.com --site blog'],
      },
    ],
  },
  {
    name: 'deployments',
    summary: 'the site’s deployments: every change to its files, previews, and going back',
    commands: [
      {
        usage: 'ls',
        operation: 'list_deployments',
        site: 'siteId',
        examples: ['berth deployments ls --site blog', 'berth deployments ls --site blog --limit 5 --json'],
        text: deploymentsText,
      },
      {
        usage: 'get <id>',
        operation: 'get_deployment',
        site: 'siteId',
        args: ['deploymentId'],
        examples: ['berth deployments get 3f9k2m1q --site blog'],
        text: deploymentText,
        resolve: {
          deploymentId: async (context, ref) => (await findDeployment(context.api(), await context.site(), ref)).id,
        },
      },
      {
        usage: 'update <id>',
        operation: 'update_deployment',
        site: 'siteId',
        args: ['deploymentId'],
        examples: [
          'berth deployments update 3f9k2m1q --site blog --preview-access PUBLIC',
          'berth deployments update 3f9k2m1q --site blog --preview-secrets true',
        ],
        text: deploymentText,
        resolve: {
          deploymentId: async (context, ref) => (await findDeployment(context.api(), await context.site(), ref)).id,
        },
      },
    ],
  },
  {
    name: 'db',
    summary: 'the site’s SQL database',
    commands: [
      { usage: 'create', operation: 'create_database', site: 'siteId', examples: ['berth db create --site blog'] },
      {
        usage: 'query <sql>',
        operation: 'query_database',
        site: 'siteId',
        database: true,
        args: ['sql'],
        examples: [
          "berth db query 'SELECT count(*) FROM notes' --site blog",
          "berth db query 'INSERT INTO notes (body) VALUES (?)' --params '[\"hi\"]' --site blog",
          "berth db query 'SELECT * FROM notes' --branch 0b8f4c1e-5d2a-4e8b-9c3f-7a6d5e4c3b2a --site blog",
        ],
      },
      {
        usage: 'compact',
        operation: 'compact_database',
        site: 'siteId',
        database: true,
        examples: ['berth db compact --site blog'],
      },
      {
        usage: 'restore-points',
        operation: 'get_database_restore_points',
        site: 'siteId',
        database: true,
        examples: ['berth db restore-points --site blog'],
      },
    ],
  },
];

const WHOAMI: Generated = {
  usage: 'whoami',
  operation: 'get_current_account',
  examples: ['berth whoami', 'berth whoami --json'],
};

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

type Property = { type?: string; description?: string; anyOf?: Property[]; enum?: unknown[] };

/** commander turns an option value of null into '': `--x null` is carried as this until the input is built. */
const NULL = Symbol('null');

/** An option's text as the JSON type the input schema wants. */
function parser(property: Property): (value: string) => unknown {
  const types = new Set([property.type, ...(property.anyOf ?? []).map((p) => p.type)]);
  if (types.has('null')) {
    const other = parser({ ...property, anyOf: (property.anyOf ?? []).filter((p) => p.type !== 'null') });
    return (value) => (value === 'null' ? NULL : other(value));
  }
  if (types.has('number') || types.has('integer')) return (value) => (/^\d+$/.test(value) ? Number(value) : value);
  if (types.has('boolean')) return (value) => value === 'true';
  if (types.has('array') || types.has('object')) {
    return (value) => {
      try {
        return JSON.parse(value);
      } catch {
        throw new UsageError(`"${value}" is not JSON`);
      }
    };
  }
  return (value) => value;
}

function definition(generated: Generated, routes: Map<string, OperationRoute>): CommandDefinition {
  const operation = operationByName.get(generated.operation)!;
  const route = routes.get(generated.operation)!;
  const { properties = {} } = z.toJSONSchema(operation.input, { io: 'input', unrepresentable: 'any' }) as {
    properties?: Record<string, Property>;
  };
  const taken = new Set([
    ...(generated.args ?? []),
    ...Object.keys(generated.fixed ?? {}),
    ...(generated.site ? [generated.site] : []),
    ...(generated.account ? ['accountId'] : []),
    ...(generated.database ? ['databaseId'] : []),
  ]);
  const fields = Object.entries(properties).filter(([name]) => !taken.has(name));
  const options: OptionDefinition[] = fields.map(([name, property]) => ({
    flags: `--${kebab(name)} <${name}>`,
    description: property.description ?? (property.enum ? property.enum.join(' | ') : name),
    parse: parser(property),
  }));
  return {
    usage: generated.usage,
    summary: operation.description,
    examples: generated.examples,
    options,
    site: generated.site !== undefined,
    run: async (context) => {
      const input: Record<string, unknown> = { ...generated.fixed };
      for (const [i, field] of (generated.args ?? []).entries()) {
        const resolve = generated.resolve?.[field];
        input[field] = resolve ? await resolve(context, context.args[i]!) : context.args[i];
      }
      for (const [name] of fields) {
        const value = context.options[name];
        if (value !== undefined) input[name] = value === NULL ? null : value;
      }
      if (generated.account) input.accountId = (await context.api().get<{ id: string }>('accounts/current')).id;
      if (generated.site) {
        const site = await context.site();
        input[generated.site] = generated.site === 'siteId' ? site.id : site.bucketId;
        if (generated.database) input.databaseId = (await siteDatabase(context.api(), site)).database.id;
      }
      const answer = await send(context, route, input);
      context.out.print(answer, generated.text ? generated.text(answer as never) : formatAnswer(answer));
      // A statement the database refused is an answer, and the command failed.
      if ((answer as { success?: unknown }).success === false) return 1;
    },
  };
}

/** The REST request of an operation: its path filled in, the rest of the input in the query or body. */
function send(context: CommandContext, route: OperationRoute, input: Record<string, unknown>): Promise<unknown> {
  const { path, rest } = requestFor(route, input, encodeURIComponent);
  const relative = path.replace(/^\/v0\//, '');
  return inputSource(route) === 'query'
    ? context.api().request(route.method, relative, { query: rest as Record<string, string | number> })
    : context.api().request(route.method, relative, { body: rest });
}

/** The generated command groups, and `whoami`. */
export function catalogueCommands(): { groups: CommandGroup[]; commands: CommandDefinition[] } {
  const routes = new Map(apiRoutes.filter(isOperationRoute).map((route) => [route.operation.name, route]));
  const missing = [...GROUPS.flatMap((g) => g.commands), WHOAMI].filter(
    (c) => !routes.has(c.operation) || !operationByName.has(c.operation),
  );
  if (missing.length > 0) throw new Error(`no REST route for ${missing.map((c) => c.operation).join(', ')}`);
  return {
    groups: GROUPS.map((group) => ({
      name: group.name,
      summary: group.summary,
      commands: group.commands.map((c) => definition(c, routes)),
    })),
    commands: [definition(WHOAMI, routes)],
  };
}
