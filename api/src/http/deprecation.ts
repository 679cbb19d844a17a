import type { Response } from 'express';
import { gone } from './errors.js';
import { fillPath, type Deprecation } from './route.js';

/**
 * Before the sunset instant: the response carries `Deprecation` (RFC 9745, a structured
 * date), `Sunset` (RFC 8594, an HTTP-date) and a `Link` to the successor. From the
 * sunset instant on: 410 Gone naming the successor.
 */
export function applyDeprecation(
  deprecation: Deprecation,
  now: Date,
  params: Record<string, string>,
  res: Response,
): void {
  const successorPath = fillPath(deprecation.successor.path, params);
  const successor = `${deprecation.successor.method.toUpperCase()} ${deprecation.successor.path}`;
  const link = `<${successorPath}>; rel="successor-version"`;
  if (now.getTime() >= deprecation.sunsetAt.getTime()) {
    throw gone(`This route was removed on ${deprecation.sunsetAt.toISOString()}; use ${successor}`, {
      details: [{ code: 'successor', message: `${deprecation.successor.method.toUpperCase()} ${successorPath}` }],
      headers: { link },
      shouldRetry: false,
    });
  }
  res.setHeader('Deprecation', `@${Math.floor(deprecation.deprecatedAt.getTime() / 1000)}`);
  res.setHeader('Sunset', deprecation.sunsetAt.toUTCString());
  res.setHeader('Link', link);
}
