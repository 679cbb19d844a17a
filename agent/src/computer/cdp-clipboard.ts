import type { BrowserCdp } from '../cdp/client.js';
import type { PageView } from './cdp-page.js';
import { ComputerError } from './x11-tools.js';

/**
 * Headless Chromium keeps a clipboard of its own (no X selection), which pages reach
 * through the async Clipboard API and copy/paste commands; Ctrl+C, Ctrl+X and Ctrl+V sent
 * as key events use it as on Linux desktops (checked in 156: no editing commands needed).
 * The agent reaches it through the shown page, from its isolated world, with focus
 * emulated for its own CDP session only (a headless tab may not have focus, and the
 * Clipboard API refuses an unfocused document):
 *
 * - write: navigator.clipboard.writeText, which fires no event the page could see, in a
 *   secure context (https, localhost); elsewhere (about:blank, plain http) there is no
 *   navigator.clipboard, and a copy command whose copy event the agent fills does it. The
 *   page's own capturing copy listeners see that event, as they would see a user's copy.
 * - read: navigator.clipboard.readText needs the clipboard-read permission, which is
 *   granted to the page's origin for that one read and set back to prompt (what a
 *   headless browser starts with) right after; Chromium would also drop the grant with
 *   the agent's connection, as it drops every override of a closing CDP connection. A page
 *   that polls readText could read the clipboard during those few milliseconds. Outside a secure context Chromium offers no
 *   way to read it (a paste command is refused to scripts): 409 clipboard_unavailable.
 */

const WRITE_BY_API = 'function (text) { return navigator.clipboard.writeText(text).then(() => true); }';
const WRITE_BY_COPY = `function (text) {
  let filled = false;
  const fill = (event) => { event.clipboardData.setData('text/plain', text); event.preventDefault(); filled = true; };
  document.addEventListener('copy', fill, { capture: true, once: true });
  try { document.execCommand('copy'); } finally { document.removeEventListener('copy', fill, { capture: true }); }
  return filled;
}`;
const READ = 'function () { return navigator.clipboard.readText(); }';

export async function writeClipboard(cdp: BrowserCdp, view: PageView, text: string): Promise<void> {
  const written = await callInPage<boolean>(cdp, view, view.secureContext ? WRITE_BY_API : WRITE_BY_COPY, [text]);
  if (written !== true) throw new ComputerError(409, 'clipboard_unavailable', `the page shown (${view.origin}) did not let the clipboard be written`);
}

export async function readClipboard(cdp: BrowserCdp, view: PageView): Promise<string> {
  if (!view.secureContext || view.origin === 'null') {
    throw new ComputerError(
      409,
      'clipboard_unavailable',
      `the page shown (${view.origin}) is not a secure context, where headless Chromium lets nothing read the clipboard; show an https or localhost page first`,
    );
  }
  const permission = { permission: { name: 'clipboard-read' }, origin: view.origin, ...(view.browserContextId ? { browserContextId: view.browserContextId } : {}) };
  await cdp.send('Browser.setPermission', { ...permission, setting: 'granted' });
  try {
    return await callInPage<string>(cdp, view, READ, []);
  } finally {
    await cdp.send('Browser.setPermission', { ...permission, setting: 'prompt' });
  }
}

async function callInPage<T>(cdp: BrowserCdp, view: PageView, functionDeclaration: string, args: unknown[]): Promise<T> {
  const answer = await cdp.send<{ result: { value?: unknown }; exceptionDetails?: { text?: string; exception?: { description?: string } } }>(
    'Runtime.callFunctionOn',
    { functionDeclaration, executionContextId: view.contextId, arguments: args.map((value) => ({ value })), returnByValue: true, awaitPromise: true, userGesture: true },
    view.sessionId,
  );
  if (answer.exceptionDetails) {
    const reason = answer.exceptionDetails.exception?.description?.split('\n')[0] ?? answer.exceptionDetails.text ?? 'failed';
    throw new ComputerError(409, 'clipboard_unavailable', `the page shown (${view.origin}) refused the clipboard: ${reason}`);
  }
  return answer.result.value as T;
}
