// attntrace: the command line. Adds the subcommands, parses, and is the only place that turns
// exceptions into exit codes (the table is in errors.hpp and docs/files.md):
//   0 ok, 1 compare or check found differences, 2 bad command line, 3 bad input, 4 cannot write the output,
//   70 internal error (a bug: an exception no one expected).
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "attntrace/attention/attention.hpp"
#include "attntrace/io/atomic_output.hpp"
#include "attntrace/io/atomic_write.hpp"
#include "attntrace/tensor/timeline.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/ggml_matmul.hpp"
#include "attntrace/model/model.hpp"
#include "attntrace/tensor/gemm.hpp"
#include "attntrace/tensor/weight_gemm.hpp"
#include "commands.hpp"

namespace {

constexpr int exit_internal = 70;  // EX_SOFTWARE

int fail(int code, std::string message) {
    for (char& c : message) c = (c == '\n' || c == '\r') ? ' ' : c;  // exactly one line
    std::cerr << "attntrace: error: " << message << std::endl;
    return code;
}

// CLI11 says "A subcommand is required" for a misspelt one too: name the word instead.
std::string usage_message(const CLI::App& app, const CLI::ParseError& e) {
    const std::vector<std::string> rest = app.remaining();
    if (!app.get_subcommands().empty() || rest.empty()) return e.what();
    const bool option = rest.front().starts_with('-');
    return rest.front() + (option ? ": unknown option" : ": unknown command") + " (see attntrace --help)";
}

// A model's float32 weights are read in place from the checkpoint's mapping (FileBytes::resident):
// a file cut short by another process under a running read raises SIGBUS there. Like a pread
// that comes back short, that is "the file shrank" (exit 3), said in one line; any other SIGBUS
// is left to kill the process as before. Only async-signal-safe calls.
extern "C" void on_bus_error(int sig, siginfo_t* info, void*) {
    if (const char* file = attntrace::mapped_file_at(info->si_addr)) {
        static std::atomic<bool> reporting{false};  // workers reading the same pages fault too
        if (reporting.exchange(true))
            for (;;) ::pause();  // the first one says it and ends the process
        attntrace::remove_pending_temp_files();
        const auto say = [](const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); };
        say("attntrace: error: ");
        say(file);
        say(": the file shrank while it was read\n");
        ::_exit(attntrace::exit_input);
    }
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

extern "C" void on_signal(int sig) {
    attntrace::remove_pending_temp_files();  // no half-written output survives an interrupt
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

// "attntrace 0.1.0", then the OpenBLAS it computes with and the kernels it runs (for bug reports).
// What multiplies by a layer's weights (tensor/weight_gemm.hpp), for --version.
std::string weight_products_text() {
    const attntrace::WeightGemm kernel = attntrace::weight_gemm();
    if (kernel == attntrace::WeightGemm::blas) return "OpenBLAS products";
    if (kernel == attntrace::WeightGemm::avx512) return "avx512";
    return "amx (float32 by bfloat16 split)";
}

std::string version_text() {
    const auto replaced = attntrace::blas_core_replaced();
    const auto kernel = attntrace::attention_kernel();
    return "attntrace " ATTNTRACE_VERSION "\n" + attntrace::blas_config() +
           (replaced ? " (runs " + attntrace::blas_core_name() + " kernels: OpenBLAS chose generic " + *replaced + ")" : "") +
           "\nattention kernels: " +
           (kernel == attntrace::AttentionKernel::blas ? std::string("OpenBLAS products")
                                                       : "fused " + attntrace::attention_kernel_name(kernel)) +
           "\nweight products: " + weight_products_text();
}

// ATTNTRACE_ATTENTION_KERNEL=best|blas|avx512 chooses the attention kernels (attention.hpp),
// for comparing them; an empty or unset variable is `best`. Returns the error message, or "".
std::string choose_attention_kernel() {
    const char* word = std::getenv("ATTNTRACE_ATTENTION_KERNEL");
    if (!word || !*word) return "";
    const auto kernel = attntrace::attention_kernel_named(word);
    if (!kernel) return std::string("ATTNTRACE_ATTENTION_KERNEL: '") + word + "' is not one of best, blas, avx512, amx";
    try {
        attntrace::set_attention_kernel(*kernel);
    } catch (const attntrace::UsageError& e) {
        return std::string("ATTNTRACE_ATTENTION_KERNEL: ") + e.what();
    }
    return "";
}

// ATTNTRACE_GEMM_KERNEL=best|scalar|avx2|avx512_vnni|amx chooses the quantized products' kernel
// (io/ggml_matmul.hpp), for comparing them; an empty or unset variable is `best`. Returns the
// error message, or "".
std::string choose_gemm_kernel() {
    const char* word = std::getenv("ATTNTRACE_GEMM_KERNEL");
    if (!word || !*word) return "";
    for (const auto kernel : {attntrace::GemmKernel::best, attntrace::GemmKernel::scalar, attntrace::GemmKernel::avx2,
                              attntrace::GemmKernel::avx512_vnni, attntrace::GemmKernel::amx})
        if (attntrace::gemm_kernel_name(kernel) == word) {
            try {
                attntrace::set_gemm_kernel(kernel);
            } catch (const attntrace::UsageError& e) {
                return std::string("ATTNTRACE_GEMM_KERNEL: ") + e.what();
            }
            return "";
        }
    return std::string("ATTNTRACE_GEMM_KERNEL: '") + word + "' is not one of best, scalar, avx2, avx512_vnni, amx";
}

// ATTNTRACE_WEIGHT_GEMM=best|blas|avx512|amx chooses the float32 products by a layer's weights
// (tensor/weight_gemm.hpp): our own AMX or AVX-512 kernels or OpenBLAS, for comparing them; an empty or
// unset variable is `best`. Returns the error message, or "".
std::string choose_weight_gemm() {
    const char* word = std::getenv("ATTNTRACE_WEIGHT_GEMM");
    if (!word || !*word) return "";
    attntrace::WeightGemm kernel{};
    if (!attntrace::weight_gemm_named(word, kernel))
        return std::string("ATTNTRACE_WEIGHT_GEMM: '") + word + "' is not one of best, blas, avx512, amx";
    try {
        attntrace::set_weight_gemm(kernel);
    } catch (const attntrace::UsageError& e) {
        return std::string("ATTNTRACE_WEIGHT_GEMM: ") + e.what();
    }
    return "";
}

// ATTNTRACE_GGUF_PRODUCTS=quantized|float32 chooses how a float32 forward multiplies by a GGUF
// file's quantized weights (model.hpp GgufProducts); an empty or unset variable is `quantized`.
// Returns the error message, or "".
std::string choose_gguf_products() {
    const char* word = std::getenv("ATTNTRACE_GGUF_PRODUCTS");
    if (!word || !*word || std::string_view(word) == "quantized") return "";
    if (std::string_view(word) != "float32")
        return std::string("ATTNTRACE_GGUF_PRODUCTS: '") + word + "' is not one of quantized, float32";
    attntrace::set_gguf_products(attntrace::GgufProducts::float32);
    return "";
}

// ATTNTRACE_WEIGHT_PAGES=best|map|read chooses how a checkpoint's float32 weights reach the products
// (io/file_bytes.hpp WeightPages); an empty or unset variable is `best`. Returns the error message, or "".
std::string choose_weight_pages() {
    const char* word = std::getenv("ATTNTRACE_WEIGHT_PAGES");
    if (!word || !*word) return "";
    attntrace::WeightPages pages{};
    if (!attntrace::weight_pages_named(word, pages))
        return std::string("ATTNTRACE_WEIGHT_PAGES: '") + word + "' is not one of best, map, read";
    attntrace::set_weight_pages(pages);
    return "";
}

// The kernels the ATTNTRACE_* variables above choose; the first error message, or "".
std::string choose_kernels() {
    for (auto choose : {choose_attention_kernel, choose_gguf_products, choose_gemm_kernel, choose_weight_gemm,
                        choose_weight_pages})
        if (std::string bad = choose(); !bad.empty()) return bad;
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGHUP, on_signal);
    struct sigaction bus {};
    bus.sa_sigaction = on_bus_error;
    bus.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &bus, nullptr);
    std::signal(SIGXFSZ, SIG_IGN);  // past ulimit -f, write(2) fails with EFBIG and is reported (exit 4)
    if (const std::string bad = choose_kernels(); !bad.empty()) return fail(attntrace::exit_usage, bad);
    attntrace::remember_inputs(true);  // no output may replace a file this run read
    // A replaced output's old data is freed by a helper after this process, not before it exits
    // (atomic_write.hpp): the run does not wait for the file system to release it.
    attntrace::defer_replaced_files(true);
    const bool timeline = std::getenv("ATTNTRACE_TIMELINE") != nullptr;  // docs/performance.md
    if (timeline) attntrace::enable_timeline();
    struct ReleaseAtExit {
        bool timeline;
        ~ReleaseAtExit() {
            attntrace::timeline_mark("exit: releasing replaced files");
            attntrace::release_replaced_files();
            attntrace::timeline_mark("exit");
            if (timeline) std::cerr << attntrace::timeline_text() << std::flush;
        }
    } release_at_exit{timeline};

