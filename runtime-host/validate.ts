// The rules for function and cron sources, checked with TypeScript's own parser so that every problem
// points at the exact line and column. A source without imports is a v0 function, one self-contained
// file served as it is; one that imports (the site's own modules, npm packages, node: built-ins) is a
// v1 function, built into one module at deploy (control-plane/builds/). The rules give clear errors
// early; the sandbox's permissions, not this check, are the security boundary.
import { createRequire } from 'node:module';
import { CronExpressionParser } from 'cron-parser';
import type * as TS from 'typescript6';

export interface SourceProblem {
  message: string;
  /** 1-based; 0 when the problem is the file's path rather than its text. */
  line: number;
  column: number;
}

/** api/<name>.ts answers HTTP requests; cron/<name>.ts runs on its schedule. */
export type SourceKind = 'api' | 'cron';

export type Validation =
  | {
      ok: true;
      kind: SourceKind;
      name: string;
      /** cron only: the 5-field UTC schedule */
      schedule?: string;
      /** It imports: it is built into one module before it runs (a v1 function). */
      imports?: boolean;
    }
  | { ok: false; problem: SourceProblem };

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

// typescript is large: load it on the first source checked, not at server start.
let ts: typeof TS | undefined;
const typescript = (): typeof TS => (ts ??= createRequire(import.meta.url)('typescript6') as typeof TS);

/** The kind and name of `api/<name>.ts` or `cron/<name>.ts`, or a problem when the path is neither. */
export function functionName(path: string): Validation {
  if (isSharedModule(path))
    return pathProblem(`"${path}" is a module that functions import (its name starts with "_"), not a function`);
  const match = /^(api|cron)\/(.+)\.ts$/.exec(path);
  if (!match)
    return pathProblem(`"${path}" is not a runtime source: functions are api/<name>.ts, cron jobs cron/<name>.ts`);
  const kind = match[1] as SourceKind;
  const name = match[2]!;
  if (name.includes('/')) {
    return pathProblem(
      `"${path}" is nested: a source is one file directly under ${kind}/, such as ${kind}/${name.split('/').at(-1)}.ts`,
    );
  }
  if (!NAME_PATTERN.test(name)) {
    return pathProblem(
      `"${name}" is not a valid name: use letters, digits, "-" and "_" (at most 63), starting with a letter or digit`,
    );
  }
  return { ok: true, kind, name };
}

const pathProblem = (message: string): Validation => ({ ok: false, problem: { message, line: 0, column: 0 } });

/** A file or folder under api/ or cron/ whose name starts with "_": a module functions import, never one. */
export const isSharedModule = (path: string): boolean =>
  /^(api|cron)\//.test(path) &&
  path
    .split('/')
    .slice(1)
    .some((part) => part.startsWith('_'));

/** Checks an api/ or cron/ source: a v0 file, or a v1 one that imports and is built. */
export function validateFunction(path: string, source: string): Validation {
  const named = functionName(path);
  if (!named.ok) return named;
  const t = typescript();
  const file = t.createSourceFile(path, source, t.ScriptTarget.Latest, true, t.ScriptKind.TS);
  const at = (pos: number, message: string): Validation => {
    const { line, character } = file.getLineAndCharacterOfPosition(pos);
    return { ok: false, problem: { message, line: line + 1, column: character + 1 } };
  };

  const syntax = (file as unknown as { parseDiagnostics: TS.Diagnostic[] }).parseDiagnostics[0];
  if (syntax) return at(syntax.start ?? 0, `syntax error: ${t.flattenDiagnosticMessageText(syntax.messageText, ' ')}`);

  let forbidden: Validation | undefined;
  let imports = false;
  const visit = (node: TS.Node): void => {
    if (forbidden) return;
    const start = node.getStart(file);
    if (t.isImportEqualsDeclaration(node)) {
      forbidden = at(start, '"import … = require()" is not allowed: use an import statement');
    } else if (t.isExportAssignment(node) && node.isExportEquals) {
      forbidden = at(start, '"export =" is not allowed: use export default');
    } else if (t.isImportDeclaration(node) || (t.isExportDeclaration(node) && node.moduleSpecifier)) {
      imports = true;
    } else if (t.isCallExpression(node) && node.expression.kind === t.SyntaxKind.ImportKeyword) {
      forbidden = at(
        start,
        'dynamic import() is not allowed: import modules and packages with import statements, resolved at deploy',
      );
    } else if (t.isMetaProperty(node) && node.keywordToken === t.SyntaxKind.ImportKeyword) {
      forbidden = at(start, 'import.meta is not available to functions');
    } else if (t.isCallExpression(node) && t.isIdentifier(node.expression) && node.expression.text === 'require') {
      forbidden = at(start, 'require() is not available: use an import statement');
    }
    if (!forbidden) t.forEachChild(node, visit);
  };
  visit(file);
  if (forbidden) return forbidden;
  const found = imports ? { ...named, imports } : named;

  if (named.kind === 'cron') {
    if (!exportsNamedHandler(t, file)) {
      return at(
        0,
        'no handler: a cron job exports a function named "handler" (export function handler(req, ctx) { … })',
      );
    }
    return checkSchedule(t, file, at, found);
  }
  if (!exportsDefault(t, file) && !exportsNamedHandler(t, file)) {
    return at(
      0,
      'no handler: export a default function, or a function named "handler" (export function handler(req, ctx) { … })',
    );
  }
  return found;
}

