-- Up Migration

-- Browser telemetry (docs/telemetry.md): events the session's agent captured and pushed
-- to the API's side door, and control events the API recorded itself. seq is the event's
-- seq on the wire (list and stream, Last-Event-ID); ts is the event's own time in Unix
-- microseconds. Rows outlive the session (the list works after it ended) until the
-- retention sweep removes them; each session keeps at most a configured number.
CREATE TABLE browser_telemetry_events (
  seq         bigserial PRIMARY KEY,
  session_id  text NOT NULL,
  org_id      text NOT NULL REFERENCES orgs(id),
  project_id  text NOT NULL REFERENCES projects(id),
  category    text NOT NULL,
  type        text NOT NULL,
  ts          bigint NOT NULL,
  received_at timestamptz NOT NULL,
  event       jsonb NOT NULL
);
CREATE INDEX browser_telemetry_events_session ON browser_telemetry_events (session_id, seq);
CREATE INDEX browser_telemetry_events_received ON browser_telemetry_events (received_at);

-- Down Migration
DROP TABLE browser_telemetry_events;
