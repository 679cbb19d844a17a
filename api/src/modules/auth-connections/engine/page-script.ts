import type { PageElement, PageGlobals } from './page-dom.js';
import type {
  DiscoveredField,
  DiscoveredFieldType,
  LoginPageReading,
  MfaType,
  PageMfaOption,
  PageSignInOption,
  PageSsoButton,
} from './page-types.js';
import { pageSelectors, pageVisibility } from './page-locate.js';
import { pageText } from './page-text.js';
import type { PageVocabulary } from './page-vocabulary.js';

/** The in-page parts the reader is given, each sent to the page as its own function. */
export interface PageParts {
  pageText: typeof pageText;
  pageVisibility: typeof pageVisibility;
  pageSelectors: typeof pageSelectors;
}

/**
 * Reads a login page the way a person would, inside the page. It runs there as source
 * text (readLoginPageScript), so it must be self-contained: nothing from the module scope
 * may be referenced at run time (types are fine, they vanish); its helpers come in as
 * `parts` (page-text.ts, page-locate.ts), sent along the same way. It is split into
 * sections, one per part of the reading. The wording it matches comes in as
 * `vocabulary` (page-vocabulary.ts).
 */
export function readLoginPageInPage(vocabulary: PageVocabulary, parts: PageParts): LoginPageReading {
  const { document: doc, location, CSS: css } = globalThis as unknown as PageGlobals;
  const view = globalThis as unknown as PageGlobals;
  const re = (source: string) => new RegExp(source, 'i');
  const words = {
    submit: re(vocabulary.submitText),
    signInLink: re(vocabulary.signInLinkText),
    logout: re(vocabulary.logoutText),
    logoutHref: re(vocabulary.logoutHref),
    accountMenu: re(vocabulary.accountMenuLabel),
    loginContext: re(vocabulary.loginContext),
    search: re(vocabulary.searchField),
    identifier: re(vocabulary.identifierField),
    code: re(vocabulary.codeField),
    notCode: re(vocabulary.notCodeField),
    totp: re(vocabulary.totpContext),
    call: re(vocabulary.callContext),
    sms: re(vocabulary.smsContext),
    email: re(vocabulary.emailContext),
    verify: re(vocabulary.verifyContext),
    mfa: vocabulary.mfaOptions.map(([type, source]) => [type as MfaType, re(source)] as const),
    notAChoice: re(vocabulary.notAChoice),
    sso: re(vocabulary.ssoText),
    notIdp: re(vocabulary.notAnIdentityProvider),
    signInOption: re(vocabulary.signInOption),
    maskedPhone: re(vocabulary.maskedPhone),
    shownEmail: re(vocabulary.shownEmail),
    notAnError: re(vocabulary.notAnError),
  };
  const providers = vocabulary.providers.map((p) => ({ key: p.key, name: re(p.name), href: re(p.href) }));

  const { collapse, trimEdges, slug, lines, textOfIds, proseOf, controlText, radioLines } = parts.pageText(doc);
  const { isShown, usable } = parts.pageVisibility(doc, view);
  const { cssSelector, xpathSelector } = parts.pageSelectors(doc, css, collapse);

  // ---- page-level signals -----------------------------------------------------------
  const CLICKABLE = 'button, a[href], [role="button"], [role="link"], input[type="submit"], input[type="button"], input[type="image"]';
  const clickables = [...doc.querySelectorAll(CLICKABLE)].filter(usable);
  const said = new Map(clickables.map((element) => [element, trimEdges(controlText(element))]));
  const saying = (element: PageElement) => said.get(element) ?? trimEdges(controlText(element));
  const pageProse = `${doc.title} ${proseOf(doc.body)}`;

  const loggedInHints =
    [...clickables, ...doc.querySelectorAll('[role="menuitem"]')].some((element) => isShown(element) && words.logout.test(saying(element))) ||
    [...doc.querySelectorAll('a[href], form[action]')].some((element) =>
      words.logoutHref.test(element.getAttribute('href') ?? element.getAttribute('action') ?? ''),
    ) ||
    clickables.some((element) => words.accountMenu.test(collapse(element.getAttribute('aria-label'))));

  // ---- fields -----------------------------------------------------------------------
  const NOT_FILLABLE = ['hidden', 'submit', 'button', 'reset', 'image', 'checkbox', 'radio', 'file', 'range', 'color', 'search', 'date', 'datetime-local', 'month', 'week', 'time'];
  const fillable = (input: PageElement) => !NOT_FILLABLE.includes(input.type ?? '') && !input.readOnly && usable(input);

  function fieldLabel(input: PageElement): string {
    for (const label of input.labels ?? []) {
      const text = trimEdges(proseOf(label));
      if (text) return text;
    }
    return (
      trimEdges(input.getAttribute('aria-label')) ||
      trimEdges(textOfIds(input.getAttribute('aria-labelledby'))) ||
      trimEdges(input.placeholder) ||
      trimEdges(input.getAttribute('title')) ||
      (input.name || input.id || input.type || 'field').replace(/[_\-.[\]]+/g, ' ').trim()
    );
  }
  /** Where a field sits: climb from its form to the nearest block with a heading, which is what a person reads with it. */
  function contextRoot(input: PageElement): PageElement {
    let node = input.form ?? input.parentElement;
    while (node && node !== doc.body && !node.querySelector('h1, h2, h3, h4, [role="heading"], legend')) node = node.parentElement;
    return node ?? doc.body;
  }
  function isSearchBox(input: PageElement, label: string): boolean {
    if (input.closest('[role="search"], form[action*="search" i]')) return true;
    return [input.name, input.id, label, input.placeholder].some((hint) => hint && words.search.test(collapse(hint)));
  }
  function isCodeInput(input: PageElement, label: string): boolean {
    const autocomplete = input.getAttribute('autocomplete') ?? '';
    if (/one-time-code/i.test(autocomplete)) return true;
    // An address or phone box is an identifier even when its label says "…to verify".
    if (input.type === 'email' || input.type === 'tel' || /username|email|tel/i.test(autocomplete)) return false;
    const hints = [input.name, input.id, label, input.placeholder].join(' ');
    if (words.notCode.test(hints)) return false;
    if (words.code.test(hints)) return true;
    // A bare numeric box sized for a 6-8 digit code, with no identifier-like name.
    const numeric = input.inputMode === 'numeric' || input.type === 'number' || /\\d|\[0-9\]/.test(input.pattern ?? '');
    const size = input.maxLength ?? -1;
    return numeric && size >= 6 && size <= 8 && !words.identifier.test(hints);
  }
  function codeChannel(prose: string): MfaType | null {
    if (words.call.test(prose)) return 'call';
    if (words.sms.test(prose) || words.maskedPhone.test(prose)) return 'sms';
    if (words.email.test(prose) || words.shownEmail.test(prose)) return 'email';
    return null;
  }
  function fieldKind(input: PageElement, label: string, prose: string): { type: DiscoveredFieldType; linked?: MfaType | null } {
    if (input.type === 'password') return { type: 'password' };
    if (isCodeInput(input, label)) return words.totp.test(prose) ? { type: 'totp', linked: 'totp' } : { type: 'code', linked: codeChannel(prose) };
    const autocomplete = (input.getAttribute('autocomplete') ?? '').toLowerCase().split(/\s+/);
    if (input.type === 'email' || autocomplete.includes('email')) return { type: 'email' };
    if (input.type === 'tel' || autocomplete.some((token) => token.startsWith('tel'))) return { type: 'tel' };
    if (input.type === 'number') return { type: 'number' };
    if (input.type === 'url' || autocomplete.includes('url')) return { type: 'url' };
    return { type: 'text' };
  }
  /** A form (or block) is a login context when it holds a password input (even a hidden one), a sign-in verb button, or says so. */
  function isLoginContext(input: PageElement, root: PageElement): boolean {
    const scope = input.form ?? root;
    if (scope.querySelector('input[type="password"]')) return true;
    return clickables.some((button) => scope.contains(button) && words.submit.test(saying(button))) || words.loginContext.test(proseOf(root));
  }

  interface Draft { input: PageElement; field: DiscoveredField; scope: PageElement; secret: boolean }
  const drafts: Draft[] = [];
  for (const input of doc.querySelectorAll('input')) {
    if (!fillable(input)) continue;
    const label = fieldLabel(input);
    if (isSearchBox(input, label)) continue;
    const root = contextRoot(input);
    const kind = fieldKind(input, label, proseOf(root));
    const secret = kind.type === 'password' || kind.type === 'code' || kind.type === 'totp';
    if (!secret && !isLoginContext(input, root)) continue;
    const field: DiscoveredField = { label, name: input.name || input.id || slug(label), selector: cssSelector(input), type: kind.type };
    const hint = textOfIds(input.getAttribute('aria-describedby'));
    if (hint) field.hint = hint;
    if (kind.linked !== undefined) field.linked_mfa_type = kind.linked;
    if (input.placeholder) field.placeholder = collapse(input.placeholder);
    if (input.required || input.getAttribute('aria-required') === 'true') field.required = true;
    drafts.push({ input, field, scope: input.form ?? doc.body, secret });
  }
  // One step at a time: the form holding the first password or code (else the first login form).
  // A second login box on the page (a header quick-login) would only confuse the person filling in.
  const stepScope = (drafts.find((d) => d.secret) ?? drafts[0])?.scope;
  const inStep = drafts.filter((d) => d.scope === stepScope);
  // On a logged-in page an identifier-like box (invite by e-mail) is not a login step, unless it
  // sits with a password or code (a re-authentication prompt).
  const kept = loggedInHints && !inStep.some((d) => d.secret) ? [] : inStep;
  const usedNames = new Map<string, number>();
  const fields = kept.map(({ field }) => {
    const seen = (usedNames.get(field.name) ?? 0) + 1;
    usedNames.set(field.name, seen);
    return seen > 1 ? { ...field, name: `${field.name}-${seen}` } : field;
  });

  // ---- SSO buttons ------------------------------------------------------------------
  const used = new Set<PageElement>();
  function providerOfHref(element: PageElement): string | null {
    const target = element.getAttribute('href') ?? (element.type === 'submit' ? element.form?.getAttribute('action') : null);
    if (!target) return null;
    try {
      const url = new URL(target, location.href);
      return providers.find((p) => p.href.test(`${url.host}${url.pathname}`))?.key ?? null;
    } catch {
      return null;
    }
  }
  const providerOfName = (name: string) => providers.find((p) => p.name.test(name))?.key ?? null;
  const ssoButtons: PageSsoButton[] = [];
  for (const element of clickables) {
    const label = saying(element);
    const named = words.sso.exec(label)?.[1];
    if (named && words.notIdp.test(named)) continue;
    const provider =
      providerOfHref(element) ??
      (named ? (providerOfName(named) ?? slug(named)) : null) ??
      // A button that only names a provider ("Google") counts on a login page, not on a shop's "Apple" filter.
      (element.tagName !== 'A' && (kept.length > 0 || words.loginContext.test(pageProse)) ? providerOfName(label) : null);
    if (!provider || !label) continue;
    used.add(element);
    ssoButtons.push({ label, provider, selector: xpathSelector(element) });
  }

  // ---- submit control ---------------------------------------------------------------
  const isOtherChoice = (element: PageElement) => used.has(element);
  function submitOfForm(form: PageElement): PageElement | null {
    const submits = [...doc.querySelectorAll('button, input[type="submit"], input[type="image"]')].filter(
      (b) => b.form === form && b.type !== 'button' && b.type !== 'reset' && usable(b) && !isOtherChoice(b),
    );
    return submits.find((b) => words.submit.test(saying(b))) ?? submits[0] ?? null;
  }
  function submitByText(scope: PageElement): PageElement | null {
    return clickables.find((b) => scope.contains(b) && !isOtherChoice(b) && words.submit.test(saying(b))) ?? null;
  }
  const stepForm = kept.map((d) => d.input.form).find((form) => form) ?? null;
  /** The block a person reads with the step's fields; the whole page when there are none. */
  const area = kept[0] ? contextRoot(kept[0].input) : doc.body;
  const fieldSubmit =
    kept.length === 0 ? null : ((stepForm ? submitOfForm(stepForm) : null) ?? submitByText(area) ?? submitByText(doc.body));
  if (fieldSubmit) used.add(fieldSubmit);

  // ---- MFA choices ------------------------------------------------------------------
  const OPTION = `${CLICKABLE}, [role="radio"], [role="option"], [role="menuitem"], [role="menuitemradio"], input[type="radio"]`;
  function choiceTarget(element: PageElement): PageElement | null {
    if (usable(element)) return element;
    // A styled radio hides the input itself; the person clicks its label.
    const label = element.type === 'radio' ? [...(element.labels ?? [])].find(usable) : undefined;
    return label ?? null;
  }
  const optionElements = [...doc.querySelectorAll(OPTION)].filter((e) => !used.has(e) && choiceTarget(e));
  const optionSet = new Set(optionElements);
  const insideAnother = (element: PageElement) => {
    for (let node = element.parentElement; node; node = node.parentElement) if (optionSet.has(node)) return true;
    return false;
  };
  const outermost = optionElements.filter((e) => !insideAnother(e));
  const hasPasswordField = fields.some((f) => f.type === 'password');
  const rawOptions: PageMfaOption[] = [];
  const optionSources = new Set<PageElement>();
  for (const element of outermost) {
    const isRadio = element.tagName === 'INPUT';
    const text = isRadio ? radioLines(element).join(' ') : saying(element);
    if (!text || text.length > 200 || words.notAChoice.test(text)) continue;
    const type = words.mfa.find(([, pattern]) => pattern.test(text))?.[0];
    if (!type || (type === 'password' && hasPasswordField)) continue;
    // Tiles often put the method on one line and the details under it: label, then description.
    const parts = isRadio ? radioLines(element) : lines(element.innerText);
    const target = words.maskedPhone.exec(text)?.[0] ?? words.shownEmail.exec(text)?.[0] ?? null;
    const clickable = choiceTarget(element) ?? element;
    rawOptions.push({
      label: parts[0] ?? text,
      type,
      description: parts.slice(1).join(' ') || null,
      target: target ? collapse(target) : null,
      selector: cssSelector(clickable),
    });
    optionSources.add(element);
  }
  const realChoices = rawOptions.filter((o) => o.type !== 'switch' && o.type !== 'password');
  const asksHow = words.verify.test(pageProse) || realChoices.length >= 2;
  const mfaOptions = asksHow && (!loggedInHints || fields.length > 0) ? rawOptions.filter((o) => o.type !== 'password' || realChoices.length > 0) : [];
  if (mfaOptions.length > 0) for (const element of optionSources) used.add(element);
  // A choice page (radios, then "Continue") has no fields but still a submit control.
  const submit = fieldSubmit ?? (mfaOptions.length > 0 ? submitByText(doc.body) : null);
  if (submit) used.add(submit);

  // ---- other ways to sign in --------------------------------------------------------
  const signInOptions: PageSignInOption[] = [];
  for (const element of clickables) {
    const text = saying(element);
    if (used.has(element) || text.length > 100 || !words.signInOption.test(text) || words.notAChoice.test(text)) continue;
    const parts = lines(element.innerText);
    const label = trimEdges(parts[0] ?? text) || text;
    const base = slug(label);
    let id = base;
    for (let n = 2; signInOptions.some((o) => o.id === id); n++) id = `${base}-${n}`;
    signInOptions.push({ id, label, description: parts.slice(1).join(' ') || null, selector: cssSelector(element) });
  }

  // ---- error shown by the site ------------------------------------------------------
  const markerSelector = vocabulary.errorMarkers.map((m) => `[class*="${m}" i], [id*="${m}" i]`).join(', ');
  const errorElements = [...doc.querySelectorAll(`[role="alert"], [aria-live="assertive"], [aria-live="polite"], ${markerSelector}`)].filter(
    (element) =>
      isShown(element) &&
      !element.querySelector('input, select, textarea, form') &&
      !words.notAnError.test(`${element.id} ${element.getAttribute('class') ?? ''}`) &&
      // Live regions speak for the whole page; a class that merely says "error" must sit with the form.
      (element.matches('[role="alert"], [aria-live]') || area.contains(element)),
  );
  const errorTexts: string[] = [];
  const errorRoots: PageElement[] = [];
  for (const element of errorElements) {
    if (errorRoots.some((root) => root.contains(element))) continue;
    const text = proseOf(element);
    if (!text || text.length > 500) continue;
    errorRoots.push(element);
    if (!errorTexts.includes(text)) errorTexts.push(text);
  }

  // ---- verdict ----------------------------------------------------------------------
  const hasSecretField = fields.some((f) => f.type === 'password' || f.type === 'code' || f.type === 'totp');
  const identifierStep = fields.length > 0 && (submit !== null || kept.some((d) => d.input.form)) && !loggedInHints;
  const isLoginStep = hasSecretField || identifierStep || mfaOptions.length > 0 || (ssoButtons.length > 0 && !loggedInHints);
  const signInLink = isLoginStep || loggedInHints ? undefined : clickables.find((element) => words.signInLink.test(saying(element)));

  return {
    url: location.href,
    title: collapse(doc.title),
    fields,
    submitSelector: submit ? cssSelector(submit) : null,
    mfaOptions,
    ssoButtons: loggedInHints ? [] : ssoButtons,
    signInOptions: isLoginStep ? signInOptions : [],
    errorText: errorTexts.length > 0 ? errorTexts.join(' ') : null,
    signInLinkSelector: signInLink ? cssSelector(signInLink) : null,
    loggedInHints,
    isLoginStep,
  };
}

/**
 * The script page.evaluate runs: the reader called with the vocabulary and its parts, all
 * as source text (a function's own text is what Playwright would send for it too).
 */
const READER_SOURCE = `(vocabulary) => (${readLoginPageInPage.toString()})(vocabulary, {
  pageText: ${pageText.toString()},
  pageVisibility: ${pageVisibility.toString()},
  pageSelectors: ${pageSelectors.toString()},
})`;

/** An expression that reads the page with this vocabulary (plain data, so JSON carries it). */
export const readLoginPageScript = (vocabulary: PageVocabulary): string => `(${READER_SOURCE})(${JSON.stringify(vocabulary)})`;
