"""Tiny but real tokenizer.json files (Hugging Face `tokenizers` format, version "1.0").

byte_level_bpe: GPT-2's pipeline (ByteLevel pre-tokenizer with its regex, BPE over the 256 byte
symbols of bytes_to_unicode in GPT-2's id order, a few English merges, ByteLevel decoder), with the
special tokens of each family placed where that family puts them (first for NeoX / BLOOM / RoBERTa,
last for GPT-2 / Llama 3 / Qwen) and the family's post-processor (none, a BOS template, RoBERTa's
<s> ... </s>). wordpiece: BERT's (BertNormalizer lowercase, BertPreTokenizer, WordPiece with ##
continuations, [CLS] ... [SEP] template).

Each builder returns (tokenizer dict, {special token -> id}, vocabulary size).
"""

MERGES = [  # (left, right) in GPT-2's byte alphabet: "Ġ" is the space byte
    ("Ġ", "t"), ("h", "e"), ("Ġ", "a"), ("i", "n"), ("Ġt", "he"), ("r", "e"), ("o", "n"), ("e", "r"),
    ("Ġ", "s"), ("a", "t"), ("Ġ", "w"), ("o", "u"), ("e", "n"), ("Ġ", "c"), ("i", "s"), ("Ġ", "on"),
    ("a", "n"), ("Ġ", "m"), ("Ġc", "at"), ("Ġs", "at"), ("Ġ", "is"), ("Ġm", "at"), ("Ġa", "n"),
    ("in", "g"),
]


def bytes_to_unicode():
    """GPT-2's encoder.py bytes_to_unicode: byte -> printable character; the 188 printable bytes
    keep their code point, the other 68 map to 256 + k. Id i of the byte vocabulary is the i-th
    byte of that list (GPT-2's encoder.json order: "!" is 0)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def added(token, i, lstrip=False):
    return {"id": i, "content": token, "single_word": False, "lstrip": lstrip, "rstrip": False,
            "normalized": False, "special": True}


def template(first, last, ids):
    """TemplateProcessing: FIRST A LAST (either may be None), pairs FIRST A LAST B LAST."""
    def seq(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    def sp(token, type_id):
        return {"SpecialToken": {"id": token, "type_id": type_id}}
    single = ([sp(first, 0)] if first else []) + [seq("A", 0)] + ([sp(last, 0)] if last else [])
    pair = single + [seq("B", 1)] + ([sp(last, 1)] if last else [])
    used = [t for t in (first, last) if t]
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in used}}


def byte_level_bpe(front=(), back=(), post=None, mask=None):
    """FRONT specials get ids 0.., then the 256 bytes and the merges, then BACK specials (and MASK,
    lstrip as RoBERTa's <mask>). POST: None (ByteLevel), ("bos", token) or ("roberta", cls, sep)."""
    vocab = {}
    for token in front:
        vocab[token] = len(vocab)
    for _, ch in bytes_to_unicode():
        vocab[ch] = len(vocab)
    for left, right in MERGES:
        assert left in vocab and right in vocab, (left, right)
        vocab[left + right] = len(vocab)
    for token in list(back) + ([mask] if mask else []):
        vocab[token] = len(vocab)
    specials = {t: vocab[t] for t in list(front) + list(back) + ([mask] if mask else [])}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if post is None:
        post_processor = dict(byte_level, trim_offsets=False)
    elif post[0] == "bos":
        post_processor = template(post[1], None, specials)
    else:
        post_processor = {"type": "RobertaProcessing", "sep": [post[2], specials[post[2]]],
                          "cls": [post[1], specials[post[1]]], "trim_offsets": True, "add_prefix_space": False}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(t, i, lstrip=(t == mask)) for t, i in sorted(specials.items(), key=lambda kv: kv[1])],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": post_processor,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [f"{a} {b}" for a, b in MERGES]},
    }
    return tok, specials, len(vocab)


WORDS = ["the", "a", "cat", "sat", "on", "mat", "dog", "is", "in", "paris", "capital", "of", "france",
         "hello", "world", "attention", "head", "token", "##s", "##ing", "##ed", "##er"]


def wordpiece():
    """BERT's pipeline over [PAD] [UNK] [CLS] [SEP] [MASK], single characters (and their ##
    continuations) and a few words."""
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789") + list(".,!?'-:;()\"")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars[:36]] + WORDS
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    specials = {t: vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(t, i) for t, i in specials.items()],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": template("[CLS]", "[SEP]", specials),
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }
    return tok, specials, len(vocab)


FAMILY_TOKENIZERS = {  # family -> builder call, as the family's hub tokenizers are laid out
    "gpt2": lambda: byte_level_bpe(back=["<|endoftext|>"]),
    "llama": lambda: byte_level_bpe(back=["<|begin_of_text|>", "<|end_of_text|>"],
                                    post=("bos", "<|begin_of_text|>")),
    "mistral": lambda: byte_level_bpe(front=["<unk>", "<s>", "</s>"], post=("bos", "<s>")),
    "qwen2": lambda: byte_level_bpe(back=["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    "qwen3": lambda: byte_level_bpe(back=["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    "gpt_neox": lambda: byte_level_bpe(front=["<|endoftext|>", "<|padding|>"]),
    "bloom": lambda: byte_level_bpe(front=["<unk>", "<s>", "</s>", "<pad>"]),
    "roberta": lambda: byte_level_bpe(front=["<s>", "<pad>", "</s>", "<unk>"], mask="<mask>",
                                      post=("roberta", "<s>", "</s>")),
    "bert": wordpiece,
    **{kind: (lambda: byte_level_bpe(front=["<pad>", "<eos>", "<bos>", "<unk>"], post=("bos", "<bos>")))
       for kind in ("gemma", "gemma2", "gemma3_text")},
    "phi3": lambda: byte_level_bpe(front=["<unk>", "<s>", "</s>"], back=["<|endoftext|>"]),
    "olmo2": lambda: byte_level_bpe(back=["<|endoftext|>", "<|pad|>"]),
    "mixtral": lambda: byte_level_bpe(front=["<unk>", "<s>", "</s>"], post=("bos", "<s>")),
    "qwen2_moe": lambda: byte_level_bpe(back=["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    "qwen3_moe": lambda: byte_level_bpe(back=["<|endoftext|>", "<|im_start|>", "<|im_end|>"]),
    "olmoe": lambda: byte_level_bpe(front=["<|endoftext|>", "<|padding|>"]),
}
