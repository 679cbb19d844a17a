import { inflateSync } from 'node:zlib';
import type { HttpClient } from '../support/http.js';

/** A page that records every input event, with a green pad to click and drag on and room to scroll. */
export const INPUT_PAGE = `<!doctype html><html><head><title>input</title><style>
body { margin: 0; font: 16px sans-serif; }
#pad { user-select: none; position: absolute; left: 0; top: 100px; width: 600px; height: 300px; background: #00ff00; }
#tall { height: 5000px; }
</style></head><body>
<input id="text" autocomplete="off"><div id="pad"></div><div id="tall"></div>
<script>
window.events = [];
for (const type of ['mousedown', 'mouseup', 'click', 'dblclick', 'contextmenu', 'mousemove', 'keydown'])
  addEventListener(type, (e) => events.push({ type, button: e.button, x: e.clientX, y: e.clientY, sx: e.screenX, sy: e.screenY, key: e.key, ctrl: e.ctrlKey, shift: e.shiftKey, detail: e.detail }), true);
addEventListener('contextmenu', (e) => e.preventDefault());
</script></body></html>`;

export interface RecordedEvent {
  type: string;
  button: number;
  x: number;
  y: number;
  sx: number;
  sy: number;
  key: string;
  ctrl: boolean;
  shift: boolean;
  detail: number;
}

/** POST that keeps the answer's bytes (HttpClient reads text, which would mangle a PNG). */
export async function postForBytes(client: HttpClient, path: string, body: unknown): Promise<{ status: number; type: string; bytes: Buffer }> {
  const res = await fetch(client.baseUrl + path, {
    method: 'POST',
    headers: { ...client.extraHeaders, authorization: `Bearer ${client.key}`, 'content-type': 'application/json', accept: 'image/png' },
    body: JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get('content-type') ?? '', bytes: Buffer.from(await res.arrayBuffer()) };
}

export interface DecodedPng {
  width: number;
  height: number;
  /** [r, g, b] at a pixel. */
  pixel(x: number, y: number): [number, number, number];
}

/**
 * Reads an 8-bit RGB PNG by the format's own rules (chunks, CRC-free, unfiltering of all
 * five filter types), so the test does not trust the encoder's shortcuts.
 */
export function decodePng(png: Buffer): DecodedPng {
  if (png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') throw new Error('not a PNG');
  let offset = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  while (offset < png.length) {
    const length = png.readUInt32BE(offset);
    const type = png.toString('latin1', offset + 4, offset + 8);
    const data = png.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      [width, height] = [data.readUInt32BE(0), data.readUInt32BE(4)];
      if (data[8] !== 8 || data[9] !== 2) throw new Error(`expected 8-bit RGB, got depth ${data[8]} colour type ${data[9]}`);
    }
    if (type === 'IDAT') idat.push(data);
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * 3;
  const rows = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    for (let i = 0; i < stride; i++) {
      const value = raw[y * (stride + 1) + 1 + i]!;
      const left = i >= 3 ? rows[y * stride + i - 3]! : 0;
      const up = y > 0 ? rows[(y - 1) * stride + i]! : 0;
      const upLeft = y > 0 && i >= 3 ? rows[(y - 1) * stride + i - 3]! : 0;
      const paeth = () => {
        const p = left + up - upLeft;
        const [pa, pb, pc] = [Math.abs(p - left), Math.abs(p - up), Math.abs(p - upLeft)];
        return pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
      };
      const predictor = [0, left, up, (left + up) >> 1, paeth()][filter]!;
      rows[y * stride + i] = (value + predictor) & 0xff;
    }
  }
  return {
    width,
    height,
    pixel: (x, y) => [rows[y * stride + x * 3]!, rows[y * stride + x * 3 + 1]!, rows[y * stride + x * 3 + 2]!],
  };
}
