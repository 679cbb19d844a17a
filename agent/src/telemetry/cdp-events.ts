import type { TelemetryEvent } from '../../../contract/telemetry.js';

/**
 * CDP events as telemetry events (the SDK's BrowserTelemetryEvent data shapes). Pure: the
 * capture (cdp-capture.ts) keeps the per-target state (url, navigation count) and passes
 * it in as the context every CDP-sourced event carries.
 */

export interface TargetContext {
  session_id: string;
  target_id: string;
  target_type: 'page' | 'background_page' | 'service_worker' | 'shared_worker' | 'other';
  url?: string;
  nav_seq: number;
}

type Params = Record<string, unknown>;
type Draft = Omit<TelemetryEvent, 'ts'>;

const cdp = (event: string) => ({ kind: 'cdp' as const, event });

interface RemoteObject {
  type?: string;
  value?: unknown;
  description?: string;
  unserializableValue?: string;
}

/** A console argument as the console would print it. */
export function remoteText(arg: RemoteObject): string {
  if (arg.value !== undefined) return typeof arg.value === 'string' ? arg.value : JSON.stringify(arg.value);
  return arg.unserializableValue ?? arg.description ?? arg.type ?? '';
}

/** The context fields every CDP-sourced event carries (BrowserEventContext). */
export function contextFields(ctx: TargetContext, extra: { frame_id?: unknown; loader_id?: unknown } = {}): Record<string, unknown> {
  const out: Record<string, unknown> = { session_id: ctx.session_id, target_id: ctx.target_id, target_type: ctx.target_type, nav_seq: ctx.nav_seq };
  if (ctx.url !== undefined) out.url = ctx.url;
  if (typeof extra.frame_id === 'string') out.frame_id = extra.frame_id;
  if (typeof extra.loader_id === 'string') out.loader_id = extra.loader_id;
  return out;
}

export function consoleEvent(params: Params, ctx: TargetContext): Draft {
  const args = ((params.args as RemoteObject[] | undefined) ?? []).map(remoteText);
  const level = typeof params.type === 'string' ? params.type : 'log';
  const data: Record<string, unknown> = { ...contextFields(ctx), level, text: args[0] ?? '', args };
  if (params.stackTrace) data.stack_trace = params.stackTrace;
  return { category: 'console', type: level === 'error' ? 'console_error' : 'console_log', source: cdp('Runtime.consoleAPICalled'), data };
}

export function exceptionEvent(params: Params, ctx: TargetContext): Draft {
  const details = (params.exceptionDetails ?? {}) as { text?: string; lineNumber?: number; columnNumber?: number; url?: string; exception?: RemoteObject; stackTrace?: unknown };
  const message = details.exception?.description?.split('\n')[0];
  const text = [details.text ?? 'Uncaught', message].filter(Boolean).join(' ');
  const data: Record<string, unknown> = { ...contextFields(ctx), text, line: details.lineNumber, column: details.columnNumber };
  if (details.url) data.source_url = details.url;
  if (details.stackTrace) data.stack_trace = details.stackTrace;
  return { category: 'console', type: 'console_error', source: cdp('Runtime.exceptionThrown'), data };
}

export function requestEvent(params: Params, ctx: TargetContext): Draft {
  const request = (params.request ?? {}) as { url?: string; method?: string; headers?: Record<string, unknown>; postData?: string };
  const redirect = params.redirectResponse !== undefined;
  const data: Record<string, unknown> = {
    ...contextFields(ctx, { frame_id: params.frameId, loader_id: params.loaderId }),
    request_id: params.requestId,
    method: request.method,
    url: request.url,
    headers: request.headers,
    resource_type: params.type,
    document_url: params.documentURL,
    initiator_type: (params.initiator as { type?: string } | undefined)?.type,
    is_redirect: redirect,
  };
  if (request.postData !== undefined) data.post_data = request.postData;
  if (redirect) data.redirect_url = request.url;
  return { category: 'network', type: 'network_request', source: cdp('Network.requestWillBeSent'), data };
}

export function responseEvent(params: Params, ctx: TargetContext, method: string | undefined): Draft {
  const response = (params.response ?? {}) as { url?: string; status?: number; statusText?: string; headers?: Record<string, unknown>; mimeType?: string };
  const data: Record<string, unknown> = {
    ...contextFields(ctx, { frame_id: params.frameId, loader_id: params.loaderId }),
    request_id: params.requestId,
    url: response.url,
    status: response.status,
    status_text: response.statusText,
    headers: response.headers,
    mime_type: response.mimeType,
    resource_type: params.type,
  };
  if (method !== undefined) data.method = method;
  return { category: 'network', type: 'network_response', source: cdp('Network.responseReceived'), data };
}

export function loadingFailedEvent(params: Params, ctx: TargetContext): Draft {
  return {
    category: 'network',
    type: 'network_loading_failed',
    source: cdp('Network.loadingFailed'),
    data: { ...contextFields(ctx), request_id: params.requestId, error_text: params.errorText, canceled: params.canceled === true, resource_type: params.type },
  };
}

export function networkIdleEvent(ctx: TargetContext): Draft {
  return { category: 'network', type: 'network_idle', source: cdp('Network.loadingFinished'), data: contextFields(ctx) };
}

export function navigationEvent(params: Params, ctx: TargetContext): Draft {
  const frame = (params.frame ?? {}) as { id?: string; parentId?: string; loaderId?: string; url?: string };
  const data: Record<string, unknown> = { session_id: ctx.session_id, target_id: ctx.target_id, target_type: ctx.target_type, frame_id: frame.id, loader_id: frame.loaderId, url: frame.url };
  if (frame.parentId !== undefined) data.parent_frame_id = frame.parentId;
  return { category: 'page', type: 'page_navigation', source: cdp('Page.frameNavigated'), data };
}

export function lifecycleEvent(kind: 'dom' | 'load', params: Params, ctx: TargetContext): Draft {
  return {
    category: 'page',
    type: kind === 'dom' ? 'page_dom_content_loaded' : 'page_load',
    source: cdp(kind === 'dom' ? 'Page.domContentEventFired' : 'Page.loadEventFired'),
    data: { ...contextFields(ctx), cdp_timestamp: params.timestamp },
  };
}

export function tabOpenedEvent(info: { targetId?: string; type?: string; url?: string; title?: string; openerId?: string }): Draft {
  const data: Record<string, unknown> = { target_id: info.targetId, target_type: targetType(info.type), url: info.url, title: info.title };
  if (info.openerId !== undefined) data.opener_id = info.openerId;
  return { category: 'page', type: 'page_tab_opened', source: cdp('Target.targetCreated'), data };
}

export function targetType(type: string | undefined): TargetContext['target_type'] {
  return type === 'page' || type === 'background_page' || type === 'service_worker' || type === 'shared_worker' ? type : 'other';
}
