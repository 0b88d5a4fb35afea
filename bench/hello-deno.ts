// The hello-world handler served bare by `deno serve`, the baseline of the warm function benchmark.
export default {
  fetch(_req: Request): Response {
    return new Response('hello world');
  },
};
