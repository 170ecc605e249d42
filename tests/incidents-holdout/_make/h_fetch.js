// One request with Node.js's fetch (undici), as the hold-out cases' Node.js agents make it.
//
// node h_fetch.js METHOD URL [BODY] [HEADERS_JSON]
// Prints one JSON object: start_ns, end_ns, status, status_text, body, and on failure `err`
// as pino's standard error serializer renders it (type, message, stack with the cause chain
// appended), plus the cause's code. NODE_EXTRA_CA_CERTS decides which CAs are trusted.
'use strict';
const { err: serializeErr } = require('pino-std-serializers');

async function main() {
  const [method, url, body, headers] = process.argv.slice(2);
  const out = { start_ns: (BigInt(Date.now()) * 1000000n).toString() };
  try {
    const res = await fetch(url, {
      method,
      body: body || undefined,
      headers: { 'Content-Type': 'application/json', 'User-Agent': 'bmagent-js/1.8.4', ...JSON.parse(headers || '{}') },
      signal: AbortSignal.timeout(10000),
    });
    out.status = res.status;
    out.status_text = res.statusText;
    out.body = await res.text();
  } catch (e) {
    out.status = 0;
    out.err = serializeErr(e);
    if (e.cause) out.cause_code = e.cause.code;
  }
  out.end_ns = (BigInt(Date.now()) * 1000000n).toString();
  process.stdout.write(JSON.stringify(out) + '\n');
}
main();
