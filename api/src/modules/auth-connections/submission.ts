import type { AppDeps } from '../../app-deps.js';
import { badRequest, conflict } from '../../http/errors.js';
import { storePendingInput } from './flow-store.js';
import type { ConnectionRow, FlowView } from './rows.js';
import type { SubmitInput } from './schema.js';
import { connectionChannel } from './service.js';
import { isRunning } from './view.js';

/** What a person answers at a step (POST …/submit, the hosted page), on its way to the flow's driver. */

export const SUBMISSION_SEAL_CONTEXT = 'auth_flows:pending_input';

/** A submission in canonical form: values by Field.id, and at most one choice. */
export interface Submission {
  values: Record<string, string>;
  choiceId?: string;
}

/** Maps the canonical and legacy submit fields onto the step's fields and choices. */
export function canonicalSubmission(view: FlowView, body: SubmitInput): Submission {
  const fields = view.fields ?? [];
  const choices = view.choices ?? [];
  const problems: Array<{ code: string; message: string; field: string }> = [];
  const values: Record<string, string> = {};
  for (const [key, value] of Object.entries(body.field_values ?? {})) {
    if (fields.some((f) => f.id === key)) values[key] = value;
    else problems.push({ code: 'unknown_field', message: `the current step has no field ${JSON.stringify(key)}`, field: `body.field_values.${key}` });
  }
  const discovered = view.discovered_fields ?? [];
  for (const [name, value] of Object.entries(body.fields ?? {})) {
    const field = fields.find((f) => f.id === name) ?? fields.find((f) => discovered.find((d) => d.name === name)?.selector === f.observed_selector);
    if (field) values[field.id] = value;
    else problems.push({ code: 'unknown_field', message: `the current step has no field named ${JSON.stringify(name)}`, field: `body.fields.${name}` });
  }
  const picks: Array<{ id: string | undefined; field: string }> = [];
  if (body.selected_choice_id !== undefined) picks.push({ id: choices.find((c) => c.id === body.selected_choice_id)?.id, field: 'body.selected_choice_id' });
  if (body.mfa_option_id !== undefined) {
    const match = choices.find((c) => c.type === 'mfa_method' && (c.id === body.mfa_option_id || c.id === `mfa_${body.mfa_option_id}`));
    picks.push({ id: match?.id, field: 'body.mfa_option_id' });
  }
  if (body.sign_in_option_id !== undefined) {
    const match = choices.find((c) => c.type === 'sign_in_method' && (c.id === body.sign_in_option_id || c.id === `signin_${body.sign_in_option_id}`));
    picks.push({ id: match?.id, field: 'body.sign_in_option_id' });
  }
  if (body.sso_button_selector !== undefined) {
    const match = choices.find((c) => c.type === 'sso_provider' && c.observed_selector === body.sso_button_selector);
    picks.push({ id: match?.id, field: 'body.sso_button_selector' });
  }
  const ssoProvider = body.sso_provider;
  if (ssoProvider !== undefined) {
    const match = choices.find((c) => c.type === 'sso_provider' && c.id === `sso_${ssoProvider.toLowerCase()}`);
    picks.push({ id: match?.id, field: 'body.sso_provider' });
  }
  for (const pick of picks) {
    if (pick.id === undefined) problems.push({ code: 'unknown_choice', message: 'the current step offers no such choice', field: pick.field });
  }
  const chosen = [...new Set(picks.map((p) => p.id).filter((id): id is string => id !== undefined))];
  if (chosen.length > 1) problems.push({ code: 'too_many_choices', message: 'choose one option at a time', field: 'body' });
  if (problems.length > 0) throw badRequest('invalid_submission', 'The submission does not fit the current step', problems);
  if (chosen.length === 0) {
    const missing = fields.filter((f) => f.required !== false && !(f.id in values));
    if (Object.keys(values).length === 0) throw badRequest('invalid_submission', 'Send field_values for the step’s fields, or selected_choice_id', []);
    if (missing.length > 0) {
      throw badRequest(
        'invalid_submission',
        'Required fields are missing',
        missing.map((f) => ({ code: 'required', message: `${f.label ?? f.id} is required`, field: `body.field_values.${f.id}` })),
      );
    }
  }
  return { values, ...(chosen[0] !== undefined ? { choiceId: chosen[0] } : {}) };
}

/**
 * Hands a submission to the flow's driver (on whichever replica runs it): sealed into the
 * flow row, then a notification. accepted false when the flow was not awaiting input.
 */
export async function submitToFlow(deps: AppDeps, row: ConnectionRow, body: SubmitInput): Promise<boolean> {
  const flow = row.flow;
  // A flow past its expiry is over even before the engine's sweep marks it EXPIRED.
  if (!flow || !isRunning(flow) || flow.expires_at.getTime() <= deps.clock.now().getTime()) {
    throw conflict('flow_not_running', 'No login flow is running for this connection; start one with POST /auth/connections/{id}/login');
  }
  if (flow.step !== 'AWAITING_INPUT' || flow.has_pending_input) return false;
  const submission = canonicalSubmission(flow.view, body);
  const sealed = deps.sealer.seal(JSON.stringify(submission), `${SUBMISSION_SEAL_CONTEXT}:${flow.id}`);
  const stored = await storePendingInput(deps.db, flow.id, sealed, deps.clock.now());
  if (stored) await deps.events.publish(connectionChannel(row.id), { id: row.id, input: flow.id });
  return stored;
}
