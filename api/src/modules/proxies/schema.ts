import { isIP } from 'node:net';
import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { labelSchema, lookupText } from '../../http/schemas.js';

const regionNames = new Intl.DisplayNames(['en'], { type: 'region' });

const country = z
  .string()
  .regex(/^[A-Za-z]{2}$/, 'must be a two-letter ISO 3166 country code')
  .transform((c) => c.toUpperCase())
  .refine((c) => regionNames.of(c) !== c, 'is not an ISO 3166 country code')
  .describe('ISO 3166 alpha-2 country code, e.g. US (case-insensitive)');

const noSpaces = (what: string) =>
  z
    .string()
    .min(1)
    .max(100)
    .regex(/^[\p{L}\p{N}_.-]+$/u, 'must be letters, digits, "_", "." or "-" (no spaces)')
    .describe(what);

const stateCode = z
  .string()
  .regex(/^[A-Za-z]{2}$/, 'must be a two-letter state code')
  .transform((s) => s.toUpperCase());

const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

const host = z
  .string()
  .refine((h) => isIP(h) !== 0 || HOSTNAME.test(h), 'must be a hostname or an IP address')
  .describe('Proxy host name or IP address');

/** A host that skips the proxy: a host name, `*.`/`.` domain wildcard, or an IP literal. */
const bypassHost = z
  .string()
  .min(1)
  .max(253)
  .refine((h) => isIP(h) !== 0 || HOSTNAME.test(h.replace(/^\*?\./, '')), 'must be a host name, *.domain, .domain or an IP');

export const managedConfigs = {
  datacenter: z
    .strictObject({ country: country.optional().describe('ISO 3166 country code; default US') })
    .meta({ id: 'DatacenterProxyConfig' }),
  isp: z.strictObject({ country: country.optional().describe('ISO 3166 country code; default US') }).meta({ id: 'IspProxyConfig' }),
  residential: z
    .strictObject({
      country: country.optional(),
      city: noSpaces('City without spaces, e.g. sanfrancisco; requires country').optional(),
      state: stateCode.optional().describe('Two-letter state code'),
      zip: z.string().regex(/^\d{5}$/, 'must be a five-digit US ZIP code').optional().describe('US ZIP code'),
      asn: z.string().regex(/^(?:AS)?\d{1,10}$/i, 'must be an autonomous system number such as AS7922').optional(),
      os: z.enum(['windows', 'macos', 'android']).optional().describe('Deprecated: operating system of the device'),
    })
    .superRefine((c, ctx) => {
      if (c.city !== undefined && c.country === undefined) {
        ctx.addIssue({ code: 'custom', path: ['city'], message: 'city requires country' });
      }
      if (c.zip !== undefined && c.country !== undefined && c.country !== 'US') {
        ctx.addIssue({ code: 'custom', path: ['zip'], message: 'zip is a US ZIP code; country must be US' });
      }
    })
    .meta({ id: 'ResidentialProxyConfig' }),
  mobile: z
    .strictObject({
      country: country.optional(),
      city: noSpaces('Provider city alias').optional(),
      state: stateCode.optional().describe('US state code (US only)'),
    })
    .superRefine((c, ctx) => {
      if (c.state !== undefined && c.country !== undefined && c.country !== 'US') {
        ctx.addIssue({ code: 'custom', path: ['state'], message: 'state is US only; country must be US' });
      }
    })
    .meta({ id: 'MobileProxyConfig' }),
};

export const customConfig = z
  .strictObject({
    host,
    port: z.number().int().min(1).max(65535).describe('Proxy port'),
    username: z
      .string()
      .min(1)
      .max(255)
      // eslint-disable-next-line no-control-regex -- refusing control characters is the point
      .regex(/^[^\u0000-\u001f\u007f-\u009f:]*$/u, 'must not contain ":" or control characters')
      .optional()
      .describe('Username for proxy authentication'),
    password: z
      .string()
      .min(1)
      .max(1024)
      // eslint-disable-next-line no-control-regex -- refusing control characters is the point
      .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/u, 'must not contain control characters')
      .optional()
      .describe('Password for proxy authentication; stored encrypted and never returned'),
  })
  .meta({ id: 'CreateCustomProxyConfig' });

const common = {
  name: labelSchema.optional().describe('Readable name (not unique); default: host:port, or the type and country'),
  protocol: z
    .enum(['http', 'https'])
    .optional()
    .describe('Protocol to reach the proxy; default http for custom, the upstream’s for managed types'),
  bypass_hosts: z.array(bypassHost).max(100).optional().describe('Hosts that connect directly, not through the proxy'),
};

export const createProxyBody = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('datacenter'), ...common, config: managedConfigs.datacenter.optional() }),
    z.strictObject({ type: z.literal('isp'), ...common, config: managedConfigs.isp.optional() }),
    z.strictObject({ type: z.literal('residential'), ...common, config: managedConfigs.residential.optional() }),
    z.strictObject({ type: z.literal('mobile'), ...common, config: managedConfigs.mobile.optional() }),
    z.strictObject({ type: z.literal('custom'), ...common, config: customConfig.describe('host and port are required') }),
  ])
  .describe('type: datacenter, isp, residential, mobile or custom; config depends on it')
  .meta({ id: 'ProxyCreateRequest' });

export type CreateProxyInput = z.output<typeof createProxyBody>;

export const updateProxyBody = z
  .strictObject({ name: labelSchema.describe('New name, trimmed; duplicates are allowed') })
  .meta({ id: 'ProxyUpdateRequest' });

export const checkProxyBody = z
  .strictObject({
    url: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .optional()
      .describe(
        'Test reachability of this http(s) URL instead of the configured check URL; it must resolve to public ' +
          'addresses only. Such a check does not change the stored health status',
      ),
  })
  .meta({ id: 'ProxyCheckRequest' });

export const proxyIdParams = z.object({ id: lookupText.describe('Proxy id') });

export const listProxiesQuery = z.object({
  ...paginationQuery,
  name: lookupText.optional().describe('Exact name, case- and accent-insensitive; may match several'),
  query: lookupText.optional().describe('Substring of the name, host or IP address; or an exact id'),
});

const responseConfig = z
  .union([
    z.object({ host: z.string(), port: z.number().int(), username: z.string().optional(), has_password: z.boolean() }),
    z.object({
      country: z.string().optional(),
      city: z.string().optional(),
      state: z.string().optional(),
      zip: z.string().optional(),
      asn: z.string().optional(),
      os: z.string().optional(),
    }),
  ])
  .describe('Per type: the managed fields, or host/port/username/has_password for custom');

export const proxySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    type: z.enum(['datacenter', 'isp', 'residential', 'mobile', 'custom']),
    protocol: z.enum(['http', 'https']),
    bypass_hosts: z.array(z.string()),
    config: responseConfig,
    status: z.enum(['available', 'unavailable']).optional().describe('Health from the last check; absent until checked'),
    last_checked: z.string().optional().describe('When the last check ran'),
    ip_address: z.string().optional().describe('Egress IP seen by the last successful check'),
  })
  .meta({ id: 'Proxy' });
