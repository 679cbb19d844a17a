import { deflateSync } from 'node:zlib';

/**
 * Screenshots as PNG from the X server's own pixels: `xwd` (X.Org's dump tool, Debian
 * x11-apps) reads the root window with XGetImage, and this file turns its XWD output
 * into an RGB PNG. That keeps ImageMagick or ffmpeg (hundreds of MB of codecs, and
 * ImageMagick's long record of parser CVEs) out of the image for one format conversion.
 */

export interface RgbImage {
  width: number;
  height: number;
  /** width * height * 3 bytes, rows top to bottom. */
  rgb: Buffer;
}

export interface Region {
  x: number;
  y: number;
  width: number;
  height: number;
}

const XWD_HEADER_FIELDS = 25;
const Z_PIXMAP = 2;

/** TrueColor ZPixmap at 24 or 32 bits per pixel: what Xvfb -screen WxHx24 gives. */
export function decodeXwd(xwd: Buffer): RgbImage {
  if (xwd.length < XWD_HEADER_FIELDS * 4) throw new Error('xwd output too short');
  const field = (index: number) => xwd.readUInt32BE(index * 4);
  const [headerSize, version, format] = [field(0), field(1), field(2)];
  if (version !== 7 || format !== Z_PIXMAP) throw new Error(`unsupported XWD image (version ${version}, format ${format})`);
  const width = field(4);
  const height = field(5);
  const littleEndian = field(7) === 0;
  const bitsPerPixel = field(11);
  const bytesPerLine = field(12);
  const masks = [field(14), field(15), field(16)];
  const colors = field(19);
  if (bitsPerPixel !== 32 && bitsPerPixel !== 24) throw new Error(`unsupported XWD depth: ${bitsPerPixel} bits per pixel`);
  const start = headerSize + colors * 12;
  if (xwd.length < start + bytesPerLine * height) throw new Error('xwd output truncated');
  const shifts = masks.map(shiftOf);
  const bytes = bitsPerPixel / 8;
  const rgb = Buffer.allocUnsafe(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = start + y * bytesPerLine + x * bytes;
      const pixel = bytes === 4 ? (littleEndian ? xwd.readUInt32LE(at) : xwd.readUInt32BE(at)) : littleEndian ? xwd.readUIntLE(at, 3) : xwd.readUIntBE(at, 3);
      const out = (y * width + x) * 3;
      for (let channel = 0; channel < 3; channel++) rgb[out + channel] = ((pixel & masks[channel]!) >>> shifts[channel]!) & 0xff;
    }
  }
  return { width, height, rgb };
}

const shiftOf = (mask: number) => (mask === 0 ? 0 : 31 - Math.clz32(mask & -mask));

export function crop(image: RgbImage, region: Region): RgbImage {
  const rgb = Buffer.allocUnsafe(region.width * region.height * 3);
  for (let row = 0; row < region.height; row++) {
    const from = ((region.y + row) * image.width + region.x) * 3;
    image.rgb.copy(rgb, row * region.width * 3, from, from + region.width * 3);
  }
  return { width: region.width, height: region.height, rgb };
}

export function encodePng(image: RgbImage): Buffer {
  const stride = image.width * 3;
  const raw = Buffer.alloc((stride + 1) * image.height);
  for (let y = 0; y < image.height; y++) image.rgb.copy(raw, y * (stride + 1) + 1, y * stride, (y + 1) * stride);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(image.width, 0);
  header.writeUInt32BE(image.height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, deflate, no filter method variants, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw, { level: 3 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(data: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of data) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
