import { describe, expect, it } from 'vitest';
import { AppError } from '../../api/src/http/errors.js';
import type { DiscoveredField, LoginPageReading, PageMfaOption } from '../../api/src/modules/auth-connections/engine/page-types.js';
import {
  addRequirements,
  autoStep,
  GENERATED_TOTP,
  navigationAllowed,
  valuesToSave,
  viewOf,
  type Secrets,
} from '../../api/src/modules/auth-connections/engine/plan.js';
import { judgeReauth } from '../../api/src/modules/auth-connections/reauth.js';
import { canonicalSubmission } from '../../api/src/modules/auth-connections/submission.js';
import type { LoginRequirements } from '../../api/src/modules/auth-connections/store.js';
import type { FlowView } from '../../api/src/modules/auth-connections/view.js';

// Table tests of the pure parts of managed auth: what a page reading shows the user, what
// a credential fills unattended, what a login needed, where the flow may go, whether a
// re-auth can run unattended, and how a submission maps onto the current step.

const field = (name: string, type: DiscoveredField['type'], extra: Partial<DiscoveredField> = {}): DiscoveredField => ({
  label: name,
  name,
  selector: `#${name.replace(/\W/g, '')}`,
  type,
  ...extra,
});

const mfa = (type: PageMfaOption['type'], extra: Partial<PageMfaOption> = {}): PageMfaOption => ({
  label: `Send by ${type}`,
  type,
  description: null,
  target: null,
  selector: `#mfa-${type}`,
  ...extra,
});

const reading = (parts: Partial<LoginPageReading>): LoginPageReading => ({
  url: 'https://example.com/login',
  title: 'Sign in',
  fields: [],
  submitSelector: '#submit',
  mfaOptions: [],
  ssoButtons: [],
  signInOptions: [],
  errorText: null,
  signInLinkSelector: null,
  loggedInHints: false,
  isLoginStep: true,
  ...parts,
});

const shapeOf = (view: FlowView) => view.fields!.map((f) => [f.id, f.ref, f.type]);

describe('viewOf: the step a page reading shows', () => {
  it.each<[string, DiscoveredField[], Array<[string, string, string]>]>([
    ['username and password', [field('username', 'text'), field('password', 'password')], [['username', 'username', 'identifier'], ['password', 'password', 'password']]],
    ['an e-mail field under another name', [field('login_id', 'email')], [['login_id', 'email', 'identifier']]],
    ['a text field under an unknown name', [field('acct', 'text')], [['acct', 'username', 'identifier']]],
    ['a phone number', [field('Phone', 'tel')], [['phone', 'phone', 'identifier']]],
    ['a second text field', [field('email', 'email'), field('company', 'text')], [['email', 'email', 'identifier'], ['company', 'company', 'text']]],
    ['a number field before the identifier', [field('pin', 'number'), field('user', 'text')], [['pin', 'pin', 'text'], ['user', 'user', 'identifier']]],
    ['an authenticator code', [field('otp', 'totp')], [['otp', 'totp_code', 'totp_code']]],
    ['a code sent by SMS', [field('sms_code', 'code')], [['sms_code', 'code', 'code']]],
    ['two fields with one name', [field('code', 'code'), field('code', 'code')], [['code', 'code', 'code'], ['code_2', 'code', 'code']]],
    ['names that need slugging', [field('User Name!', 'text'), field('***', 'password')], [['user_name', 'username', 'identifier'], ['field', 'password', 'password']]],
  ])('maps %s', (_case, fields, expected) => {
    expect(shapeOf(viewOf(reading({ fields })))).toEqual(expected);
  });

  it('keeps labels, selectors and required, defaulting required to true', () => {
    const view = viewOf(reading({ fields: [field('username', 'text', { label: 'Your e-mail' }), field('remember', 'text', { required: false })] }));
    expect(view.fields).toEqual([
      { id: 'username', ref: 'username', type: 'identifier', label: 'Your e-mail', observed_selector: '#username', required: true },
      { id: 'remember', ref: 'remember', type: 'text', label: 'remember', observed_selector: '#remember', required: false },
    ]);
    expect(view.discovered_fields).toEqual([field('username', 'text', { label: 'Your e-mail' }), field('remember', 'text', { required: false })]);
  });

  it('offers MFA methods, SSO buttons and sign-in options as choices with distinct ids', () => {
    const view = viewOf(
      reading({
        mfaOptions: [mfa('sms', { target: '•••• 1234', description: 'Text me' }), mfa('sms', { description: 'Text my other phone' }), mfa('totp')],
        ssoButtons: [{ label: 'Sign in with Google', provider: 'google', selector: '//button[1]' }],
        signInOptions: [{ id: 'passkey', label: 'Use a passkey', description: null, selector: '#passkey' }],
      }),
    );
    expect(view.choices).toEqual([
      { id: 'mfa_sms', label: 'Send by sms', type: 'mfa_method', description: '•••• 1234', observed_selector: '#mfa-sms' },
      { id: 'mfa_sms_2', label: 'Send by sms', type: 'mfa_method', description: 'Text my other phone', observed_selector: '#mfa-sms' },
      { id: 'mfa_totp', label: 'Send by totp', type: 'mfa_method', description: null, observed_selector: '#mfa-totp' },
      { id: 'sso_google', label: 'Sign in with Google', type: 'sso_provider', description: null, observed_selector: '//button[1]' },
      { id: 'signin_passkey', label: 'Use a passkey', type: 'sign_in_method', description: null, observed_selector: '#passkey' },
    ]);
    // The legacy lists carry no CSS selectors (the SSO button's XPath is its contract field).
    expect(view.mfa_options).toEqual([
      { label: 'Send by sms', type: 'sms', description: 'Text me', target: '•••• 1234' },
      { label: 'Send by sms', type: 'sms', description: 'Text my other phone', target: null },
      { label: 'Send by totp', type: 'totp', description: null, target: null },
    ]);
    expect(view.pending_sso_buttons).toEqual([{ label: 'Sign in with Google', provider: 'google', selector: '//button[1]' }]);
    expect(view.sign_in_options).toEqual([{ id: 'passkey', label: 'Use a passkey', description: null }]);
    expect(view.fields).toEqual([]);
  });
});

