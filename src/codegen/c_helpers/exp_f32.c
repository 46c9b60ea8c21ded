/* e^x for float in plain arithmetic, which the C compiler vectorizes inside
 * the lane loops of vector code (math.h's expf is a call it cannot).
 *
 * e^x = 2^n e^r with n = round(x / ln 2) and |r| <= ln(2) / 2; e^r by a
 * degree-6 polynomial fitted on that interval (relative error 1.2e-7).
 * 2^n is applied as two powers of two, so that n from -150 to 150 needs no
 * special case: results round to 0 below e^-104 and overflow to inf above
 * e^88.7, as expf's do. n is rounded by adding and subtracting 1.5 * 2^23,
 * which the compiler keeps (no -ffast-math). n is halved by an arithmetic
 * shift (GCC's and Clang's >> of a negative int): k / 2 rounds toward zero,
 * which costs two more vector instructions.
 * |x| is clamped to 104 as an unsigned minimum of its bits: one vector
 * instruction, where float selects make GCC evaluate the rest once more per
 * clamped constant and blend. A NaN's bits clamp to 104 too, so n stays in
 * range; the last line restores the NaN. */
static inline float tt_exp_f32(float x) {
  float c = __builtin_fabsf(x);
  uint32_t cb;
  __builtin_memcpy(&cb, &c, sizeof cb);
  cb = cb < 0x42D00000u ? cb : 0x42D00000u; /* 104.0f */
  __builtin_memcpy(&c, &cb, sizeof c);
  c = __builtin_copysignf(c, x);
  float n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = (c - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.39336509e-3f;
  p = p * r + 8.36318173e-3f;
  p = p * r + 4.16664667e-2f;
  p = p * r + 1.66665763e-1f;
  p = p * r + 0.5f;
  p = 1.0f + r + r * r * p;
  int32_t k = (int32_t)n, half = k >> 1;
  uint32_t b1 = (uint32_t)(half + 127) << 23, b2 = (uint32_t)(k - half + 127) << 23;
  float s1, s2;
  __builtin_memcpy(&s1, &b1, sizeof s1);
  __builtin_memcpy(&s2, &b2, sizeof s2);
  return x != x ? x : p * s1 * s2;
}
