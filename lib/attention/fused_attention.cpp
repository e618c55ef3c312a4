// attend()'s fused path (fused_attention.hpp): the kernel chosen for this CPU, each kv head's K and
// V packed once for it, and the tasks (head, block of query rows) spread over the workers.
#include "fused_attention.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "attntrace/tensor/timeline.hpp"
#include "attntrace/tensor/buffer.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/tensor/threads.hpp"
#include "fused_kernels.hpp"

namespace attntrace {

namespace fused {
// fused_avx512.cpp, compiled with AVX-512F (x86-64 only).
std::size_t run_avx512(const Task& task);
void pack_avx512(const float* k, std::size_t ldk, const float* v, std::size_t ldv, std::size_t lk, std::size_t p,
                 std::size_t pv, std::size_t pv_pad, float* kpack, float* vpack);
}  // namespace fused

namespace {

std::atomic<AttentionKernel> chosen{AttentionKernel::best};

bool cpu_runs(AttentionKernel kernel) {
#if ATTNTRACE_FUSED_X86
    __builtin_cpu_init();
    if (kernel == AttentionKernel::avx512) return __builtin_cpu_supports("avx512f");
#endif
    return kernel == AttentionKernel::blas || kernel == AttentionKernel::best;
}

constexpr std::pair<AttentionKernel, const char*> kNames[] = {
    {AttentionKernel::best, "best"}, {AttentionKernel::blas, "blas"}, {AttentionKernel::avx512, "avx512"}};

}  // namespace

void set_attention_kernel(AttentionKernel kernel) {
    if (!cpu_runs(kernel))
        throw UsageError("attention kernel: this CPU cannot run the " + attention_kernel_name(kernel) + " kernels");
    chosen = kernel;
}

AttentionKernel attention_kernel() {
    const AttentionKernel k = chosen;
    if (k != AttentionKernel::best) return k;
    return cpu_runs(AttentionKernel::avx512) ? AttentionKernel::avx512 : AttentionKernel::blas;
}

std::string attention_kernel_name(AttentionKernel kernel) {
    for (const auto& [k, name] : kNames)
        if (k == kernel) return name;
    return "";
}

std::optional<AttentionKernel> attention_kernel_named(const std::string& name) {
    for (const auto& [k, word] : kNames)
        if (name == word) return k;
    return std::nullopt;
}

namespace stages {
namespace {

// One instruction set's kernel: its lanes and tiles, and its two entry points.
struct Isa {
    std::size_t w = 0, nr = 0, nc = 0;
    std::size_t (*run)(const fused::Task&) = nullptr;
    void (*pack)(const float*, std::size_t, const float*, std::size_t, std::size_t, std::size_t, std::size_t,
                 std::size_t, float*, float*) = nullptr;
};

Isa isa_for(AttentionKernel kernel) {
#if ATTNTRACE_FUSED_X86
    if (kernel == AttentionKernel::avx512) return {16, 16, 16, fused::run_avx512, fused::pack_avx512};
#endif
    (void)kernel;
    return {};
}

using Floats = std::vector<float, BufferAllocator<float>>;

// Each kv head's K and V packed for the kernel by the first task of a head that needs them (the
// others wait for it), and freed after the last task that reads them: the tasks go head by head,
// so only the heads being worked on hold a pack.
class Packs {
    struct Slot {
        std::once_flag once;
        std::atomic<std::size_t> tasks{0};
        Floats k, v;
        NonFiniteValues bad;
    };

public:
    // WITH_BAD: also find each head's non-finite values (the masks skip keys).
    Packs(const HeadBatch<float>& hb, std::size_t tasks_per_head, const Isa& isa, bool with_bad)
        : hb_(hb), isa_(isa), with_bad_(with_bad) {
        pv_pad_ = (hb.pv + isa.nc - 1) / isa.nc * isa.nc;
        std::map<std::pair<std::size_t, std::size_t>, std::size_t> index;  // (k_off, v_off) -> slot
        for (std::size_t n = 0; n < hb.count(); ++n) {
            const auto [it, added] = index.emplace(std::pair(hb.k_off[n], hb.v_off[n]), slots_.size());
            if (added) slots_.push_back(std::make_unique<Slot>());
            slot_of_.push_back(it->second);
            slots_[it->second]->tasks += tasks_per_head;
        }
    }

    std::size_t pv_pad() const { return pv_pad_; }

    // Points T at the packs head N reads (packed now if no task did yet), and at its non-finite
    // values when there are any.
    void acquire(std::size_t n, fused::Task& t) {
        Slot& s = ready(n);
        t.kpack = s.k.data(), t.vpack = s.v.data(), t.pv_pad = pv_pad_;
        if (s.bad.any) t.bad_first = s.bad.first.data(), t.bad_last = s.bad.last.data();
    }

    // Head N's packs made (by this call if no task did yet; a call racing it waits).
    Slot& ready(std::size_t n) {
        Slot& s = *slots_[slot_of_[n]];
        std::call_once(s.once, [&] {
            const std::size_t keys = (hb_.lk + isa_.nr - 1) / isa_.nr * isa_.nr;
            s.k.resize(keys * hb_.p), s.v.resize(keys * pv_pad_);
            timeline_mark("attention: packing a head's K, V");
            isa_.pack(hb_.k + hb_.k_off[n], hb_.ldk, hb_.v + hb_.v_off[n], hb_.ldv, hb_.lk, hb_.p, hb_.pv, pv_pad_,
                      s.k.data(), s.v.data());
            if (with_bad_) s.bad = nonfinite_values(hb_.v + hb_.v_off[n], hb_.ldv, hb_.lk, hb_.pv);
        });
        return s;
    }

