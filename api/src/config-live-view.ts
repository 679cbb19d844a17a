import { z } from 'zod';

/**
 * Settings of the live view (docs/live-view.md): which other sites may embed its page in
 * an iframe. Spread into config.ts's schema.
 */

/** An origin as CSP frame-ancestors takes it: scheme://host[:port], the host's first label may be `*`. */
const ORIGIN = /^https?:\/\/(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d{1,5})?$/;

const origins = z.array(z.string().max(300).regex(ORIGIN, 'origins like https://app.example.com or https://*.example.com:8443, separated by spaces or commas')).max(64);

/** Unset (or only 'self'): undefined, as --help shows it; else the origins, each checked. */
const originList = z
  .string()
  .optional()
  .transform((v) => (v ?? '').split(/[\s,]+/).filter((origin) => origin !== '' && origin !== "'self'" && origin !== 'self'))
  .pipe(origins)
  .transform((list) => (list.length === 0 ? undefined : list));

export const liveViewFields = {
  BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS: originList.describe(
    "Origins allowed to embed the live view page (browser_live_view_url) in an iframe, besides this service itself, separated by spaces or commas (https://app.example.com https://*.example.com); unset, only this service's own pages ('self')",
  ),
};