/** `export const schedule = "<5-field cron>"`: a string literal, read here, at deploy time. */
function checkSchedule(
  t: typeof TS,
  file: TS.SourceFile,
  at: (pos: number, message: string) => Validation,
  named: Validation & { ok: true },
): Validation {
  const example = 'export const schedule = "*/5 * * * *"';
  for (const statement of file.statements) {
    if (!t.isVariableStatement(statement) || !hasModifier(t, statement, t.SyntaxKind.ExportKeyword)) continue;
    const declaration = statement.declarationList.declarations.find(
      (d) => t.isIdentifier(d.name) && d.name.text === 'schedule',
    );
    if (!declaration) continue;
    const init = declaration.initializer;
    if (
      !(statement.declarationList.flags & t.NodeFlags.Const) ||
      !init ||
      !(t.isStringLiteral(init) || t.isNoSubstitutionTemplateLiteral(init))
    ) {
      return at(declaration.getStart(file), `schedule must be a constant string literal, such as ${example}`);
    }
    const schedule = init.text.trim();
    const problem = scheduleProblem(schedule);
    return problem ? at(init.getStart(file), problem) : { ...named, schedule };
  }
  return at(0, `no schedule: a cron job exports its UTC schedule, such as ${example}`);
}

/** Why a schedule is not a 5-field cron expression, or null when it is one. */
export function scheduleProblem(schedule: string): string | null {
  if (schedule.split(/\s+/).length !== 5)
    return `schedule "${schedule}" must have 5 fields: minute hour day-of-month month day-of-week (UTC)`;
  try {
    CronExpressionParser.parse(schedule, { tz: 'UTC' });
    return null;
  } catch (err) {
    return `schedule "${schedule}" is not a valid cron expression: ${(err as Error).message}`;
  }
}

const hasModifier = (t: typeof TS, node: TS.Node, kind: TS.SyntaxKind): boolean =>
  (t.canHaveModifiers(node) ? t.getModifiers(node) : undefined)?.some((m) => m.kind === kind) ?? false;

/** A default export, in any of TypeScript's spellings. */
function exportsDefault(t: typeof TS, file: TS.SourceFile): boolean {
  for (const statement of file.statements) {
    if (t.isExportAssignment(statement)) return true;
    if (hasModifier(t, statement, t.SyntaxKind.ExportKeyword) && hasModifier(t, statement, t.SyntaxKind.DefaultKeyword))
      return true;
    if (t.isExportDeclaration(statement) && statement.exportClause && t.isNamedExports(statement.exportClause)) {
      if (statement.exportClause.elements.some((e) => e.name.text === 'default')) return true;
    }
  }
  return false;
}

/** A named export called `handler`, in any of TypeScript's spellings (`export * from` may be one). */
function exportsNamedHandler(t: typeof TS, file: TS.SourceFile): boolean {
  for (const statement of file.statements) {
    // `export default function handler` exports "default", not "handler".
    const exported =
      hasModifier(t, statement, t.SyntaxKind.ExportKeyword) && !hasModifier(t, statement, t.SyntaxKind.DefaultKeyword);
    if (
      exported &&
      (t.isFunctionDeclaration(statement) || t.isClassDeclaration(statement)) &&
      statement.name?.text === 'handler'
    )
      return true;
    if (exported && t.isVariableStatement(statement)) {
      if (statement.declarationList.declarations.some((d) => t.isIdentifier(d.name) && d.name.text === 'handler'))
        return true;
    }
    if (t.isExportDeclaration(statement) && statement.moduleSpecifier && !statement.exportClause) return true;
    if (t.isExportDeclaration(statement) && statement.exportClause && t.isNamedExports(statement.exportClause)) {
      if (statement.exportClause.elements.some((e) => e.name.text === 'handler')) return true;
    }
  }
  return false;
}
