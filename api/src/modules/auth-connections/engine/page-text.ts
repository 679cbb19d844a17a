import type { PageDocument, PageElement } from './page-dom.js';

/*
 * Parts of the in-page login reader (page-script.ts). Each function here is sent to the
 * page as source text and called there, so it must be self-contained: it may use only
 * its parameters and what it nests, nothing from the module scope at run time (types are
 * fine, they vanish). page-script.ts joins them into one script.
 */

/** Text as a person reads it: collapsed whitespace, labels, prose around a control. */
export function pageText(doc: PageDocument) {
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
  return { collapse, trimEdges, slug, lines, textOfIds, proseOf, controlText, radioLines };
}

export type PageText = ReturnType<typeof pageText>;
