// The GGUF reader (gguf.hpp): files built byte by byte here the way gguf-py's GGUFWriter lays
// them out (tests/goldens/gguf_writer.py writes the same layout and checks it against gguf-py),
// every metadata value type, tensor infos in numpy order, the types read dequantized, split
// files; and every hostile header refused with one InputError, never a crash or an allocation
// the file does not justify.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/gguf.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/model/checkpoint.hpp"
#include "attntrace/tensor/errors.hpp"
#include "gguf_builder.hpp"
#include "test_helpers.hpp"

using namespace attntrace;
using namespace attntrace::testing;

namespace {

std::string floats(std::initializer_list<float> xs) {
    std::string out;
    for (float x : xs) out += f32(x);
    return out;
}

// A Q8_0 block: f16 scale D (as bits) and 32 quants Q.
std::string q8_0_block(std::uint16_t d, const std::vector<std::int8_t>& q) {
    std::string out = le(d);
    for (std::int8_t v : q) out.push_back(static_cast<char>(v));
    return out;
}

std::string error_of_parse(const std::string& bytes) {
    return error_of<InputError>([&] { (void)parse_gguf(bytes, "f.gguf"); });
}

Builder sample() {
    Builder b;
    b.add("general.architecture", GgufType::string, gstr("llama"))
        .add("llama.block_count", GgufType::uint32, le<std::uint32_t>(3))
        .tensor("w", {2, 3}, 0, floats({1, 2, 3, 4, 5, 6}))
        .tensor("b", {2}, 0, floats({-1, 0.5f}));
    return b;
}

std::shared_ptr<GgufFiles> open_bytes(const TempDir& dir, const std::string& name, const std::string& bytes) {
    write_file(dir / name, bytes);
    return GgufFiles::open(dir / name);
}

}  // namespace

TEST_CASE("gguf: a header reads as written: metadata in order, tensors in numpy order, data aligned") {
    const std::string bytes = sample().bytes();
    const GgufHeader h = parse_gguf(bytes, "f.gguf");
    CHECK(h.version == 3);
    CHECK(h.alignment == 32);
    REQUIRE(h.metadata.size() == 2);
    CHECK(h.metadata[0].first == "general.architecture");
    CHECK(h.metadata[0].second.bytes == "llama");
    REQUIRE(h.tensors.size() == 2);
    CHECK(h.tensors[0].shape == Shape{3, 2});  // ne {2, 3} reversed
    CHECK(h.tensors[0].nbytes == 24);
    CHECK(h.tensors[0].offset == h.data_offset);
    CHECK(h.data_offset % 32 == 0);
    CHECK(h.tensors[1].offset == h.data_offset + 32);  // 24 bytes padded to 32
    CHECK(h.tensors[1].shape == Shape{2});
}

