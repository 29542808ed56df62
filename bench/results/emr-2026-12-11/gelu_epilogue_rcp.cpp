// Throwaway experiment (2026-12-06, session 10), kept for the numbers in README.md: ConvNeXt-T's first
// stage-1 Linear at batch 8 (25088x96 x 96x384, bf16, bias) with GELU as oneDNN's gelu_erf post-op (A),
// without GELU (N), with a separate GELU pass over its float32 output (B), and computed in row chunks
// of R rows whose float32 output gets GELU (Abramowitz-Stegun erf, as kernels/cpu/activation.cpp) and
// bf16 rounding while in L2 (C). Build: g++ -O2 -std=c++17 gelu_epilogue.cpp -ldnnl; run with
// OMP_NUM_THREADS=1 or 2. Not part of the build. Session 11 variant: the 1/(1 + p a) division also as rcp14 +
// one Newton step (g_rcp), and GELU alone over a 256-row chunk in L2 repeated 98 times (9.6 M values).
#include <dnnl.hpp>
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cstring>
using namespace dnnl;
using dt = memory::data_type;
static const float kP = 0.3275911f; static const float kPoly[] = {1.061405429f, -1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) static inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-104.f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}
static bool g_rcp = false;
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) static void gelu_to_bf16(const float* x, uint16_t* y, int64_t count) {
  const __m512 one = _mm512_set1_ps(1.f), p = _mm512_set1_ps(kP), sb = _mm512_set1_ps(-0.0f), rs2 = _mm512_set1_ps(0.70710678f), half = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < count; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512 z = _mm512_mul_ps(v, rs2);
    __m512 a = _mm512_andnot_ps(sb, z);
    __m512 den = _mm512_fmadd_ps(p, a, one);
    __m512 t;
    if (g_rcp) { __m512 r0 = _mm512_rcp14_ps(den); t = _mm512_mul_ps(r0, _mm512_fnmadd_ps(den, r0, _mm512_set1_ps(2.f))); }
    else t = _mm512_div_ps(one, den);
    __m512 poly = _mm512_set1_ps(kPoly[0]);
    for (int j = 1; j < 5; ++j) poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kPoly[j]));
    poly = _mm512_mul_ps(poly, t);
    __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a)));
    __m512 r = _mm512_fnmadd_ps(poly, e, one);
    r = _mm512_or_ps(r, _mm512_and_ps(sb, z));
    __m512 g = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, r));
    _mm256_storeu_si256((__m256i*)(y + i), (__m256i)_mm512_cvtneps_pbh(g));
  }
}
int main() {
  int M = 25088, K = 96, N = 384;
  engine eng(engine::kind::cpu, 0); stream s(eng);
  memory::desc a({M, K}, dt::bf16, memory::format_tag::ab);
  memory::desc bias({1, N}, dt::f32, memory::format_tag::ab);
  memory::desc cb({M, N}, dt::bf16, memory::format_tag::ab), cf({M, N}, dt::f32, memory::format_tag::ab);
  memory am(a, eng), biasm(bias, eng), outb(cb, eng), outf(cf, eng);
  std::vector<uint16_t> ainit(size_t(M)*K); for (size_t i=0;i<ainit.size();++i) ainit[i] = 0x3f80 ^ (i*2654435761u >> 20 & 0x807f);
  memcpy(am.get_data_handle(), ainit.data(), a.get_size());
  std::memset(biasm.get_data_handle(), 0, bias.get_size());
  auto make = [&](int rows, memory::desc dst, bool gelu) {
    post_ops po; if (gelu) po.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0, 0);
    primitive_attr attr; attr.set_post_ops(po);
    memory::desc ar({rows, K}, dt::bf16, memory::format_tag::ab), br({K, N}, dt::bf16, memory::format_tag::any);
    memory::desc dr({rows, N}, dst.data_type(), memory::format_tag::ab);
    return matmul::primitive_desc(matmul::desc(ar, br, bias, dr), attr, eng);
  };
  auto pdA = make(M, cb, true);
  memory wm(pdA.weights_desc(), eng); std::vector<uint16_t> w(pdA.weights_desc().get_size()/2); for (size_t i=0;i<w.size();++i) w[i]=0x3c00 ^ (i*40503u>>22 & 0x807f); memcpy(wm.get_data_handle(), w.data(), w.size()*2);
  auto pdB = make(M, cf, false); auto pdN = make(M, cb, false); matmul mN(pdN);
  matmul mA(pdA), mB(pdB);
  auto time = [&](const char* name, auto fn) { std::vector<double> t; for (int i=0;i<15;++i){auto t0=std::chrono::steady_clock::now(); fn(); t.push_back(std::chrono::duration<double,std::milli>(std::chrono::steady_clock::now()-t0).count());} std::sort(t.begin(),t.end()); printf("%-28s median %.3f min %.3f\n", name, t[7], t[0]); };
  std::vector<uint16_t> refA(size_t(M)*N);
  for (int rep=0; rep<2; ++rep) {
  time("A onednn gelu post-op", [&]{ mA.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, outb}}); s.wait(); });
  time("N matmul bf16 no gelu", [&]{ mN.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, outb}}); s.wait(); });
  mA.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, outb}}); s.wait();
  if (rep==0) memcpy(refA.data(), outb.get_data_handle(), refA.size()*2);
  time("B matmul f32 + gelu pass", [&]{ mB.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, outf}}); s.wait();
     gelu_to_bf16((float*)outf.get_data_handle(), (uint16_t*)outb.get_data_handle(), (int64_t)M*N); });
  { std::vector<float> buf(size_t(256)*N); for (size_t i=0;i<buf.size();++i) buf[i] = float(int(i%97)-48)/16.f; std::vector<uint16_t> o(buf.size());
    for (int v=0; v<2; ++v) { g_rcp = v; char name[64]; snprintf(name,64,"gelu only 9.6M rcp=%d", v);
      time(name, [&]{ for (int r0=0; r0<M; r0+=256) gelu_to_bf16(buf.data(), o.data(), (int64_t)256*N); }); } }
  for (int R : {128, 256, 128, 256}) { g_rcp = !g_rcp;
    auto pdC = make(R, cf, false); matmul mC(pdC);
    std::vector<float> buf(size_t(R)*N);
    memory ac({{R, K}, dt::bf16, memory::format_tag::ab}, eng, am.get_data_handle()), dc({{R, N}, dt::f32, memory::format_tag::ab}, eng, buf.data());
    char name[64]; snprintf(name, 64, "C chunked R=%d rcp=%d", R, (int)g_rcp);
    time(name, [&]{ for (int r0=0; r0<M; r0+=R) { ac.set_data_handle((uint16_t*)am.get_data_handle() + size_t(r0)*K);
        mC.execute(s, {{DNNL_ARG_SRC, ac}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, dc}});
        gelu_to_bf16(buf.data(), (uint16_t*)outb.get_data_handle() + size_t(r0)*N, (int64_t)R*N);} s.wait(); });
  }
  }
  // compare last C with A
  double maxd=0; const uint16_t* o=(const uint16_t*)outb.get_data_handle(); int diff=0;
  for (size_t i=0;i<refA.size();++i){ uint32_t x=uint32_t(o[i])<<16, y=uint32_t(refA[i])<<16; float fx,fy; memcpy(&fx,&x,4); memcpy(&fy,&y,4); double d=std::fabs(fx-fy)/(std::fabs(fy)+1e-3); if(d>maxd)maxd=d; diff += o[i]!=refA[i];}
  printf("max rel diff %.3g, %d of %zu codes differ\n", maxd, diff, refA.size());
}
