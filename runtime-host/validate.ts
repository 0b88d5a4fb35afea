// The v0 rules for function sources, checked with TypeScript's own parser so that every problem
// points at the exact line and column. The rules give clear errors early; the sandbox's permissions,
// not this check, are the security boundary.
import { createRequire } from 'node:module';
import type * as TS from 'typescript6';

export interface SourceProblem {
  message: string;
  /** 1-based; 0 when the problem is the file's path rather than its text. */
  line: number;
  column: number;
}

export type Validation = { ok: true; name: string } | { ok: false; problem: SourceProblem };

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

// typescript is large: load it on the first deployment, not at server start.
let ts: typeof TS | undefined;
const typescript = (): typeof TS => (ts ??= createRequire(import.meta.url)('typescript6') as typeof TS);

/** The function name of `api/<name>.ts`, or a problem when the path cannot be a function. */
export function functionName(path: string): Validation {
  const match = /^api\/(.+)\.ts$/.exec(path);
  if (!match) return pathProblem(`"${path}" is not a function source: functions are api/<name>.ts`);
  const name = match[1]!;
  if (name.includes('/')) {
    return pathProblem(`"${path}" is nested: a function is one file directly under api/, such as api/${name.split('/').at(-1)}.ts`);
  }
  if (!NAME_PATTERN.test(name)) {
    return pathProblem(`"${name}" is not a valid function name: use letters, digits, "-" and "_" (at most 63), starting with a letter or digit`);
  }
  return { ok: true, name };
}

const pathProblem = (message: string): Validation => ({ ok: false, problem: { message, line: 0, column: 0 } });

/** Checks an api/ function source against the v0 rules. */
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
  const visit = (node: TS.Node): void => {
    if (forbidden) return;
    const start = node.getStart(file);
    if (t.isImportDeclaration(node) || t.isImportEqualsDeclaration(node)) {
      forbidden = at(start, 'import statements are not allowed: a v0 function is one self-contained file');
    } else if ((t.isExportDeclaration(node) && node.moduleSpecifier) || (t.isExportAssignment(node) && node.isExportEquals)) {
      forbidden = at(start, t.isExportDeclaration(node) ? '"export … from" is not allowed: a v0 function is one self-contained file' : '"export =" is not allowed: use export default');
    } else if (t.isCallExpression(node) && node.expression.kind === t.SyntaxKind.ImportKeyword) {
      forbidden = at(start, 'dynamic import() is not allowed: a v0 function is one self-contained file');
    } else if (t.isMetaProperty(node) && node.keywordToken === t.SyntaxKind.ImportKeyword) {
      forbidden = at(start, 'import.meta is not available to v0 functions');
    } else if (t.isCallExpression(node) && t.isIdentifier(node.expression) && node.expression.text === 'require') {
      forbidden = at(start, 'require() is not available: v0 functions use standard web APIs only');
    }
    if (!forbidden) t.forEachChild(node, visit);
  };
  visit(file);
  if (forbidden) return forbidden;

  if (!exportsHandler(t, file)) {
    return at(0, 'no handler: export a default function, or a function named "handler" (export function handler(req, ctx) { … })');
  }
  return named;
}

const hasModifier = (t: typeof TS, node: TS.Node, kind: TS.SyntaxKind): boolean =>
  (t.canHaveModifiers(node) ? t.getModifiers(node) : undefined)?.some((m) => m.kind === kind) ?? false;

/** A default export, or a named export called `handler`, in any of TypeScript's spellings. */
function exportsHandler(t: typeof TS, file: TS.SourceFile): boolean {
  for (const statement of file.statements) {
    if (t.isExportAssignment(statement)) return true;
    const exported = hasModifier(t, statement, t.SyntaxKind.ExportKeyword);
    if (exported && hasModifier(t, statement, t.SyntaxKind.DefaultKeyword)) return true;
    if (exported && (t.isFunctionDeclaration(statement) || t.isClassDeclaration(statement)) && statement.name?.text === 'handler') return true;
    if (exported && t.isVariableStatement(statement)) {
      if (statement.declarationList.declarations.some((d) => t.isIdentifier(d.name) && d.name.text === 'handler')) return true;
    }
    if (t.isExportDeclaration(statement) && !statement.moduleSpecifier && statement.exportClause && t.isNamedExports(statement.exportClause)) {
      if (statement.exportClause.elements.some((e) => e.name.text === 'handler' || e.name.text === 'default')) return true;
    }
  }
  return false;
}
