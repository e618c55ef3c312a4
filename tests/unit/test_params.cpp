// load_mha_params / check_mha_params / random_mha_params / torch_state_dict, against the
// parameters of torch.nn.MultiheadAttention and of the seed notebooks' modules, recorded by
// tests/fixtures/make_params_fixtures.py (tests/fixtures/params/manifest.json).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "attntrace/tensor/errors.hpp"
#include "attntrace/attention/params.hpp"
#include "attntrace/attention/params_check.hpp"
#include "attntrace/tensor/random.hpp"
#include "attntrace/io/safetensors.hpp"
#include "attntrace/io/tensor_io.hpp"
#include "test_helpers.hpp"

namespace fs = std::filesystem;
using attntrace::Array;
using attntrace::HeadSizes;
using attntrace::InputError;
using attntrace::MhaDims;
using attntrace::MhaParams;
using attntrace::Shape;
using attntrace::ShapeError;
using attntrace::UsageError;
using namespace attntrace::testing;
using nlohmann::json;

namespace {

const fs::path params_dir = fs::path(ATTNTRACE_FIXTURES) / "params";
const std::string fixture_script = std::string(ATTNTRACE_FIXTURES) + "/make_params_fixtures.py";

const json& manifest() {
    static const json parsed = json::parse(read_file(params_dir / "manifest.json"));
    return parsed;
}

const json& manifest_case(const std::string& name) {
    for (const json& c : manifest()) {
        if (c["case"] == name) return c;
    }
    FAIL("no case " << name << " in manifest.json");
    throw;
}

MhaDims dims_of(const json& c) {
    const json& d = c["dims"];
    return MhaDims{d["heads"], d["kv_heads"], d["query_dim"], d["key_dim"], d["value_dim"], d["out_proj"]};
}

std::string good(const std::string& case_name, const std::string& format) {
    const fs::path base = params_dir / "good" / case_name;
    return format == "npy" ? base.string() : base.string() + "." + format;
}

// The eight fields by name, for comparing with expected/CASE/NAME.npy.
template <class T>
std::map<std::string, const Array<T>*> fields(const MhaParams<T>& p) {
    std::map<std::string, const Array<T>*> out{{"w_q", &p.w_q}, {"w_k", &p.w_k}, {"w_v", &p.w_v}};
    if (p.b_q) out["b_q"] = &*p.b_q;
    if (p.b_k) out["b_k"] = &*p.b_k;
    if (p.b_v) out["b_v"] = &*p.b_v;
    if (p.w_o) out["w_o"] = &*p.w_o;
    if (p.b_o) out["b_o"] = &*p.b_o;
    return out;
}

template <class T>
void check_against_torch(const MhaParams<T>& p, const json& c) {
    const auto got = fields(p);
    std::vector<std::string> names;
    for (const auto& [name, array] : got) names.push_back(name);
    CHECK(names == c["expected"].get<std::vector<std::string>>());
    for (const auto& [name, array] : got) {
        const fs::path npy = params_dir / "expected" / c["case"].get<std::string>() / (name + ".npy");
        check_equal(*array, attntrace::load_tensor<T>(npy.string()).array, name);
    }
}

// Writes TENSORS as DIR/NAME.safetensors and returns its path.
template <class T = float>
std::string write_safetensors(const TempDir& dir, const std::string& name,
                              const std::map<std::string, Array<T>>& tensors) {
    const std::string file = dir / (name + ".safetensors");
    write_file(file, attntrace::safetensors_bytes(tensors));
    return file;
}

Array<float> filled(const Shape& shape, float start = 0.5f) {
    Array<float> a = Array<float>::from_shape(shape);
    float v = start;
    for (float& x : a) x = (v += 0.25f);
    return a;
}

// d2l-named parameters in memory: H=2, G=1, P=3, Pv=2, Eq=5, Ek=4, Ev=7, PO=6, with biases.
MhaParams<float> d2l_params() {
    MhaParams<float> p;
    p.scheme = "d2l";
    p.source = "p.safetensors";
    p.w_q = filled({6, 5});
    p.w_k = filled({3, 4});
    p.w_v = filled({2, 7});
    p.b_q = filled({6});
    p.b_k = filled({3});
    p.b_v = filled({2});
    p.w_o = filled({6, 4});
    p.b_o = filled({6});
    p.names = {"W_k.bias", "W_k.weight", "W_o.bias", "W_o.weight", "W_q.bias", "W_q.weight", "W_v.bias", "W_v.weight"};
    return p;
}
const MhaDims d2l_dims{2, 1, 5, 4, 7, true};

}  // namespace

