// Builds without the CUDA backend: the GPU entry points of the plan say why they cannot run.
#include "core/error.h"
#include "plan/plan.h"
#include "plan/tune.h"

namespace fuselm {

#if !FUSELM_HAVE_CUDA
namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(what, ": this build of fuselm has no CUDA backend (nvcc was not found at configure time); rebuild on a "
       "machine with the CUDA toolkit");
}
}  // namespace

GpuIdentity query_gpu_identity() { no_cuda("querying the GPU"); }

Plan tune_plan(const ModelConfig&, DType, const PlanLimits&, const TuneOptions&, const TuneLog&) {
  no_cuda("fuselm tune times kernels on the GPU");
}
#endif

}  // namespace fuselm
