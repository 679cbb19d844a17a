-- Up Migration

-- Video recordings of browser sessions (docs/replays.md). A row is made when a recording
-- starts and outlives its session: the session's row may be soft-deleted while its replays
-- stay listable and downloadable until expires_at (the retention setting), when the sweep
-- removes the file and the row. Deleting the org or project removes them too.
CREATE TABLE replays (
  id             text PRIMARY KEY,
  session_id     text NOT NULL,
  org_id         text NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
  project_id     text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  seq            bigint GENERATED ALWAYS AS IDENTITY,
  status         text NOT NULL CHECK (status IN ('recording', 'finished', 'failed')),
  framerate      integer NOT NULL,
  max_duration_s integer NOT NULL,
  started_at     timestamptz NOT NULL,
  finished_at    timestamptz,
  size_bytes     bigint,
  failure        text,
  expires_at     timestamptz NOT NULL
);
CREATE INDEX replays_session ON replays (org_id, project_id, session_id, started_at, seq);
CREATE INDEX replays_expiry ON replays (expires_at);
CREATE INDEX replays_recording ON replays (started_at) WHERE status = 'recording';

-- Down Migration

DROP TABLE replays;