TEST_CASE("gguf: every metadata value type, nested arrays included, reads by type") {
    Builder b;
    b.add("u8", GgufType::uint8, le<std::uint8_t>(200))
        .add("i8", GgufType::int8, le<std::int8_t>(-5))
        .add("u16", GgufType::uint16, le<std::uint16_t>(60000))
        .add("i16", GgufType::int16, le<std::int16_t>(-300))
        .add("u32", GgufType::uint32, le<std::uint32_t>(4000000000u))
        .add("i32", GgufType::int32, le<std::int32_t>(-70000))
        .add("f32", GgufType::float32, f32(0.25f))
        .add("yes", GgufType::boolean, le<std::uint8_t>(1))
        .add("s", GgufType::string, gstr("h\xc3\xa9llo"))
        .add("u64", GgufType::uint64, le<std::uint64_t>(1ull << 40))
        .add("i64", GgufType::int64, le<std::int64_t>(-(1ll << 40)))
        .add("f64", GgufType::float64, le<std::uint64_t>(0x400921fb54442d18ull))  // pi
        .add("tokens", GgufType::array, le(std::uint32_t(8)) + le<std::uint64_t>(3) + gstr("a") + gstr("") + gstr("bc"))
        .add("scores", GgufType::array, le(std::uint32_t(6)) + le<std::uint64_t>(2) + f32(-1.5f) + f32(2))
        .add("types", GgufType::array, le(std::uint32_t(5)) + le<std::uint64_t>(2) + le<std::int32_t>(1) + le<std::int32_t>(-3))
        .add("nested", GgufType::array,
             le(std::uint32_t(9)) + le<std::uint64_t>(2) + le(std::uint32_t(4)) + le<std::uint64_t>(1) +
                 le<std::uint32_t>(7) + le(std::uint32_t(8)) + le<std::uint64_t>(1) + gstr("x"));
    TempDir dir;
    const auto g = open_bytes(dir, "m.gguf", b.bytes());
    CHECK(g->count("u8") == 200u);
    CHECK(g->number("i8") == -5.0);
    CHECK_THROWS_WITH_AS(g->count("i8"), (dir / "m.gguf" + ": key 'i8' is -5, not a count").c_str(), InputError);
    CHECK(g->count("u16") == 60000u);
    CHECK(g->number("i16") == -300.0);
    CHECK(g->count("u32") == 4000000000u);
    CHECK(g->number("i32") == -70000.0);
    CHECK(g->number("f32") == 0.25);
    CHECK(g->flag("yes") == true);
    CHECK(g->string("s") == "h\xc3\xa9llo");
    CHECK(g->count("u64") == (1ull << 40));
    CHECK(g->number("i64") == -double(1ll << 40));
    CHECK(g->number("f64") == doctest::Approx(M_PI).epsilon(1e-15));
    CHECK(g->strings("tokens") == std::vector<std::string_view>{"a", "", "bc"});
    CHECK(g->numbers("scores") == std::vector<double>{-1.5, 2});
    CHECK(g->integers("types") == std::vector<std::int64_t>{1, -3});
    CHECK(g->array_size("tokens") == 3u);
    CHECK(GgufFiles::to_json(*g->find("nested"), 10).dump() == R"([[7],["x"]])");
    CHECK(GgufFiles::to_json(*g->find("tokens"), 1).dump() == R"j(["a","... (2 more)"])j");
    CHECK_FALSE(g->string("absent").has_value());
    CHECK(g->strings("absent").empty());
    CHECK_THROWS_WITH_AS(g->string("u32"), (dir / "m.gguf" + ": key 'u32' is a uint32, not a string").c_str(), InputError);
    CHECK_THROWS_WITH_AS(g->strings("scores"),
                         (dir / "m.gguf" + ": key 'scores' is an array of float32, not of strings").c_str(), InputError);
    CHECK_THROWS_AS(g->number("s"), InputError);
    CHECK_THROWS_AS(g->flag("u8"), InputError);
}

TEST_CASE("gguf: F32, F16, BF16 and Q8_0 rows dequantize as ggml's to_float gives them") {
    std::vector<std::int8_t> q(32);
    for (int i = 0; i < 32; ++i) q[i] = static_cast<std::int8_t>(i * 8 - 128);
    const std::string q8 = q8_0_block(0x3800, q) + q8_0_block(0xbc00, std::vector<std::int8_t>(32, 3));  // d 0.5, -1
    Builder b;
    b.tensor("f32", {2, 2}, 0, floats({1.5f, -2, 3, 1e-30f}))
        .tensor("f16", {3}, 1, le<std::uint16_t>(0x3c00) + le<std::uint16_t>(0xc000) + le<std::uint16_t>(0x0001))
        .tensor("bf16", {2}, 30, le<std::uint16_t>(0x3f80) + le<std::uint16_t>(0xc0a0))
        .tensor("q8", {32, 2}, 8, q8)
        .tensor("q4k", {256}, 12, std::string(144, '\0'))
        .tensor("iq2", {256}, 16, std::string(66, '\0'));
    TempDir dir;
    const auto g = open_bytes(dir, "t.gguf", b.bytes());
    std::vector<float> out(64);
    g->read_rows(*g->tensor("f32"), 0, 2, out.data());
    CHECK(std::vector<float>(out.begin(), out.begin() + 4) == std::vector<float>{1.5f, -2, 3, 1e-30f});
    g->read_rows(*g->tensor("f32"), 1, 2, out.data());  // a row: ne[0] values
    CHECK(out[0] == 3);
    g->read_rows(*g->tensor("f16"), 0, 3, out.data());
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == -2.0f);
    CHECK(out[2] == std::ldexp(1.0f, -24));  // the smallest subnormal
    std::vector<double> wide(2);
    g->read_rows(*g->tensor("bf16"), 0, 2, wide.data());
    CHECK(wide == std::vector<double>{1.0, -5.0});
    g->read_rows(*g->tensor("q8"), 0, 2, out.data());
    for (int i = 0; i < 32; ++i) CHECK(out[i] == 0.5f * float(i * 8 - 128));
    for (int i = 32; i < 64; ++i) CHECK(out[i] == -3.0f);
    const float* in_place = g->in_place(*g->tensor("f32"), 0, 2);
    REQUIRE(in_place != nullptr);
    CHECK(in_place[1] == -2);
    CHECK(g->in_place(*g->tensor("q8"), 0, 2) == nullptr);
    std::vector<float> k(256, 1.0f);
    g->read_rows(*g->tensor("q4k"), 0, 256, k.data());  // all-zero blocks: d = dmin = 0
    CHECK_THROWS_WITH_AS(g->read_rows(*g->tensor("q4k"), 0, 1, k.data()),
                         (dir / "t.gguf" + ": tensor 'q4k': rows [0, 1) are not whole blocks of q4_K").c_str(), InputError);
    CHECK(std::all_of(k.begin(), k.end(), [](float x) { return x == 0.0f; }));
    CHECK_THROWS_WITH_AS(g->read_rows(*g->tensor("iq2"), 0, 1, k.data()),
                         (dir / "t.gguf" + ": tensor 'iq2' is of type iq2_xxs, which attntrace does not read (it reads "
                                           "f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, "
                                           "iq4_xs, bf16)").c_str(),
                         InputError);
}