    CLI::App app("attntrace: run and trace attention on tensor files (.npy, JSON), and read, convert, compare\n"
                 "and generate those files",
                 "attntrace");
    app.footer(R"(Examples:
  attntrace sdpa -q data/atcold/q1.npy -k data/atcold/k.npy -v data/atcold/v.npy --scale 0.125 --trace values
  attntrace mha -q data/bloem/x.npy --heads 2 --params data/bloem/params.safetensors
  attntrace mha -q x.npy --heads 8 --format json | jq '.head_stats'
  attntrace random --shape 2,3 -o - | attntrace info -

Exit codes: 0 ok, 1 compare or check found differences, 2 bad command line, 3 bad input, 4 cannot write
the output, 70 internal error. `attntrace COMMAND --help` describes each command.)");
    app.set_version_flag("--version", version_text);
    app.require_subcommand(1);
    // `attntrace COMMAND ...` builds only COMMAND's options (building every command's costs ~0.4 ms
    // of page faults at each start, docs/performance.md); anything else (--help, a misspelt
    // command) builds them all, so the help lists them and the error names the word.
    using Setup = void (*)(CLI::App&);
    constexpr std::pair<std::string_view, Setup> commands[] = {
        {"info", setup_info}, {"convert", setup_convert}, {"compare", setup_compare}, {"random", setup_random},
        {"sdpa", setup_sdpa}, {"mha", setup_mha},         {"rollout", setup_rollout}, {"check", setup_check},
        {"tokenize", setup_tokenize}, {"model", setup_model}, {"lens", setup_lens}, {"ablate", setup_ablate},
        {"attribute", setup_attribute}, {"patch", setup_patch}};
    const std::string_view first = argc > 1 ? argv[1] : "";
    const auto chosen = std::find_if(std::begin(commands), std::end(commands), [&](const auto& c) { return c.first == first; });
    for (const auto& [name, setup] : commands)
        if (chosen == std::end(commands) || name == first) setup(app);

    try {
        app.parse(argc, argv);  // the chosen subcommand's callback runs inside
        std::cout.flush();
        if (!std::cout) return fail(attntrace::exit_output, "stdout: write failed");
        return attntrace::exit_ok;
    } catch (const CLI::RuntimeError& e) {  // a command's own exit code (compare: 1)
        std::cout.flush();  // its report must not be lost silently (compare > /dev/full)
        if (!std::cout) return fail(attntrace::exit_output, "stdout: write failed");
        return e.get_exit_code();
    } catch (const CLI::Success& e) {  // --help, --help-all, --version
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        return fail(attntrace::exit_usage, usage_message(app, e));
    } catch (const attntrace::UsageError& e) {
        return fail(attntrace::exit_usage, e.what());
    } catch (const attntrace::InputError& e) {
        return fail(attntrace::exit_input, e.what());
    } catch (const attntrace::OutputError& e) {
        return fail(attntrace::exit_output, e.what());
    } catch (const std::bad_alloc&) {
        return fail(attntrace::exit_input, "out of memory (is an input or --shape too large?)");
    } catch (const std::exception& e) {
        return fail(exit_internal, std::string("internal error: ") + e.what());
    }
}
