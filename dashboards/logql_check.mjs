// Parses LogQL expressions with Grafana's own LogQL grammar (@grafana/lezer-logql, the parser
// behind Grafana's Loki query editor) and reports every syntax error.
//
// stdin:  a JSON array of expressions (template variables already substituted).
// stdout: a JSON array, one object per expression, in order:
//         {"errors": [{"from": 3, "to": 4, "text": "}"}], "strings": ["\"ingress\"", ...],
//          "shape": "LogQL(Expr(LogExpr(Selector(...))))"}
//         `errors` lists the error nodes of the parse tree; `strings` the raw text of every
//         String token; `shape` the tree's node names without any text. Two expressions that
//         differ only inside string literals have the same shape, which is how the caller
//         proves that a substituted value stayed inside its literal.
// exit:   0 when every expression parsed cleanly, 1 when any has an error, 2 on bad input.
//
// Lezer parsers are error-tolerant: they always return a tree and mark what they could not
// parse with error nodes (`type.isError`, named "⚠"), so a clean parse means a tree without
// any error node, and a tree whose top node holds at least one expression.
import { parser } from '@grafana/lezer-logql';

function check(expr) {
  const errors = [];
  const strings = [];
  const shape = [];
  const tree = parser.parse(expr);
  tree.iterate({
    enter(node) {
      shape.push(node.name, '(');
      if (node.type.isError) {
        errors.push({ from: node.from, to: node.to, text: expr.slice(node.from, node.to) });
      } else if (node.name === 'String') {
        strings.push(expr.slice(node.from, node.to));
      }
    },
    leave() {
      shape.push(')');
    },
  });
  const top = tree.topNode;
  if (top.name !== 'LogQL' || top.firstChild === null) {
    errors.push({ from: 0, to: expr.length, text: 'not a LogQL expression' });
  }
  return { errors, strings, shape: shape.join('') };
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

// Exit through process.exitCode, never process.exit(): stdout to a pipe is written
// asynchronously, and process.exit() would cut off whatever is still queued (at 64 KiB).
async function main() {
  let expressions;
  try {
    expressions = JSON.parse(await readStdin());
  } catch (err) {
    process.stderr.write(`logql_check: stdin is not JSON: ${err.message}\n`);
    return 2;
  }
  if (!Array.isArray(expressions) || !expressions.every((e) => typeof e === 'string')) {
    process.stderr.write('logql_check: stdin must be a JSON array of strings\n');
    return 2;
  }
  const results = expressions.map(check);
  process.stdout.write(JSON.stringify(results) + '\n');
  return results.some((r) => r.errors.length > 0) ? 1 : 0;
}

process.exitCode = await main();