TEST_CASE("every parameter source resolves to the weights torch and the seed modules use") {
    REQUIRE(manifest().size() == 11);
    std::size_t loads = 0;
    for (const json& c : manifest()) {
        for (const std::string& format : c["formats"].get<std::vector<std::string>>()) {
            const std::string path = good(c["case"], format);
            INFO(path);
            const MhaParams<float> p = attntrace::load_mha_params<float>(path, c["prefix"], dims_of(c));
            check_against_torch(p, c);
            CHECK(p.scheme == c["scheme"]);
            CHECK(p.source == path);
            CHECK(p.fused_in_proj == c["fused"].get<bool>());
            CHECK(p.names == c["names"].get<std::vector<std::string>>());
            CHECK(p.ignored == c["ignored"].get<std::vector<std::string>>());
            const MhaParams<double> d = attntrace::load_mha_params<double>(path, c["prefix"], dims_of(c));
            check_against_torch(d, c);
            ++loads;
        }
    }
    CHECK(loads == 30);  // 9 cases x 3 formats, prefixed x 2, mixed x 1
}

TEST_CASE("check_mha_params returns the per-head sizes the shapes imply") {
    // torch_kv: E=6, H=3, kdim=5, vdim=3: P = Pv = 2, PO = 6
    const json& kv = manifest_case("torch_kv");
    const auto p = attntrace::load_mha_params<float>(good("torch_kv", "safetensors"), "", dims_of(kv));
    HeadSizes s = attntrace::check_mha_params(p, dims_of(kv));
    CHECK(s.head_dim == 2);
    CHECK(s.value_head_dim == 2);
    CHECK(s.out_dim == 6);
    // d2l: H=2, P=4, Pv=3, PO=7
    const json& d2l = manifest_case("d2l");
    s = attntrace::check_mha_params(attntrace::load_mha_params<float>(good("d2l", "json"), "", dims_of(d2l)), dims_of(d2l));
    CHECK(s.head_dim == 4);
    CHECK(s.value_head_dim == 3);
    CHECK(s.out_dim == 7);
    // gqa: H=4 query heads of P=2 share G=2 kv heads of Pv=3
    const json& gqa = manifest_case("gqa");
    s = attntrace::check_mha_params(attntrace::load_mha_params<float>(good("gqa", "npy"), "", dims_of(gqa)), dims_of(gqa));
    CHECK(s.head_dim == 2);
    CHECK(s.value_head_dim == 3);
    // seed004 without an output projection: the heads concatenated, H*Pv
    const json& s004 = manifest_case("seed004");
    s = attntrace::check_mha_params(attntrace::load_mha_params<float>(good("seed004", "npy"), "", dims_of(s004)), dims_of(s004));
    CHECK(s.out_dim == 6);
}

TEST_CASE("a checkpoint's layer needs a prefix, and the error says which") {
    const json& c = manifest_case("prefixed");
    const std::string path = good("prefixed", "safetensors");
    CHECK_THROWS_WITH_AS(
        attntrace::load_mha_params<float>(path, "", dims_of(c)),
        (path + ": no attention parameters found: expected in_proj_weight, q_proj_weight, W_q.weight or "
                "toqueries.weight (names present: encoder.layers.0.linear1.weight, "
                "encoder.layers.0.self_attn.extra_scale, encoder.layers.0.self_attn.in_proj_bias, "
                "encoder.layers.0.self_attn.in_proj_weight, encoder.layers.0.self_attn.out_proj.bias, "
                "encoder.layers.0.self_attn.out_proj.weight, encoder.layers.1.self_attn.in_proj_weight); "
                "to use names under a prefix, give the prefix encoder.layers.0.self_attn.")
            .c_str(),
        InputError);
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(path, "decoder.", dims_of(c)),
                         (path + ": no tensor name starts with the prefix 'decoder.' (names present: "
                                 "encoder.layers.0.linear1.weight, encoder.layers.0.self_attn.extra_scale, "
                                 "encoder.layers.0.self_attn.in_proj_bias, encoder.layers.0.self_attn.in_proj_weight, "
                                 "encoder.layers.0.self_attn.out_proj.bias, encoder.layers.0.self_attn.out_proj.weight, "
                                 "encoder.layers.1.self_attn.in_proj_weight)")
                             .c_str(),
                         InputError);
    // the second layer under its own prefix: its in_proj_weight, but no out_proj there
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(path, "encoder.layers.1.self_attn.", dims_of(c)),
                         (path + ": no output projection (out_proj.weight / W_o.weight / unifyheads.weight); turn the "
                                 "output projection off to concatenate the heads without one")
                             .c_str(),
                         InputError);
    MhaDims no_out = dims_of(c);
    no_out.out_proj = false;
    const auto layer1 = attntrace::load_mha_params<float>(path, "encoder.layers.1.self_attn.", no_out);
    CHECK(layer1.names == std::vector<std::string>{"encoder.layers.1.self_attn.in_proj_weight"});
    CHECK(layer1.ignored.empty());
    CHECK(!layer1.w_o);
}

