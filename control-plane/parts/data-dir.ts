// The data dir's part of a start: its lock first (one server per data dir), then what a killed server
// left in it (processes still writing there, half-written temp files) goes, and the instance key and
// this node's id are read. Its code lives in storage/, which knows nothing of a start.
import path from 'node:path';
import { masterKeyFileOf } from '../config.ts';
import { defaultNodeId } from '../cluster/nodes.ts';
import type { Part } from '../part.ts';
import { replicationDirOf } from '../site-databases/compose.ts';
import { replicatorConfigFile } from '../site-databases/replication/replicator.ts';
import { dataDirLockProblem } from '../startup-error.ts';
import { type DataDirLock, lockDataDir } from '../../storage/data-dir-lock.ts';
import { stopLeftovers } from '../../storage/leftover-processes.ts';
import { loadMasterKey } from '../../storage/master-key.ts';
import { sweepTempFiles } from '../../storage/temp-files.ts';
import { socketDirFor } from '../../runtime-host/runtime.ts';

export const dataDirPart: Part = {
  name: 'the data dir',
  async open(_deps, { config, log, stack }) {
    let lock: DataDirLock;
    try {
      lock = lockDataDir(config.dataDir);
    } catch (err) {
      throw dataDirLockProblem(err);
    }
    stack.defer('the data dir lock', () => lock.release());
    const runtimeDir = path.join(config.dataDir, 'runtime');
    // The data dir is this process's now: what a killed server left running or half-written goes first.
    const stopped = await stopLeftovers(
      [config.dataDir, socketDirFor(runtimeDir)],
      [replicatorConfigFile(replicationDirOf(runtimeDir))],
    );
    if (stopped > 0) log.warn({ processes: stopped }, 'stopped the processes a previous server left running');
    const swept = sweepTempFiles(config.dataDir);
    if (swept > 0) log.warn({ files: swept }, 'removed the temp files a previous server left');
    return {
      runtimeDir,
      nodeId: config.nodeId || defaultNodeId(config.dataDir),
      masterKey: loadMasterKey(masterKeyFileOf(config)),
    };
  },
};
