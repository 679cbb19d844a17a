import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { getSession } from '../browsers/index.js';
import { listFilter } from './list-filter.js';
import { listTelemetryQuery, streamTelemetryQuery, telemetryEnvelopeSchema, telemetryParams } from './schema.js';
import { listEvents } from './store.js';
import { streamTelemetry } from './stream.js';

const tags = ['Browser telemetry'];

/** GET /browsers/{id}/telemetry/events and /stream (CONTRACT §2.4, docs/telemetry.md). */
export function telemetryRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/browsers/{id_or_name}/telemetry/events',
      operationId: 'listBrowserTelemetryEvents',
      summary: 'A page of the session’s telemetry events',
      description:
        'Offset-paginated ({seq, event} items, X-Has-More and X-Next-Offset). since defaults to 5m with order asc and is ignored when offset is given; ' +
        'order desc with since is refused (400). Works after the session ended, until the retention removes the events.',
      tags,
      auth: 'project',
      params: telemetryParams,
      query: listTelemetryQuery,
      responses: {
        200: { description: 'The events', schema: telemetryEnvelopeSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400, 404),
      },
      handler: async ({ params, query, auth }) => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name, true);
        const filter = listFilter(session.id, query, deps.clock.now());
        return page(await listEvents(deps.db, filter), { limit: filter.limit, offset: filter.offset }, (row) => row);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/browsers/{id_or_name}/telemetry/stream',
      operationId: 'streamBrowserTelemetry',
      summary: 'Server-Sent Events: the session’s telemetry as it arrives',
      description:
        'Each frame is `id: <seq>` and `data: {"seq", "event"}`, never an `event:` line; a `: keepalive` comment every 15 s. ' +
        'Last-Event-ID resumes after that seq (it wins over replay); replay=all starts from the oldest stored event; without either, only new events. ' +
        'The stream ends once the session has ended and its last events are sent.',
      tags,
      auth: 'project',
      params: telemetryParams,
      query: streamTelemetryQuery,
      responses: {
        200: { description: 'An event stream', schema: telemetryEnvelopeSchema, contentType: 'text/event-stream' },
        ...errorResponses(400, 404),
      },
      handler: async ({ params, query, auth, req, res }) => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name, true);
        await streamTelemetry(deps, session.id, { req, res }, { replayAll: query.replay === 'all' });
        return { kind: 'handled' };
      },
    }),
  ];
}
