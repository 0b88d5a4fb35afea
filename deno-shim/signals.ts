// Signals meant for the server reach Deno processes too: systemd's control-group kill signals every
// process of the service at once, and `kill` of a process group reaches whoever is in it. A worker or
// database process that died of them would fail the calls the server is still draining. The host ends
// these processes itself, by closing their channel or with SIGKILL, once it is done with them.
const ignore = (): void => {};

export function leaveStoppingToTheHost(): void {
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) Deno.addSignalListener(signal, ignore);
}