TEST_CASE("a file with no scheme's names lists what it expected and what it found") {
    TempDir tmp;
    const std::string path = write_safetensors(tmp, "x", {{"query.weight", filled({2, 2})}, {"key.weight", filled({2, 2})}});
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(path, "", d2l_dims),
                         (path + ": no attention parameters found: expected in_proj_weight, q_proj_weight, "
                                 "W_q.weight or toqueries.weight (names present: key.weight, query.weight)")
                             .c_str(),
                         InputError);
    // more than 8 names are cut short
    std::map<std::string, Array<float>> many;
    for (char c = 'a'; c <= 'l'; ++c) many[std::string(1, c)] = filled({1});
    const std::string message = error_of([&] { attntrace::load_mha_params<float>(write_safetensors(tmp, "many", many), "", d2l_dims); });
    CHECK(message.find("(names present: a, b, c, d, e, f, g, h and 4 more)") != std::string::npos);
}

TEST_CASE("a required name missing from the chosen scheme is an InputError naming it") {
    TempDir tmp;
    const std::string d2l = write_safetensors(tmp, "d2l", {{"W_q.weight", filled({6, 5})}, {"W_v.weight", filled({2, 7})},
                                                    {"W_o.weight", filled({6, 4})}});
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(d2l, "", d2l_dims),
                         (d2l + ": missing 'W_k.weight': the d2l names ('W_q.weight' is present) need W_q.weight, "
                                "W_k.weight and W_v.weight")
                             .c_str(),
                         InputError);
    const std::string torch = write_safetensors(tmp, "torch", {{"m.q_proj_weight", filled({6, 5})}, {"m.k_proj_weight", filled({3, 4})}});
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(torch, "m.", d2l_dims),
                         (torch + ": missing 'm.v_proj_weight': the torch names ('m.q_proj_weight' is present) need "
                                  "q_proj_weight, k_proj_weight and v_proj_weight")
                             .c_str(),
                         InputError);
    const std::string bloem = write_safetensors(tmp, "bloem", {{"toqueries.weight", filled({6, 5})}, {"tovalues.weight", filled({2, 7})}});
    CHECK(error_of([&] { attntrace::load_mha_params<float>(bloem, "", d2l_dims); }).find("missing 'tokeys.weight'") !=
          std::string::npos);
    // add_bias_kv=True: bias_k / bias_v are loaded with the torch names (mha checks their shapes)
    const std::string bias_kv = write_safetensors(
        tmp, "bias_kv", {{"in_proj_weight", filled({18, 6})}, {"bias_k", filled({1, 1, 6})}, {"bias_v", filled({1, 1, 6})}});
    const auto with_kv = attntrace::load_mha_params<float>(bias_kv, "", MhaDims{2, 2, 6, 6, 6, false});
    REQUIRE(with_kv.bias_k);
    REQUIRE(with_kv.bias_v);
    CHECK(shape_of(*with_kv.bias_k) == attntrace::Shape{1, 1, 6});
    CHECK(with_kv.ignored.empty());
}

