// The inventory API of the hold-out cases: Node.js http + node-postgres (pg) + pino.
//
// Logs pino JSON lines on stdout (h_cases.py maps them to the record schema as a log shipper
// would: time -> ts, level number -> word, msg -> event, err -> error {type, message, stack}).
// Its SQL carries sqlcommenter comments with the request's correlation and allocation ids.
//
// Environment: PORT, PGHOST, PGPORT, PGDATABASE, PGUSER, SERVICE, DB_RETRIES (attempts after
// the first on connection-class errors), ENGINE_URL (the workflow engine, for releases).
'use strict';
const http = require('http');
const { Pool } = require('pg');
const pino = require('pino');

const service = process.env.SERVICE || 'inventory-api';
const log = pino({ base: { service } });
const retries = Number(process.env.DB_RETRIES || '0');
const pool = new Pool({
  application_name: service,
  max: 4,
  idleTimeoutMillis: 0,
  connectionTimeoutMillis: 3000,
});
pool.on('error', (err) => log.warn({ err }, 'idle database client failed and was removed from the pool'));

const RETRYABLE = new Set(['ECONNREFUSED', 'ECONNRESET', '57P01', '57P02', '57P03']);

function retryable(err) {
  return RETRYABLE.has(err.code) || /Connection terminated/.test(err.message);
}

function comment(ids) {
  const pairs = Object.keys(ids)
    .sort()
    .filter((k) => ids[k])
    .map((k) => `${k}='${encodeURIComponent(ids[k])}'`);
  return pairs.length ? ` /*${pairs.join(',')}*/` : '';
}

async function query(ctx, text, values) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await pool.query(text + comment(ctx.ids), values);
    } catch (err) {
      if (attempt < retries && retryable(err)) {
        const delay = 500 * 2 ** attempt;
        log.warn({ ...ctx.ids, err, attempt: attempt + 1, retry_in_ms: delay }, 'database query failed, retrying');
        await new Promise((r) => setTimeout(r, delay));
        continue;
      }
      throw err;
    }
  }
}

function send(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function report(ctx, id, body, res) {
  const result = await query(
    ctx,
    'UPDATE allocations SET state = $1, node_id = $2, updated_at = now() WHERE id = $3',
    [body.state, body.node_id, id],
  );
  if (result.rowCount === 0) return send(res, 404, { error: `allocation ${id} not found` });
  log.info({ ...ctx.ids, state: body.state }, 'allocation updated');
  return send(res, 200, { id, state: body.state });
}

async function show(ctx, id, res) {
  const result = await query(ctx, 'SELECT id, state, node_id FROM allocations WHERE id = $1', [id]);
  if (result.rowCount === 0) return send(res, 404, { error: `allocation ${id} not found` });
  return send(res, 200, result.rows[0]);
}

async function release(ctx, id, res) {
  const answer = await fetch(`${process.env.ENGINE_URL}/allocations/${id}/events/release`, {
    method: 'POST',
    headers: { 'X-Correlation-ID': ctx.ids.correlation_id },
  });
  const text = await answer.text();
  if (answer.status === 409) {
    log.warn({ ...ctx.ids, engine_status: 409, engine_body: text }, 'release rejected by the workflow engine');
    return send(res, 409, { error: 'allocation cannot be released in its current state' });
  }
  if (!answer.ok) throw new Error(`workflow engine answered ${answer.status}`);
  return send(res, 202, { id, state: 'releasing' });
}

async function route(req, res, ctx, body) {
  const url = new URL(req.url, 'http://x');
  const m = url.pathname.match(/^\/v1\/allocations\/([^/]+)(\/[a-z]+)?$/);
  if (url.pathname === '/healthz') return send(res, 200, { ok: true });
  if (!m) return send(res, 404, { error: 'no such route' });
  const [, id, sub] = m;
  ctx.ids.allocation_id = id;
  if (req.method === 'POST' && sub === '/report') return report(ctx, id, body, res);
  if (req.method === 'POST' && sub === '/release') return release(ctx, id, res);
  if (req.method === 'GET' && sub === '/console') {
    return send(res, 404, { error: 'console not ready' });
  }
  if (req.method === 'GET' && !sub) return show(ctx, id, res);
  return send(res, 405, { error: 'method not allowed' });
}

const server = http.createServer((req, res) => {
  const started = process.hrtime.bigint();
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const ctx = {
      ids: { correlation_id: req.headers['x-correlation-id'] || req.headers['x-request-id'] },
    };
    let body = {};
    try {
      body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
      await route(req, res, ctx, body);
    } catch (err) {
      log.error({ ...ctx.ids, err }, `${req.method} ${req.url.split('?')[0]} failed`);
      send(res, 503, { error: 'database unavailable' });
    }
    const duration = Number(process.hrtime.bigint() - started) / 1e9;
    log.info(
      { ...ctx.ids, method: req.method, path: req.url, status: res.statusCode, duration_s: duration },
      'request completed',
    );
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1', () => log.info(`listening on 127.0.0.1:${process.env.PORT}`));
