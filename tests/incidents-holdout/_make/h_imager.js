// The node-side image writer of the hold-out node case (Node.js, pino to IMAGER_LOG).
//
// node h_imager.js SOURCE TARGET   (env IMAGER_LOG, ALLOCATION_ID, NODE_ID, WORKFLOW_ID)
// Copies SOURCE to TARGET in 4 MiB chunks with fs.writeSync; a failure is logged and rethrown,
// so Node prints it and exits 1 (what the Ansible task that runs it sees).
'use strict';
const fs = require('fs');
const pino = require('pino');

if (process.argv[2] === '--version') {
  process.stdout.write('bm-imager 1.12.0\n');
  process.exit(0);
}
const log = pino(
  { base: { service: 'bm-imager', node_id: process.env.NODE_ID } },
  pino.destination({ dest: process.env.IMAGER_LOG, sync: true }),
);
const ids = { allocation_id: process.env.ALLOCATION_ID, workflow_id: process.env.WORKFLOW_ID };
const [source, target] = process.argv.slice(2);
const size = fs.statSync(source).size;
log.info({ ...ids, source, target, bytes: size }, 'writing image');
const input = fs.openSync(source, 'r');
const output = fs.openSync(target, 'w');
const chunk = Buffer.alloc(4 * 1024 * 1024);
let written = 0;
try {
  for (;;) {
    const n = fs.readSync(input, chunk, 0, chunk.length, written);
    if (n === 0) break;
    written += fs.writeSync(output, chunk, 0, n);
  }
  fs.fsyncSync(output);
} catch (err) {
  log.error({ ...ids, err, written, target }, 'image write failed');
  throw err;
}
log.info({ ...ids, bytes: written }, 'image written');
