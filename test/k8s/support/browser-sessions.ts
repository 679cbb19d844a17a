import { randomBytes } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { ANNOTATIONS, API_VERSION, LABELS, LAUNCH_SECRET_SUFFIX, LAUNCH_SPEC_KEY, ownerLabels, PLURALS, resourceNameOf } from '../../../contract/kinds.js';
import type { BrowserLaunchSpec } from '../../../contract/browser-runtime.js';
import type { BrowserSessionStatus } from '../../../api/src/runtime/custom-resource-status.js';
import { kubeConfig, rawRequest } from './kube.js';

/**
 * BrowserSessions and launch Secrets written the way the API writes them in Kubernetes
 * mode (the contract in the K1/K2 briefs), for the operator's tests.
 */

export interface SessionObject {
  metadata: { name: string; uid: string; generation: number; resourceVersion: string; finalizers?: string[]; managedFields?: { manager: string; subresource?: string }[] };
  status?: BrowserSessionStatus;
}

export const newSessionId = (): string => `bs_${randomBytes(8).toString('hex').replace(/[^a-z2-7]/g, 'a').slice(0, 12)}`;

/** A headless launch spec for `sessionId`; `overrides` replace whole fields. */
export function launchSpec(sessionId: string, overrides: Partial<BrowserLaunchSpec> = {}): BrowserLaunchSpec {
  return {
    browserId: sessionId,
    orgId: 'org_k1',
    projectId: 'proj_k1',
    headless: true,
    stealth: false,
    kioskMode: false,
    viewport: { width: 1024, height: 768 },
    chromePolicy: {},
    labels: {},
    ...overrides,
  };
}

const sessionsPath = (namespace: string) => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}`;

/** Writes the BrowserSession as the API does (before its Secret). */
export async function createSession(namespace: string, sessionId: string): Promise<SessionObject> {
  const answer = await rawRequest('POST', sessionsPath(namespace), {
    apiVersion: API_VERSION,
    kind: 'BrowserSession',
    metadata: {
      name: resourceNameOf(sessionId),
      labels: { [LABELS.sessionId]: sessionId, ...ownerLabels({ orgId: 'org_k1', projectId: 'proj_k1' }) },
      annotations: { [ANNOTATIONS.createdBy]: 'api' },
    },
    spec: { headless: true, viewport: { width: 1024, height: 768 }, project: 'proj_k1' },
  });
  if (answer.status !== 201) throw new Error(`creating BrowserSession: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body as unknown as SessionObject;
}

/** The launch Secret, owned by the resource, holding the launch spec. */
export async function createLaunchSecret(namespace: string, session: SessionObject, spec: BrowserLaunchSpec): Promise<void> {
  await kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name: `${session.metadata.name}${LAUNCH_SECRET_SUFFIX}`,
          labels: { [LABELS.sessionId]: spec.browserId },
          ownerReferences: [{ apiVersion: API_VERSION, kind: 'BrowserSession', name: session.metadata.name, uid: session.metadata.uid }],
        },
        type: 'Opaque',
        stringData: { [LAUNCH_SPEC_KEY]: JSON.stringify(spec) },
      },
    });
}

export async function readSession(namespace: string, name: string): Promise<SessionObject | undefined> {
  const answer = await rawRequest('GET', `${sessionsPath(namespace)}/${name}`);
  if (answer.status === 404) return undefined;
  if (answer.status !== 200) throw new Error(`reading BrowserSession ${name}: ${answer.status}`);
  return answer.body as unknown as SessionObject;
}

export async function deleteSession(namespace: string, name: string): Promise<void> {
  const answer = await rawRequest('DELETE', `${sessionsPath(namespace)}/${name}`);
  if (answer.status !== 200 && answer.status !== 202) throw new Error(`deleting BrowserSession ${name}: ${answer.status}`);
}

export const readyCondition = (status: BrowserSessionStatus | undefined) => status?.conditions?.find((c) => c.type === 'Ready');
