/**
 * Header lists between the caller, Chromium and the answer. Pure, so they are tested alone.
 */

export interface HeaderEntry {
  name: string;
  value: string;
}

/**
 * The browser's own request headers (its Cookie, User-Agent, Accept, client hints) with
 * the caller's on top: a caller's header replaces the browser's of the same name, in any
 * case. Fetch.continueRequest takes the whole list, so nothing of the browser's is lost.
 */
export function mergeRequestHeaders(browser: Record<string, string>, caller: Record<string, string>): HeaderEntry[] {
  const overridden = new Set(Object.keys(caller).map((name) => name.toLowerCase()));
  const kept = Object.entries(browser).filter(([name]) => !overridden.has(name.toLowerCase()));
  return [...kept, ...Object.entries(caller)].map(([name, value]) => ({ name, value }));
}

/**
 * The answer's headers as {lower-case name: values}. `raw` is Network.responseReceivedExtraInfo's
 * object (repeated headers joined by newlines, Set-Cookie included), preferred because
 * Fetch's list leaves Set-Cookie out; `listed` (Fetch's) serves when it never came.
 * HTTP/2 pseudo-headers (":status") are not headers. Chromium hands the body over decoded,
 * so Content-Encoding and Content-Length then no longer describe it and are dropped, as Go's
 * HTTP client does when it decompresses.
 */
export function answerHeaders(raw: Record<string, string> | undefined, listed: HeaderEntry[]): Record<string, string[]> {
  const entries: [string, string][] = raw
    ? Object.entries(raw).flatMap(([name, joined]) => joined.split('\n').map((value): [string, string] => [name, value]))
    : listed.map(({ name, value }) => [name, value]);
  // No prototype: a header may be called __proto__.
  const headers = Object.create(null) as Record<string, string[]>;
  for (const [name, value] of entries) {
    const key = name.toLowerCase();
    if (key.startsWith(':')) continue;
    (headers[key] ??= []).push(value);
  }
  const encoding = headers['content-encoding'];
  if (encoding && encoding.some((value) => value.trim().toLowerCase() !== 'identity')) {
    delete headers['content-encoding'];
    delete headers['content-length'];
  }
  return headers;
}
