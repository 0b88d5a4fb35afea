// @ts-check
// The SQLite driver of Berth's Node side (metadata, the data dir lock, backups, compaction): better-sqlite3.
// Its 12.x releases build on Node's C++ API, which aborts the process at garbage collection on Node
// 24.19 and later (nodejs/node#65446); 13.x is a Node-API addon, but of Node-API 10, which Node 20 does
// not have. Both are installed (13.x under the name better-sqlite3-napi) and the one this Node runs is
// loaded. Plain JavaScript, so that worker threads, which do not run through Berth's TypeScript loader,
// load the same driver.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** Node-API 10 came with Node 22.14, 23.6 and 24. */
export const usesNodeApiDriver = Number(process.versions.napi) >= 10;

/** @type {typeof import('better-sqlite3')} */
const Database = require(usesNodeApiDriver ? 'better-sqlite3-napi' : 'better-sqlite3');

export default Database;
