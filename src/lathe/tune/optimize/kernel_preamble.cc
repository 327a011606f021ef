// The fixed part of every generated kernel (fused_gemm_generator.h): GCC vector-extension types of
// W floats, loads and stores (whole and partial), reductions, and vector math (exp, log, tanh,
// erfc) after Cephes' single-precision routines and Abramowitz & Stegun 7.1.26, accurate to a
// few ulp (erfc: 1.5e-7 absolute), so the fused epilogues pass the suite's tolerance rule.
#include "lathe/tune/optimize/fused_gemm_generator.h"

namespace lathe {

const char* generated_kernel_preamble() {
  return R"PREAMBLE(
typedef float V __attribute__((vector_size(W * 4)));
typedef int VI __attribute__((vector_size(W * 4)));
typedef float VU __attribute__((vector_size(W * 4), aligned(4)));
typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));

inline V splat(float a) { return V{} + a; }
inline V load(const float* p) { return *reinterpret_cast<const VU*>(p); }
inline void store(float* p, V v) { *reinterpret_cast<VU*>(p) = v; }
// count < W lanes: the rest read as `fill` and are not written.
inline V load_part(const float* p, int64_t count, float fill = 0.0f) {
  if (count == W) return load(p);
  V v = splat(fill);
  std::memcpy(&v, p, static_cast<size_t>(count) * 4);
  return v;
}
inline void store_part(float* p, V v, int64_t count) {
  if (count == W) return store(p, v);
  std::memcpy(p, &v, static_cast<size_t>(count) * 4);
}
inline V lane_index() {
  V v;
  for (int i = 0; i < W; ++i) v[i] = static_cast<float>(i);
  return v;
}
inline V keep_lanes(V v, int64_t count) { return lane_index() < static_cast<float>(count) ? v : splat(0.0f); }
inline float hsum4(V4 v) { return (v[0] + v[2]) + (v[1] + v[3]); }
inline float hsum8(V8 v) {
  V4 a, b;
  std::memcpy(&a, &v, 16);
  std::memcpy(&b, reinterpret_cast<const char*>(&v) + 16, 16);
  return hsum4(a + b);
}
inline float hsum(V v) {
  if constexpr (W == 4) {
    V4 a;
    std::memcpy(&a, &v, 16);
    return hsum4(a);
  } else if constexpr (W == 8) {
    V8 a;
    std::memcpy(&a, &v, 32);
    return hsum8(a);
  } else {
    V8 a, b;
    std::memcpy(&a, &v, 32);
    std::memcpy(&b, reinterpret_cast<const char*>(&v) + 32, 32);
    return hsum8(a + b);
  }
}
inline float hmax(V v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
inline V vmax(V a, V b) { return a > b ? a : b; }
inline V vmin(V a, V b) { return a < b ? a : b; }
inline V vfloor(V x) {
  V t = __builtin_convertvector(__builtin_convertvector(x, VI), V);
  return t > x ? t - 1.0f : t;
}
inline V vexp(V x) {
  x = vmin(vmax(x, splat(-87.3365447505531f)), splat(88.0f));
  V t = vfloor(x * 1.44269504088896341f + 0.5f);
  x = x - t * 0.693359375f + t * 2.12194440e-4f;
  V z = x * x;
  V y = (((((1.9875691500E-4f * x + 1.3981999507E-3f) * x + 8.3334519073E-3f) * x + 4.1665795894E-2f) * x +
          1.6666665459E-1f) * x + 5.0000001201E-1f) * z + x + 1.0f;
  VI bits = (__builtin_convertvector(t, VI) + 127) << 23;
  return y * (V)bits;
}
inline V vlog(V x) {  // x > 0
  VI bits = (VI)x;
  VI e = ((bits >> 23) & 0xff) - 126;
  V m = (V)((bits & 0x807fffff) | 0x3f000000);
  VI small = m < 0.707106781186547524f;
  V ef = __builtin_convertvector(e + small, V);
  m = small ? m + m - 1.0f : m - 1.0f;
  V z = m * m;
  V y = ((((((((7.0376836292E-2f * m - 1.1514610310E-1f) * m + 1.1676998740E-1f) * m - 1.2420140846E-1f) * m +
             1.4249322787E-1f) * m - 1.6668057665E-1f) * m + 2.0000714765E-1f) * m - 2.4999993993E-1f) * m +
        3.3333331174E-1f) * m * z;
  y = y - ef * 2.12194440e-4f - z * 0.5f;
  return m + y + ef * 0.693359375f;
}
inline V vsigmoid(V x) { return 1.0f / (1.0f + vexp(-x)); }
inline V vtanh(V x) {
  V a = x < 0.0f ? -x : x;
  V z = x * x;
  V small = ((((-5.70498872745E-3f * z + 2.06390887954E-2f) * z - 5.37397155531E-2f) * z + 1.33314422036E-1f) * z -
             3.33332819422E-1f) * z * x + x;
  V large = 1.0f - 2.0f / (vexp(a + a) + 1.0f);
  large = x < 0.0f ? -large : large;
  return a < 0.625f ? small : large;
}
inline V vsoftplus(V x) {  // log1p(exp(x)), x for x > 20
  V e = vexp(vmin(x, splat(20.0f)));
  V u = 1.0f + e;
  V d = u - 1.0f;
  V r = vlog(u) * (e / (d == 0.0f ? splat(1.0f) : d));
  r = d == 0.0f ? e : r;
  return x > 20.0f ? x : r;
}
inline V vmish(V x) {  // x tanh(softplus(x)) = x n / (n + 2), n = e^x (e^x + 2)
  V e = vexp(vmin(x, splat(20.0f)));
  V n = e * (e + 2.0f);
  return x * (n / (n + 2.0f));
}
inline V verfc_abs(V u) {  // erfc(|u|)
  V a = u < 0.0f ? -u : u;
  V t = 1.0f / (1.0f + 0.3275911f * a);
  V poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return poly * vexp(-(a * a));
}
inline V vgelu_erf(V x) {
  V u = x * 0.7071067811865476f;
  V q = verfc_abs(u);
  return 0.5f * x * (u >= 0.0f ? 2.0f - q : q);
}
inline V vgelu_tanh(V x) {  // x * sigmoid(2 c (x + 0.044715 x^3))
  V z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + vexp(-2.0f * z));
}
inline V vhardswish(V x) { return x * vmin(vmax(x + 3.0f, splat(0.0f)), splat(6.0f)) * (1.0f / 6.0f); }
)PREAMBLE";
}

}  // namespace lathe