TEST_CASE("gguf: a split model is opened by its first file and holds the tensors of all") {
    TempDir dir;
    auto split = [](std::uint16_t no, std::int32_t total, const std::string& name) {
        Builder b;
        if (no == 0) b.add("general.architecture", GgufType::string, gstr("llama"));
        b.add("split.no", GgufType::uint16, le(no)).add("split.count", GgufType::uint16, le<std::uint16_t>(2));
        b.add("split.tensors.count", GgufType::int32, le(total));
        b.tensor(name, {1}, 0, floats({float(no)}));
        return b.bytes();
    };
    write_file(dir / "m-00001-of-00002.gguf", split(0, 2, "a"));
    write_file(dir / "m-00002-of-00002.gguf", split(1, 2, "b"));
    const auto g = GgufFiles::open(dir / "m-00001-of-00002.gguf");
    CHECK(g->file_count() == 2);
    REQUIRE(g->tensors().size() == 2);
    float x = 0;
    g->read_rows(*g->tensor("b"), 0, 1, &x);
    CHECK(x == 1);
    CHECK(error_of<InputError>([&] { GgufFiles::open(dir / "m-00002-of-00002.gguf"); }) ==
          dir / "m-00002-of-00002.gguf" + ": is split file 2 of 2: a split model is opened by its first file "
                                          "(NAME-00001-of-2.gguf)");
    write_file(dir / "m-00001-of-00002.gguf", split(0, 3, "a"));
    CHECK(error_of<InputError>([&] { GgufFiles::open(dir / "m-00001-of-00002.gguf"); }) ==
          dir / "m-00001-of-00002.gguf" + ": split.tensors.count is 3 but the 2 files hold 2 tensors");
    write_file(dir / "m-00002-of-00002.gguf", split(0, 2, "b"));
    CHECK(error_of<InputError>([&] { GgufFiles::open(dir / "m-00001-of-00002.gguf"); }) ==
          dir / "m-00002-of-00002.gguf" + ": is not split file 2 of 2 (its split.no)");
    std::filesystem::remove(dir / "m-00002-of-00002.gguf");
    CHECK(error_of<InputError>([&] { GgufFiles::open(dir / "m-00001-of-00002.gguf"); }) ==
          dir / "m-00001-of-00002.gguf" + ": split file " + dir / "m-00002-of-00002.gguf" + " is missing");
}

