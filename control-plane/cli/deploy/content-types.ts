// The Content-Type an upload is stored and served with, from the file's extension. Browsers refuse
// scripts and styles served with the wrong type (Berth sends nosniff), so this matters for web/ files.
import path from 'node:path';

const TEXT = '; charset=utf-8';

const TYPES: Record<string, string> = {
  '.html': `text/html${TEXT}`,
  '.htm': `text/html${TEXT}`,
  '.css': `text/css${TEXT}`,
  '.js': `text/javascript${TEXT}`,
  '.mjs': `text/javascript${TEXT}`,
  '.map': 'application/json',
  '.json': 'application/json',
  '.jsonl': 'application/jsonl',
  '.webmanifest': 'application/manifest+json',
  '.ts': `text/typescript${TEXT}`,
  '.txt': `text/plain${TEXT}`,
  '.md': `text/markdown${TEXT}`,
  '.csv': `text/csv${TEXT}`,
  '.xml': 'application/xml',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.wasm': 'application/wasm',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.pdf': 'application/pdf',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mp3': 'audio/mpeg',
  '.sql': `application/sql`,
};

/** Files known by their whole name: a deno.lock is JSON (and so the server's build stores the one it writes). */
const NAMED: Record<string, string> = { 'deno.lock': 'application/json' };

export function contentTypeFor(filePath: string): string {
  return NAMED[path.basename(filePath)] ?? TYPES[path.extname(filePath).toLowerCase()] ?? 'application/octet-stream';
}
