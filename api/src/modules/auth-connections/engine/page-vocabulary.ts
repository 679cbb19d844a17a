/**
 * The words the in-page reader looks for, kept apart from the DOM walk so the wording
 * can grow (or be translated) without touching the walk. Every entry is a regular
 * expression *source* matched case-insensitively: plain strings survive Playwright's
 * argument serialisation into the page, RegExp objects would need a custom encoding.
 * Texts are whitespace-collapsed before matching.
 */

export interface ProviderWords {
  /** Lower-case key reported as PageSsoButton.provider. */
  key: string;
  /** Matches the "X" of "Sign in with X" or a button that only names the provider. */
  name: string;
  /** Matches `host + pathname` of a link that goes to this identity provider. */
  href: string;
}

export interface PageVocabulary {
  /** Text of a control that submits a login step. */
  submitText: string;
  /** Text of a link or button that leads to the login page. */
  signInLinkText: string;
  /** Text of a control that ends a session: the page is a logged-in page. */
  logoutText: string;
  /** href/action of a logout control, even one hidden inside a closed account menu. */
  logoutHref: string;
  /** aria-label of an account menu button, shown only to a signed-in person. */
  accountMenuLabel: string;
  /** Prose around a form that says it is a login step. */
  loginContext: string;
  /** name/id/placeholder/label of a site search box. */
  searchField: string;
  /** name/id/autocomplete/label of an identifier input. */
  identifierField: string;
  /** name/id/label/placeholder of a one-time-code input... */
  codeField: string;
  /** ...unless it is one of these other codes. */
  notCodeField: string;
  /** Prose that makes a code input an authenticator (TOTP) code. */
  totpContext: string;
  /** Prose that says where a one-time code was sent. */
  callContext: string;
  smsContext: string;
  emailContext: string;
  /** Prose of a page that asks how the person wants to verify. */
  verifyContext: string;
  /** MFA option types in the order they are tried; the first match wins. */
  mfaOptions: Array<[type: string, source: string]>;
  /** Controls that are never a login choice (recovery, sign-up, legal links). */
  notAChoice: string;
  /** "Sign in with X"; group 1 is X. */
  ssoText: string;
  /** Values of X that are another way to sign in on the same site, not an identity provider. */
  notAnIdentityProvider: string;
  providers: ProviderWords[];
  /** Other ways to sign in on the same site. */
  signInOption: string;
  maskedPhone: string;
  /** An e-mail address, masked or not, shown as where a code goes. */
  shownEmail: string;
  /** Substrings of the class or id of an element that shows an error. */
  errorMarkers: string[];
  /** class/id of banners that look like alerts but are not about the login. */
  notAnError: string;
}

const LOGIN_VERB = 'sign[ -]?in|log[ -]?in|login|sign[ -]?on|log[ -]?on';

