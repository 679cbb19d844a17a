import { inflateSync } from 'node:zlib';
import type { BrowserCdp } from '../cdp/client.js';
import type { PageView } from './cdp-page.js';
import { crop, encodePng, type Region, type RgbImage } from './png.js';

/**
 * A headless screenshot has the size of the window, as a headful one has the size of
 * the X screen the window fills: the page's own capture (Page.captureScreenshot of its
 * viewport) is drawn where the page sits on that screen, and the band above it, where a
 * headful browser draws its tab strip and toolbar, is plain grey: headless Chromium lays
 * that band out but paints nothing there.
 */

/** Chromium's light tab strip colour. */
const BAND_RGB = [0xde, 0xe1, 0xe6] as const;

export async function captureScreen(cdp: BrowserCdp, view: PageView, region: Region | undefined): Promise<Buffer> {
  const { data } = await cdp.send<{ data: string }>('Page.captureScreenshot', { format: 'png' }, view.sessionId);
  const page = decodePng(Buffer.from(data, 'base64'));
  const screen = compose(view, page);
  return encodePng(region ? crop(screen, region) : screen);
}

function compose(view: PageView, page: RgbImage): RgbImage {
  const { width, height } = view.screen;
  const rgb = Buffer.allocUnsafe(width * height * 3);
  for (let at = 0; at < rgb.length; at += 3) rgb.set(BAND_RGB, at);
  const columns = Math.max(0, Math.min(page.width, width - view.offset.x));
  for (let row = 0; row < page.height && view.offset.y + row < height; row++) {
    const from = row * page.width * 3;
    page.rgb.copy(rgb, ((view.offset.y + row) * width + view.offset.x) * 3, from, from + columns * 3);
  }
  return { width, height, rgb };
}

/** The PNGs Chromium encodes: 8-bit RGB or RGBA, not interlaced. */
export function decodePng(png: Buffer): RgbImage {
  if (png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') throw new Error('the browser returned a screenshot that is not a PNG');
  let [offset, width, height, channels] = [8, 0, 0, 0];
  const idat: Buffer[] = [];
  while (offset + 8 <= png.length) {
    const length = png.readUInt32BE(offset);
    const type = png.toString('latin1', offset + 4, offset + 8);
    const data = png.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      [width, height] = [data.readUInt32BE(0), data.readUInt32BE(4)];
      channels = data[9] === 6 ? 4 : data[9] === 2 ? 3 : 0;
      if (data[8] !== 8 || channels === 0 || data[12] !== 0) throw new Error(`unsupported screenshot PNG (depth ${data[8]}, colour type ${data[9]}, interlace ${data[12]})`);
    }
    if (type === 'IDAT') idat.push(data);
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const rows = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) unfilter(raw, rows, y, stride, channels);
  const rgb = Buffer.allocUnsafe(width * height * 3);
  for (let pixel = 0; pixel < width * height; pixel++) rows.copy(rgb, pixel * 3, pixel * channels, pixel * channels + 3);
  return { width, height, rgb };
}

/** Undoes one row's filter (PNG spec §9) into `rows`. */
function unfilter(raw: Buffer, rows: Buffer, y: number, stride: number, bpp: number): void {
  const filter = raw[y * (stride + 1)]!;
  const input = y * (stride + 1) + 1;
  const out = y * stride;
  for (let i = 0; i < stride; i++) {
    const left = i >= bpp ? rows[out + i - bpp]! : 0;
    const up = y > 0 ? rows[out - stride + i]! : 0;
    const upLeft = y > 0 && i >= bpp ? rows[out - stride + i - bpp]! : 0;
    let predictor = 0;
    if (filter === 1) predictor = left;
    else if (filter === 2) predictor = up;
    else if (filter === 3) predictor = (left + up) >> 1;
    else if (filter === 4) {
      const p = left + up - upLeft;
      const [pa, pb, pc] = [Math.abs(p - left), Math.abs(p - up), Math.abs(p - upLeft)];
      predictor = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
    }
    rows[out + i] = (raw[input + i]! + predictor) & 0xff;
  }
}
