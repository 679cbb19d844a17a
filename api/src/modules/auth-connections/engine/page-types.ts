/**
 * What the login-flow engine reads from a page, in the contract's own vocabulary where
 * one exists (CONTRACT.md §5 nested types), plus the selectors the engine needs to act.
 * Produced by `readLoginPage` (page-model.ts); consumed by the flow engine.
 */

export type DiscoveredFieldType = 'text' | 'email' | 'password' | 'tel' | 'number' | 'url' | 'code' | 'totp';
export type MfaType = 'sms' | 'call' | 'email' | 'totp' | 'push' | 'password' | 'switch';

/** An input a person would fill; `selector` is a CSS selector unique on the page. */
export interface DiscoveredField {
  label: string;
  name: string;
  selector: string;
  /** `code` for a one-time code sent by SMS/e-mail/call; `totp` for an authenticator app's code. */
  type: DiscoveredFieldType;
  hint?: string;
  linked_mfa_type?: MfaType | null;
  placeholder?: string;
  required?: boolean;
}

/** A way to receive the second factor, offered as a button, link or radio. */
export interface PageMfaOption {
  label: string;
  type: MfaType;
  description: string | null;
  /** Masked phone number or address shown next to it, e.g. "•••• 1234". */
  target: string | null;
  /** CSS selector of the element to click (or check) to choose it. */
  selector: string;
}

/** A "Sign in with …" button or link that leaves for an identity provider. */
export interface PageSsoButton {
  label: string;
  /** Lower-case provider key: google, microsoft, github, okta, apple, … or the label's slug. */
  provider: string;
  /** XPath (the contract's PendingSSOButton.selector is XPath). */
  selector: string;
}

/** Another way to sign in on the same site (e.g. "Use a passkey", "Email me a link"). */
export interface PageSignInOption {
  id: string;
  label: string;
  description: string | null;
  selector: string;
}

export interface LoginPageReading {
  url: string;
  title: string;
  /** Fillable, visible inputs that belong to a login step, in document order. */
  fields: DiscoveredField[];
  /** The button that submits the step's form, or null (then Enter in the last field). */
  submitSelector: string | null;
  mfaOptions: PageMfaOption[];
  ssoButtons: PageSsoButton[];
  signInOptions: PageSignInOption[];
  /** Text of a visible error the site shows about the last attempt, or null. */
  errorText: string | null;
  /** On a page with no login step: a "Sign in" / "Log in" link or button to follow, or null. */
  signInLinkSelector: string | null;
  /** Whether the page looks like a logged-in page (a "Sign out"/"Log out" control, account menu). */
  loggedInHints: boolean;
  /** True when the page asks for a login step: fields, MFA choices or SSO buttons shown. */
  isLoginStep: boolean;
}
