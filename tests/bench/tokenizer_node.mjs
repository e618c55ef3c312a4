// The reference side of bench.py's tokenizer section: @huggingface/tokenizers in node, warm, its
// encode call alone. Usage: NODE_PATH=DIR/node_modules node tokenizer_node.mjs FOLDER TEXT_FILE
// Prints {"seconds": s, "tokens": n} for the median of 3 timed calls after one warm-up.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.env.NODE_PATH || ".", "x.js"));
const { Tokenizer } = require("@huggingface/tokenizers");
const [folder, textFile] = process.argv.slice(2);
const cfgFile = path.join(folder, "tokenizer_config.json");
const t = new Tokenizer(JSON.parse(fs.readFileSync(path.join(folder, "tokenizer.json"), "utf8")),
                        fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, "utf8")) : {});
const text = fs.readFileSync(textFile, "utf8");
let n = t.encode(text).ids.length;  // warm-up
const times = [];
for (let i = 0; i < 3; ++i) {
  const t0 = process.hrtime.bigint();
  n = t.encode(text).ids.length;
  times.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
times.sort((a, b) => a - b);
console.log(JSON.stringify({ seconds: times[1], tokens: n }));
