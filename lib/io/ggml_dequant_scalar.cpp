// The scalar dequantizers of every type attntrace reads: llama.cpp's ggml/src/ggml-quants.c
// `dequantize_row_*` (and ggml.c's f16 / bf16 rows) transcribed operation for operation, in
// ggml's order of float operations, since that order is what makes the floats bit-identical
// (q6_K's `d * sc * q` is (d * sc) * q; the K types' `d1 * q - m1` is two roundings, never an
// FMA: this file is compiled with -ffp-contract=off, lib/CMakeLists.txt).
#include <cstring>

#include "ggml_blocks.hpp"

namespace attntrace::ggml {
namespace {

// x: blocks * 1 floats, stored as they are
void row_f32(const std::uint8_t* x, float* y, std::size_t n) { std::memcpy(y, x, n * sizeof(float)); }

void row_f16(const std::uint8_t* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = fp16(x + 2 * i);
}

void row_bf16(const std::uint8_t* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = bf16(x + 2 * i);
}

// dequantize_row_q4_0: x = (q - 8) * d
void row_q4_0(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ4_0*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const float d = fp16(x[i].d);
        for (std::size_t j = 0; j < qk / 2; ++j) {
            y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + qk / 2] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

// dequantize_row_q4_1: x = q * d + m
void row_q4_1(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ4_1*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const float d = fp16(x[i].d), m = fp16(x[i].m);
        for (std::size_t j = 0; j < qk / 2; ++j) {
            y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
            y[j + qk / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
        }
    }
}

// The fifth bits of a q5 block's two halves: element j's at bit j, element j + 16's at bit j + 16.
inline int high_bit(std::uint32_t qh, std::size_t j, std::size_t shift) {
    return static_cast<int>((qh >> (j + shift)) & 1u) << 4;
}

// dequantize_row_q5_0: x = (q - 16) * d
void row_q5_0(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ5_0*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const float d = fp16(x[i].d);
        std::uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        for (std::size_t j = 0; j < qk / 2; ++j) {
            y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | high_bit(qh, j, 0)) - 16) * d;
            y[j + qk / 2] = static_cast<float>(((x[i].qs[j] >> 4) | high_bit(qh, j, 16)) - 16) * d;
        }
    }
}

// dequantize_row_q5_1: x = q * d + m
void row_q5_1(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ5_1*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const float d = fp16(x[i].d), m = fp16(x[i].m);
        std::uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        for (std::size_t j = 0; j < qk / 2; ++j) {
            y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | high_bit(qh, j, 0)) * d + m;
            y[j + qk / 2] = static_cast<float>((x[i].qs[j] >> 4) | high_bit(qh, j, 16)) * d + m;
        }
    }
}