    // A task of head N is done; the last one frees the packs.
    void release(std::size_t n) {
        Slot& s = *slots_[slot_of_[n]];
        if (--s.tasks == 0) Floats().swap(s.k), Floats().swap(s.v);
    }

private:
    const HeadBatch<float>& hb_;
    Isa isa_;
    bool with_bad_ = false;
    std::size_t pv_pad_ = 0;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<std::size_t> slot_of_;  // (N)
};

// Query rows per task: the rows of one head a worker takes at a time.
constexpr std::size_t kTaskRows = 256;

// The kernel's task for rows [i0, i0 + rows) of head N.
fused::Task make_task(const HeadBatch<float>& hb, const MaskPlan<float>& masks, float scale, std::size_t n,
                      std::size_t i0, std::size_t rows, std::vector<std::uint32_t>& ranges) {
    fused::Task t;
    t.q = hb.q + hb.q_off[n] + i0 * hb.ldq, t.ldq = hb.ldq;
    t.rows = rows, t.i0 = i0, t.p = hb.p, t.pv = hb.pv, t.lk = hb.lk, t.scale = scale;
    t.o = hb.o + hb.o_off[n] + i0 * hb.ldo, t.ldo = hb.ldo;
    ranges.resize(2 * rows);
    for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t end = masks.key_end(n, i0 + r), begin = masks.key_begin(i0 + r);
        ranges[r] = static_cast<std::uint32_t>(begin < end ? begin : end);
        ranges[rows + r] = static_cast<std::uint32_t>(end);
    }
    t.key_begin = ranges.data(), t.key_end = ranges.data() + rows;
    if (masks.key_padding) t.key_padding = masks.key_padding + (n / masks.heads_per_batch) * hb.lk;
    if (masks.alibi) t.alibi = true, t.alibi_slope = masks.alibi[n % masks.alibi_heads];
    return t;
}

// The row statistics of rows [i0, ...) of head N go straight into STATS.
void point_stats(fused::Task& t, RowStats& stats, std::size_t first_row, bool square) {
    t.entropy = stats.entropy.data() + first_row;
    t.argmax = stats.argmax.data() + first_row;
    t.max_weight = stats.max_weight.data() + first_row;
    if (stats.first_token.empty()) return;
    t.previous_token = stats.previous_token.data() + first_row;
    t.diagonal = stats.diagonal.data() + first_row;
    t.first_token = stats.first_token.data() + first_row;
    t.square = square;
}

}  // namespace

bool fused_applies(const HeadBatch<float>& hb, const Kept<float>& kept, const MaskPlan<float>& masks) {
    constexpr std::size_t kExactInFloat = std::size_t(1) << 24;
    return attention_kernel() != AttentionKernel::blas && kept.tiled() && !kept.pooled && !masks.attn &&
           hb.lq < kExactInFloat && hb.lk < kExactInFloat;
}

std::size_t attend_fused(const HeadBatch<float>& hb, const MaskPlan<float>& masks, float scale, Kept<float>& kept,
                         std::size_t threads, const std::function<void(std::size_t, std::size_t)>& progress) {
    const Isa isa = isa_for(attention_kernel());
    const std::size_t blocks = (hb.lq + kTaskRows - 1) / kTaskRows, tasks = hb.count() * blocks;
    if (tasks == 0) return 0;
    threads = std::max<std::size_t>(1, std::min(threads, tasks));
    Packs packs(hb, blocks, isa, skips_keys(masks));
    const std::size_t scratch = fused::scratch_floats(isa.w, hb.p, packs.pv_pad());
    std::vector<Floats> scratches(threads);
    std::vector<std::vector<std::uint32_t>> ranges(threads);
    std::vector<std::size_t> empty(threads, 0);
    std::atomic<std::size_t> done{0};
    parallel_for(tasks, threads, [&](std::size_t task, std::size_t worker) {
        const std::size_t n = task / blocks, i0 = (task % blocks) * kTaskRows;
        fused::Task t = make_task(hb, masks, scale, n, i0, std::min(kTaskRows, hb.lq - i0), ranges[worker]);
        packs.acquire(n, t);
        // halfway through head N's tasks, head N + 1's K and V are packed ahead (a pack is 1 ms at
        // L = 4096), so the workers that reach it do not wait, one packing while the others idle
        if (threads > 1 && task % blocks == blocks / 2 && n + 1 < hb.count()) packs.ready(n + 1);
        if (scratches[worker].size() < scratch) scratches[worker].resize(scratch);
        t.scratch = scratches[worker].data();
        if (kept.stats) point_stats(t, *kept.stats, n * hb.lq + i0, hb.lq == hb.lk);
        empty[worker] += isa.run(t);
        packs.release(n);
        if (progress) progress(++done, tasks);
        if (task + threads >= tasks) timeline_mark("attention: a worker's last task done");
    });
    std::size_t total = 0;
    for (std::size_t e : empty) total += e;
    return total;
}

}  // namespace stages
}  // namespace attntrace
