/**
 * Every tag an operation may carry, with what it groups, in the order a reader meets
 * them (the document's `tags`). buildOpenApiDocument refuses a tag missing here, so a
 * new module declares its tag once, in this list.
 */
export const OPENAPI_TAGS: ReadonlyArray<{ name: string; description: string }> = [
  { name: 'Browsers', description: 'Browser sessions: start one, read, list, update and delete them, their live view and CDP address.' },
  { name: 'Browser pools', description: 'Pools of warm browsers of one configuration: acquire one in milliseconds, release it for reuse.' },
  { name: 'Browser computer control', description: 'Mouse, keyboard, screenshots and clipboard of a session’s display.' },
  { name: 'Browser filesystem', description: 'Files and directories inside a session: read, write, upload, download, watch.' },
  { name: 'Browser processes', description: 'Commands run inside a session, with their output streamed.' },
  { name: 'Browser Playwright', description: 'Playwright code executed against a session’s browser, next to it.' },
  { name: 'Browser telemetry', description: 'What happened in a session (console, network, page and API events), captured and read back.' },
  { name: 'Replays', description: 'Screen recordings of a session: start, stop, list and download them.' },
  { name: 'Extensions', description: 'Chromium extensions uploaded once and loaded into sessions and pools.' },
  { name: 'Profiles', description: 'Saved browser profiles (cookies, storage) that sessions load and save.' },
  { name: 'Proxies', description: 'Upstream proxies sessions send their traffic through, and their checks.' },
  { name: 'Credentials', description: 'Secrets used to log in to sites, encrypted at rest and never returned.' },
  { name: 'Credential providers', description: 'External secret stores (such as 1Password) that credentials are read from.' },
  { name: 'Managed auth', description: 'Auth connections: keep a site logged in, with a hosted login page when a person is needed.' },
  { name: 'Deployments', description: 'Apps deployed to the service: upload or point at source, build, and follow the build.' },
  { name: 'Apps', description: 'The apps deployed in a project and their actions.' },
  { name: 'Invocations', description: 'Runs of an app’s action: start one, follow its events, read its result.' },
  { name: 'Projects', description: 'Projects, the unit of isolation inside an organisation, and their limits.' },
  { name: 'API keys', description: 'Keys of the organisation or of one project: create, rotate, list and delete them.' },
  { name: 'Organisation', description: 'Organisation-wide settings and limits.' },
  { name: 'Audit logs', description: 'Every state-changing call, by whom, when and with what answer.' },
  { name: 'Operations', description: 'Probes, metrics, this document and the pages for people: what running the service needs.' },
];
