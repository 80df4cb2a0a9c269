#include "runtime/engine.h"

#include <exception>

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

void Engine::check_submit(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers,
                          int in_flight) const {
  FUSELM_CHECK(samplers.size() == chunks.size(), "submit_sample: one sampler per chunk expected, got ",
               samplers.size(), " for ", chunks.size(), " chunks");
  FUSELM_CHECK(in_flight < kMaxStepsInFlight, "submit_sample: ", in_flight,
               " steps are already submitted and not waited for (at most ", kMaxStepsInFlight,
               "); call wait_sample first");
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SequenceChunk& c = chunks[i];
    FUSELM_CHECK(samplers[i] != nullptr, "submit_sample: null sampler for sequence ", c.seq_id);
    for (size_t t = 0; t < c.tokens.size(); ++t) {
      if (c.tokens[t] != kPendingToken) continue;
      FUSELM_CHECK(c.tokens.size() == 1, "submit_sample: sequence ", c.seq_id, " has kPendingToken at token ", t,
                   " of a ", c.tokens.size(), "-token chunk; only a single-token (decode) chunk may take it");
      FUSELM_CHECK(!samplers[i]->params.penalised(), "submit_sample: sequence ", c.seq_id,
                   " takes kPendingToken but its sampler has a repetition penalty (",
                   samplers[i]->params.repetition_penalty,
                   "), whose window must hold that token; pass the token after wait_sample instead");
    }
  }
}

void Engine::submit_sample(std::span<const SequenceChunk> chunks, std::span<SamplerState* const> samplers) {
  check_submit(chunks, samplers, steps_in_flight());
  // Every earlier step has run, so a pending token is already known.
  std::vector<int32_t> resolved(chunks.size());
  std::vector<SequenceChunk> run(chunks.begin(), chunks.end());
  for (size_t i = 0; i < run.size(); ++i) {
    if (run[i].tokens.size() != 1 || run[i].tokens[0] != kPendingToken) continue;
    const auto it = last_sampled_.find(run[i].seq_id);
    FUSELM_CHECK(it != last_sampled_.end() && it->second.first == sequence_length(run[i].seq_id),
                 "submit_sample: sequence ", run[i].seq_id,
                 " takes kPendingToken but its latest step was not a submitted one that sampled a token");
    resolved[i] = it->second.second;
    run[i].tokens = std::span<const int32_t>(&resolved[i], 1);
  }
  std::vector<int32_t> tokens;
  forward_sample(run, samplers, tokens);
  // Entries of removed sequences, or of ones fed since, can never be taken again: drop them now and
  // then, so that the map follows the sequences alive rather than every one ever sampled for.
  if (last_sampled_.size() > 4 * run.size() + 64) {
    std::erase_if(last_sampled_, [&](const auto& entry) {
      try {
        return sequence_length(entry.first) != entry.second.first;
      } catch (const std::exception&) {
        return true;  // removed
      }
    });
  }
  for (size_t i = 0; i < run.size(); ++i) last_sampled_[run[i].seq_id] = {sequence_length(run[i].seq_id), tokens[i]};
  finished_steps_.push_back(std::move(tokens));
}

void Engine::wait_sample(std::vector<int32_t>& tokens) {
  FUSELM_CHECK(!finished_steps_.empty(), "wait_sample: no step was submitted and not yet waited for");
  tokens = std::move(finished_steps_.front());
  finished_steps_.pop_front();
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
