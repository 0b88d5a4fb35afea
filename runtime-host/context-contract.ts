// The runtime contract of functions, defined once: the ctx methods a worker may call (the host serves
// exactly these, the shim builds exactly these) and BerthContext, the type of the `ctx` a handler gets.
// Dependency-free and web-standard only, because Deno imports it too; its types are what editors show.

/** Every ctx method, as `namespace.method`. */
export const CTX_METHODS = [
  'data.readText',
  'data.readJson',
  'data.readJsonl',
  'data.writeText',
  'data.writeJson',
  'data.appendJsonl',
  'data.list',
  'db.query',
  'db.first',
  'db.execute',
  'db.batch',
  'secrets.get',
  'llm.messages.create',
] as const;

export type CtxMethod = (typeof CTX_METHODS)[number];

export type SqlParam = string | number | boolean | null;
export type Row = Record<string, unknown>;

/** What a data write answers. */
export interface DataWrite {
  path: string;
  versionId: string;
  bytes: number;
}

export interface ModelMessage {
  role: 'user' | 'assistant' | 'system';
  content: string;
}

/** The `ctx` every handler receives: `handler(req: Request, ctx: BerthContext)`. */
export interface BerthContext {
  readonly siteId: string;
  /** Files under the site's data/ folder; "x.json", "data/x.json" and "/data/x.json" all name data/x.json. */
  readonly data: {
    readText(path: string): Promise<string | null>;
    readJson<T = unknown>(path: string): Promise<T | null>;
    readJsonl<T = unknown>(path: string): Promise<T[]>;
    writeText(path: string, text: string): Promise<DataWrite>;
    writeJson(path: string, value: unknown): Promise<DataWrite>;
    appendJsonl(path: string, value: unknown): Promise<DataWrite>;
    list(prefix?: string): Promise<Array<{ path: string; bytes: number; updatedAt: string }>>;
  };
  /** The site's SQL database: one statement per call; batch runs several in one transaction. */
  readonly db: {
    query<T extends Row = Row>(sql: string, params?: SqlParam[]): Promise<T[]>;
    first<T extends Row = Row>(sql: string, params?: SqlParam[]): Promise<T | null>;
    execute(sql: string, params?: SqlParam[]): Promise<{ changes: number; lastInsertRowId: number | null }>;
    batch(
      statements: Array<{ sql: string; params?: SqlParam[] }>,
    ): Promise<Array<{ rows: Row[]; changes: number; lastInsertRowId: number | null }>>;
  };
  readonly secrets: {
    get(name: string): Promise<string | null>;
  };
  readonly llm: {
    readonly messages: {
      create(options: {
        model?: 'model-6-luna' | 'model-6.1-sol';
        messages: ModelMessage[];
        reasoningEffort?: 'none' | 'low' | 'medium' | 'high';
        maxOutputTokens?: number;
      }): Promise<{
        id: string;
        model: string;
        message: { content: string };
        usage: { inputTokens: number; outputTokens: number };
      }>;
    };
  };
}
