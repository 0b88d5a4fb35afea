import type BetterSqlite3 from 'better-sqlite3';

export declare const usesNodeApiDriver: boolean;
declare const Database: typeof BetterSqlite3;
export default Database;