TEST_CASE("without an output projection in the file, out_proj must be off; with it off, one is ignored") {
    const json& s004 = manifest_case("seed004");
    MhaDims with_out = dims_of(s004);
    with_out.out_proj = true;
    const std::string path = good("seed004", "json");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(path, "", with_out),
                         (path + ": no output projection (out_proj.weight / W_o.weight / unifyheads.weight); turn the "
                                 "output projection off to concatenate the heads without one")
                             .c_str(),
                         InputError);
    const json& self = manifest_case("torch_self");
    MhaDims no_out = dims_of(self);
    no_out.out_proj = false;
    const auto p = attntrace::load_mha_params<float>(good("torch_self", "npy"), "", no_out);
    CHECK(!p.w_o);
    CHECK(!p.b_o);
    CHECK(p.b_q);
    CHECK(p.ignored == std::vector<std::string>{"out_proj.bias", "out_proj.weight"});
    CHECK(attntrace::check_mha_params(p, no_out).out_dim == 6);
    // atcold's W_h is its W_o, dropped the same way
    const json& atcold = manifest_case("atcold");
    no_out = dims_of(atcold);
    no_out.out_proj = false;
    CHECK(attntrace::load_mha_params<float>(good("atcold", "safetensors"), "", no_out).ignored ==
          std::vector<std::string>{"W_h.bias", "W_h.weight"});
}

TEST_CASE("a parameter of the wrong shape is a ShapeError naming both shapes and the symbols") {
    // loaded: torch_kv has kdim=5; claim the keys have 4 features
    const json& kv = manifest_case("torch_kv");
    MhaDims dims = dims_of(kv);
    dims.key_dim = 4;
    const std::string kv_path = good("torch_kv", "safetensors");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(kv_path, "", dims),
                         (kv_path + ": k_proj_weight: shape (6, 5) but expected (6, 4) = (G*P, Ek) with G=3, P=2, Ek=4").c_str(),
                         ShapeError);
    // the fused in_proj_weight names the rows of its block
    const json& self = manifest_case("torch_self");
    dims = dims_of(self);
    dims.heads = dims.kv_heads = 4;
    const std::string self_path = good("torch_self", "json");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(self_path, "", dims),
                         (self_path + ": in_proj_weight [0:6]: shape (6, 6) but expected (4*P, 6) = (H*P, Eq) with H=4, "
                                      "Eq=6: 6 rows are not a multiple of H=4")
                             .c_str(),
                         ShapeError);
    dims = dims_of(self);
    dims.value_dim = 5;
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(self_path, "", dims),
                         (self_path + ": in_proj_weight [12:18]: shape (6, 6) but expected (6, 5) = (G*Pv, Ev) with G=2, "
                                      "Pv=3, Ev=5")
                             .c_str(),
                         ShapeError);
    // under a prefix, the file's spelling
    const json& pre = manifest_case("prefixed");
    dims = dims_of(pre);
    dims.query_dim = 7;
    const std::string pre_path = good("prefixed", "json");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(pre_path, pre["prefix"], dims),
                         (pre_path + ": encoder.layers.0.self_attn.in_proj_weight [0:6]: shape (6, 6) but expected (6, 7) "
                                     "= (H*P, Eq) with H=2, P=3, Eq=7")
                             .c_str(),
                         ShapeError);

    // in memory: every field of a d2l set
    CHECK(attntrace::check_mha_params(d2l_params(), d2l_dims).head_dim == 3);
    struct Case {
        const char* what;
        void (*spoil)(MhaParams<float>&);
        const char* message;
    };
    const Case cases[] = {
        {"w_q cols", [](MhaParams<float>& p) { p.w_q = filled({6, 4}); },
         "p.safetensors: W_q.weight: shape (6, 4) but expected (6, 5) = (H*P, Eq) with H=2, P=3, Eq=5"},
        {"w_q 1-D", [](MhaParams<float>& p) { p.w_q = filled({30}); },
         "p.safetensors: W_q.weight: shape (30,) but expected 2-D (H*P, Eq) with H=2, Eq=5"},
        {"w_q no rows", [](MhaParams<float>& p) { p.w_q = filled({0, 5}); },
         "p.safetensors: W_q.weight: shape (0, 5) but expected (2*P, 5) = (H*P, Eq) with H=2, Eq=5: a head needs P >= 1 rows"},
        {"w_k rows", [](MhaParams<float>& p) { p.w_k = filled({6, 4}); },
         "p.safetensors: W_k.weight: shape (6, 4) but expected (3, 4) = (G*P, Ek) with G=1, P=3, Ek=4"},
        {"w_k 3-D", [](MhaParams<float>& p) { p.w_k = filled({1, 3, 4}); },
         "p.safetensors: W_k.weight: shape (1, 3, 4) but expected 2-D (G*P, Ek) with G=1, P=3, Ek=4"},
        {"w_v cols", [](MhaParams<float>& p) { p.w_v = filled({2, 6}); },
         "p.safetensors: W_v.weight: shape (2, 6) but expected (2, 7) = (G*Pv, Ev) with G=1, Pv=2, Ev=7"},
        {"b_q", [](MhaParams<float>& p) { p.b_q = filled({5}); },
         "p.safetensors: W_q.bias: shape (5,) but expected (6,) = (H*P,) with H=2, P=3"},
        {"b_k 2-D", [](MhaParams<float>& p) { p.b_k = filled({3, 1}); },
         "p.safetensors: W_k.bias: shape (3, 1) but expected 1-D (G*P,) with G=1, P=3"},
        {"b_v", [](MhaParams<float>& p) { p.b_v = filled({3}); },
         "p.safetensors: W_v.bias: shape (3,) but expected (2,) = (G*Pv,) with G=1, Pv=2"},
        {"w_o cols", [](MhaParams<float>& p) { p.w_o = filled({6, 6}); },
         "p.safetensors: W_o.weight: shape (6, 6) but expected (PO, 4) = (PO, H*Pv) with H=2, Pv=2"},
        {"b_o", [](MhaParams<float>& p) { p.b_o = filled({4}); },
         "p.safetensors: W_o.bias: shape (4,) but expected (6,) = (PO,) with PO=6, the rows of W_o.weight"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        MhaParams<float> p = d2l_params();
        c.spoil(p);
        CHECK_THROWS_WITH_AS(attntrace::check_mha_params(p, d2l_dims), c.message, ShapeError);
    }
    // torch's in_proj_bias must match the rows of the three weights
    TempDir tmp;
    const std::string bias = write_safetensors(tmp, "bias", {{"in_proj_weight", filled({18, 6})}, {"in_proj_bias", filled({17})}});
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(bias, "", MhaDims{2, 2, 6, 6, 6, false}),
                         (bias + ": in_proj_bias: shape (17,) but expected (18,) = (H*P + G*P + G*Pv,), the rows of "
                                 "the q, k and v weights (6 + 6 + 6)")
                             .c_str(),
                         ShapeError);
    const std::string fused = write_safetensors(tmp, "fused", {{"in_proj_weight", filled({17, 6})}});
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(fused, "", MhaDims{2, 2, 6, 6, 6, false}),
                         (fused + ": in_proj_weight: shape (17, 6) but expected (3E, E): 17 rows do not split into q, "
                                  "k and v blocks")
                             .c_str(),
                         ShapeError);
}

