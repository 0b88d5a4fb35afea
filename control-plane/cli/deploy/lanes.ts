// A few requests at once: enough to hide each one's latency, few enough not to crowd the server.
export const CONCURRENT_UPLOADS = 4;

export async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}
