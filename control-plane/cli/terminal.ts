// Reading from the person at the terminal, or from a pipe.
import readline from 'node:readline';
import { Writable } from 'node:stream';
import { CliError } from './cli-error.ts';

/** Everything on stdin, for values that must never appear in argv (and so in `ps` or shell history). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export const stdinIsTerminal = () => process.stdin.isTTY === true;

/** Asks one question on the terminal; `hidden` does not echo the answer (a secret value). */
export function ask(question: string, options: { hidden?: boolean } = {}): Promise<string> {
  let muted = false;
  // readline echoes through its output stream: muting it after the question hides what is typed.
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = readline.createInterface({ input: process.stdin, output, terminal: true });
  return new Promise((resolve, reject) => {
    let answered = false;
    rl.question(question, (answer) => {
      answered = true;
      rl.close();
      if (options.hidden) process.stderr.write('\n');
      resolve(answer);
    });
    muted = options.hidden === true;
    const cancel = () => {
      if (options.hidden) process.stderr.write('\n');
      reject(new CliError('cancelled', { code: 'cancelled' }));
    };
    rl.on('SIGINT', () => rl.close());
    rl.on('close', () => {
      if (!answered) cancel();
    });
  });
}