TEST_CASE("head counts that make no sense are usage errors") {
    const MhaParams<float> p = d2l_params();
    CHECK_THROWS_WITH_AS(attntrace::check_mha_params(p, MhaDims{0, 1, 5, 4, 7, true}), "heads: must be at least 1 (got 0)",
                         UsageError);
    CHECK_THROWS_WITH_AS(attntrace::check_mha_params(p, MhaDims{2, 0, 5, 4, 7, true}),
                         "kv heads: must be at least 1 (got 0)", UsageError);
    CHECK_THROWS_WITH_AS(attntrace::random_mha_params<float>(MhaDims{8, 3, 8, 8, 8, true}, HeadSizes{1, 1, 8}, true, 0),
                         "kv heads: 8 query heads cannot share 3 kv heads (8 % 3 != 0)", UsageError);
    CHECK_THROWS_WITH_AS(attntrace::random_mha_params<float>(MhaDims{2, 2, 8, 8, 8, true}, HeadSizes{0, 4, 8}, true, 0),
                         "head dim: must be at least 1 (got 0)", UsageError);
}

TEST_CASE("sources that are not parameter files are InputErrors naming them") {
    TempDir tmp;
    const std::string json_path = tmp / "p.json";
    write_file(json_path, R"({"W_q.weight": [[1, 2], [3]]})");
    const std::string ragged = error_of([&] { attntrace::load_mha_params<float>(json_path, "", d2l_dims); });
    CHECK(ragged.rfind(json_path + ": tensor 'W_q.weight': ", 0) == 0);
    CHECK(ragged.find("ragged") != std::string::npos);
    write_file(json_path, R"({"a": [1], "a": [2]})");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(json_path, "", d2l_dims),
                         (json_path + ": tensor 'a' appears twice").c_str(), InputError);
    write_file(json_path, "[[1, 2]]");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(json_path, "", d2l_dims),
                         (json_path + ": expected a JSON object of name -> nested arrays").c_str(), InputError);
    write_file(json_path, "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}");
    CHECK(error_of([&] { attntrace::load_mha_params<float>(json_path, "", d2l_dims); }).find("nested deeper") != std::string::npos);

    fs::create_directories(tmp.path / "empty_dir");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(tmp / "empty_dir", "", d2l_dims),
                         (tmp / "empty_dir" + ": no NAME.npy files in the directory").c_str(), InputError);
    const std::string other = tmp / "p.bin";
    write_file(other, "hello");
    CHECK_THROWS_WITH_AS(attntrace::load_mha_params<float>(other, "", d2l_dims),
                         (other + ": not a .safetensors file, a JSON object of name -> nested arrays, or a directory "
                                  "of NAME.npy files")
                             .c_str(),
                         InputError);
    const std::string missing = tmp / "missing.safetensors";
    CHECK(error_of([&] { attntrace::load_mha_params<float>(missing, "", d2l_dims); }).rfind(missing + ": ", 0) == 0);
    // the content decides when the extension does not: a safetensors file named .bin, a JSON .txt
    const json& kv = manifest_case("torch_kv");
    fs::copy_file(good("torch_kv", "safetensors"), tmp.path / "kv.bin");
    fs::copy_file(good("torch_kv", "json"), tmp.path / "kv.txt");
    check_against_torch(attntrace::load_mha_params<float>(tmp / "kv.bin", "", dims_of(kv)), kv);
    check_against_torch(attntrace::load_mha_params<float>(tmp / "kv.txt", "", dims_of(kv)), kv);
}

