// The program of a build process (see ../bundler.ts): Deno's own bundler turns each entry, with the
// site's modules and the npm packages it imports, into one ES module. The process may read only the
// build's folder and the package cache and write only the output folder; each entry is bundled in a
// worker of its own that may read only that entry, the site's modules and the cache, and write only its
// module. So an import of a host file, of another function or of a remote module fails here, at deploy,
// under Deno's own checks. Its one line of output is what the host reads: every error with its place.

interface Plan {
  /** Absolute paths of the site's modules and its deno.json and deno.lock. */
  inputs: string[];
  /** Entries relative to the build's folder (the working directory), each bundled into `<out>/<index>.js`. */
  entries: string[];
  out: string;
  npmCache: string;
}

interface Problem {
  entry: string;
  text: string;
  file: string | null;
  line: number;
  column: number;
}

interface BundleMessage {
  errors: Array<{ text: string; location: { file: string; line: number; column: number } | null }>;
}

// The bundler runs in the worker; its source is given inline, so the worker needs no read of Berth's files.
const WORKER = `self.onmessage = async ({ data }) => {
  try {
    const result = await Deno.bundle({ entrypoints: [data.entry], outputPath: data.output, format: 'esm', platform: 'deno', write: true });
    self.postMessage({ errors: result.errors });
  } catch (err) {
    self.postMessage({ errors: [{ text: String(err?.message ?? err), location: null }] });
  }
};`;
const workerUrl = URL.createObjectURL(new Blob([WORKER], { type: 'application/javascript' }));

function bundleOne(plan: Plan, entry: string, output: string): Promise<BundleMessage> {
  const worker = new Worker(workerUrl, {
    type: 'module',
    deno: {
      permissions: {
        read: [...plan.inputs, `${Deno.cwd()}/${entry}`, plan.npmCache],
        write: [output],
        net: false,
        env: false,
        run: false,
        ffi: false,
        sys: false,
        import: false,
      },
    },
  });
  return new Promise((resolve) => {
    worker.onmessage = (event: MessageEvent<BundleMessage>) => {
      worker.terminate();
      resolve(event.data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      worker.terminate();
      resolve({ errors: [{ text: event.message, location: null }] });
    };
    worker.postMessage({ entry, output });
  });
}

const plan = JSON.parse(Deno.args[0]!) as Plan;
const problems: Problem[] = [];
for (const [index, entry] of plan.entries.entries()) {
  const { errors } = await bundleOne(plan, entry, `${plan.out}/${index}.js`);
  for (const error of errors) {
    problems.push({
      entry,
      text: error.text,
      file: error.location?.file ?? null,
      line: error.location?.line ?? 0,
      column: error.location ? error.location.column + 1 : 0,
    });
  }
}
console.log(JSON.stringify({ problems }));
