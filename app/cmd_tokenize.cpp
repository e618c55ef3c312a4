// attntrace tokenize MODEL (--text S | --text-file F | -) [--no-special-tokens] [--format text|json]
// attntrace tokenize MODEL --jsonl F [--no-special-tokens]: many texts, one JSON document a line
// attntrace tokenize MODEL --decode IDS: a checkpoint's own tokenizer, from its tokenizer.json, or
// a GGUF file's, from its metadata, as llama.cpp tokenizes.
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>

#include <charconv>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/text/tokenizer.hpp"
#include "commands.hpp"
#include "flag_parsing.hpp"

namespace {

struct TokenizeOptions {
    std::string model;
    std::string stdin_marker;      // "-": the text is stdin
    std::string text;
    std::string text_file;
    std::string decode;
    std::string jsonl;             // a JSON Lines file of texts (- for stdin)
    bool text_given = false;
    bool format_given = false;
    bool no_special = false;
    std::size_t threads = 0;       // 0: every core (the model uses 2 at most)
    std::string format = "text";
};

// --decode's ids: "15496,995".
std::vector<std::uint32_t> parse_ids(const std::string& list) {
    std::vector<std::uint32_t> ids;
    std::size_t at = 0;
    while (at <= list.size()) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        std::uint32_t id = 0;
        const auto r = std::from_chars(item.data(), item.data() + item.size(), id);
        if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size())
            throw attntrace::UsageError("--decode: \"" + item + "\" is not a token id (expected ids like 15496,995)");
        ids.push_back(id);
        at = comma + 1;
    }
    return ids;
}

// The whole content of a file (its mapping, not a copy) or of stdin, and its name for messages.
struct Input {
    std::optional<attntrace::FileBytes> file;
    std::string stdin_bytes;
    std::string name;
    std::string_view bytes() const { return file ? file->bytes() : std::string_view(stdin_bytes); }
};

Input read_all(const std::string& file) {
    Input in;
    if (file == "-") {
        in.stdin_bytes.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        if (std::cin.bad()) throw attntrace::InputError("stdin: read failed");
        in.name = "stdin";
        return in;
    }
    in.file.emplace(attntrace::FileBytes::open(file));
    in.file->resident(0, in.file->bytes().size());  // its pages mapped by one call, not a fault each
    in.name = file;
    return in;
}

// The text to tokenize (from OPT, or read into IN) and its name for messages.
std::pair<std::string_view, std::string> read_text(const TokenizeOptions& opt, Input& in) {
    if (opt.text_given) return {opt.text, "--text"};
    in = read_all(opt.stdin_marker.empty() ? opt.text_file : "-");
    return {in.bytes(), in.name};
}

// A pipe on stdout holds 64 KiB: the 18 MB of JSON of a 1 MB text would stop this process some 300
// times, each time until the reader has drained it. Widened to 1 MiB (Linux's limit for an
// unprivileged process, /proc/sys/fs/pipe-max-size), the writing goes on while the reader reads.
// A hint: where the kernel refuses (or stdout is no pipe), nothing changes.
void widen_stdout_pipe() {
#ifdef F_SETPIPE_SZ
    struct stat st {};
    if (fstat(1, &st) == 0 && S_ISFIFO(st.st_mode)) fcntl(1, F_SETPIPE_SZ, 1 << 20);
#endif
}

// --jsonl: every line's text encoded first (an error prints nothing), then one JSON document a line.
void tokenize_lines(const attntrace::Tokenizer& tokenizer, const TokenizeOptions& opt) {
    if (opt.format_given && opt.format != "json")
        throw attntrace::UsageError("--jsonl writes one JSON document a line; --format " + opt.format + " does not apply");
    const Input in = read_all(opt.jsonl);
    const std::string& name = in.name;
    const std::vector<std::string> texts = attntrace::json_lines_texts(in.bytes(), name);
    std::vector<attntrace::Encoding> encodings;
    encodings.reserve(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) encodings.push_back(tokenizer.encode(texts[i], !opt.no_special, name));
    for (const attntrace::Encoding& e : encodings) attntrace::write_encoding_json(e, std::cout);
}