TEST_CASE("the random init is xavier-uniform drawn in order w_q, w_k, w_v, w_o from Rng(seed)") {
    const MhaDims dims{4, 2, 6, 5, 3, true};  // H=4, G=2, Eq=6, Ek=5, Ev=3
    const HeadSizes sizes{2, 3, 7};            // P=2, Pv=3, PO=7
    const auto p = attntrace::random_mha_params<double>(dims, sizes, true, 42);
    CHECK(p.scheme == "random");
    CHECK(p.source == "random init (seed 42)");
    CHECK(shape_of(p.w_q) == Shape{8, 6});
    CHECK(shape_of(p.w_k) == Shape{4, 5});
    CHECK(shape_of(p.w_v) == Shape{6, 3});
    REQUIRE(p.w_o);
    CHECK(shape_of(*p.w_o) == Shape{7, 12});
    const HeadSizes checked = attntrace::check_mha_params(p, dims);
    CHECK(checked.head_dim == 2);
    CHECK(checked.value_head_dim == 3);
    CHECK(checked.out_dim == 7);

    // every value is the next Rng draw mapped to U(-a, a), a = sqrt(6 / (fan_in + fan_out))
    attntrace::Rng rng(42);
    for (const Array<double>* w : {&p.w_q, &p.w_k, &p.w_v, &*p.w_o}) {
        const double a = std::sqrt(6.0 / static_cast<double>(w->shape()[0] + w->shape()[1]));
        double largest = 0;
        std::size_t differ = 0;
        for (double v : *w) {
            differ += v != rng.uniform(-a, a);
            largest = std::max(largest, std::abs(v));
        }
        CHECK(differ == 0);
        CHECK(largest <= a);
        CHECK(largest > a / 2);  // the draws do spread over the range
    }
    for (const auto* b : {&p.b_q, &p.b_k, &p.b_v, &p.b_o}) {
        REQUIRE(*b);
        CHECK(std::all_of((*b)->begin(), (*b)->end(), [](double v) { return v == 0.0; }));
    }
    CHECK(p.b_q->size() == 8);
    CHECK(p.b_v->size() == 6);
    CHECK(p.b_o->size() == 7);

    // deterministic, seed-dependent, and float holds the same draws rounded
    const auto again = attntrace::random_mha_params<double>(dims, sizes, true, 42);
    check_equal(again.w_v, p.w_v, "same seed");
    const auto other = attntrace::random_mha_params<double>(dims, sizes, true, 43);
    CHECK(other.w_q(0, 0) != p.w_q(0, 0));
    const auto f = attntrace::random_mha_params<float>(dims, sizes, true, 42);
    check_equal(f.w_k, Array<float>(xt::cast<float>(p.w_k)), "float");
    const float af = static_cast<float>(std::sqrt(6.0 / 14.0));
    CHECK(std::all_of(f.w_q.begin(), f.w_q.end(), [&](float v) { return std::abs(v) <= af; }));

    // no bias, no output projection
    const MhaDims no_out{4, 2, 6, 5, 3, false};
    const auto bare = attntrace::random_mha_params<float>(no_out, sizes, false, 42);
    CHECK(!bare.b_q);
    CHECK(!bare.b_k);
    CHECK(!bare.b_v);
    CHECK(!bare.w_o);
    CHECK(!bare.b_o);
    CHECK(attntrace::check_mha_params(bare, no_out).out_dim == 12);
}

