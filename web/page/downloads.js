// Downloads: the files an export wrote in the module's file system, handed to the browser one by one or as
// one zip archive.
import { formatBytes, utf8 } from './module.js';

const MIME = { png: 'image/png', json: 'application/json', csv: 'text/csv', zip: 'application/zip' };
function save(name, parts) {
  const url = URL.createObjectURL(new Blob(parts, { type: MIME[name.split('.').pop()] || 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// A zip archive (files stored as they are, UTF-8 names), as Blob parts: the format's own limits are
// 65,535 files and 4 GB.
const CRC_TABLE = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; ++i) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function zipParts(files) {
  const now = new Date();
  const time = (now.getHours() << 11) | (now.getMinutes() << 5) | (now.getSeconds() >> 1);
  const date = ((now.getFullYear() - 1980) << 9) | ((now.getMonth() + 1) << 5) | now.getDate();
  const parts = [], directory = [];
  let offset = 0;
  for (const f of files) {
    const name = utf8.encode(f.name), crc = crc32(f.data), size = f.data.length;
    const local = new DataView(new ArrayBuffer(30));
    local.setUint32(0, 0x04034b50, true);
    local.setUint16(4, 20, true);       // version needed: 2.0
    local.setUint16(6, 0x0800, true);   // names are UTF-8
    local.setUint16(10, time, true);
    local.setUint16(12, date, true);
    local.setUint32(14, crc, true);
    local.setUint32(18, size, true);    // stored: compressed size = size
    local.setUint32(22, size, true);
    local.setUint16(26, name.length, true);
    parts.push(local, name, f.data);
    const entry = new DataView(new ArrayBuffer(46));
    entry.setUint32(0, 0x02014b50, true);
    entry.setUint16(4, 20, true);
    entry.setUint16(6, 20, true);
    entry.setUint16(8, 0x0800, true);
    entry.setUint16(12, time, true);
    entry.setUint16(14, date, true);
    entry.setUint32(16, crc, true);
    entry.setUint32(20, size, true);
    entry.setUint32(24, size, true);
    entry.setUint16(28, name.length, true);
    entry.setUint32(42, offset, true);
    directory.push(entry, name);
    offset += 30 + name.length + size;
  }
  const directorySize = directory.reduce((n, p) => n + p.byteLength, 0);
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, files.length, true);
  end.setUint16(10, files.length, true);
  end.setUint32(12, directorySize, true);
  end.setUint32(16, offset, true);
  return { parts: [...parts, ...directory, end], size: offset + directorySize + 22 };
}

// The files an export wrote: each its own download, or past a few, one zip archive (an export of 16,384
// heads is one download, not 16,384). Returns what was downloaded, for the message.
const ZIP_OVER = 8;
export function download(paths) {
  const files = paths.map((path) => {
    const data = Module.FS.readFile(path);
    Module.FS.unlink(path);
    return { name: path.slice(path.lastIndexOf('/') + 1), data };
  });
  if (files.length <= ZIP_OVER) {
    for (const f of files) save(f.name, [f.data]);
    return files[0].name + (files.length > 1 ? ` and ${files.length - 1} more` : '');
  }
  const total = files.reduce((n, f) => n + f.data.length, 0);
  if (files.length > 65535 || total >= 2 ** 32 - 2 ** 26)
    return `nothing: ${files.length} files of ${formatBytes(total)} are more than one zip archive holds ` +
           '(65,535 files, 4 GB)';
  // attnviz_weights_head0.csv -> attnviz_weights_csv.zip
  const first = files[0].name, ext = first.slice(first.lastIndexOf('.') + 1);
  const stem = first.slice(0, first.lastIndexOf('.')).replace(/_(head|layer)\d+$/, '');
  const name = `${stem}_${ext}.zip`;
  const zip = zipParts(files);
  save(name, zip.parts);
  return `${name} (${files.length} files, ${formatBytes(zip.size)})`;
}
