import type { PageDocument, PageElement, PageGlobals } from './page-dom.js';

/*
 * Parts of the in-page login reader (page-script.ts). Each function here is sent to the
 * page as source text and called there, so it must be self-contained: it may use only
 * its parameters and what it nests, nothing from the module scope at run time (types are
 * fine, they vanish). page-script.ts joins them into one script.
 */

/** What a person can see and use. */
export function pageVisibility(doc: PageDocument, view: Pick<PageGlobals, 'scrollX' | 'scrollY'>) {
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
  return { isShown, isEnabled, usable };
}

/** Selectors that find one element again: CSS for fields and controls, XPath for SSO buttons. */
export function pageSelectors(doc: PageDocument, css: PageGlobals['CSS'], collapse: (text: string | null | undefined) => string) {
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
  return { cssSelector, xpathSelector };
}

export type PageVisibility = ReturnType<typeof pageVisibility>;
export type PageSelectors = ReturnType<typeof pageSelectors>;