TEST_CASE("gguf: hostile headers are refused with one line naming the problem") {
    const std::string good = sample().bytes();
    CHECK(error_of_parse("GGUX" + good.substr(4)) == "f.gguf: not a GGUF file (it does not start with \"GGUF\")");
    CHECK(error_of_parse("") == "f.gguf: not a GGUF file (it does not start with \"GGUF\")");
    Builder b = sample();
    b.version = 1;
    CHECK(error_of_parse(b.bytes()) == "f.gguf: GGUF version 1 is no longer read (llama.cpp reads versions 2 and 3)");
    b.version = 4;
    CHECK(error_of_parse(b.bytes()) == "f.gguf: GGUF version 4 is not read (versions 2 and 3 are)");
    b.version = 0x03000000;
    CHECK(error_of_parse(b.bytes()).find("big-endian") != std::string::npos);
    b = sample();
    b.version = 2;
    CHECK_NOTHROW(parse_gguf(b.bytes(), "f.gguf"));

    b = sample();
    b.claimed_kv = 1ull << 60;
    CHECK(error_of_parse(b.bytes()).find("the header claims 1152921504606846976 key/value pairs, more than the") !=
          std::string::npos);
    b = sample();
    b.claimed_tensors = ~0ull;
    CHECK(error_of_parse(b.bytes()).find("claims 18446744073709551615 tensors") != std::string::npos);

    b = Builder();
    b.add("k", GgufType::string, le<std::uint64_t>(1ull << 62) + "abc");
    CHECK(error_of_parse(b.bytes()).find("truncated: the value of 'k' (4611686018427387904 bytes at byte") !=
          std::string::npos);
    b = Builder();
    b.add("a", GgufType::array, le(std::uint32_t(6)) + le<std::uint64_t>(1ull << 61));
    CHECK(error_of_parse(b.bytes()).find("array 'a' of 2305843009213693952 float32 elements") != std::string::npos);
    b = Builder();
    b.add("a", GgufType::array, le(std::uint32_t(8)) + le<std::uint64_t>(1000) + gstr("x"));
    CHECK(error_of_parse(b.bytes()).find("truncated") != std::string::npos);
    b = Builder();
    b.add("k", static_cast<GgufType>(13), "");
    CHECK(error_of_parse(b.bytes()) == "f.gguf: key 'k' has unknown value type 13");
    b = Builder();
    b.add("k", GgufType::uint8, "x").add("k", GgufType::uint8, "y");
    CHECK(error_of_parse(b.bytes()) == "f.gguf: key 'k' appears twice");
    b = Builder();
    b.add("", GgufType::uint8, "x");
    CHECK(error_of_parse(b.bytes()) == "f.gguf: key 0 is empty");
    std::string deep = le<std::uint32_t>(7);  // int32, innermost
    for (int i = 0; i < 9; ++i) deep = le(std::uint32_t(9)) + le<std::uint64_t>(1) + deep;
    b = Builder();
    b.add("deep", GgufType::array, deep.substr(0, deep.size() - 4) + le<std::uint32_t>(7) + le<std::uint64_t>(0));
    CHECK(error_of_parse(b.bytes()).find("nests arrays deeper than 8 levels") != std::string::npos);
}

TEST_CASE("gguf: hostile tensor infos are refused naming the tensor") {
    auto with = [](std::vector<std::int64_t> ne, std::uint32_t type, std::string data) {
        Builder b;
        b.tensor("t", std::move(ne), type, std::move(data));
        return error_of_parse(b.bytes());
    };
    CHECK(with({1, 1, 1, 1, 1}, 0, f32(1)) == "f.gguf: tensor 't' has 5 dims (at most 4)");
    CHECK(with({-1}, 0, "") == "f.gguf: tensor 't' has a negative dim -1");
    CHECK(with({1ll << 32, 1ll << 32}, 0, "") == "f.gguf: tensor 't' has dims (4294967296, 4294967296) whose product passes 2^63");
    CHECK(with({1ll << 60, 4}, 27, "") ==
          "f.gguf: tensor 't' (4, 1152921504606846976) has more bytes than fit in 64 bits");
    CHECK(with({1}, 99, f32(1)) == "f.gguf: tensor 't' has unknown type 99");
    CHECK(with({32}, 4, "") == "f.gguf: tensor 't' has type 4: q4_2 (removed)");
    CHECK(with({16}, 8, std::string(34, '\0')) ==
          "f.gguf: tensor 't' of type q8_0 has rows of 16 elements, not a multiple of its block of 32");
    CHECK(with({100}, 0, floats({1})) ==
          "f.gguf: tensor 't': its 400 bytes at offset 0 run past the end of the file (the data section holds 32 bytes)");
    CHECK(with({0, 5}, 0, "").empty());  // an empty tensor is fine

    Builder b;
    b.tensor(std::string(64, 'n'), {1}, 0, f32(1));
    CHECK(error_of_parse(b.bytes()) == "f.gguf: tensor 0's name is 64 bytes (under 64)");
    b = Builder();
    b.tensor("t", {1}, 0, f32(1)).tensor("t", {1}, 0, f32(2));
    CHECK(error_of_parse(b.bytes()) == "f.gguf: tensor 't' appears twice");
    b = Builder();
    b.tensor("a", {8}, 0, std::string(32, '\0')).tensor("b", {8}, 0, std::string(32, '\0'));
    b.tensors[1].offset = 0;
    CHECK(error_of_parse(b.bytes()).find("tensor '") != std::string::npos);
    CHECK(error_of_parse(b.bytes()).find("at offset 0 overlaps tensor '") != std::string::npos);
    b.tensors[1].offset = 4;
    CHECK(error_of_parse(b.bytes()) == "f.gguf: tensor 'b' has offset 4, not a multiple of the alignment 32");
    b = sample();
    b.kv += gstr("general.alignment") + le(std::uint32_t(4)) + le<std::uint32_t>(48);
    ++b.n_kv;
    CHECK(error_of_parse(b.bytes()) == "f.gguf: general.alignment 48 is not a power of 2");
    b = sample();
    b.kv += gstr("general.alignment") + le(std::uint32_t(10)) + le<std::uint64_t>(64);
    ++b.n_kv;
    CHECK(error_of_parse(b.bytes()) == "f.gguf: general.alignment is a uint64, not a uint32");
    b = sample();
    b.kv += gstr("general.alignment") + le(std::uint32_t(4)) + le<std::uint32_t>(1u << 31);
    ++b.n_kv;
    b.alignment = 4;  // the file itself packed on 4: the data section would start past its end
    CHECK(error_of_parse(b.bytes()).find("truncated: the data section would start at byte") != std::string::npos);
}

