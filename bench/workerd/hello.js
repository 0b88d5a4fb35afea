// The hello-world handler served by workerd, Cloudflare's open-source Workers runtime: the same handler
// as hello-deno.ts (workerd runs JavaScript, not TypeScript), the second baseline of the warm function.
export default {
  fetch(_req) {
    return new Response('hello world');
  },
};
