import net from 'node:net';

/**
 * A raw HTTP/1.1 conversation, for requests that fetch and the SDK cannot hold half-sent:
 * with `Expect: 100-continue` the server confirms it has a request's head (so the request
 * is in flight) before the client sends its body.
 */
export function rawConversation(url: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let received = '';
  let closed = false;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  return {
    socket,
    received: () => received,
    closed: () => closed,
    /** Sends a request head announcing a JSON body of `bodyBytes`, with Expect: 100-continue. */
    sendHead(method: string, path: string, headers: Record<string, string>, bodyBytes: number) {
      const lines = [`${method} ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Content-Type: application/json'];
      for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
      lines.push(`Content-Length: ${bodyBytes}`, 'Expect: 100-continue', '', '');
      socket.write(lines.join('\r\n'));
    },
    /** True once the server has answered 100 Continue. */
    continued: () => received.startsWith('HTTP/1.1 100 Continue\r\n'),
    /** The final (non-100) response once it has fully arrived, else undefined. */
    response: () => finalResponse(received),
  };
}

function finalResponse(text: string): { status: number; body: string } | undefined {
  const start = text.lastIndexOf('HTTP/1.1 ');
  const headEnd = text.indexOf('\r\n\r\n', start);
  if (start < 0 || headEnd < 0) return undefined;
  const head = text.slice(start, headEnd);
  const status = Number(head.slice(9, 12));
  if (status === 100) return undefined;
  const length = /^content-length: *(\d+)$/im.exec(head)?.[1];
  const body = text.slice(headEnd + 4);
  if (length === undefined || Buffer.byteLength(body) < Number(length)) return undefined;
  return { status, body };
}
