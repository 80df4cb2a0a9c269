// The one-launch decode FFN (kernels/cuda/skinny_ffn.h) against the two skinny GEMM launches it
// replaces (gate/up + SwiGLU, then down + residual), which skinny_gemm_test checks against the CPU
// reference. Tolerance: none. The one launch must give the same bits (activations, residual stream,
// the next norm's x * g and sums of squares) for every pair of rounding classes the plans use, at
// 1 to 8 tokens, on any number of CTAs, launch after launch (its counters reset themselves), with
// PDL and in a CUDA graph, and with the next norm's outputs written over its own inputs as the
// decode step does.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "gpu_timing.h"
#include "kernels/cuda/ffn_schedule.h"
#include "kernels/cuda/skinny_ffn.h"
#include "kernels/cuda/skinny_gemm.h"
#include "kernels/mma_packing.h"

namespace fuselm {
namespace {

using test::DeviceArray;

SkinnyGemmVariant cta(int row_tiles, int warps, int k_split) {
  return {row_tiles, warps, k_split, SkinnyPipeline::kCtaSplitRows};
}
SkinnyGemmVariant warp_pipe(int warps) { return {1, warps, 1, SkinnyPipeline::kWarpSplitK}; }

std::vector<uint8_t> bytes_of(const DeviceArray& a) {
  std::vector<uint8_t> h(a.bytes());
  a.download(h.data(), h.size());
  return h;
}

// One FFN's weights and a token batch's inputs, on the device.
struct FfnCase {
  int64_t hidden, ffn;
  int m;
  DType dtype = DType::BF16;
  int gate_up_group = 1;
  std::vector<uint8_t> xg, partials, residual;  // the inputs, as bytes
  DeviceArray gate_up_w, down_w, g_next;
  PackedWeight gate_up, down;

