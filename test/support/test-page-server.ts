import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestPageServer {
  /** http://127.0.0.1:<port> */
  url: string;
  /** Every path requested so far, in order, for tests that check what a browser fetched. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * A tiny HTML server on loopback for browser tests. `pages` maps paths to HTML; any
 * other path gets a page titled after it ("page /x"), so a test can tell pages apart.
 */
export async function startTestPageServer(pages: Record<string, string> = {}): Promise<TestPageServer> {
  const requests: string[] = [];
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://test').pathname;
    requests.push(path);
    const html = pages[path] ?? `<!doctype html><html><head><title>page ${path}</title></head><body><h1>${path}</h1></body></html>`;
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    response.end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