void run_tokenize(const TokenizeOptions& opt) {
    const int sources = int(opt.text_given) + int(!opt.text_file.empty()) + int(!opt.stdin_marker.empty()) +
                        int(!opt.decode.empty()) + int(!opt.jsonl.empty());
    if (sources != 1)
        throw attntrace::UsageError("tokenize: give exactly one of --text S, --text-file F, - (stdin), --jsonl F or --decode IDS");
    if (!opt.stdin_marker.empty() && opt.stdin_marker != "-")
        throw attntrace::UsageError("tokenize: unexpected argument \"" + opt.stdin_marker + "\" (- reads the text from stdin)");
    // One malloc arena for the whole process, set before the load starts its second thread: that
    // thread's words and scratch then reuse the pages the load freed instead of a fresh arena's
    // (each page ~10 µs to fault on a VM). GPT-2 on 1 MB of mixed scripts: 106-109 -> 99-102 ms,
    // 145-154 -> 133-142 ms of CPU; the others unchanged (docs/tokenize.md). Not for the model
    // commands: their workers allocate at once, and one arena made `ablate --heads each` 3-5% slower.
    mallopt(M_ARENA_MAX, 1);
    auto tokenizer = attntrace::Tokenizer::load(opt.model, opt.threads);
    if (!opt.decode.empty()) {
        std::cout << tokenizer.decode(parse_ids(opt.decode)) << '\n';
        return;
    }
    widen_stdout_pipe();
    if (!opt.jsonl.empty()) return tokenize_lines(tokenizer, opt);
    Input in;
    const auto [text, source] = read_text(opt, in);
    if (opt.format == "json") tokenizer.encode_json(text, !opt.no_special, source, std::cout);
    else tokenizer.encode_text(text, !opt.no_special, source, std::cout);
}

}  // namespace

void setup_tokenize(CLI::App& app) {
    auto [opt, cmd] = add_command<TokenizeOptions>(app, "tokenize", "A checkpoint's own tokenizer (tokenizer.json, or a GGUF file's): text to ids, ids to text", run_tokenize,
                                                      {{"decode: id", "--decode: id"}});
    cmd->add_option("MODEL", opt->model, "a checkpoint folder holding tokenizer.json, a tokenizer.json, or a GGUF file")->required();
    cmd->add_option("STDIN", opt->stdin_marker, "- : read the text from stdin");
    cmd->add_option("--text", opt->text, "the text to tokenize")->each([o = opt.get()](const std::string&) { o->text_given = true; });
    cmd->add_option("--text-file", opt->text_file, "tokenize this file's whole content as one text (- for stdin)");
    cmd->add_option("--threads", opt->threads, "number of threads (default: all cores; a text of 64 KB and more uses 2 at most)")
        ->check(positive_integer(1024));
    cmd->add_flag("--no-special-tokens", opt->no_special, "add no special tokens (add_special_tokens=False)");
    cmd->add_option("--format", opt->format, "text (one token a line) or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->each([o = opt.get()](const std::string&) { o->format_given = true; });
    cmd->add_option("--jsonl", opt->jsonl,
                    "many texts through one load: F (- for stdin) holds a JSON string (or {\"text\": ...}) a line; "
                    "prints one JSON document a line");
    cmd->add_option("--decode", opt->decode, "ids to text, as transformers' tokenizer.decode(ids) (a GGUF file: llama_detokenize): --decode 15496,995");
    cmd->footer(R"(Text format: one token a line, tab-separated: index, id, the vocabulary string and the text it
covers (C-style escapes: \t \n \r \\ \xNN), then the count. JSON: {"ids", "tokens", "offsets"}, the
offsets as byte spans [b0, b1) of the input. Special tokens are added as the file's post_processor
adds them. A GGUF file: the ids of llama.cpp's llama_tokenize(add_special, parse_special false).
Invalid UTF-8 in the text, or a tokenizer.json or GGUF tokenizer we cannot read, is exit 3.

Examples:
  attntrace tokenize path/to/gpt2 --text "Hello world"
  attntrace tokenize path/to/bert --text-file notes.txt --format json | jq .ids
  attntrace tokenize path/to/gpt2 --jsonl texts.jsonl > ids.jsonl
  attntrace tokenize qwen3-q4_k_m.gguf --text "Hello <think>"
  attntrace tokenize path/to/gpt2 --decode 15496,995)");
}
