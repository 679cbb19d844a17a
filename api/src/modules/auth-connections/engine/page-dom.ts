/**
 * The slice of the browser DOM the in-page reader (page-script.ts) touches. The project
 * compiles against Node's lib only; pulling in lib "dom" would make `document`, `window`
 * and friends look valid in every server file. Declaring just what the reader uses keeps
 * it type-checked without that leak.
 */

export interface PageRect {
  left: number;
  top: number;
  width: number;
  height: number;
}

export interface PageNode {
  /** 1 for elements, 3 for text. */
  nodeType: number;
  textContent: string | null;
  childNodes: Iterable<PageNode>;
}

export interface PageElement extends PageNode {
  tagName: string;
  id: string;
  innerText: string;
  parentElement: PageElement | null;
  children: Iterable<PageElement>;
  getAttribute(name: string): string | null;
  closest(selector: string): PageElement | null;
  matches(selector: string): boolean;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  contains(other: PageElement): boolean;
  checkVisibility(options: { opacityProperty?: boolean; visibilityProperty?: boolean; contentVisibilityAuto?: boolean }): boolean;
  getBoundingClientRect(): PageRect;
  // Form-control members: present on inputs and buttons, undefined elsewhere.
  type?: string;
  name?: string;
  value?: string;
  disabled?: boolean;
  readOnly?: boolean;
  required?: boolean;
  placeholder?: string;
  maxLength?: number;
  inputMode?: string;
  pattern?: string;
  form?: PageElement | null;
  labels?: Iterable<PageElement> | null;
}

export interface PageXPathSnapshot {
  snapshotLength: number;
  snapshotItem(index: number): PageElement | null;
}

export interface PageDocument {
  title: string;
  body: PageElement;
  documentElement: PageElement & { scrollWidth: number };
  getElementById(id: string): PageElement | null;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  evaluate(expression: string, context: PageDocument, resolver: null, type: number, result: null): PageXPathSnapshot;
}

export interface PageGlobals {
  document: PageDocument;
  location: { href: string };
  scrollX: number;
  scrollY: number;
  CSS: { escape(value: string): string };
}