// dequantize_row_q8_0: x = q * d
void row_q8_0(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ8_0*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const float d = fp16(x[i].d);
        for (std::size_t j = 0; j < qk; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

// dequantize_row_iq4_nl: x = d * kvalues_iq4nl[q]
void row_iq4_nl(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockIq4Nl*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i, y += qk) {
        const float d = fp16(x[i].d);
        for (std::size_t j = 0; j < qk / 2; ++j) {
            y[j] = d * static_cast<float>(kvalues_iq4nl[x[i].qs[j] & 0xF]);
            y[j + qk / 2] = d * static_cast<float>(kvalues_iq4nl[x[i].qs[j] >> 4]);
        }
    }
}

// dequantize_row_q2_K: 2 halves of 128, each 4 shifts of the same 32 bytes, 2 sub-blocks of 16.
void row_q2_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ2_K*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d), min = fp16(x[i].dmin);
        const std::uint8_t* q = x[i].qs;
        std::size_t is = 0;
        for (std::size_t n = 0; n < qk_k; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (std::size_t half = 0; half < 32; half += 16) {
                    const std::uint8_t sc = x[i].scales[is++];
                    const float dl = d * static_cast<float>(sc & 0xF), ml = min * static_cast<float>(sc >> 4);
                    for (std::size_t l = 0; l < 16; ++l)
                        *y++ = dl * static_cast<float>((q[l + half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// dequantize_row_q3_K's unpacking of the 12 bytes of 16 6-bit scales (kmask1, kmask2).
void q3_K_scales(const std::uint8_t* packed, std::int8_t* scales) {
    constexpr std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    std::uint32_t aux[4];
    std::memcpy(aux, packed, 12);
    const std::uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    std::memcpy(scales, aux, 16);
}

// dequantize_row_q3_K: like q2_K, the third bit from hmask (a clear bit subtracts 4).
void row_q3_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ3_K*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d_all = fp16(x[i].d);
        std::int8_t scales[16];
        q3_K_scales(x[i].scales, scales);
        const std::uint8_t* q = x[i].qs;
        const std::uint8_t* hm = x[i].hmask;
        std::uint8_t m = 1;
        std::size_t is = 0;
        for (std::size_t n = 0; n < qk_k; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = static_cast<std::uint8_t>(m << 1)) {
                for (std::size_t half = 0; half < 32; half += 16) {
                    const float dl = d_all * static_cast<float>(scales[is++] - 32);
                    for (std::size_t l = 0; l < 16; ++l)
                        *y++ = dl * static_cast<float>(((q[l + half] >> shift) & 3) - ((hm[l + half] & m) ? 0 : 4));
                }
            }
        }
    }
}

// dequantize_row_q4_K: 4 pairs of sub-blocks of 32, low nibbles then high nibbles of 32 bytes.
void row_q4_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ4_K*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d), min = fp16(x[i].dmin);
        const std::uint8_t* q = x[i].qs;
        for (std::size_t is = 0; is < 8; is += 2, q += 32) {
            std::uint8_t sc, m;
            scale_min_k4(is, x[i].scales, sc, m);
            const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
            scale_min_k4(is + 1, x[i].scales, sc, m);
            const float d2 = d * static_cast<float>(sc), m2 = min * static_cast<float>(m);
            for (std::size_t l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            for (std::size_t l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
    }
}

// dequantize_row_q5_K: q4_K with a fifth bit per element from qh (bits 2k and 2k+1 for pair k).
void row_q5_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ5_K*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d), min = fp16(x[i].dmin);
        const std::uint8_t* ql = x[i].qs;
        const std::uint8_t* qh = x[i].qh;
        unsigned u1 = 1, u2 = 2;
        for (std::size_t is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            std::uint8_t sc, m;
            scale_min_k4(is, x[i].scales, sc, m);
            const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
            scale_min_k4(is + 1, x[i].scales, sc, m);
            const float d2 = d * static_cast<float>(sc), m2 = min * static_cast<float>(m);
            for (std::size_t l = 0; l < 32; ++l)
                *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (std::size_t l = 0; l < 32; ++l)
                *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

// dequantize_row_q6_K: 2 halves of 128; element l of each quarter from a nibble of ql and 2 bits of qh.
void row_q6_K(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockQ6_K*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d);
        const std::uint8_t* ql = x[i].ql;
        const std::uint8_t* qh = x[i].qh;
        const std::int8_t* sc = x[i].scales;
        for (std::size_t n = 0; n < qk_k; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (std::size_t l = 0; l < 32; ++l) {
                const std::size_t is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

// dequantize_row_iq4_xs: 8 sub-blocks of 32 with 6-bit scales (4 low bits in scales_l, 2 in scales_h).
void row_iq4_xs(const std::uint8_t* bytes, float* y, std::size_t blocks) {
    const auto* x = reinterpret_cast<const BlockIq4Xs*>(bytes);
    for (std::size_t i = 0; i < blocks; ++i) {
        const float d = fp16(x[i].d);
        std::uint16_t scales_h;
        std::memcpy(&scales_h, x[i].scales_h, 2);
        const std::uint8_t* qs = x[i].qs;
        for (std::size_t ib = 0; ib < qk_k / 32; ++ib, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * static_cast<float>(ls - 32);
            for (std::size_t j = 0; j < 16; ++j) {
                y[j] = dl * static_cast<float>(kvalues_iq4nl[qs[j] & 0xF]);
                y[j + 16] = dl * static_cast<float>(kvalues_iq4nl[qs[j] >> 4]);
            }
        }
    }
}

}  // namespace

RowFn scalar_row(std::uint32_t type) {
    switch (type) {
        case 0: return row_f32;
        case 1: return row_f16;
        case 2: return row_q4_0;
        case 3: return row_q4_1;
        case 6: return row_q5_0;
        case 7: return row_q5_1;
        case 8: return row_q8_0;
        case 10: return row_q2_K;
        case 11: return row_q3_K;
        case 12: return row_q4_K;
        case 13: return row_q5_K;
        case 14: return row_q6_K;
        case 20: return row_iq4_nl;
        case 23: return row_iq4_xs;
        case 30: return row_bf16;
        default: return nullptr;
    }
}

}  // namespace attntrace::ggml
