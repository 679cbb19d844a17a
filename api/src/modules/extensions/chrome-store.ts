import { AppError, badRequest } from '../../http/errors.js';
import { zipOfCrx } from '../../../../lib/extension-zip.js';
import type { ExtensionSettings } from './settings.js';

/**
 * GET /extensions/from_chrome_store: the store's update service (BROWSERPLANE_CHROME_STORE_URL,
 * Google's update2 endpoint by default) answers a CRX package for an extension id; its
 * header is cut off and the zip inside answered. When the store cannot be reached (no
 * internet, as on an isolated host) the answer is 424 chrome_store_unreachable: a 4xx,
 * because retrying at once cannot help (the SDK retries 5xx), and 424 because the request
 * itself was fine and what failed is the service it depends on. The extension id is the
 * only part of the client's URL sent anywhere, so the client cannot point the service at
 * another host.
 */

const EXTENSION_ID = /^[a-p]{32}$/;
/** Chromium's version in the request: the store answers packages that version can run. */
const PROD_VERSION = '156.0.0.0';

/** The 32-letter id from a store URL (…/detail/<slug>/<id>, old or new store) or the id itself. */
export function chromeStoreIdOf(raw: string): string {
  const trimmed = raw.trim();
  if (EXTENSION_ID.test(trimmed)) return trimmed;
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw badRequest('invalid_chrome_store_url', 'url must be a Chrome Web Store URL (https://chromewebstore.google.com/detail/<name>/<id>) or an extension id');
  }
  const id = url.pathname.split('/').find((part) => EXTENSION_ID.test(part));
  if (!['chromewebstore.google.com', 'chrome.google.com'].includes(url.hostname) || !id) {
    throw badRequest('invalid_chrome_store_url', 'url must be a Chrome Web Store URL (https://chromewebstore.google.com/detail/<name>/<id>) naming a 32-letter extension id');
  }
  return id;
}

export function chromeStoreRequestUrl(settings: Pick<ExtensionSettings, 'chromeStoreUrl'>, id: string, os: string): string {
  const url = new URL(settings.chromeStoreUrl);
  url.searchParams.set('response', 'redirect');
  url.searchParams.set('prodversion', PROD_VERSION);
  url.searchParams.set('acceptformat', 'crx2,crx3');
  url.searchParams.set('os', os);
  url.searchParams.set('arch', 'x64');
  url.searchParams.set('nacl_arch', 'x86-64');
  url.searchParams.set('x', `id=${id}&uc`);
  return url.href;
}

const unreachable = (why: string) =>
  new AppError(424, 'chrome_store_unreachable', `The Chrome Web Store could not be reached from this service (${why}); download the extension elsewhere and upload it with POST /extensions`, {
    shouldRetry: false,
  });

/** The extension's zip, downloaded from the store. */
export async function downloadFromChromeStore(settings: ExtensionSettings, input: { url: string; os: string }): Promise<Buffer> {
  const id = chromeStoreIdOf(input.url);
  let response: Response;
  try {
    response = await fetch(chromeStoreRequestUrl(settings, id, input.os), { redirect: 'follow', signal: AbortSignal.timeout(settings.chromeStoreTimeoutMs) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw unreachable(cause?.code ?? cause?.message ?? (error as Error).message);
  }
  if (response.status === 204 || response.status === 404) {
    await response.body?.cancel();
    throw new AppError(404, 'chrome_store_extension_not_found', `The Chrome Web Store has no extension ${id} for ${input.os}`);
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw unreachable(`it answered ${response.status}`);
  }
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > settings.maxZipBytes) throw new AppError(413, 'extension_too_large', `The package is larger than ${settings.maxZipBytes} bytes`);
  const crx = Buffer.from(await response.arrayBuffer());
  if (crx.length > settings.maxZipBytes) throw new AppError(413, 'extension_too_large', `The package is larger than ${settings.maxZipBytes} bytes`);
  const zip = zipOfCrx(crx);
  if (!zip) throw new AppError(424, 'chrome_store_invalid_package', `The Chrome Web Store answered something that is not a CRX package for ${id}`, { shouldRetry: false });
  return zip;
}