  FfnCase(int64_t hidden_, int64_t ffn_, int m_, int group, std::mt19937& gen)
      : hidden(hidden_), ffn(ffn_), m(m_), gate_up_group(group),
        gate_up_w(mma_packed_elems(2 * ffn_, hidden_, group) * 2), down_w(mma_packed_elems(hidden_, ffn_) * 2),
        g_next(hidden_ * 4) {
    const auto gu = test::random_floats(gen, 2 * ffn * hidden, -0.08f, 0.08f);
    std::vector<uint16_t> packed(mma_packed_elems(2 * ffn, hidden, group));
    const auto map = gate_up_row_map(static_cast<int>(ffn));
    pack_mma_tiles(gu.data(), DType::F32, 2 * ffn, hidden, map, dtype, packed.data(), group);
    gate_up_w.upload(packed.data(), packed.size() * 2);
    const auto dw = test::random_floats(gen, hidden * ffn, -0.05f, 0.05f);
    packed.assign(mma_packed_elems(hidden, ffn), 0);
    pack_mma_tiles(dw.data(), DType::F32, hidden, ffn, {}, dtype, packed.data());
    down_w.upload(packed.data(), packed.size() * 2);
    const auto g = test::random_floats(gen, hidden, 0.5f, 1.5f);
    g_next.upload(g.data(), g.size() * 4);
    gate_up = PackedWeight{gate_up_w.get(), dtype, 2 * ffn, hidden, group};
    down = PackedWeight{down_w.get(), dtype, hidden, ffn, 1};
    xg = test::random_tensor(gen, m * hidden, dtype, -2.0f, 2.0f).bytes;
    const auto p = test::random_floats(gen, m * mma_tiles(hidden), 1.0f, 4.0f);
    partials.resize(p.size() * 4);
    std::memcpy(partials.data(), p.data(), partials.size());
    const auto r = test::random_floats(gen, m * hidden, -3.0f, 3.0f);
    residual.resize(r.size() * 4);
    std::memcpy(residual.data(), r.data(), residual.size());
  }
  int tiles() const { return static_cast<int>(mma_tiles(hidden)); }
  SkinnyNorm norm(const DeviceArray& partials_in) const {
    return SkinnyNorm{partials_in.get<float>(), tiles(), static_cast<int>(hidden), 1e-5f};
  }
};

// The buffers one run writes (and, for the inputs, reads), filled with the case's inputs.
struct FfnRun {
  DeviceArray xg_in, partials_in, residual, act, xg_out, partials_out;
  explicit FfnRun(const FfnCase& c)
      : xg_in(c.xg.size()), partials_in(c.partials.size()), residual(c.residual.size()),
        act(static_cast<size_t>(c.m) * c.ffn * 2), xg_out(c.xg.size()), partials_out(c.partials.size()) {
    reset(c);
  }
  void reset(const FfnCase& c) const {
    xg_in.upload(c.xg.data(), c.xg.size());
    partials_in.upload(c.partials.data(), c.partials.size());
    residual.upload(c.residual.data(), c.residual.size());
    act.poison();
    xg_out.poison();
    partials_out.poison();
  }
  // The next norm's outputs over the FFN's own inputs (x * g and sums of squares), as in the step.
  SkinnyResidualOut out(const FfnCase& c, bool in_place) const {
    return SkinnyResidualOut{residual.get<float>(), c.hidden, c.g_next.get<float>(),
                             in_place ? xg_in.get() : xg_out.get(), c.hidden,
                             in_place ? partials_in.get<float>() : partials_out.get<float>()};
  }
  SkinnyInput in(const FfnCase& c) const { return SkinnyInput{xg_in.get(), c.hidden, c.m}; }
};

// The schedule and counters of one launch shape, on the device.
struct FfnPlanOnDevice {
  DeviceArray offsets, jobs, counters;
  SkinnyFfnPlan plan;
  FfnPlanOnDevice(const FfnScheduleShape& shape, const FfnSchedule& s)
      : offsets(s.offsets.size() * 4), jobs(std::max<size_t>(s.jobs.size(), 1) * 4),
        counters((shape.down_pieces + 1) * 4) {
    offsets.upload(s.offsets.data(), s.offsets.size() * 4);
    jobs.upload(s.jobs.data(), s.jobs.size() * 4);
    cudaMemset(counters.get(), 0, counters.bytes());
    plan = SkinnyFfnPlan{shape.gate_up_pieces, shape.down_pieces, shape.ctas, offsets.get<int32_t>(),
                         jobs.get<int32_t>(), counters.get<int>()};
  }
};

struct Outputs {
  std::vector<uint8_t> act, residual, xg, partials;
  bool operator==(const Outputs&) const = default;
};

Outputs outputs(const FfnRun& r, bool in_place) {
  return Outputs{bytes_of(r.act), bytes_of(r.residual), bytes_of(in_place ? r.xg_in : r.xg_out),
                 bytes_of(in_place ? r.partials_in : r.partials_out)};
}

struct ClassPair {
  const char* name;
  SkinnyGemmVariant gate_up, down;  // for 2+ tokens
  int gate_up_group;
};

// The rounding classes the plans run: the 1B shape's (k2, k8), the 8B shape's (k2 in tile groups of
// 7, k8), and two more cuts.
const ClassPair kPairs[] = {
    {"k2/k8", cta(1, 4, 2), cta(1, 4, 8), 1},
    {"k2 groups of 7/k8", cta(1, 7, 2), cta(1, 4, 8), 7},
    {"k8/k4", cta(1, 4, 8), cta(1, 4, 4), 1},
    {"k1/k2", cta(1, 4, 1), cta(1, 4, 2), 1},
};

void check_case(const FfnCase& c, const ClassPair& pair, int ctas, bool pdl, int max_stages = 0) {
  const std::string what = std::string(pair.name) + " hidden " + std::to_string(c.hidden) + " ffn " +
                           std::to_string(c.ffn) + " m " + std::to_string(c.m) + " ctas " + std::to_string(ctas) +
                           (pdl ? " pdl" : "");
  SCOPED_TRACE(what);
  // The two launches, as the decode step runs them.
  FfnRun ref(c);
  ASSERT_STATUS_OK(skinny_gemm_swiglu(c.gate_up, ref.in(c), c.norm(ref.partials_in),
                                      SkinnySwigluOut{ref.act.get(), c.ffn, static_cast<int>(c.ffn)}, pair.gate_up,
                                      nullptr));
  ASSERT_STATUS_OK(skinny_gemm_residual(c.down, SkinnyInput{ref.act.get(), c.ffn, c.m}, SkinnyNorm{},
                                        ref.out(c, false), pair.down, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const Outputs want = outputs(ref, false);

  FfnScheduleShape shape;
  ASSERT_STATUS_OK(skinny_ffn_schedule_shape(c.gate_up, c.down, pair.gate_up, pair.down, ctas, &shape));
  FfnPlanOnDevice plan(shape, make_ffn_schedule(shape));
  plan.plan.max_stages = max_stages;
  FfnRun run(c);
  SkinnyGemmLaunch launch;
  launch.pdl = pdl;
  for (int rep = 0; rep < 3; ++rep) {  // the counters must be zero again after each launch
    for (bool in_place : {false, true}) {
      run.reset(c);
      ASSERT_STATUS_OK(skinny_ffn(c.gate_up, c.down, run.in(c), c.norm(run.partials_in),
                                  SkinnySwigluOut{run.act.get(), c.ffn, static_cast<int>(c.ffn)}, run.out(c, in_place),
                                  plan.plan, nullptr, launch));
      ASSERT_CUDA_OK(cudaDeviceSynchronize());
      const Outputs got = outputs(run, in_place);
      EXPECT_TRUE(got.act == want.act) << "activations, rep " << rep << (in_place ? " in place" : "");
      EXPECT_TRUE(got.residual == want.residual) << "residual, rep " << rep << (in_place ? " in place" : "");
      EXPECT_TRUE(got.xg == want.xg) << "x * g, rep " << rep << (in_place ? " in place" : "");
      EXPECT_TRUE(got.partials == want.partials) << "sums of squares, rep " << rep << (in_place ? " in place" : "");
    }
  }
}

TEST(SkinnyFfn, GivesTheTwoLaunchesBitsForEveryClassPair) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(7);
  int sms = 0;
  ASSERT_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // 1792 = 7 * 256 (whole tile groups of 7); 1368 / 520: partial row tiles and a shorter last piece.
  for (auto [hidden, ffn] : {std::pair<int64_t, int64_t>{256, 1792}, {520, 1368}}) {
    for (int m : {1, 5, 8}) {
      for (const ClassPair& pair : kPairs) {
        if (pair.gate_up_group > 1 && mma_tiles(2 * ffn) % pair.gate_up_group != 0) continue;
        FfnCase c(hidden, ffn, m, pair.gate_up_group, gen);
        check_case(c, pair, sms, false);
        check_case(c, pair, 5, false);  // several jobs a CTA
      }
    }
  }
}

// Two CTAs an SM (4-stage rings, so that both fit): more CTAs than SMs, all resident at once.
TEST(SkinnyFfn, TwoCtasAnSmGiveTheSameBits) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(23);
  int sms = 0;
  ASSERT_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int m : {1, 8}) {
    for (const ClassPair& pair : {kPairs[0], kPairs[1]}) {
      FfnCase c(512, 1792, m, pair.gate_up_group, gen);
      check_case(c, pair, 2 * sms, false, 4);
    }
  }
}

// One token runs the single-token variants (the warp-pipeline twins of the k4 / k8 CTA variants) in
// the two launches: the one launch must give those bits too.
TEST(SkinnyFfn, GivesTheSingleTokenVariantsBits) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(11);
  FfnCase c(512, 1792, 1, 1, gen);
  check_case(c, ClassPair{"k2/rt1_w8", cta(1, 4, 2), warp_pipe(8), 1}, 16, false);
  check_case(c, ClassPair{"rt1_w4/k8", warp_pipe(4), cta(1, 4, 8), 1}, 16, false);
}

