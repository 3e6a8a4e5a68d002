/* x86_vec.h — the vector types and width-neutral spellings shared by the x86 kernel
 * templates of src/codec (codec_kernels_x86.h, trellis_x86.h): vf (floats), vi (int32),
 * vmask (a lane mask: __mmask16 for AVX-512, all-ones lanes of a __m256 for AVX2),
 * VF(op) (the intrinsic of that width), VAND, VOR, VCAST_SI, VCAST_PS and vpick.
 * Include it from a template after defining SJK_X86_W (8 or 16); no include guard (once
 * per translation unit). */
#include <immintrin.h>

#if SJK_X86_W == 16
typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vmask;
#define VF(op) _mm512_##op
#define VAND(a, b) _mm512_and_si512(a, b)
#define VOR(a, b) _mm512_or_si512(a, b)
#define VCAST_SI(x) _mm512_castps_si512(x)
#define VCAST_PS(x) _mm512_castsi512_ps(x)
static inline vf vpick(vmask m, vf if_clear, vf if_set) { return _mm512_mask_blend_ps(m, if_clear, if_set); }
#elif SJK_X86_W == 8
typedef __m256 vf;
typedef __m256i vi;
typedef __m256 vmask; /* all-ones lanes where set */
#define VF(op) _mm256_##op
#define VAND(a, b) _mm256_and_si256(a, b)
#define VOR(a, b) _mm256_or_si256(a, b)
#define VCAST_SI(x) _mm256_castps_si256(x)
#define VCAST_PS(x) _mm256_castsi256_ps(x)
static inline vf vpick(vmask m, vf if_clear, vf if_set) { return _mm256_blendv_ps(if_clear, if_set, m); }
#else
#error "x86_vec.h: define SJK_X86_W as 8 or 16"
#endif
