// The reference side of bench.py's tokenizer section, in node, warm, its encode call alone:
// @huggingface/tokenizers (the JS port), or with "rust" @anush008/tokenizers (Hugging Face's Rust
// tokenizers 0.22 through napi; its encode runs on one libuv worker thread).
// Usage: NODE_PATH=DIR/node_modules node tokenizer_node.mjs FOLDER TEXT_FILE [rust]
// Prints {"seconds": s, "tokens": n} for the median of 3 timed calls after one warm-up.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.env.NODE_PATH || ".", "x.js"));
const [folder, textFile, which] = process.argv.slice(2);
const text = fs.readFileSync(textFile, "utf8");

// encode(text) -> its ids, with the special tokens as the tokenizer adds them
async function encoder() {
  if (which === "rust") {
    const { Tokenizer } = require("@anush008/tokenizers");
    const t = Tokenizer.fromFile(path.join(folder, "tokenizer.json"));
    t.disableTruncation();
    t.disablePadding();
    return async (s) => (await t.encode(s, null, { addSpecialTokens: true })).getIds();
  }
  const { Tokenizer } = require("@huggingface/tokenizers");
  const cfgFile = path.join(folder, "tokenizer_config.json");
  const t = new Tokenizer(JSON.parse(fs.readFileSync(path.join(folder, "tokenizer.json"), "utf8")),
                          fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, "utf8")) : {});
  return async (s) => t.encode(s).ids;
}

const encode = await encoder();
let n = (await encode(text)).length;  // warm-up
const times = [];
for (let i = 0; i < 3; ++i) {
  const t0 = process.hrtime.bigint();
  n = (await encode(text)).length;
  times.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
times.sort((a, b) => a - b);
console.log(JSON.stringify({ seconds: times[1], tokens: n }));