describe('autoStep: what a credential fills with nobody watching', () => {
  const secrets = (values: Record<string, string>, extra: Partial<Secrets> = {}): Secrets => ({ values, totpSecret: null, ssoProvider: null, ...extra });
  const login = viewOf(reading({ fields: [field('email', 'email'), field('password', 'password')] }));
  const withTotp = viewOf(reading({ fields: [field('otp', 'totp')] }));
  const withSmsCode = viewOf(reading({ fields: [field('code', 'code')] }));
  const mfaChoice = viewOf(reading({ mfaOptions: [mfa('sms'), mfa('totp')] }));
  const ssoChoice = viewOf(reading({ ssoButtons: [{ label: 'Google', provider: 'google', selector: '//a' }] }));
  const ssoWithFields = viewOf(reading({ fields: [field('email', 'email')], ssoButtons: [{ label: 'Google', provider: 'google', selector: '//a' }] }));
  const extraText = viewOf(reading({ fields: [field('username', 'text'), field('company', 'text', { required: false }), field('password', 'password')] }));

  it.each<[string, FlowView, Secrets | undefined, string | null, ReturnType<typeof autoStep>]>([
    ['no credential', login, undefined, null, undefined],
    ['identifier and password', login, secrets({ email: 'a@example.com', password: 'pw' }), null, { values: { email: 'a@example.com', password: 'pw' } }],
    ['an identifier stored under another key', login, secrets({ username: 'alice', password: 'pw' }), null, { values: { email: 'alice', password: 'pw' } }],
    ['a missing password', login, secrets({ email: 'a@example.com' }), null, undefined],
    ['a missing optional field', extraText, secrets({ username: 'u', password: 'p' }), null, { values: { username: 'u', password: 'p' } }],
    ['an optional text field it holds', extraText, secrets({ username: 'u', password: 'p', company: 'acme' }), null, { values: { username: 'u', company: 'acme', password: 'p' } }],
    ['an authenticator code with a secret', withTotp, secrets({}, { totpSecret: 'S' }), null, { values: { otp: GENERATED_TOTP } }],
    ['an authenticator code without a secret', withTotp, secrets({ totp_code: '123456' }), null, undefined],
    ['a code sent by SMS', withSmsCode, secrets({ code: '123456' }), null, undefined],
    ['an MFA choice with a TOTP secret', mfaChoice, secrets({}, { totpSecret: 'S' }), null, { values: {}, choiceId: 'mfa_totp' }],
    ['an MFA choice without a TOTP secret', mfaChoice, secrets({ password: 'p' }), null, undefined],
    ['the credential’s SSO provider', ssoChoice, secrets({}, { ssoProvider: 'Google' }), null, { values: {}, choiceId: 'sso_google' }],
    ['the provider of the last login', ssoChoice, secrets({}), 'google', { values: {}, choiceId: 'sso_google' }],
    ['an SSO provider the page does not offer', ssoChoice, secrets({}, { ssoProvider: 'github' }), null, undefined],
    ['an SSO button beside fields it cannot fill', ssoWithFields, secrets({}, { ssoProvider: 'google' }), null, undefined],
    ['fields beside an SSO button it can fill', ssoWithFields, secrets({ email: 'e' }, { ssoProvider: 'google' }), null, { values: { email: 'e' } }],
  ])('%s', (_case, view, given, preferredSso, expected) => {
    expect(autoStep(view, given, preferredSso)).toEqual(expected);
  });
});

