/** The BrowserSession kind: one browser, written by the API (or kubectl), run by the operator as a pod. */
import { z } from 'zod';
import { commonStatusFields, type KindNames } from './status.js';

export const BROWSER_SESSION = { kind: 'BrowserSession', plural: 'browsersessions', singular: 'browsersession', shortNames: ['bsess'] } as const satisfies KindNames;

/** BrowserSession status.phase, as the operator writes it and the API reads it. */
export const SESSION_PHASES = {
  pending: 'Pending',
  running: 'Running',
  failed: 'Failed',
  terminating: 'Terminating',
} as const;
export type SessionPhase = (typeof SESSION_PHASES)[keyof typeof SESSION_PHASES];

/** Reasons of a BrowserSession's Ready condition (the API reads only phase and message). */
export const SESSION_REASONS = {
  awaitingLaunchSpec: 'AwaitingLaunchSpec',
  invalidLaunchSpec: 'InvalidLaunchSpec',
  podStarting: 'PodStarting',
  podReady: 'PodReady',
  launchFailed: 'LaunchFailed',
  browserExited: 'BrowserExited',
  terminating: 'Terminating',
} as const;

const phases = Object.values(SESSION_PHASES) as [SessionPhase, ...SessionPhase[]];

export const browserSessionStatusSchema = z.strictObject({
  ...commonStatusFields,
  sessionId: z.string().optional().describe('The session’s id in the API'),
  phase: z.enum(phases).optional(),
  podName: z.string().optional().describe('The pod running the browser'),
  agentUrl: z.string().optional().describe('Base URL of the browser pod’s agent (http://podIP:9222), for the API’s proxies'),
  message: z.string().optional().describe('Human-readable detail of the phase (why it failed, what it waits for)'),
  webdriverWsUrl: z.string().optional().describe('WebDriver BiDi WebSocket URL through the API (token-signed)'),
  browserLiveViewUrl: z.string().optional().describe('Live view URL, for headful sessions'),
});