export const PAGE_VOCABULARY: PageVocabulary = {
  submitText: `^(?:${LOGIN_VERB}|next|continue|verify|submit|confirm|send(?: code)?|sign in to .{1,40}|log in to .{1,40})$`,
  signInLinkText: `^(?:${LOGIN_VERB}|sign[ -]?in / register|log[ -]?in / sign[ -]?up|my account)$`,
  logoutText: '^(?:sign[ -]?out|log[ -]?out|logout|signout|sign[ -]?off|log[ -]?off)$',
  logoutHref: 'log[_-]?out|sign[_-]?out|sign[_-]?off|log[_-]?off|end[_-]?session',
  accountMenuLabel: '(?:open|view|toggle) (?:the )?(?:user|account|profile) (?:menu|navigation)|^account menu$|^user menu$|^profile menu$',
  loginContext: `${LOGIN_VERB}|verif|authenticat|password|passcode|one-time|2-step|two-step|two-factor|security code|identity`,
  searchField: '^(?:q|s|query|search.*|.* search|keywords?|find)$|^search\\b',
  identifierField: 'user|login|e-?mail|account|identifier|phone|mobile|member|customer|handle|^id$',
  codeField: 'otp|otc|one.?time|verif|2fa|mfa|two.?factor|2.?step|totp|passcode|code|token|(?:^|[^a-z])pin(?:[^a-z]|$)',
  notCodeField: 'zip|postal|post.?code|country|promo|coupon|discount|voucher|gift|referral|area.?code|invite|captcha',
  totpContext:
    'authenticator|authentication app|auth app|totp|okta verify|duo mobile|code generator|verification app|security app|two-factor app|2fa app',
  callContext: "\\bcall(?:ed|ing)?\\b|voice message|phone call|we'll call",
  smsContext: '\\bsms\\b|text message|\\btext(?:ed)?\\b|sent to (?:your|the) (?:phone|mobile|number)|phone number ending',
  emailContext: '\\be-?mail\\b|\\binbox\\b',
  verifyContext:
    'verif|2-step|two-step|two-factor|multi-factor|2fa|\\bmfa\\b|how (?:do|would) you (?:like|want) to|choose (?:a|another|how)|another way|security (?:check|code)|confirm (?:it.?s|your identity)',
  mfaOptions: [
    [
      'switch',
      "try another (?:way|method)|(?:another|different) (?:way|method|option)|other (?:ways|options|methods)|more (?:ways|options)|can.?t use|don.?t have (?:access|your|any)|choose another|something else|lost (?:your |my )?(?:phone|device)",
    ],
    ['push', '\\bpush\\b|notification|approve|tap yes|prompt on'],
    ['totp', '^use a (?:verification )?code$|authenticator|authentication app|auth app|totp|code generator|verification app|okta verify|duo mobile'],
    ['call', '\\bcall\\b|voice|phone call'],
    ['sms', '\\bsms\\b|\\btext\\b|text message'],
    ['email', '\\be-?mail\\b'],
    ['password', '\\bpassword\\b'],
  ],
  notAChoice: '\\bshow\\b|\\bhide\\b|forgot|reset|recover|sign[ -]?up|create|register|help|privacy|terms|cancel|back to|learn more|resend|remember',
  ssoText: `^(?:${LOGIN_VERB}|continue|sign[ -]?up|connect|authenticate)\\s+(?:with|using|via|through)\\s+(.+)$`,
  notAnIdentityProvider:
    '^(?:an? |your |my )?(?:passkey|security key|e-?mail|phone|password|(?:one-time |single-use )?code|magic link|link|sso|single sign-on|qr code|username|face id|touch id|fingerprint|biometrics|windows hello)\\b',
  providers: [
    { key: 'google', name: '^google(?: account)?$', href: '^accounts\\.google\\.com/' },
    {
      key: 'microsoft',
      name: '^(?:microsoft|microsoft account|office 365|azure(?: ad)?|entra(?: id)?|outlook)$',
      href: '^(?:login\\.microsoftonline\\.com|login\\.live\\.com)/',
    },
    { key: 'github', name: '^github$', href: '^github\\.com/login' },
    { key: 'okta', name: '^okta$', href: '^[a-z0-9-]+\\.okta(?:preview)?\\.com/' },
    { key: 'apple', name: '^apple(?: id)?$', href: '^appleid\\.apple\\.com/' },
    { key: 'auth0', name: '^auth0$', href: '^[a-z0-9-.]+\\.auth0\\.com/' },
    // Only the OAuth/login paths: a plain facebook.com or linkedin.com link is a footer "follow us".
    { key: 'facebook', name: '^facebook$', href: '^(?:www\\.|m\\.)?facebook\\.com/(?:v[\\d.]+/)?(?:dialog/oauth|login)' },
    { key: 'linkedin', name: '^linkedin$', href: '^(?:www\\.)?linkedin\\.com/(?:oauth|uas/login|login)' },
    { key: 'cognito', name: '^(?:amazon )?cognito$', href: '^[a-z0-9-.]+\\.amazoncognito\\.com/' },
    { key: 'onelogin', name: '^onelogin$', href: '^[a-z0-9-]+\\.onelogin\\.com/' },
    { key: 'ping', name: '^ping(?: ?identity| ?federate| ?one)?$', href: '^[a-z0-9-.]+\\.(?:pingidentity|pingone)\\.com/' },
  ],
  signInOption:
    'passkey|security key|face id|touch id|windows hello|biometric|fingerprint|magic link|(?:sign[ -]?in|login|log[ -]?in) link|(?:e-?mail|send|text) me (?:a |an )?(?:sign[ -]?in |login |magic |one-time )?(?:link|code)|' +
    '(?:sign|log)[ -]?in with (?:a |an |your )?(?:one-time )?(?:code|e-?mail|phone|password|sso|single sign-on)|use (?:a |an )?(?:one-time |single-use )?code|' +
    'use (?:your )?password|continue with (?:e-?mail|phone)|single sign-on|\\bsso\\b|use (?:your )?(?:phone|e-?mail)(?: number| address)?(?: instead)?|qr code',
  maskedPhone: '(?<![a-z])(?:\\+[\\dx*•]{1,3}[ .-]?)?(?:\\(?[•*●·∙x]{2,}\\)?[ .-]?)+[•*●·∙x]*\\d{2,4}\\b',
  shownEmail: '[^\\s@:,;()<>]+@[^\\s@:,;()<>]+\\.[a-z]{2,}',
  errorMarkers: ['error', 'alert', 'invalid-feedback'],
  notAnError: 'cookie|consent|gdpr|newsletter|promo',
};
