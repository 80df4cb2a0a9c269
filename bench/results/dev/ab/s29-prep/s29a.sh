#!/usr/bin/env bash
# Prepared in session 28 for the next session's first device call (~2 min, no A/B): the SASS of the
# two stretches the 1bbff2e timeline leaves unexplained, for reading before any change:
#  - the 1B step's decode attention (bf16, head dim 64, 3 stages, split kernel): 1.25 us from q
#    landing to the key loop's end (marks m0 -> m1) for one or two 64-key stages, and the claim's
#    answer is not what it waits for (s28c);
#  - the 8B batch-16 O/down projection (CTA pipeline rt1_w4_k8, 16 tokens, residual epilogue):
#    1.6 us from the epilogue's start to the kernel's end (m2 -> end).
# Built with -lineinfo; cuobjdump -sass output demangled, one file per kernel (the timeline of the
# same code is bench/results/dev/decode-timeline/1bbff2e.txt).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s29-prep/s29a.sh
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
flags=(-O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -cubin -I src -DNDEBUG --expt-relaxed-constexpr -lineinfo)
nvcc "${flags[@]}" -o /tmp/attention_decode.cubin src/kernels/cuda/attention_decode.cu || exit 1
nvcc "${flags[@]}" -o /tmp/skinny_gemm_residual.cubin src/kernels/cuda/skinny_gemm_residual.cu || exit 1
# One function's SASS (demangled name matching PATTERN) from a cubin.
sass_of() {  # CUBIN PATTERN OUTFILE
  cuobjdump -sass "$1" | c++filt | awk -v pat="$2" '/Function : /{on = index($0, pat) > 0} on' > "$3"
  echo "$3: $(grep -c '^ *\/\*[0-9a-f]*\*\/' "$3") instructions"
}
sass_of /tmp/attention_decode.cubin "decode_split_kernel<__nv_bfloat16, 64, 3>" $OUT/attention-split-bf16-hd64-s3.sass
sass_of /tmp/skinny_gemm_residual.cubin "skinny_gemm_cta_kernel<__nv_bfloat16, 2, 1, 4, fuselm::skinny_detail::ResidualEpilogue>" \
    $OUT/skinny-cta-bf16-mt2-rt1-w4-residual.sass
# The same two with source lines (nvdisasm -g): each function's section, by its mangled name.
lines_of() {  # CUBIN MANGLED-PART OUTFILE
  nvdisasm -g -c "$1" | awk -v pat="$2" '/^[ \t]*\.section/{on = index($0, ".text.") > 0 && index($0, pat) > 0} on' > "$3"
  echo "$3: $(wc -l < "$3") lines"
}
lines_of /tmp/attention_decode.cubin "decode_split_kernelI13__nv_bfloat16Li64ELi3E" $OUT/attention-split-bf16-hd64-s3.lines
lines_of /tmp/skinny_gemm_residual.cubin "skinny_gemm_cta_kernelI13__nv_bfloat16Li2ELi1ELi4ENS0_16ResidualEpilogue" \
    $OUT/skinny-cta-bf16-mt2-rt1-w4-residual.lines
(cd $OUT && gzip -9 *.sass *.lines)
echo "total $((SECONDS - start)) s"
