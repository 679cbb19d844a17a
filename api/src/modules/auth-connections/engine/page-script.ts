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
import type { PageVocabulary } from './page-vocabulary.js';

/**
 * Reads a login page the way a person would, inside the page. Playwright sends this
 * function to the page as source text, so it must be self-contained: every helper is
 * nested here and nothing from the module scope may be referenced at run time (types
 * are fine, they vanish). That is why this one function is longer than our usual limit;
 * it is split into sections (text, visibility, selectors, then one section per part of
 * the reading). The wording it matches comes in as `vocabulary` (page-vocabulary.ts).
 */
export function readLoginPageInPage(vocabulary: PageVocabulary): LoginPageReading {
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

  // ---- text -------------------------------------------------------------------------
  const collapse = (text: string | null | undefined) => (text ?? '').replace(/\s+/g, ' ').trim();
  /** Drops arrows, icons and required-markers around a label ("Sign in →", "Password *"). */
  const trimEdges = (text: string | null | undefined) =>
    collapse(text).replace(/^[^\p{L}\p{N}(+]+|[^\p{L}\p{N})?.]+$/gu, '');
  const slug = (text: string) =>
    text
      .toLowerCase()
      .normalize('NFKD')
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '') || 'option';
  const lines = (text: string) => text.split('\n').map(collapse).filter(Boolean);
  const textOfIds = (ids: string | null) =>
    collapse(
      (ids ?? '')
        .split(/\s+/)
        .map((id) => (id ? doc.getElementById(id)?.textContent : ''))
        .join(' '),
    );
  const NOT_PROSE = 'a, button, [role="button"], [role="link"], script, style, noscript, template, select, textarea';
  const proseCache = new Map<PageElement, string>();
  /** Visible text under `root`, leaving out links and buttons: those are alternatives, not what the page says. */
  function proseOf(root: PageElement): string {
    const cached = proseCache.get(root);
    if (cached !== undefined) return cached;
    const parts: string[] = [];
    let length = 0;
    const walk = (node: PageElement) => {
      for (const child of node.childNodes) {
        if (length > 6000) return;
        if (child.nodeType === 3) {
          const text = collapse(child.textContent);
          parts.push(text);
          length += text.length;
        } else if (child.nodeType === 1) {
          const element = child as PageElement;
          if (element.matches(NOT_PROSE) || element.getAttribute('aria-hidden') === 'true') continue;
          if (!element.checkVisibility({ visibilityProperty: true, opacityProperty: true })) continue;
          walk(element);
        }
      }
    };
    walk(root);
    const prose = collapse(parts.join(' '));
    proseCache.set(root, prose);
    return prose;
  }
  /** What a control says: its accessible name as a person would read it. */
  function controlText(element: PageElement): string {
    const name = collapse(element.getAttribute('aria-label')) || textOfIds(element.getAttribute('aria-labelledby'));
    if (name) return name;
    if (element.tagName === 'INPUT') {
      if (element.type === 'radio' || element.type === 'checkbox') return radioLines(element).join(' ');
      return collapse(element.value || element.getAttribute('alt'));
    }
    const text = collapse(element.innerText);
    if (text) return text;
    const image = element.querySelector('img[alt], [aria-label], [title]');
    return collapse(element.getAttribute('title') || image?.getAttribute('alt') || image?.getAttribute('aria-label') || image?.getAttribute('title'));
  }
  function radioLines(radio: PageElement): string[] {
    for (const label of radio.labels ?? []) {
      const found = lines(label.innerText);
      if (found.length > 0) return found;
    }
    return lines(collapse(radio.getAttribute('aria-label')));
  }

  // ---- visibility -------------------------------------------------------------------
  /** Shown to a person: rendered, not transparent, not a 1px trick, not parked off-screen (honeypots). */
  const shownCache = new Map<PageElement, boolean>();
  function isShown(element: PageElement): boolean {
    const cached = shownCache.get(element);
    if (cached !== undefined) return cached;
    const shown = measureShown(element);
    shownCache.set(element, shown);
    return shown;
  }
  function measureShown(element: PageElement): boolean {
    if (element.closest('[aria-hidden="true"], [inert]')) return false;
    if (!element.checkVisibility({ opacityProperty: true, visibilityProperty: true, contentVisibilityAuto: true })) return false;
    const rect = element.getBoundingClientRect();
    if (rect.width < 2 || rect.height < 2) return false;
    const left = rect.left + view.scrollX;
    const top = rect.top + view.scrollY;
    return left + rect.width > 0 && top + rect.height > 0 && left < doc.documentElement.scrollWidth;
  }
  const isEnabled = (element: PageElement) =>
    !element.disabled && element.getAttribute('aria-disabled') !== 'true' && !element.closest('fieldset[disabled]');
  const usable = (element: PageElement) => isEnabled(element) && isShown(element);

  // ---- selectors --------------------------------------------------------------------
  function uniqueCss(selector: string, element: PageElement): boolean {
    try {
      const found = [...doc.querySelectorAll(selector)];
      return found.length === 1 && found[0] === element;
    } catch {
      return false;
    }
  }
  const cssString = (value: string) => `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\a ')}"`;
  /** Prefer #id, then tag[attribute=…], then a child-by-child path; each checked to match only `element`. */
  function cssSelector(element: PageElement): string {
    const tag = element.tagName.toLowerCase();
    if (element.id && uniqueCss(`#${css.escape(element.id)}`, element)) return `#${css.escape(element.id)}`;
    for (const attribute of ['name', 'data-testid', 'aria-label', ...(tag === 'a' ? ['href'] : [])]) {
      const value = element.getAttribute(attribute);
      const selector = value ? `${tag}[${attribute}=${cssString(value)}]` : '';
      if (selector && uniqueCss(selector, element)) return selector;
    }
    const name = element.getAttribute('name');
    const value = element.getAttribute('value');
    if (name && value && (tag === 'input' || tag === 'button')) {
      // Radios and choice buttons share a name and differ by value.
      const selector = `${tag}[name=${cssString(name)}][value=${cssString(value)}]`;
      if (uniqueCss(selector, element)) return selector;
    }
    const steps: string[] = [];
    for (let node: PageElement | null = element; node; node = node.parentElement) {
      if (node !== element && node.id && uniqueCss(`#${css.escape(node.id)}`, node)) {
        steps.unshift(`#${css.escape(node.id)}`);
        break;
      }
      const nodeTag = node.tagName.toLowerCase();
      const siblings = node.parentElement ? [...node.parentElement.children].filter((c) => c.tagName === node?.tagName) : [];
      steps.unshift(siblings.length > 1 ? `${nodeTag}:nth-of-type(${siblings.indexOf(node) + 1})` : nodeTag);
    }
    return steps.join(' > ');
  }
  const xpathString = (value: string) =>
    !value.includes('"') ? `"${value}"` : !value.includes("'") ? `'${value}'` : `concat("${value.split('"').join(`", '"', "`)}")`;
  function uniqueXPath(expression: string, element: PageElement): boolean {
    try {
      const found = doc.evaluate(expression, doc, null, 7 /* ORDERED_NODE_SNAPSHOT_TYPE */, null);
      return found.snapshotLength === 1 && found.snapshotItem(0) === element;
    } catch {
      return false;
    }
  }
  /** XPath for SSO buttons (the contract's PendingSSOButton.selector is XPath): id, text, href, then an absolute path. */
  function xpathSelector(element: PageElement): string {
    const tag = element.tagName.toLowerCase();
    const text = collapse(element.textContent);
    const attempts = [
      element.id ? `//*[@id=${xpathString(element.id)}]` : '',
      text && tag !== 'input' ? `//${tag}[normalize-space(.)=${xpathString(text)}]` : '',
      element.getAttribute('aria-label') ? `//${tag}[@aria-label=${xpathString(element.getAttribute('aria-label') ?? '')}]` : '',
      tag === 'input' && element.value ? `//input[@value=${xpathString(element.value)}]` : '',
      element.getAttribute('href') ? `//a[@href=${xpathString(element.getAttribute('href') ?? '')}]` : '',
    ];
    const found = attempts.find((attempt) => attempt && uniqueXPath(attempt, element));
    if (found) return found;
    const steps: string[] = [];
    for (let node: PageElement | null = element; node; node = node.parentElement) {
      const siblings = node.parentElement ? [...node.parentElement.children].filter((c) => c.tagName === node?.tagName) : [node];
      steps.unshift(`${node.tagName.toLowerCase()}[${siblings.indexOf(node) + 1}]`);
    }
    return `/${steps.join('/')}`;
  }

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
