// The fused decode step's kernel timeline (kernel_trace.h): a check that every traced kernel stamps
// a consistent record, and a lab that prints, for the synthetic Llama shapes at batch 1 and 16, where each
// kind of kernel starts, is released from its wait, and ends within a step, averaged over layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "reference_model.h"
#include "kernels/cuda/fused_decode.h"
#include "model/loader.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/sampler.h"

namespace fuselm {
namespace {

EngineOptions lab_options(int batch = 1) {
  EngineOptions o;
  // The lab can run a plan file's kernels (FUSELM_TIMELINE_PLAN, made for the one shape of
  // FUSELM_TIMELINE_SHAPE) instead of the rule table's.
  if (const char* plan = std::getenv("FUSELM_TIMELINE_PLAN")) o.plan_file = plan;
  o.device = DeviceKind::Cuda;
  o.dtype = DType::BF16;
  o.path = ExecutionPath::Fused;
  o.max_batch = batch;
  o.max_prefill_tokens = 512;
  o.max_seq_len = 1024;
  return o;
}

// Prefills `prompt` tokens into each of `batch` sequences, then decodes `steps` tokens per sequence,
// all sequences in one step, and returns every step's timeline.
std::vector<std::vector<KernelTrace>> traced_steps(const Model& model, int prompt, int steps, int batch = 1) {
  CudaEngineTuning tuning;
  tuning.trace_decode = true;
  auto engine = make_cuda_engine(model, lab_options(batch), tuning);
  std::mt19937 gen(7);
  std::uniform_int_distribution<int32_t> pick(0, model.config.vocab_size - 1);
  std::vector<int> seqs;
  std::vector<float> logits;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(engine->add_sequence());
    std::vector<int32_t> tokens(static_cast<size_t>(prompt));
    for (int32_t& t : tokens) t = pick(gen);
    SequenceChunk chunk{seqs.back(), tokens, false};
    engine->forward(std::span<const SequenceChunk>(&chunk, 1), logits);
  }
  std::vector<std::vector<KernelTrace>> out;
  std::vector<int32_t> next(static_cast<size_t>(batch));
  for (int s = 0; s < steps; ++s) {
    std::vector<SequenceChunk> step;
    for (int b = 0; b < batch; ++b) {
      next[static_cast<size_t>(b)] = pick(gen);
      step.push_back({seqs[static_cast<size_t>(b)], std::span<const int32_t>(&next[static_cast<size_t>(b)], 1), false});
    }
    engine->forward(step, logits);
    out.push_back(engine->decode_trace());
  }
  return out;
}

TEST(DecodeTimeline, EveryKernelStampsAnOrderedRecord) {
  FUSELM_REQUIRE_GPU();
  ModelConfig config = test::gqa4_config();
  config.num_layers = 3;  // enough kernels to check the order of the records
  auto model = test::make_synthetic_model(config, false);
  const auto steps = traced_steps(*model, 20, 3);
  ASSERT_EQ(steps.size(), 3u);
  for (const std::vector<KernelTrace>& trace : steps) {
    ASSERT_EQ(trace.size(), static_cast<size_t>(fused_decode_trace_slots(config.num_layers)));
    size_t prev = 0;  // the last slot a kernel stamped
    for (size_t i = 0; i < trace.size(); ++i) {
      const KernelTrace& t = trace[i];
      SCOPED_TRACE("slot " + std::to_string(i));
      // A step with the FFN in one launch (decode.ffn_one_launch_tokens) stamps no down slot.
      if (t.start == KernelTrace::kUnset && i > 1 && (i - 1) % 5 == static_cast<size_t>(FusedTraceOp::Down)) continue;
      ASSERT_NE(t.start, KernelTrace::kUnset);
      ASSERT_NE(t.released, KernelTrace::kUnset);
      ASSERT_NE(t.end_complement, KernelTrace::kUnset);
      EXPECT_LE(t.start, t.released);
      EXPECT_LE(t.released, t.end());
      EXPECT_LE(t.start, t.first_end);
      EXPECT_LE(t.first_end, t.end());
      EXPECT_LE(t.start, t.last_start());
      EXPECT_LE(t.released, t.last_released());
      EXPECT_LE(t.last_released(), t.end());
      // The marks, where a kernel has them, come in order between its release and its end.
      uint64_t before = t.released;
      for (int m = 0; m < KernelTrace::kOrderedMarks; ++m) {
        if (t.mark(m) == KernelTrace::kUnset) continue;
        EXPECT_LE(before, t.mark(m)) << "mark " << m;
        before = t.mark(m);
      }
      EXPECT_LE(before, t.end());
      // Every CTA's end is counted on its SM, between the first CTA's end and the last's.
      int ctas = 0;
      for (int sm = 0; sm < KernelTrace::kSms; ++sm) {
        ctas += t.sm_ctas(sm);
        if (t.sm_ctas(sm) == 0) {
          EXPECT_EQ(t.sm_end(sm), KernelTrace::kUnset) << "SM " << sm;
          EXPECT_EQ(t.sm_last_start(sm), KernelTrace::kUnset) << "SM " << sm;
          continue;
        }
        EXPECT_LE(t.first_end, t.sm_end(sm)) << "SM " << sm;
        EXPECT_LE(t.sm_end(sm), t.end()) << "SM " << sm;
        // A CTA starts on an SM before the last one there ends, within the launch's starts.
        EXPECT_LE(t.start, t.sm_last_start(sm)) << "SM " << sm;
        EXPECT_LE(t.sm_last_start(sm), t.last_start()) << "SM " << sm;
        EXPECT_LE(t.sm_last_start(sm), t.sm_end(sm)) << "SM " << sm;
      }
      EXPECT_GT(ctas, 0);
      // A kernel is released only once its predecessor has ended (programmatic dependent launch
      // lets it start earlier, never read earlier).
      if (i > 0) EXPECT_GE(t.released, trace[prev].end());
      prev = i;
    }
  }
  // Without the tuning flag there is no timeline.
  auto plain = make_cuda_engine(*model, lab_options());
  EXPECT_TRUE(plain->decode_trace().empty());
}

// What each kernel's marks (kernel_trace.h) stand for, in the lab's columns.
constexpr const char* kMarkNames =
    "marks: GEMMs m0 first stage landed, m1 K loop done, m2 epilogue starts; attention m0 q and prologue "
    "landed, m1 key loop done, m2 split partial written and counted, before the wait: m3 first item located, "
    "m4 its block numbers staged, m5 prologue issued";

// Lab: batch 1 and batch 16, prompt 512 (FUSELM_TIMELINE_PROMPT: another length, e.g. the 128 tokens
// of the bench's throughput scenario), the mean over 16 steps and over the layers of each step of, per kind of
// kernel: when its first and last CTA start, are released from the wait, reach each mark (the
// last CTA), and end (last, then first), relative to its predecessor's end; the LM head as a sixth
// kind, and the embedding's own time. Then, per kind of kernel,
// its SMs by how many of its CTAs each ran: how many SMs (per launch) and when the last CTA on them
// ended, on average; and its late SMs (the last CTA there started within the launch's last
// microsecond of starts): how many (per launch), on how many the late CTA started beside a CTA of
// the predecessor still running, on how many after the predecessor's last CTA there had ended, and
// how long after that end, on average (~0: it waited for the room).
TEST(DecodeTimeline, DISABLED_Lab) {
  FUSELM_REQUIRE_GPU();
  LoadOptions load;
  load.materialize_synthetic = false;
  // The layers' five kinds, then the LM head (after the last layer's down projection).
  constexpr int kKinds = 6;
  const char* kOps[kKinds] = {"qkv", "attention", "o", "gate_up", "down", "lm_head"};
  constexpr int kColumns = 12;
  // An SM is late when its last CTA started within this much of the launch's last start.
  constexpr uint64_t kLateWindowNs = 1000;
  const char* kColumnNames[kColumns] = {"start", "start_l", "rel",  "rel_l", "m0_l",  "m1_l",
                                        "m2_l",  "m3_l",    "m4_l", "m5_l",  "end_l", "end"};
  std::printf("[bench] us after the predecessor's end (_l: last CTA; end: first CTA's end); %s\n", kMarkNames);
  std::printf("[bench] %-13s %5s %-9s", "shape", "batch", "kernel");
  for (const char* c : kColumnNames) std::printf(" %8s", c);
  std::printf(" %8s\n", "step_us");
  const char* only = std::getenv("FUSELM_TIMELINE_SHAPE");
  const char* prompt_env = std::getenv("FUSELM_TIMELINE_PROMPT");
  const int prompt_tokens = prompt_env != nullptr ? std::atoi(prompt_env) : 512;
  ASSERT_TRUE(prompt_tokens >= 1 && prompt_tokens <= 512) << "FUSELM_TIMELINE_PROMPT " << prompt_env << ": 1..512";
  for (const char* shape : {"llama-3.1-8b", "llama-3.2-1b"}) {
    if (only != nullptr && std::string(only) != shape) continue;
    auto model = load_model(std::string("synthetic:") + shape + "?vocab=32000", load);
    for (int batch : {1, 16}) {
      const int layers = model->config.num_layers;
      const auto steps = traced_steps(*model, prompt_tokens, 16, batch);
      double sum[kKinds][kColumns] = {}, step_us = 0, embedding_us = 0;
      int count[kKinds][kColumns] = {};
      // Per kind of kernel and CTAs an SM: SMs seen and the sum of their last ends (us after the predecessor's).
      std::map<int, std::pair<int64_t, double>> by_ctas[kKinds];
      // Per kind of kernel: late SMs; those where the late CTA started beside the predecessor's, and
      // after them, with the sum of its delay after the predecessor's last end there (us).
      int64_t late_sms[kKinds] = {}, late_beside_prev[kKinds] = {}, late_after_prev[kKinds] = {};
      double late_delay_us[kKinds] = {};
      int64_t launches[kKinds] = {};
      for (const std::vector<KernelTrace>& t : steps) {
        step_us += (t.back().end() - t.front().start) * 1e-3;
        embedding_us += (t.front().end() - t.front().start) * 1e-3;
        for (int l = 0; l < layers; ++l) {
          for (int op = 0; op < kKinds; ++op) {
            if (op == kKinds - 1 && l != layers - 1) continue;  // one LM head a step
            const int i = op == kKinds - 1 ? fused_decode_trace_head_slot(layers)
                                           : fused_decode_trace_slot(l, static_cast<FusedTraceOp>(op));
            const KernelTrace& k = t[static_cast<size_t>(i)];
            if (k.start == KernelTrace::kUnset) continue;  // not launched (the one-launch FFN has no down)
            int prev = i - 1;
            while (prev > 0 && t[static_cast<size_t>(prev)].start == KernelTrace::kUnset) --prev;
            const double prev_end = static_cast<double>(t[static_cast<size_t>(prev)].end());
            const uint64_t at[kColumns] = {k.start,   k.last_start(), k.released, k.last_released(),
                                           k.mark(0), k.mark(1),      k.mark(2),  k.mark(3),
                                           k.mark(4), k.mark(5),      k.end(),      k.first_end};
            for (int c = 0; c < kColumns; ++c) {
              if (at[c] == KernelTrace::kUnset) continue;  // a mark this kernel does not have
              sum[op][c] += (static_cast<double>(at[c]) - prev_end) * 1e-3;
              ++count[op][c];
            }
            ++launches[op];
            const KernelTrace& pred = t[static_cast<size_t>(prev)];
            for (int sm = 0; sm < KernelTrace::kSms; ++sm) {
              if (k.sm_ctas(sm) == 0) continue;
              auto& [sms, ends] = by_ctas[op][k.sm_ctas(sm)];
              ++sms;
              ends += (static_cast<double>(k.sm_end(sm)) - prev_end) * 1e-3;
              if (k.sm_last_start(sm) + kLateWindowNs < k.last_start()) continue;
              ++late_sms[op];
              if (pred.sm_ctas(sm) == 0) continue;
              if (pred.sm_end(sm) > k.sm_last_start(sm)) {
                ++late_beside_prev[op];
                continue;
              }
              ++late_after_prev[op];
              late_delay_us[op] +=
                  (static_cast<double>(k.sm_last_start(sm)) - static_cast<double>(pred.sm_end(sm))) * 1e-3;
            }
          }
        }
      }
      for (int op = 0; op < kKinds; ++op) {
        std::printf("[bench] %-13s %5d %-9s", shape, batch, kOps[op]);
        for (int c = 0; c < kColumns; ++c) {
          if (count[op][c] > 0)
            std::printf(" %8.2f", sum[op][c] / count[op][c]);
          else
            std::printf(" %8s", "-");
        }
        std::printf(" %8.1f\n", step_us / steps.size());
      }
      std::printf("[bench] %-13s %5d embedding: %.2f us from its first CTA's start to its last CTA's end\n", shape,
                  batch, embedding_us / steps.size());
      for (int op = 0; op < kKinds; ++op) {
        std::printf("[bench] %-13s %5d %-9s CTAs an SM: SMs, their last end:", shape, batch, kOps[op]);
        for (const auto& [ctas, sm_ends] : by_ctas[op])
          std::printf("  %d: %.1f, %.2f", ctas, static_cast<double>(sm_ends.first) / launches[op],
                      sm_ends.second / sm_ends.first);
        std::printf("\n");
        std::printf("[bench] %-13s %5d %-9s late SMs (last start within %.1f us of the launch's): %.1f; beside the "
                    "predecessor's CTAs: %.1f; after them: %.1f, %.2f us after their end\n",
                    shape, batch, kOps[op], kLateWindowNs * 1e-3, static_cast<double>(late_sms[op]) / launches[op],
                    static_cast<double>(late_beside_prev[op]) / launches[op],
                    static_cast<double>(late_after_prev[op]) / launches[op],
                    late_after_prev[op] > 0 ? late_delay_us[op] / late_after_prev[op] : 0.0);
      }
    }
  }
}

// Lab: the device's idle time between two decode steps of the bench's loop (batch 1, prompt 512,
// greedy forward_sample per token). Per step: the host's wall time of forward_sample, the step's
// kernels from the embedding's start to the LM head's end (globaltimer), and the device time from
// one step's LM head end to the next step's embedding start, less the host time spent reading the
// timeline back in between (which the bench does not do). That gap holds the sampling kernel, the
// copies of the inputs and the ids, and everything the host does between two replays.
TEST(DecodeTimeline, DISABLED_LabStepGap) {
  FUSELM_REQUIRE_GPU();
  LoadOptions load;
  load.materialize_synthetic = false;
  const char* only = std::getenv("FUSELM_TIMELINE_SHAPE");
  for (const char* shape : {"llama-3.1-8b", "llama-3.2-1b"}) {
    if (only != nullptr && std::string(only) != shape) continue;
    auto model = load_model(std::string("synthetic:") + shape + "?vocab=32000", load);
    CudaEngineTuning tuning;
    tuning.trace_decode = true;
    auto engine = make_cuda_engine(*model, lab_options(1), tuning);
    std::vector<int32_t> prompt(512);
    std::mt19937 gen(7);
    std::uniform_int_distribution<int32_t> pick(0, model->config.vocab_size - 1);
    for (int32_t& t : prompt) t = pick(gen);
    const int seq = engine->add_sequence();
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    SamplerState sampler(greedy);
    SamplerState* samplers[1] = {&sampler};
    std::vector<int32_t> out;
    SequenceChunk chunk{seq, prompt, false};
    engine->forward_sample(std::span<const SequenceChunk>(&chunk, 1), samplers, out);
    int32_t token = out[0];
    using Clock = std::chrono::steady_clock;
    std::vector<double> wall, kernels, gaps, readback;
    uint64_t prev_end = 0;
    double prev_readback = 0;
    for (int s = 0; s < 48; ++s) {
      SequenceChunk step{seq, std::span<const int32_t>(&token, 1), false};
      const auto t0 = Clock::now();
      engine->forward_sample(std::span<const SequenceChunk>(&step, 1), samplers, out);
      const auto t1 = Clock::now();
      token = out[0];
      const std::vector<KernelTrace> trace = engine->decode_trace();
      const auto t2 = Clock::now();
      const double rb = std::chrono::duration<double, std::micro>(t2 - t1).count();
      if (s >= 8) {  // after the warm-up
        wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        kernels.push_back((trace.back().end() - trace.front().start) * 1e-3);
        gaps.push_back((static_cast<double>(trace.front().start) - static_cast<double>(prev_end)) * 1e-3 -
                       prev_readback);
        readback.push_back(prev_readback);
      }
      prev_end = trace.back().end();
      prev_readback = rb;
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("[bench] %-13s forward_sample %8.1f us, kernels %8.1f us, device gap %6.1f us (readback %5.1f) median of %zu\n",
                shape, median(wall), median(kernels), median(gaps), median(readback), wall.size());

    // Without the timeline: a token's host time one step at a time and pipelined, and the graph
    // replayed back to back.
    auto plain = make_cuda_engine(*model, lab_options(1));
    const int pseq = plain->add_sequence();
    SamplerState psampler(greedy);
    SamplerState* psamplers[1] = {&psampler};
    SequenceChunk pchunk{pseq, prompt, false};
    plain->forward_sample(std::span<const SequenceChunk>(&pchunk, 1), psamplers, out);
    token = out[0];
    const int kSteps = 64;
    auto t0 = Clock::now();
    for (int s = 0; s < kSteps; ++s) {
      SequenceChunk step{pseq, std::span<const int32_t>(&token, 1), false};
      plain->forward_sample(std::span<const SequenceChunk>(&step, 1), psamplers, out);
      token = out[0];
    }
    const double sync_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kSteps;
    static const int32_t pending = kPendingToken;
    SequenceChunk first{pseq, std::span<const int32_t>(&token, 1), false};
    SequenceChunk next{pseq, std::span<const int32_t>(&pending, 1), false};
    t0 = Clock::now();
    plain->submit_sample(std::span<const SequenceChunk>(&first, 1), psamplers);
    for (int s = 0; s < kSteps; ++s) {
      if (s + 1 < kSteps) plain->submit_sample(std::span<const SequenceChunk>(&next, 1), psamplers);
      plain->wait_sample(out);
    }
    const double pipe_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kSteps;
    const double replay_us = plain->lab_replay_decode_us(kSteps);
    std::printf("[bench] %-13s token one at a time %8.1f us, pipelined %8.1f us; graph replays back to back %8.1f us\n",
                shape, sync_us, pipe_us, replay_us);
    // What the boundary between two graphs costs: the same steps, several to a graph.
    for (int per_graph : {1, 2, 4, 8, 1, 2, 4, 8})
      std::printf("[bench] %-13s steps a graph %d, replayed back to back: %8.1f us a step\n", shape, per_graph,
                  plain->lab_replay_decode_us(kSteps, per_graph));
  }
}

}  // namespace
}  // namespace fuselm
