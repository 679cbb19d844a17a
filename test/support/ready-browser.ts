import { expect, vi } from 'vitest';
import type { BrowserRuntime, ObservedBrowser } from '../../contract/browser-runtime.js';

/**
 * A cold create is answered at Chromium's spawn (launchNew in
 * api/src/modules/browsers/service.ts), so a test that looks at the runtime or at the
 * agent's own /health right after one waits for Chromium first, as a client's first CDP
 * command does at the agent.
 */
export function readyBrowser(runtime: Pick<BrowserRuntime, 'observe'>, browserId: string, timeoutMs = 30_000): Promise<ObservedBrowser> {
  return vi.waitFor(
    async () => {
      const observed = await runtime.observe(browserId);
      expect(observed?.phase).toBe('Ready');
      return observed!;
    },
    { timeout: timeoutMs, interval: 50 },
  );
}
