// The function logs' part of a start: the buffer that stores what functions print (flushed as the
// server stops, after the workers that print), and the live log streams, woken by the change feed when
// lines of their site are stored on any node.
import { opened, type Part } from '../part.ts';
import { FunctionLogBuffer } from './function-log-buffer.ts';
import { openLogStreams } from './log-streams.ts';

export const logsPart: Part = {
  name: 'the function logs',
  open(deps, { config, log, stack }) {
    const { db, changes } = opened(deps, 'the function logs', 'db', 'changes');
    const functionLogs = new FunctionLogBuffer({ db, log, perSite: config.functionLogsPerSite });
    stack.defer('the function logs', () => functionLogs.flush());
    return { functionLogs, logStreams: openLogStreams({ functionLogs, changes, log }, stack) };
  },
};
