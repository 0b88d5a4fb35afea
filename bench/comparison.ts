// What one comparison of Berth against its baseline measured (bench/main.ts makes them; https.ts and
// many-tenants.ts run their own; report.ts prints them and checks the aims).
import type { LoadResult } from './load-worker.ts';

export interface Measured extends LoadResult {
  server: string;
  /** CPU time of the server's whole process tree over the run, as a share of one core. */
  serverCpuShare: number;
  /** That CPU time per response, in µs: the cost of a request on the server's side. */
  cpuPerRequestUs: number;
  /**
   * The CPU time of the server's own process alone (Berth: the Node process, without its workers) per
   * response, in µs; read for the runs a figure needs it for (the egress proxy's CPU per fetch).
   */
  ownCpuPerRequestUs?: number;
  /** What other processes used of the server's core meanwhile (the machine is shared). */
  othersOnServerCore: number;
  loadCpuShare: number;
  loadCpus: string;
}

export interface Comparison {
  name: string;
  baseline: Measured;
  berth: Measured;
  /** Berth's req/s over the baseline's. */
  ratio: number;
  /** Berth's p50 minus the baseline's, in ms. */
  addedP50: number;
  /** The baseline's server CPU per request over Berth's. */
  cpuRatio: number;
  /** How many pairs were measured before this one was kept (see BENCH_MAX_OTHERS). */
  attempts: number;
  /** The larger share of the server's core other processes took during either side. */
  interference: number;
}