TEST_CASE("gguf: every truncation of a valid file is refused cleanly") {
    Builder b = sample();
    b.add("tokens", GgufType::array, le(std::uint32_t(8)) + le<std::uint64_t>(2) + gstr("ab") + gstr("c"));
    const std::string bytes = b.bytes();
    const GgufHeader whole = parse_gguf(bytes, "f.gguf");
    const std::size_t data_end = whole.tensors.back().offset + whole.tensors.back().nbytes;
    for (std::size_t n = 0; n < data_end; ++n) {
        CAPTURE(n);
        CHECK_FALSE(error_of_parse(bytes.substr(0, n)).empty());
    }
}

// ---- a GGUF file as a model (lib/model/gguf_source.cpp) -----------------------------------------

TEST_CASE("gguf: a model's configuration is its metadata, read through the family's table") {
    const std::string fixtures = ATTNTRACE_FIXTURES;
    const Model m = open_model(fixtures + "/gguf/llama_q8_0/model.gguf");
    const ModelConfig& c = m.config;
    CHECK(c.model_type == "llama");
    CHECK(c.layers.size() == 3);
    CHECK(c.hidden == 32);
    CHECK(c.heads == 4);
    CHECK(c.kv_heads == 2);
    CHECK(c.head_dim == 8);
    CHECK(c.vocab == 282);  // token_embd's rows
    CHECK(c.intermediate == 64);
    CHECK_FALSE(c.tied);  // output.weight is there
    CHECK(c.norm_eps == double(1e-5f));  // the float32 the file holds
    CHECK(m.has_head());
    // Llama 3's rope scaling as rope_freqs.weight: each frequency divided by its factor. The
    // fixture's checkpoint has factor 8, low 1, high 4, original 64: its lowest frequencies
    // (wavelength over 64) are divided by 8, its highest kept.
    const Rotary& r = *c.layers[0].rotary;
    REQUIRE(r.inv_freq.size() == 4);
    CHECK(r.inv_freq[0] == doctest::Approx(1.0));
    CHECK(r.inv_freq[3] == doctest::Approx(std::pow(10000.0, -6.0 / 8) / 8).epsilon(1e-6));
    const CheckpointLayer layer = open_checkpoint_layer(fixtures + "/gguf/llama_q8_0/model.gguf", 2);
    REQUIRE(layer.tensors.size() == 5);
    CHECK(layer.tensors[1].name == "blk.2.attn_q.weight");
    CHECK(layer.tensors[1].dtype == "q8_0");
    CHECK(layer.tensors[1].shape == Shape{32, 32});
    CHECK(layer.tensors[0].dtype == "f32");  // attn_norm
}

TEST_CASE("gguf: a metadata problem names the metadata key") {
    TempDir dir;
    auto with = [&](Builder b) {
        write_file(dir / "m.gguf", b.bytes());
        return error_of<InputError>([&] { (void)open_model(dir / "m.gguf"); });
    };
    Builder b;
    b.add("general.architecture", GgufType::string, gstr("llama"))
        .add("llama.block_count", GgufType::uint32, le<std::uint32_t>(1))
        .add("llama.attention.head_count", GgufType::uint32, le<std::uint32_t>(2));
    CHECK(with(b) == dir / "m.gguf" + ": missing metadata key 'llama.embedding_length'");
    b.add("llama.embedding_length", GgufType::string, gstr("32"));
    CHECK(with(b) == dir / "m.gguf" + ": metadata key 'llama.embedding_length' must be a positive integer, not \"32\"");
    Builder bert;
    bert.add("general.architecture", GgufType::string, gstr("bert"));
    CHECK(with(bert).rfind(dir / "m.gguf" + ": architecture 'bert' is not read (attntrace reads ", 0) == 0);
    CHECK(with(Builder()) == dir / "m.gguf" + ": no general.architecture: not a model (a vocabulary-only file?)");
}
