/* A stand-in for libTritonCPURuntime: one exported function per kind of instruction the real one may hold, each
 * computing a result the tests compare. Our own code, no upstream code. Built the two ways patch 0008 builds the
 * runtime (Armv9 flags; the baseline -march=armv8.2-a+dotprod): the i8mm, bf16 and fp16 functions ask for their
 * extension with a target attribute, as a runtime that adds such code to the baseline build would, so both
 * builds carry them; the SVE loop is plain C that the Armv9 flags vectorize with SVE.
 *
 * How each reaches its instructions is what tests/test_runtime_manifest.py checks the manifest follows: inline,
 * through a local (static, non-inlined) function, through an OpenMP region GCC outlines into a local function
 * libgomp calls back, and through a call of another exported function (the PLT). */
#include <arm_neon.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))
#define LOCAL static __attribute__((noinline))

/* dotprod, inline: sum of a[i] * b[i] over 16 bytes, added to acc. */
EXPORT int32_t standin_dotprod(const int8_t *a, const int8_t *b, int32_t acc) {
  return acc + vaddvq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(a), vld1q_s8(b)));
}

/* i8mm, in a local function: the 2x2 int32 tile of a (2x8 int8) times b^T (2x8 int8), summed. */
__attribute__((target("+i8mm"))) LOCAL int32_t tile_sum_i8mm(const int8_t *a, const int8_t *b) {
  return vaddvq_s32(vmmlaq_s32(vdupq_n_s32(0), vld1q_s8(a), vld1q_s8(b)));
}
EXPORT int32_t standin_i8mm(const int8_t *a, const int8_t *b) { return tile_sum_i8mm(a, b); }

/* bf16, inline: dot product of 8 bf16 pairs (given as their bits), accumulated in fp32, times 1000. */
__attribute__((target("+bf16"))) EXPORT int32_t standin_bf16(const uint16_t *a, const uint16_t *b) {
  float32x4_t dot = vbfdotq_f32(vdupq_n_f32(0.0f), vreinterpretq_bf16_u16(vld1q_u16(a)),
                                vreinterpretq_bf16_u16(vld1q_u16(b)));
  return (int32_t)(vaddvq_f32(dot) * 1000.0f);
}

/* fp16 arithmetic, inline: 8 half-precision additions, summed in fp32, times 1000. */
__attribute__((target("+fp16"))) EXPORT int32_t standin_fp16(const float *x, const float *y) {
  float16x8_t a = vcombine_f16(vcvt_f16_f32(vld1q_f32(x)), vcvt_f16_f32(vld1q_f32(x + 4)));
  float16x8_t b = vcombine_f16(vcvt_f16_f32(vld1q_f32(y)), vcvt_f16_f32(vld1q_f32(y + 4)));
  float16x8_t sum = vaddq_f16(a, b);
  float32x4_t low = vcvt_f32_f16(vget_low_f16(sum)), high = vcvt_f32_f16(vget_high_f16(sum));
  return (int32_t)(vaddvq_f32(vaddq_f32(low, high)) * 1000.0f);
}

/* A plain loop: NEON in the baseline build, SVE (vectorized at 128 bits) with the Armv9 flags. */
EXPORT int32_t standin_sve_loop(int32_t *out, const int32_t *in, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; i++) {
    out[i] = in[i] > 0 ? in[i] * 3 : -in[i];
    sum += out[i];
  }
  return sum;
}

/* i8mm in an OpenMP region: GCC outlines the body into standin_omp_i8mm._omp_fn.0, a local function whose
 * address the exported function hands to libgomp. */
__attribute__((target("+i8mm"))) EXPORT int32_t standin_omp_i8mm(const int8_t *a, const int8_t *b) {
  int32_t total = 0;
#pragma omp parallel for reduction(+ : total) num_threads(2)
  for (int i = 0; i < 2; i++)
    total += vaddvq_s32(vmmlaq_s32(vdupq_n_s32(0), vld1q_s8(a + 16 * i), vld1q_s8(b + 16 * i)));
  return total;
}

/* Another exported function called through the PLT. */
EXPORT int32_t standin_calls_i8mm(const int8_t *a, const int8_t *b) { return 1 + standin_i8mm(a, b); }

/* Nothing beyond the base. */
EXPORT int32_t standin_plain(int32_t x) { return 3 * x + 1; }

/* Which build this is (-DSTANDIN_TIER=9 or 8): what a kernel bound to. */
#ifndef STANDIN_TIER
#define STANDIN_TIER 0
#endif
EXPORT int32_t standin_tier(void) { return STANDIN_TIER; }
