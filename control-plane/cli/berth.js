#!/usr/bin/env node
// The `berth` command. Berth is written in TypeScript and run through tsx, with no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2));
