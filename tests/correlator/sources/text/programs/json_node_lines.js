// json_node_lines writes the JSON lines of Node's pino and bunyan to stdout, for the json text
// format: pino's time in epoch milliseconds, bunyan's in ISO 8601, both with numeric levels
// (10 trace ... 60 fatal), hostname and pid.
//
// Neither library is a dependency of the project: install them in a folder of their own, then
// regenerate the fixtures (from this folder) with:
//
//	npm install --prefix /tmp/json-node pino@10.4.0 bunyan@2.0.5
//	NODE_PATH=/tmp/json-node/node_modules node json_node_lines.js pino > ../fixtures/json_pino.log
//	NODE_PATH=/tmp/json-node/node_modules node json_node_lines.js bunyan > ../fixtures/json_bunyan.log
"use strict";

const request = { request_id: "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab", host: "worker-1" };

function lines(logger) {
  logger.info("service started");
  logger.debug(request, "handling request");
  logger.warn({ trace: { id: "4bf92f3577b34da6a3ce929d0e0e4736" } }, 'slow "spawn"\nsecond line');
  logger.error({ err: new Error("boom: disk full"), attempt: 3 }, "write failed");
  logger.fatal("giving up");
  logger.trace({ tags: ["a", "b"] }, "trace detail");
}

const form = process.argv[2];
if (form === "pino") {
  lines(require("pino")({ level: "trace" }));
} else if (form === "bunyan") {
  const bunyan = require("bunyan");
  // The standard serializers turn an Error into its message, name and stack.
  lines(bunyan.createLogger({ name: "app", level: "trace", serializers: bunyan.stdSerializers }));
} else {
  console.error("usage: node json_node_lines.js pino|bunyan");
  process.exit(2);
}
