/** Who is calling and in which project, resolved once per request by the auth middleware. */
export interface AuthContext {
  orgId: string;
  apiKey: { id: string; name: string; projectId: string | null; invocationId?: string | null };
  /** The project the request acts in; null on org-scoped routes. */
  project: { id: string; name: string } | null;
}

/** The resolved project, for routes whose scope is `project`. */
export function requireProject(auth: AuthContext): { id: string; name: string } {
  if (!auth.project) throw new Error('route declared scope "project" but no project was resolved');
  return auth.project;
}
