// Reads an Apache Iceberg table with icebird (npm), a reader independent of
// iceberg-go, and prints one JSON object on stdout: the current schema's
// fields ({id, name, type}) and every row of the current snapshot.
//
//   node scripts/icebird-read.mjs <node_modules dir> <metadata location> [snapshot id]
//
// With a snapshot id, the rows are those of that snapshot instead, one the
// metadata still holds (icebird reads the current snapshot only: the
// metadata's current snapshot, and schema, are set to that snapshot's
// before it reads); the JSON then carries "snapshot_id", the live entries of
// the snapshot's manifests as "files" ({path, content, record_count}), and
// a failure to read the rows as "read_error" (with "rows" empty), so a test
// can say which file a snapshot names is missing.
//
// The node_modules directory is the one scripts/ensure-icebird.sh prints;
// the metadata location is a file:// URL of a metadata JSON, as
// `pg-cdc catalog status --format json` prints it. Used by the end-to-end
// test internal/e2e TestIcebergChangelog; the snapshot id by
// TestIcebergExpiryVsGC (internal/e2e/iceberg_expiry_test.go.pending).
//
// Three work-arounds for icebird 0.3.1, none of which changes what it reads:
//   1. It fetches every file with fetch(), which has no file: scheme in
//      node: fetch is wrapped to read file: URLs from disk (with Range).
//   2. Its Avro reader inflates deflate blocks with hyparquet-compressors'
//      gunzip, which fails on Go compress/flate output ("offset is out of
//      bounds"; iceberg-go writes its manifests so): a loader hook hands it
//      a gunzip that falls back to node's zlib.inflateRawSync (Avro's
//      deflate codec is raw RFC 1951 deflate).
//   3. hyparquet turns TIMESTAMP(MICROS) into a Date, dropping the
//      microseconds: its default parser prints them instead, as
//      {"ts_us": "<microseconds since the epoch>"}.
// Values: int64 as a decimal string, decimals as hyparquet's number, lists
// as arrays, NULL as null.

import { readFile, stat } from 'node:fs/promises'
import { register } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const [mods, metadataLocation, snapshotArg] = process.argv.slice(2)
if (!mods || !metadataLocation) {
  console.error('usage: icebird-read.mjs <node_modules dir> <metadata location> [snapshot id]')
  process.exit(2)
}

// 2. The Avro reader's gunzip, with the fallback. The hook runs on the
// loader thread and reports nothing; the shim counts its fallbacks in a
// global the main thread reads.
const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier === 'hyparquet-compressors' && context.parentURL?.endsWith('/icebird/src/avro/avro.read.js')) {
    const real = await next(specifier, context)
    const shim = 'import { gunzip as real } from ' + JSON.stringify(real.url) + ';\\n' +
      'import { inflateRawSync } from "node:zlib";\\n' +
      'export function gunzip(data) {\\n' +
      '  try { return real(data) } catch {\\n' +
      '    globalThis.__icebirdInflateFallbacks = (globalThis.__icebirdInflateFallbacks ?? 0) + 1;\\n' +
      '    return new Uint8Array(inflateRawSync(data)) }\\n' +
      '}\\n'
    return { url: 'data:text/javascript,' + encodeURIComponent(shim), shortCircuit: true }
  }
  return next(specifier, context)
}
`
register('data:text/javascript,' + encodeURIComponent(hooks))

// 1. fetch for file: URLs.
const networkFetch = globalThis.fetch
globalThis.fetch = async (input, init = {}) => {
  const url = String(input instanceof Request ? input.url : input)
  if (!url.startsWith('file:')) return networkFetch(input, init)
  const path = fileURLToPath(url)
  if (init.method === 'HEAD') {
    const st = await stat(path)
    return new Response(null, { status: 200, headers: { 'Content-Length': String(st.size) } })
  }
  let data
  try {
    data = await readFile(path)
  } catch (err) {
    return new Response(String(err), { status: 404 })
  }
  const range = new Headers(init.headers).get('Range')
  const m = range && /^bytes=(\d+)-(\d*)$/.exec(range)
  if (m) {
    const start = Number(m[1])
    const end = m[2] === '' ? data.length : Number(m[2]) + 1
    return new Response(data.subarray(start, end), { status: 206 })
  }
  return new Response(data, { status: 200 })
}

// 3. Microseconds kept.
const { DEFAULT_PARSERS } = await import(pathToFileURL(join(mods, 'hyparquet', 'src', 'convert.js')).href)
DEFAULT_PARSERS.timestampFromMicroseconds = micros => ({ ts_us: micros.toString() })

const { icebergManifests, icebergMetadata, icebergRead } = await import(pathToFileURL(join(mods, 'icebird', 'src', 'index.js')).href)

// tableUrl/metadata/<file>: the table's location is two levels up.
const cut = metadataLocation.lastIndexOf('/metadata/')
if (cut < 0) {
  console.error(`icebird-read: ${metadataLocation} is not under a metadata/ directory`)
  process.exit(2)
}
const tableUrl = metadataLocation.slice(0, cut)
const metadataFileName = metadataLocation.slice(cut + '/metadata/'.length)
const metadata = await icebergMetadata({ tableUrl, metadataFileName })
// The snapshot asked for, by id. The metadata's JSON was parsed into
// numbers, which round an id past 2^53: the argument is rounded alike.
let snapshotId
if (snapshotArg !== undefined) {
  const snapshot = metadata.snapshots?.find(s => s['snapshot-id'] === Number(snapshotArg))
  if (!snapshot) {
    console.error(`icebird-read: ${metadataLocation} holds no snapshot ${snapshotArg}`)
    process.exit(2)
  }
  metadata['current-snapshot-id'] = snapshot['snapshot-id']
  if (snapshot['schema-id'] !== undefined) metadata['current-schema-id'] = snapshot['schema-id']
  snapshotId = snapshotArg
}
let rows = []
let files, readError
if (snapshotId === undefined) {
  rows = await icebergRead({ tableUrl, metadata })
} else {
  files = []
  for (const { entries } of await icebergManifests(metadata)) {
    for (const entry of entries) {
      if (entry.status === 2) continue // deleted from the snapshot
      const f = entry.data_file
      files.push({ path: f.file_path, content: f.content ?? 0, record_count: f.record_count })
    }
  }
  try {
    rows = await icebergRead({ tableUrl, metadata })
  } catch (err) {
    readError = String(err?.stack ?? err)
  }
}
const schema = metadata.schemas.find(s => s['schema-id'] === metadata['current-schema-id'])

const json = JSON.stringify({
  schema: schema.fields.map(f => ({ id: f.id, name: f.name, type: f.type })),
  rows,
  ...(snapshotId === undefined ? {} : { snapshot_id: snapshotId, files, read_error: readError ?? null }),
  inflate_fallbacks: globalThis.__icebirdInflateFallbacks ?? 0,
}, (_, v) => {
  if (typeof v === 'bigint') return v.toString()
  if (v === undefined) return null
  return v
})
process.stdout.write(json + '\n')
