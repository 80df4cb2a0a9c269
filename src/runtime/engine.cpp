#include "runtime/engine.h"

#include "core/error.h"
#include "runtime/cpu_engine.h"
#if FUSELM_HAVE_CUDA
#include "runtime/cuda/cuda_engine.h"
#endif

namespace fuselm {

DeviceKind parse_device(const std::string& name) {
  if (name == "cpu") return DeviceKind::Cpu;
  if (name == "cuda" || name == "gpu") return DeviceKind::Cuda;
  fail("unknown device '", name, "' (supported: cpu, cuda)");
}

ExecutionPath parse_execution_path(const std::string& name) {
  if (name == "fused") return ExecutionPath::Fused;
  if (name == "baseline") return ExecutionPath::Baseline;
  fail("unknown path '", name, "' (supported: fused, baseline)");
}

std::string device_name(DeviceKind d) { return d == DeviceKind::Cpu ? "cpu" : "cuda"; }
std::string execution_path_name(ExecutionPath p) { return p == ExecutionPath::Fused ? "fused" : "baseline"; }

void Engine::forward_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers,
                            std::vector<int32_t>& tokens) {
  FUSELM_CHECK(samplers.size() == chunks.size(), "forward_sample: one sampler per chunk expected, got ",
               samplers.size(), " for ", chunks.size(), " chunks");
  std::vector<float> logits;
  forward(chunks, logits);
  const size_t vocab = static_cast<size_t>(config().vocab_size);
  tokens.resize(chunks.size());
  size_t row = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    row += chunks[i].all_logits ? chunks[i].tokens.size() : 1;
    tokens[i] = sample_token(std::span<float>(logits.data() + (row - 1) * vocab, vocab), *samplers[i]);
  }
}

std::unique_ptr<Engine> make_engine(const Model& model, const EngineOptions& options) {
  if (options.device == DeviceKind::Cpu) return make_cpu_engine(model, options);
#if FUSELM_HAVE_CUDA
  return make_cuda_engine(model, options);
#else
  fail("this build of fuselm has no CUDA backend (nvcc was not found at configure time); use --device cpu "
       "or rebuild on a machine with the CUDA toolkit");
#endif
}

}  // namespace fuselm
