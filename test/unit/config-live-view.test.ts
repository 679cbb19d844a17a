import { describe, expect, it } from 'vitest';
import { configHelp, parseConfig } from '../../api/src/config.js';
import { liveViewPageHeaders } from '../../api/src/modules/browsers/live-view-page.js';

describe('BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS', () => {
  it('is empty by default: the page may be framed by this service only', () => {
    expect(parseConfig({}).BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS).toBeUndefined();
    expect(liveViewPageHeaders()['Content-Security-Policy']).toContain("frame-ancestors 'self';");
  });

  it('takes origins separated by spaces or commas, and says what it wants of a bad one', () => {
    const { BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS: origins } = parseConfig({
      BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS: " https://app.example.com,https://*.example.org:8443  http://localhost:3000 'self' ",
    });
    expect(origins).toEqual(['https://app.example.com', 'https://*.example.org:8443', 'http://localhost:3000']);
    expect(liveViewPageHeaders(origins)['Content-Security-Policy']).toContain(
      "frame-ancestors 'self' https://app.example.com https://*.example.org:8443 http://localhost:3000;",
    );
    for (const bad of ['*', 'example.com', 'https://example.com/path', "https://a.example.com; script-src *", 'javascript:alert(1)']) {
      expect(() => parseConfig({ BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS: bad }), bad).toThrow(/BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS/);
    }
  });

  it('is in --help', () => {
    expect(configHelp()).toContain('BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS');
  });
});