describe('addRequirements and valuesToSave: what a login needed and what to keep', () => {
  const view = viewOf(
    reading({
      fields: [field('user', 'text'), field('password', 'password'), field('otp', 'totp'), field('sms', 'code'), field('company', 'text')],
      mfaOptions: [mfa('sms'), mfa('sms')],
      ssoButtons: [{ label: 'Okta', provider: 'okta', selector: '//a' }],
    }),
  );

  it('adds each filled field type once and skips unfilled ones', () => {
    const needs: LoginRequirements = { fieldTypes: ['identifier'], mfaType: null, ssoProvider: null };
    addRequirements(needs, view, { values: { user: 'u', password: 'p', otp: GENERATED_TOTP } });
    expect(needs).toEqual({ fieldTypes: ['identifier', 'password', 'totp_code'], mfaType: null, ssoProvider: null });
  });

  it.each<[string, string, Partial<LoginRequirements>]>([
    ['an MFA method', 'mfa_sms', { mfaType: 'sms' }],
    ['the second of two MFA methods of a kind', 'mfa_sms_2', { mfaType: 'sms' }],
    ['an SSO provider', 'sso_okta', { ssoProvider: 'okta' }],
    ['a choice the step does not offer', 'mfa_push', {}],
  ])('records %s', (_case, choiceId, expected) => {
    const needs: LoginRequirements = { fieldTypes: [], mfaType: null, ssoProvider: null };
    addRequirements(needs, view, { values: {}, choiceId });
    expect(needs).toEqual({ fieldTypes: [], mfaType: null, ssoProvider: null, ...expected });
  });

  it('keeps identifiers, passwords and text under their refs, never one-time codes', () => {
    const saved = valuesToSave(view, { values: { user: 'alice', password: 'pw', otp: '123456', sms: '654321', company: 'acme' } });
    // 'user' is itself an identifier key, so the value keeps that name.
    expect(saved).toEqual({ user: 'alice', password: 'pw', company: 'acme' });
  });

  it('keeps nothing for a generated TOTP code or fields not sent', () => {
    expect(valuesToSave(view, { values: { otp: GENERATED_TOTP } })).toEqual({});
    expect(valuesToSave(view, { values: {}, choiceId: 'sso_okta' })).toEqual({});
  });
});

