// What is counted of one site in one period: the numbers that add up across periods and nodes, two
// latency histograms, and the most requested paths and referrer hosts (bounded, so a visitor sending
// random paths costs a site a fixed amount of memory and metadata).
import { type Histogram, addInto } from './histogram.ts';

/** Distinct paths (and referrer hosts) a tally keeps in memory; later new ones are not listed. */
export const MAX_KEYS = 200;
/** Entries of each top list written with a period's row. */
export const STORED_TOP = 50;
/** A path is kept to this many characters. */
export const MAX_PATH_CHARS = 300;

export interface Tally {
  requests: number;
  /** Answers by status class: 2xx, 3xx, 4xx, 5xx (1xx never ends a request). */
  status: [number, number, number, number];
  bytesOut: number;
  functionInvocations: number;
  functionErrors: number;
  coldStarts: number;
  databaseCalls: number;
  /** Every request's duration, from its arrival to its answer's head. */
  latency: Histogram;
  /** The function calls' durations. */
  functionLatency: Histogram;
  paths: Map<string, number>;
  referrers: Map<string, number>;
}

export const newTally = (): Tally => ({
  requests: 0,
  status: [0, 0, 0, 0],
  bytesOut: 0,
  functionInvocations: 0,
  functionErrors: 0,
  coldStarts: 0,
  databaseCalls: 0,
  latency: new Map(),
  functionLatency: new Map(),
  paths: new Map(),
  referrers: new Map(),
});

/** Counts `key` once more, unless the map is full and `key` new to it. */
export function countKey(map: Map<string, number>, key: string, by = 1): void {
  const count = map.get(key);
  if (count !== undefined) map.set(key, count + by);
  else if (map.size < MAX_KEYS) map.set(key, by);
}

export function addTally(into: Tally, from: Tally): void {
  into.requests += from.requests;
  for (let i = 0; i < 4; i++) into.status[i]! += from.status[i]!;
  into.bytesOut += from.bytesOut;
  into.functionInvocations += from.functionInvocations;
  into.functionErrors += from.functionErrors;
  into.coldStarts += from.coldStarts;
  into.databaseCalls += from.databaseCalls;
  addInto(into.latency, from.latency);
  addInto(into.functionLatency, from.functionLatency);
  for (const [path, count] of from.paths) countKey(into.paths, path, count);
  for (const [host, count] of from.referrers) countKey(into.referrers, host, count);
}

/** The `n` largest entries, largest first (ties by name, so every read orders them alike). */
export function top(map: Map<string, number>, n: number): Array<[string, number]> {
  return [...map].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).slice(0, n);
}
