import type { Locator, Page } from 'playwright-core';
import { readLoginPageScript } from './page-script.js';
import { trackTraffic, waitForSettled, type SettleResult } from './page-settle.js';
import type { LoginPageReading } from './page-types.js';
import { PAGE_VOCABULARY } from './page-vocabulary.js';

export { trackTraffic, waitForSettled, type SettleResult } from './page-settle.js';

/**
 * Reading and acting on login pages for the flow engine: one read of the page, then
 * fill, click, submit and wait for the next page. Nothing here knows about flows,
 * connections or the database.
 */

export interface PageActionOptions {
  /** How long an action may wait for its element to be actionable (and the page to settle). */
  timeoutMs?: number;
}

/** An action on the page failed; `details` never holds a typed value. */
export class PageActionError extends Error {
  constructor(
    readonly code: 'element_not_actionable' | 'nothing_to_submit',
    message: string,
    readonly details: { selector?: string },
  ) {
    super(message);
    this.name = 'PageActionError';
  }
}

const DEFAULT_TIMEOUT_MS = 10_000;
const READ_ATTEMPTS = 3;

/**
 * Reads the main frame as a person would (see page-script.ts). A read that races a
 * navigation loses its document; it is retried on the new one once that has parsed.
 */
export async function readLoginPage(page: Page): Promise<LoginPageReading> {
  trackTraffic(page);
  const script = readLoginPageScript(PAGE_VOCABULARY);
  for (let attempt = 1; ; attempt++) {
    try {
      return await page.evaluate<LoginPageReading>(script);
    } catch (error) {
      if (attempt >= READ_ATTEMPTS || !(error instanceof Error) || !/Execution context was destroyed|Cannot find context/i.test(error.message)) throw error;
      await page.waitForLoadState('domcontentloaded').catch(() => undefined);
    }
  }
}

/** Fills an input the way Playwright does (focus, set value, input/change events). The value is never logged or put in errors. */
export async function fillField(page: Page, selector: string, value: string, options: PageActionOptions = {}): Promise<void> {
  trackTraffic(page);
  await act(locate(page, selector), selector, (target) => target.fill(value, { timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS }), value);
}

/** Clicks a CSS selector, or an XPath one (SSO buttons) when it starts with "/" or "(". */
export async function clickTarget(page: Page, selector: string, options: PageActionOptions = {}): Promise<void> {
  trackTraffic(page);
  await act(locate(page, selector), selector, (target) => target.click({ timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS }));
}

/** Clicks (an MFA choice, an SSO button, a "Sign in" link), then waits for the page to settle. */
export async function clickAndSettle(page: Page, selector: string, options: PageActionOptions = {}): Promise<SettleResult> {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  await clickTarget(page, selector, { timeoutMs: timeout });
  return waitForSettled(page, timeout);
}

/**
 * Submits the step read in `reading`: clicks its submit control, or presses Enter in
 * its last field when the page has none, then waits for the page to settle.
 */
export async function submitStep(page: Page, reading: LoginPageReading, options: PageActionOptions = {}): Promise<SettleResult> {
  const timeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const lastField = reading.fields.at(-1);
  if (!reading.submitSelector && !lastField) {
    throw new PageActionError('nothing_to_submit', 'The page shows neither a submit control nor a field to press Enter in', {});
  }
  trackTraffic(page);
  if (reading.submitSelector) await clickTarget(page, reading.submitSelector, { timeoutMs: timeout });
  else if (lastField) await act(locate(page, lastField.selector), lastField.selector, (target) => target.press('Enter', { timeout }));
  return waitForSettled(page, timeout);
}

function locate(page: Page, selector: string): Locator {
  const isXPath = selector.startsWith('/') || selector.startsWith('(');
  return page.locator(isXPath ? `xpath=${selector}` : `css=${selector}`);
}

/**
 * Runs a Playwright action and rethrows its failure as a PageActionError carrying only
 * the first line of Playwright's message: the call log below it repeats the action's
 * arguments, which for `fill` is the secret being typed. The first line is redacted too.
 */
async function act(target: Locator, selector: string, action: (target: Locator) => Promise<void>, secret?: string): Promise<void> {
  try {
    await action(target);
  } catch (error) {
    const first = error instanceof Error ? (error.message.split('\n')[0] ?? '') : 'unknown error';
    const reason = secret ? first.split(secret).join('[redacted]') : first;
    throw new PageActionError('element_not_actionable', `Could not act on ${selector}: ${reason}`, { selector });
  }
}