describe('navigationAllowed: where the flow’s browser may go', () => {
  it.each<[string, string, string[], boolean]>([
    ['https://example.com/login', 'example.com', [], true],
    ['https://login.example.com/', 'example.com', [], true],
    ['https://EXAMPLE.com./x', 'example.com', [], true],
    ['http://example.com:8080/', 'example.com', [], true],
    ['https://example.com/', 'login.example.com', [], false],
    ['https://evilexample.com/', 'example.com', [], false],
    ['https://example.com.evil.net/', 'example.com', [], false],
    ['https://example.com@evil.net/', 'example.com', [], false],
    ['https://sso.partner.net/saml', 'example.com', ['partner.net'], true],
    ['https://partner.net.evil.org/', 'example.com', ['partner.net'], false],
    ['https://accounts.google.com/o/oauth2', 'example.com', [], true],
    ['https://acme.okta.com/', 'example.com', [], true],
    ['https://login.microsoftonline.com/common', 'example.com', [], true],
    ['https://notokta.com/', 'example.com', [], false],
    ['http://127.0.0.1:3000/login', '127.0.0.1', [], true],
    ['http://127.0.0.2/', '127.0.0.1', [], false],
    ['about:blank', 'example.com', [], true],
    ['data:text/html,hi', 'example.com', [], true],
    ['not a url', 'example.com', [], false],
  ])('%s for %s (+%j): %s', (url, domain, allowed, expected) => {
    expect(navigationAllowed(url, domain, allowed)).toBe(expected);
  });
});

describe('judgeReauth: whether a re-auth can run unattended', () => {
  type Row = Parameters<typeof judgeReauth>[0];
  const row = (parts: Partial<Row>): Row => ({
    credential_id: 'cred_1',
    credential_value_keys: ['username', 'password'],
    credential_has_totp: false,
    login_requirements: null,
    ...parts,
  });
  const needs = (fieldTypes: string[], mfaType: string | null = null, ssoProvider: string | null = null): LoginRequirements => ({ fieldTypes, mfaType, ssoProvider });

  it.each<[string, Partial<Row>, boolean, string]>([
    ['no credential', { credential_id: null, credential_value_keys: null }, false, 'no_credential'],
    ['a provider item (read at login time)', { credential: { provider: 'my-1p', path: 'Vault/Item' }, credential_id: null, credential_value_keys: null }, true, 'external_credential'],
    ['a credential that was deleted', { credential_value_keys: null }, false, 'no_credential'],
    ['no login yet', {}, true, 'no_requirements_recorded'],
    ['identifier and password it holds', { login_requirements: needs(['identifier', 'password']) }, true, 'requirements_satisfiable'],
    ['an identifier under another key', { credential_value_keys: ['email', 'password'], login_requirements: needs(['identifier', 'password']) }, true, 'requirements_satisfiable'],
    ['no identifier value', { credential_value_keys: ['password'], login_requirements: needs(['identifier', 'password']) }, false, 'no_viable_plans'],
    ['no password value', { credential_value_keys: ['username'], login_requirements: needs(['identifier', 'password']) }, false, 'no_viable_plans'],
    ['an SMS code', { login_requirements: needs(['identifier', 'password', 'code'], 'sms') }, false, 'requires_sms_code'],
    ['a code with no method recorded', { login_requirements: needs(['code']) }, false, 'requires_sms_code'],
    ['an e-mailed code', { login_requirements: needs(['code'], 'email') }, false, 'requires_email_code'],
    ['e-mail chosen, no code field', { login_requirements: needs(['password'], 'email') }, false, 'requires_email_code'],
    ['a push approval', { login_requirements: needs(['password'], 'push') }, false, 'requires_external_action'],
    ['a phone call', { login_requirements: needs(['password'], 'call') }, false, 'requires_external_action'],
    ['a TOTP code without a secret', { login_requirements: needs(['password', 'totp_code'], 'totp') }, false, 'requires_totp_without_secret'],
    ['a TOTP code with a secret', { credential_has_totp: true, login_requirements: needs(['identifier', 'password', 'totp_code'], 'totp') }, true, 'requirements_satisfiable'],
    ['SSO only', { credential_value_keys: [], login_requirements: needs([], null, 'google') }, true, 'requirements_satisfiable'],
  ])('%s', (_case, parts, can, reason) => {
    expect(judgeReauth(row(parts))).toEqual({ can, reason });
  });
});

