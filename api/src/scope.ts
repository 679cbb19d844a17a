import { requireProject, type AuthContext } from './http/auth-context.js';

/**
 * What services take instead of the HTTP layer's AuthContext: where the use case acts
 * (a scope) and who acts (an actor). Routes derive both from the request; the operator's
 * reconcilers and the login-flow engine name themselves as actors, so nothing invents an
 * API key to call a service.
 */

/** An org-wide use case (projects, API keys). */
export interface OrgScope {
  orgId: string;
}

/** A use case inside one project of an org (every project resource). */
export interface ProjectScope extends OrgScope {
  projectId: string;
}

/** Who acts: a caller's API key, or a part of the system acting on its own. */
export type Actor =
  | { kind: 'api_key'; id: string; name: string; projectId: string | null }
  | { kind: 'operator'; name: string }
  | { kind: 'system'; name: string };

export const orgScopeOf = (auth: AuthContext): OrgScope => ({ orgId: auth.orgId });

/** The request's project scope; only for routes declared with scope `project`. */
export const projectScopeOf = (auth: AuthContext): ProjectScope => ({ orgId: auth.orgId, projectId: requireProject(auth).id });

export const actorOf = (auth: AuthContext): Actor => ({ kind: 'api_key', ...auth.apiKey });

/** The operator's reconcilers (GitOps: BrowserPool, AuthConnection resources). */
export const OPERATOR_ACTOR: Actor = { kind: 'operator', name: 'browserplane-operator' };
