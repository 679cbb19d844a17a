import { telemetry } from './sink.js';

/**
 * Connection telemetry (category connection): a CDP client on the agent's /cdp bridge
 * (cdp_connect, cdp_disconnect with its duration and message count) and a live view viewer
 * (live_view_connect / live_view_disconnect). The agent's own CDP connections (capture,
 * curl, reset) do not pass the bridge and are not reported.
 */

const agentSource = (event: string) => ({ kind: 'local_process' as const, event });
let viewerSeq = 0;

export function cdpClientOpened(): { message: () => void; closed: (reason: 'client_close' | 'upstream_changed' | 'upstream_error' | 'context_cancelled') => void } {
  const started = Date.now();
  let messages = 0;
  let done = false;
  telemetry.emit({ category: 'connection', type: 'cdp_connect', source: agentSource('cdp_bridge') });
  return {
    message: () => void (messages += 1),
    closed: (reason) => {
      if (done) return;
      done = true;
      telemetry.emit({ category: 'connection', type: 'cdp_disconnect', source: agentSource('cdp_bridge'), data: { duration_ms: Date.now() - started, message_count: messages, reason } });
    },
  };
}

export function liveViewOpened(): { closed: () => void } {
  const started = Date.now();
  const sessionId = `lv-${process.pid}-${++viewerSeq}`;
  telemetry.emit({ category: 'connection', type: 'live_view_connect', source: agentSource('live_view'), data: { session_id: sessionId } });
  let done = false;
  return {
    closed: () => {
      if (done) return;
      done = true;
      telemetry.emit({ category: 'connection', type: 'live_view_disconnect', source: agentSource('live_view'), data: { duration_ms: Date.now() - started, session_id: sessionId } });
    },
  };
}
