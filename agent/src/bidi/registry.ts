/**
 * The BiDi clients this agent serves, so the agent can close them on shutdown. Kept apart
 * from the mapper (and free of imports) so agent.ts can load it without loading
 * chromium-bidi, which stays unloaded until the first client asks for /webdriver.
 */

export interface ClosableClient {
  close(code: number, reason: string): void;
}

const clients = new Set<ClosableClient>();

/** Tracks a client until the returned function is called (extra calls are ignored). */
export function trackBidiClient(client: ClosableClient): () => void {
  clients.add(client);
  return () => void clients.delete(client);
}

/** Tells every BiDi client the browser is going away (1001); each closes its mapper and CDP connection. */
export function closeAllBidiClients(): void {
  for (const client of [...clients]) client.close(1001, 'browser shutting down');
}
