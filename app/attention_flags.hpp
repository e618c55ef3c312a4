#pragma once
// The flag sets the attention commands share: sdpa's and mha's (AttentionFlags), mha's model and
// masks (MhaFlags, which check reuses), and the modes of a run parsed from their flags' words.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "attntrace/attention/positions.hpp"
#include "flag_parsing.hpp"
#include "picture_flags.hpp"

// The modes of a run, parsed from their flags' words.
enum class Precision { f32, f64 };              // --dtype
enum class TraceDetail { none, shapes, values };  // --trace
enum class TraceFormat { text, json };          // --format
std::string_view precision_name(Precision p);   // "f32", "f64"

// Runs fn.template operator()<double>() for f64, <float>() for f32.
template <class Fn>
void with_precision(Precision precision, Fn&& fn) {
    if (precision == Precision::f64) {
        fn.template operator()<double>();
    } else {
        fn.template operator()<float>();
    }
}

// A flag whose words name the values of enum MODE (its current value is the default). The help and
// the error for another word read as CLI::IsMember's: "--dtype: f16 not in {f32,f64}".
template <class E>
void add_mode_option(CLI::App& cmd, const std::string& name, E& mode, const std::vector<std::pair<std::string, E>>& words,
                     const std::string& help) {
    std::string list, default_word;
    for (const auto& [word, value] : words) {
        list += (list.empty() ? "" : ",") + word;
        if (value == mode) default_word = word;
    }
    list = "{" + list + "}";
    const CLI::Validator to_value(
        [words, list](std::string& text) -> std::string {
            for (const auto& [word, value] : words)
                if (text == word) {
                    text = std::to_string(static_cast<int>(value));
                    return {};
                }
            return text + " not in " + list;
        },
        list);
    cmd.add_option(name, mode, help)->type_name("TEXT")->transform(to_value)->default_str(default_word);
}

// --dtype f32|f64 and --format text|json, as every computing command spells them.
void add_dtype_flag(CLI::App& cmd, Precision& dtype);
void add_format_flag(CLI::App& cmd, TraceFormat& format);

struct AttentionFlags {
    std::string query, key, value;
    std::optional<double> scale;
    std::optional<double> softcap;  // --softcap C: scores := tanh(s / C) * C before the masks
    bool causal = false;
    std::string attn_mask;
    std::string output;
    std::string attn_weights;
    Precision dtype = Precision::f32;
    TraceDetail trace = TraceDetail::shapes;
    TraceFormat format = TraceFormat::text;
    std::size_t threads = 0;
    std::vector<std::string> dumps;  // STAGE=FILE
    std::string max_memory;          // "" = default budget
    PictureFlags pictures;           // --heatmap, --plot, --report and their labels
    // positions (positions.hpp)
    std::string rotary;              // "", "half", "interleaved"
    double rotary_theta = 10000;
    std::size_t rotary_dims = 0;     // 0: the whole head dim
    bool alibi = false;
    std::size_t window = 0;          // 0: none
    std::string causal_align = "upper-left";
};

// The positions the flags ask for (--rotary, --alibi, --window, --causal-align, --causal), for
// HEADS heads of HEAD_DIM. Throws UsageError for rotary dims that are odd or past the head dim.
template <class T>
attntrace::PositionStages<T> positions_from_flags(const AttentionFlags& flags, std::size_t heads, std::size_t head_dim);

// The position parameters the core checks (position_stages.cpp) and the flags that set them.
inline const FlagNames kPositionFlagNames = {{"rotary dims", "--rotary-dims"}, {"ALiBi", "--alibi"}};

// Adds the flags both commands take to CMD.
void add_attention_flags(CLI::App& cmd, AttentionFlags& flags);
// The part of them that says what to compute (--scale, --causal, --attn-mask), for check.
void add_attention_input_flags(CLI::App& cmd, AttentionFlags& flags);


// mha's flags: the common ones, and the model and masks only mha has.
struct MhaFlags {
    AttentionFlags common;
    std::size_t heads = 0;
    std::size_t kv_heads = 0;
    std::string params;
    std::string prefix;
    std::string seed = "0";  // parsed by parse_seed: CLI11 would wrap -1
    bool bias = true;
    std::size_t head_dim = 0, value_head_dim = 0, out_dim = 0;
    std::string save_params;
    bool no_out_proj = false;
    std::string key_padding_mask;
    std::string valid_lens;
    bool average_heads = false;
    std::string model_dir;             // mha --model DIR: a Hugging Face checkpoint folder
    std::optional<std::size_t> layer;  // mha --layer N
    bool normed = false;               // mha --normed: the input is already normed
    bool add_bias_kv = false;          // mha --add-bias-kv: random init draws bias_k / bias_v
    bool add_zero_attn = false;        // mha --add-zero-attn
};

// What the library says of the parameters' options (param_names.cpp, params_check.cpp) in the
// words of mha's flags.
inline const FlagNames kParamFlagPhrases = {{"the prefix '", "--prefix '"},
                                            {"give the prefix ", "pass --prefix "},
                                            {"turn the output projection off", "pass --no-out-proj"}};

// Adds -q/-k/-v and the model's flags (--heads ... --valid-lens) to CMD; mha and check share them.
// --heads is left optional (check --sdpa has none): mha marks it required.
void add_mha_model_flags(CLI::App& cmd, MhaFlags& flags);