describe('canonicalSubmission: a submission mapped onto the current step', () => {
  const view = viewOf(
    reading({
      fields: [field('email', 'email'), field('password', 'password'), field('nickname', 'text', { required: false })],
      mfaOptions: [mfa('sms'), mfa('totp')],
      ssoButtons: [{ label: 'Google', provider: 'google', selector: '//button[@id="g"]' }],
      signInOptions: [{ id: 'passkey', label: 'Passkey', description: null, selector: '#pk' }],
    }),
  );
  const choicesOnly = viewOf(reading({ mfaOptions: [mfa('sms'), mfa('totp')] }));

  it.each<[string, FlowView, Parameters<typeof canonicalSubmission>[1], ReturnType<typeof canonicalSubmission>]>([
    ['values by field id', view, { field_values: { email: 'e', password: 'p' } }, { values: { email: 'e', password: 'p' } }],
    ['legacy values by discovered name', view, { fields: { email: 'e', password: 'p', nickname: 'n' } }, { values: { email: 'e', password: 'p', nickname: 'n' } }],
    ['a choice by id', view, { selected_choice_id: 'mfa_totp' }, { values: {}, choiceId: 'mfa_totp' }],
    ['a legacy MFA option by type', view, { mfa_option_id: 'sms' }, { values: {}, choiceId: 'mfa_sms' }],
    ['a legacy MFA option by choice id', view, { mfa_option_id: 'mfa_sms' }, { values: {}, choiceId: 'mfa_sms' }],
    ['a legacy sign-in option', view, { sign_in_option_id: 'passkey' }, { values: {}, choiceId: 'signin_passkey' }],
    ['a legacy SSO button by XPath', view, { sso_button_selector: '//button[@id="g"]' }, { values: {}, choiceId: 'sso_google' }],
    ['a legacy SSO provider in any case', view, { sso_provider: 'Google' }, { values: {}, choiceId: 'sso_google' }],
    ['one choice named twice', view, { selected_choice_id: 'sso_google', sso_provider: 'google' }, { values: {}, choiceId: 'sso_google' }],
    ['a choice with some values', view, { field_values: { email: 'e' }, selected_choice_id: 'mfa_sms' }, { values: { email: 'e' }, choiceId: 'mfa_sms' }],
    ['a choice on a step with no fields', choicesOnly, { selected_choice_id: 'mfa_sms' }, { values: {}, choiceId: 'mfa_sms' }],
  ])('takes %s', (_case, step, body, expected) => {
    expect(canonicalSubmission(step, body)).toEqual(expected);
  });

  const refusal = (step: FlowView, body: Parameters<typeof canonicalSubmission>[1]) => {
    try {
      canonicalSubmission(step, body);
    } catch (error) {
      expect(error).toBeInstanceOf(AppError);
      const e = error as AppError;
      return { status: e.status, code: e.code, details: e.details.map((d) => [d.code, d.field]) };
    }
    throw new Error('the submission was taken');
  };

  it.each<[string, FlowView, Parameters<typeof canonicalSubmission>[1], Array<[string, string | undefined]>]>([
    ['nothing', view, {}, []],
    ['an unknown field id', view, { field_values: { email: 'e', password: 'p', pin: '1' } }, [['unknown_field', 'body.field_values.pin']]],
    ['an unknown legacy field name', view, { fields: { email: 'e', password: 'p', pin: '1' } }, [['unknown_field', 'body.fields.pin']]],
    ['a missing required field', view, { field_values: { email: 'e' } }, [['required', 'body.field_values.password']]],
    ['an unknown choice', view, { selected_choice_id: 'mfa_push' }, [['unknown_choice', 'body.selected_choice_id']]],
    ['an MFA option the step lacks', choicesOnly, { mfa_option_id: 'email' }, [['unknown_choice', 'body.mfa_option_id']]],
    ['an SSO button XPath the step lacks', view, { sso_button_selector: '//a' }, [['unknown_choice', 'body.sso_button_selector']]],
    ['an SSO provider the step lacks', view, { sso_provider: 'github' }, [['unknown_choice', 'body.sso_provider']]],
    ['a sign-in option id given as an MFA option', view, { mfa_option_id: 'passkey' }, [['unknown_choice', 'body.mfa_option_id']]],
    ['two different choices', view, { selected_choice_id: 'mfa_sms', sso_provider: 'google' }, [['too_many_choices', 'body']]],
    ['values on a step with no fields', choicesOnly, { field_values: { code: '1' } }, [['unknown_field', 'body.field_values.code']]],
  ])('refuses %s with 400 invalid_submission', (_case, step, body, details) => {
    expect(refusal(step, body)).toEqual({ status: 400, code: 'invalid_submission', details });
  });
});
