// Text -> ids goldens for the tiny tokenizer.json of every whole-model case, from Hugging Face's own
// JavaScript port of `tokenizers` (npm @huggingface/tokenizers, the tokenizer of transformers.js),
// so `attntrace model --text` can be checked against an implementation nobody here wrote.
//
// Regenerate (after make_model_goldens.py; npm reaches the registry, nothing else is needed):
//   npm install --prefix /tmp/tokjs @huggingface/tokenizers@0.2.0
//   TOKENIZERS_JS=/tmp/tokjs/node_modules/@huggingface/tokenizers/dist/tokenizers.mjs \
//     node tests/goldens/tokenize_texts.mjs
// Writes tests/fixtures/models/full_<case>/golden/text.json:
//   {"source", "texts": [{"text", "ids", "tokens", "ids_no_special", "decoded"}]}
// ids: encode(text) with the post-processor's special tokens (BOS, [CLS] ... [SEP], <s> ... </s>);
// ids_no_special: encode(text, {add_special_tokens: false}) (--no-special-tokens); decoded:
// decode(ids, {skip_special_tokens: true}).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const { Tokenizer } = await import(process.env.TOKENIZERS_JS ?? "@huggingface/tokenizers");
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "models");
const manifest = JSON.parse(fs.readFileSync(path.join(root, "full_cases.json"), "utf8"));

// Merges, a byte-level multi-byte character, a tab, a mask token where the family has one.
const TEXTS = {
  bert: ["The cat sat on the [MASK].", "Hello world, the dog is in Paris!", "Héllo wörld ✓"],
  roberta: ["The cat sat on the <mask>.", "the cat is on the mat", "Héllo wörld ✓\tend"],
  decoder: ["the cat sat on the mat", "An attention head is in the cat.", "Héllo wörld ✓\tend"],
};

for (const entry of manifest.cases) {
  const folder = path.join(root, entry.name);
  const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(path.join(folder, "tokenizer.json"), "utf8")), {});
  const texts = TEXTS[entry.model_type] ?? TEXTS.decoder;
  const out = texts.map((text) => {
    const e = tokenizer.encode(text);
    return {
      text, ids: e.ids, tokens: e.tokens,
      ids_no_special: tokenizer.encode(text, { add_special_tokens: false }).ids,
      decoded: tokenizer.decode(e.ids, { skip_special_tokens: true }),
    };
  });
  const doc = { source: "npm @huggingface/tokenizers 0.2.0: new Tokenizer(tokenizer.json, {}).encode(text)", texts: out };
  fs.writeFileSync(path.join(folder, "golden", "text.json"), JSON.stringify(doc, null, 1) + "\n");
  console.log(`${entry.name}: ${out.map((t) => t.ids.length).join(" ")} ids`);
}