TEST(SkinnyFfn, PdlLaunchesAndGraphReplaysGiveTheSameBits) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(13);
  FfnCase c(512, 1792, 2, 1, gen);
  const ClassPair pair = kPairs[0];
  check_case(c, pair, 24, true);

  // A graph of the reference's two launches' inputs being reset, then the one launch with PDL.
  FfnScheduleShape shape;
  ASSERT_STATUS_OK(skinny_ffn_schedule_shape(c.gate_up, c.down, pair.gate_up, pair.down, 24, &shape));
  FfnPlanOnDevice plan(shape, make_ffn_schedule(shape));
  FfnRun ref(c), run(c);
  SkinnyGemmLaunch launch;
  launch.pdl = true;
  ASSERT_STATUS_OK(skinny_ffn(c.gate_up, c.down, ref.in(c), c.norm(ref.partials_in),
                              SkinnySwigluOut{ref.act.get(), c.ffn, static_cast<int>(c.ffn)}, ref.out(c, true),
                              plan.plan, nullptr, launch));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const Outputs want = outputs(ref, true);
  cudaStream_t stream;
  ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaMemcpyAsync(run.xg_in.get(), c.xg.data(), c.xg.size(), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(run.partials_in.get(), c.partials.data(), c.partials.size(), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(run.residual.get(), c.residual.data(), c.residual.size(), cudaMemcpyHostToDevice, stream);
  const Status launched = skinny_ffn(c.gate_up, c.down, run.in(c), c.norm(run.partials_in),
                                     SkinnySwigluOut{run.act.get(), c.ffn, static_cast<int>(c.ffn)}, run.out(c, true),
                                     plan.plan, stream, launch);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_STATUS_OK(launched);
  cudaGraphExec_t exec;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) {
    run.act.poison();
    ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(outputs(run, true) == want) << "graph replay " << rep;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(SkinnyFfn, RefusesWhatItCannotRun) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(17);
  FfnCase c(256, 1792, 8, 1, gen);
  FfnScheduleShape shape;
  // A warp pipeline with a cluster split adds per-CTA warp sums: not one of the cuts it runs.
  const Status mixed = skinny_ffn_schedule_shape(c.gate_up, c.down, SkinnyGemmVariant{1, 4, 2}, cta(1, 4, 8), 8, &shape);
  EXPECT_FALSE(mixed.ok());
  EXPECT_NE(mixed.message().find("pieces"), std::string::npos) << mixed.message();
  // More CTAs than fit the GPU at once (8-stage rings allow one an SM): a down item could wait
  // for a CTA that never runs.
  int sms = 0;
  ASSERT_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  {
    FfnCase big(2048, 8192, 1, 1, gen);
    ASSERT_STATUS_OK(skinny_ffn_schedule_shape(big.gate_up, big.down, cta(1, 4, 2), cta(1, 4, 8), 2 * sms, &shape));
    FfnPlanOnDevice plan(shape, make_ffn_schedule(shape));
    plan.plan.max_stages = 8;
    FfnRun run(big);
    const Status crowded = skinny_ffn(big.gate_up, big.down, run.in(big), big.norm(run.partials_in),
                                      SkinnySwigluOut{run.act.get(), big.ffn, static_cast<int>(big.ffn)},
                                      run.out(big, false), plan.plan, nullptr);
    EXPECT_FALSE(crowded.ok());
    EXPECT_NE(crowded.message().find("resident"), std::string::npos) << crowded.message();
  }
  // Matrices that are not one FFN's.
  PackedWeight wrong = c.down;
  wrong.cols = 1000;
  EXPECT_FALSE(skinny_ffn_schedule_shape(c.gate_up, wrong, cta(1, 4, 2), cta(1, 4, 8), 8, &shape).ok());
  ASSERT_STATUS_OK(skinny_ffn_schedule_shape(c.gate_up, c.down, cta(1, 4, 2), cta(1, 4, 8), 8, &shape));
  FfnPlanOnDevice plan(shape, make_ffn_schedule(shape));
  FfnRun run(c);
  SkinnyInput nine = run.in(c);
  nine.m = 9;
  const Status too_many = skinny_ffn(c.gate_up, c.down, nine, c.norm(run.partials_in),
                                     SkinnySwigluOut{run.act.get(), c.ffn, static_cast<int>(c.ffn)}, run.out(c, false),
                                     plan.plan, nullptr);
  EXPECT_FALSE(too_many.ok());
  EXPECT_NE(too_many.message().find("m=9"), std::string::npos) << too_many.message();
}

// Lab: the one launch against the two on the Llama-3.2-1B and -3.1-8B FFN shapes at one token,
// each launch sequence alone on a stream with PDL (no neighbours), CUDA events over 200 launches,
// the one launch's ring at 4, 8 and 12 stages, two CTAs an SM, and a job order that differs between
// CTAs. Prints us per FFN and the weight stream's TB/s, then per-CTA stamps.
TEST(SkinnyFfn, DISABLED_Lab) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(19);
  int sms = 0;
  ASSERT_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  struct Shape {
    const char* name;
    int64_t hidden, ffn;
    int gate_up_group;
    SkinnyGemmVariant gate_up, down_one;  // the rules' one-token variants
  };
  for (const Shape& sh : {Shape{"llama-3.2-1b", 2048, 8192, 1, cta(1, 4, 2), warp_pipe(8)},
                          Shape{"llama-3.1-8b", 4096, 14336, 7, cta(1, 7, 2), warp_pipe(8)}}) {
    FfnCase c(sh.hidden, sh.ffn, 1, sh.gate_up_group, gen);
    FfnRun run(c);
    const double bytes = 2.0 * (2 * sh.ffn * sh.hidden + sh.hidden * sh.ffn);
    cudaStream_t stream;
    ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    SkinnyGemmLaunch pdl;
    pdl.pdl = true;
    SkinnyGemmLaunch balanced = pdl;
    balanced.balance_sms = true;
    auto time_us = [&](const std::function<Status()>& launch) {
      const double ms = test::back_to_back_ms([&] { return launch().ok(); }, stream);
      EXPECT_GT(ms, 0.0) << "a launch failed";
      return ms * 1e3;
    };
    const SkinnySwigluOut act{run.act.get(), c.ffn, static_cast<int>(c.ffn)};
    const double two = time_us([&] {
      Status s = skinny_gemm_swiglu(c.gate_up, run.in(c), c.norm(run.partials_in), act, sh.gate_up, stream, balanced);
      if (!s.ok()) return s;
      return skinny_gemm_residual(c.down, SkinnyInput{run.act.get(), c.ffn, 1}, SkinnyNorm{}, run.out(c, false),
                                  sh.down_one, stream, pdl);
    });
    std::printf("[bench] %-13s two launches        %7.2f us  %5.2f TB/s\n", sh.name, two, bytes / two * 1e-6);
    FfnScheduleShape shape;
    ASSERT_STATUS_OK(skinny_ffn_schedule_shape(c.gate_up, c.down, sh.gate_up, cta(1, 4, 8), sms, &shape));
    FfnPlanOnDevice plan(shape, make_ffn_schedule(shape));
    for (int stages : {4, 8, 12}) {
      plan.plan.max_stages = stages;
      const double one = time_us([&] {
        return skinny_ffn(c.gate_up, c.down, run.in(c), c.norm(run.partials_in), act, run.out(c, false), plan.plan,
                          stream, pdl);
      });
      std::printf("[bench] %-13s one launch, %2d stages %7.2f us  %5.2f TB/s\n", sh.name, stages, one,
                  bytes / one * 1e-6);
    }
    // Two CTAs an SM with 4-stage rings (the same bytes in flight an SM from twice the warps), and at
    // one CTA an SM the odd CTAs' gate/up jobs in reverse order (so that the CTAs' requests in flight
    // stop sharing their offsets within a job): the candidates for the one launch's ~3.2 TB/s cap.
    FfnScheduleShape shape2 = shape;
    shape2.ctas = 2 * sms;
    FfnPlanOnDevice plan2(shape2, make_ffn_schedule(shape2));
    plan2.plan.max_stages = 4;
    FfnSchedule reversed = make_ffn_schedule(shape);
    for (int c2 = 1; c2 < sms; c2 += 2) {
      auto first = reversed.jobs.begin() + reversed.offsets[c2], last = reversed.jobs.begin() + reversed.offsets[c2 + 1];
      std::reverse(first, std::find_if(first, last, [](int32_t job) { return (job & kFfnDownJob) != 0; }));
    }
    FfnPlanOnDevice plan_reversed(shape, reversed);
    const std::pair<const char*, FfnPlanOnDevice*> arms[] = {{"2 CTAs an SM, 4 st.", &plan2},
                                                             {"odd CTAs reversed", &plan_reversed}};
    for (const auto& [label, arm] : arms) {
      const double one = time_us([&] {
        return skinny_ffn(c.gate_up, c.down, run.in(c), c.norm(run.partials_in), act, run.out(c, false), arm->plan,
                          stream, pdl);
      });
      std::printf("[bench] %-13s %-19s %7.2f us  %5.2f TB/s\n", sh.name, label, one, bytes / one * 1e-6);
    }
    // Where a CTA's time goes: one more launch behind a warm one, with the lab stamps, each event's
    // mean and latest over the CTAs, us after the first CTA's start.
    auto print_stamps = [&](FfnPlanOnDevice& arm, const char* label) {
      const int ctas = arm.plan.ctas;
      DeviceArray stamps(static_cast<size_t>(ctas) * kSkinnyFfnStamps * sizeof(uint64_t));
      cudaMemsetAsync(stamps.get(), 0, stamps.bytes(), stream);
      arm.plan.lab_stamps = stamps.get<uint64_t>();
      ASSERT_STATUS_OK(skinny_ffn(c.gate_up, c.down, run.in(c), c.norm(run.partials_in), act, run.out(c, false),
                                  arm.plan, stream, pdl));
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
      arm.plan.lab_stamps = nullptr;
      std::vector<uint64_t> at(static_cast<size_t>(ctas) * kSkinnyFfnStamps);
      stamps.download(at.data(), at.size() * sizeof(uint64_t));
      uint64_t first = ~uint64_t{0};
      for (int c2 = 0; c2 < ctas; ++c2) first = std::min(first, at[static_cast<size_t>(c2) * kSkinnyFfnStamps]);
      std::printf("[bench] %-13s stamps, %s, us after the first CTA's start (mean / latest over the CTAs that "
                  "have it):\n", sh.name, label);
      for (int e = 0; e < kSkinnyFfnStamps; ++e) {
        double sum = 0, latest = 0;
        int n = 0;
        for (int c2 = 0; c2 < ctas; ++c2) {
          const uint64_t t = at[static_cast<size_t>(c2) * kSkinnyFfnStamps + e];
          if (t == 0) continue;
          const double us = (t - first) * 1e-3;
          sum += us;
          latest = std::max(latest, us);
          ++n;
        }
        if (n == 0) continue;
        const std::string name = e == kFfnStampStart          ? "start"
                                 : e == kFfnStampInputsStaged  ? "inputs staged"
                                 : e == kFfnStampFirstStage    ? "first stage (warp 0)"
                                 : e < kFfnStampJobEnd         ? "down ready, warp " + std::to_string(e - kFfnStampDownReady)
                                 : e < kFfnStampEnd            ? "job " + std::to_string(e - kFfnStampJobEnd) + " done"
                                                               : "end";
        std::printf("[bench] %-13s   %-22s %7.2f / %7.2f  (%d CTAs)\n", sh.name, name.c_str(), sum / n, latest, n);
      }
    };
    plan.plan.max_stages = 0;
    print_stamps(plan, "one CTA an SM, 8 stages");
    print_stamps(plan2, "two CTAs an SM, 4 stages");
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace fuselm