TEST_CASE("torch_state_dict round-trips through safetensors to the same parameters") {
    TempDir tmp;
    for (const std::string name : {"torch_self", "torch_kv", "torch_kv_nobias", "d2l", "atcold", "gqa", "bloem", "seed004"}) {
        INFO(name);
        const json& c = manifest_case(name);
        const auto p = attntrace::load_mha_params<float>(good(name, "safetensors"), "", dims_of(c));
        const auto dict = attntrace::torch_state_dict(p);
        std::vector<std::string> keys;
        for (const auto& [key, value] : dict) keys.push_back(key);
        const bool any_bias = p.b_q || p.b_k || p.b_v || p.b_o;
        std::vector<std::string> expected{"k_proj_weight", "q_proj_weight", "v_proj_weight"};
        if (any_bias) expected.push_back("in_proj_bias");
        if (p.w_o) expected.push_back("out_proj.weight");
        if (p.w_o && any_bias) expected.push_back("out_proj.bias");
        std::sort(expected.begin(), expected.end());
        CHECK(keys == expected);
        const std::string file = write_safetensors(tmp, name, dict);
        const auto back = attntrace::load_mha_params<float>(file, "", dims_of(c));
        CHECK(back.scheme == "torch");
        CHECK_FALSE(back.fused_in_proj);
        for (const auto& [field, array] : fields(p)) check_equal(*fields(back).at(field), *array, field);
        if (any_bias) {  // missing biases come back as zeros
            for (const auto* b : {&back.b_q, &back.b_k, &back.b_v}) CHECK(*b);
        }
    }
    // bloem: no q/k/v biases but unifyheads.bias: in_proj_bias is all zeros
    const json& bloem = manifest_case("bloem");
    const auto dict = attntrace::torch_state_dict(attntrace::load_mha_params<float>(good("bloem", "npy"), "", dims_of(bloem)));
    const Array<float>& in_bias = dict.at("in_proj_bias");
    CHECK(in_bias.size() == 24);
    CHECK(std::all_of(in_bias.begin(), in_bias.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("PyTorch loads what --save-params writes with load_state_dict(strict=True)") {
    if (!torch_available()) {
        MESSAGE("skipped: /usr/bin/python3 with torch and numpy is not installed");
        return;
    }
    TempDir tmp;
    std::vector<std::string> args{fixture_script, "--check-state-dict"};  // then file, case pairs
    for (const std::string name : {"torch_self", "torch_kv", "torch_kv_nobias", "torch_nobias"}) {
        const json& c = manifest_case(name);
        const auto p = attntrace::load_mha_params<double>(good(name, "json"), "", dims_of(c));
        args.push_back(write_safetensors(tmp, name, attntrace::torch_state_dict(p)));
        args.push_back(name);
    }
    // float64 data: torch loads it into the float32 module, exactly (the values were float32)
    CHECK(run_python(args) == 0);
    // and the check can fail: torch_kv's parameters are not torch_self's
    const json& kv = manifest_case("torch_kv");
    const auto p = attntrace::load_mha_params<float>(good("torch_kv", "npy"), "", dims_of(kv));
    const std::string file = write_safetensors(tmp, "wrong", attntrace::torch_state_dict(p));
    CHECK(run_python({fixture_script, "--check-state-dict", file, "torch_self"}, " 2>/dev/null") != 0);
}
