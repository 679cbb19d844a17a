import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { STEALTH_PAGE_SCRIPT } from './stealth/page-script.js';

/**
 * stealth: true hides the tells of an automated, headless Chromium, after
 * puppeteer-extra-plugin-stealth's list of evasions, checked against Chromium 156:
 *
 * - navigator.webdriver: --disable-blink-features=AutomationControlled (pages, frames, workers).
 * - "HeadlessChrome" in the user agent: --user-agent with Chrome's own (reduced) UA for the
 *   real major version, which sets the HTTP header and navigator.userAgent everywhere.
 *   navigator.userAgentData brands already say "Chromium" (no headless brand) in 156.
 * - languages: --lang and --accept-lang, so navigator.languages matches Accept-Language
 *   whatever the host's locale.
 * - WebGL vendor/renderer: headless renders with SwiftShader ("Google Inc. (Google)",
 *   "SwiftShader"); a script reports a common Intel/Mesa pair instead. Headful on Xvfb
 *   has no GPU and Chromium 156 then offers no WebGL at all (a desktop Chrome always
 *   has it): --enable-unsafe-swiftshader gives it the software WebGL headless uses anyway.
 * - Notification.permission and permissions.query('notifications') are made to agree.
 * - navigator.plugins/mimeTypes (the five PDF viewer entries) and window.chrome (loadTimes,
 *   csi, app) are already those of a normal Chrome in new headless: nothing to do.
 *
 * The script runs as an MV3 extension's content script (world MAIN, document_start,
 * all_frames, match_origin_as_fallback) loaded with --load-extension, which unbranded
 * Chromium 156 still honours. Chosen over an agent-held CDP session that auto-attaches
 * to every target with waitForDebuggerOnStart: the browser itself injects into every tab,
 * popup, iframe (out-of-process ones too) and about:blank frame before page scripts, with
 * no agent connection that could lag or drop and hold new tabs paused, and no session of
 * ours that CDP clients could see or whose overrides theirs would fight with. Chromium
 * injects into a script-created about:blank iframe synchronously, before the parent can
 * touch its window (checked). Not covered: WebGL inside workers (OffscreenCanvas).
 */

const run = promisify(execFile);

/** What a normal desktop Chromium on Linux sends: UA reduction freezes all but the major version. */
export function stealthUserAgent(majorVersion: number): string {
  return `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${majorVersion}.0.0.0 Safari/537.36`;
}

/**
 * The binary's own version (about 20-60 ms): the UA must carry the real version, and it is
 * needed before launch, when nothing else knows it yet.
 */
export async function chromiumMajorVersion(executable: string): Promise<number> {
  const { stdout } = await run(executable, ['--version'], { timeout: 10_000 });
  const match = /(\d+)\.\d+\.\d+\.\d+/.exec(stdout);
  if (!match) throw new Error(`cannot read Chromium's version from "${stdout.trim().slice(0, 200)}"`);
  return Number(match[1]);
}

const MANIFEST = {
  manifest_version: 3,
  name: 'browserplane-stealth',
  version: '1.0',
  content_scripts: [
    {
      matches: ['<all_urls>'],
      js: ['page.js'],
      run_at: 'document_start',
      all_frames: true,
      match_about_blank: true,
      match_origin_as_fallback: true,
      world: 'MAIN',
    },
  ],
};

/**
 * Writes the extension into the browser's work dir (root-owned files the browser user can
 * read but not change) and returns Chromium's flags for stealth.
 */
export async function prepareStealth(options: { workDir: string; executable: string }): Promise<string[]> {
  const dir = path.join(options.workDir, 'stealth-extension');
  const [major] = await Promise.all([
    chromiumMajorVersion(options.executable),
    (async () => {
      await mkdir(dir, { mode: 0o755 });
      await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(MANIFEST), { mode: 0o644 });
      await writeFile(path.join(dir, 'page.js'), STEALTH_PAGE_SCRIPT, { mode: 0o644 });
    })(),
  ]);
  return [
    '--disable-blink-features=AutomationControlled',
    `--user-agent=${stealthUserAgent(major)}`,
    '--lang=en-US',
    '--accept-lang=en-US,en',
    '--enable-unsafe-swiftshader',
    `--load-extension=${dir}`,
  ];
}
